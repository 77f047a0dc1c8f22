#!/usr/bin/env bash
# Fetches the third-party test vectors the smt-crypto and smt-pagecrypt
# tests check against.
#
# NIST CAVP AES-GCM and XTS-AES (XTSGenAES128/256, IEEE 1619) vectors ship
# in the `cryptography-vectors` wheel on PyPI (pinned below). This
# downloads the wheel with pip and unpacks only its AES/GCM and AES/XTS
# directories into <repo>/test-vectors/gcm/ and test-vectors/xts/ (about
# 19 MB; under $SMT_TEST_VECTORS when that is set). Needs python3 with pip.
# Idempotent: it exits at once when the vectors are already there.
# test-vectors/ is git-ignored.
#
# Usage: scripts/fetch-vectors.sh
set -euo pipefail

VERSION="50.0.2"
PACKAGE="cryptography-vectors"
# The files crates/smt-crypto/tests/integration/nist_gcm.rs reads.
REQUIRED=(gcmEncryptExtIV128.rsp gcmEncryptExtIV256.rsp gcmDecrypt128.rsp gcmDecrypt256.rsp)
# The files crates/smt-pagecrypt/tests/integration/nist_xts.rs reads (both tweak forms).
REQUIRED_XTS=(tweak-128hexstr/XTSGenAES128.rsp tweak-dataunitseqno/XTSGenAES128.rsp)

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
# Where the tests look: SMT_TEST_VECTORS when set (a directory that already
# holds gcm/ needs neither Python nor the network), else test-vectors/.
dest="${SMT_TEST_VECTORS:-$repo_root/test-vectors}"
gcm_dir="$dest/gcm"
xts_dir="$dest/xts"

have_all() {
    local f
    for f in "${REQUIRED[@]}"; do
        [[ -n "$(find "$gcm_dir" -name "$f" -print -quit 2>/dev/null)" ]] || return 1
    done
    for f in "${REQUIRED_XTS[@]}"; do
        [[ -f "$xts_dir/$f" ]] || return 1
    done
}

if have_all; then
    echo "fetch-vectors: NIST GCM and XTS vectors already in $gcm_dir and $xts_dir"
    exit 0
fi

pip_cmd=()
if command -v pip3 >/dev/null 2>&1; then
    pip_cmd=(pip3)
elif command -v python3 >/dev/null 2>&1; then
    pip_cmd=(python3 -m pip)
else
    echo "fetch-vectors: needs pip3 (or python3 -m pip) to download $PACKAGE" >&2
    exit 1
fi

mkdir -p "$dest"
wheel_glob="$dest/cryptography_vectors-$VERSION-*.whl"
# shellcheck disable=SC2086 # the glob is meant to expand
if ! ls $wheel_glob >/dev/null 2>&1; then
    echo "fetch-vectors: downloading $PACKAGE==$VERSION"
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: \
        "$PACKAGE==$VERSION" -d "$dest"
fi
# shellcheck disable=SC2086
wheel="$(ls $wheel_glob | head -n 1)"

# Inside the wheel the vectors sit at
# cryptography_vectors/ciphers/AES/{GCM,XTS}/; keep just those directories.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unpack() {
    local member_dir="$1" to="$2"
    python3 - "$wheel" "$member_dir" "$tmp" <<'PY'
import sys, zipfile
wheel, prefix, out = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith(prefix) and not m.endswith("/")]
    if not members:
        sys.exit(f"fetch-vectors: no {prefix} in {wheel}")
    z.extractall(out, members)
PY
    rm -rf "$to"
    mv "$tmp/$member_dir" "$to"
}
unpack "cryptography_vectors/ciphers/AES/GCM" "$gcm_dir"
unpack "cryptography_vectors/ciphers/AES/XTS" "$xts_dir"
# The wheel holds every other vector set too (~55 MB); only GCM and XTS are kept.
rm -f "$wheel"

if ! have_all; then
    echo "fetch-vectors: $wheel lacks one of: ${REQUIRED[*]} ${REQUIRED_XTS[*]}" >&2
    exit 1
fi
echo "fetch-vectors: NIST GCM and XTS vectors unpacked into $gcm_dir and $xts_dir"
