#!/usr/bin/env bash
# smt-dns against a real DNS client: `dig` (from Debian's dnsutils).
#
#   scripts/dig-test.sh --install   make sure `dig` is on PATH. Silent and a no-op
#                                   when it already is; installs dnsutils with apt
#                                   when running as root; otherwise says why not
#                                   and exits 1. Safe to run any number of times.
#   scripts/dig-test.sh             install as above (where possible), then run
#                                   smt-dns's dig test (which prints SKIPPED and
#                                   passes when dig is still missing).
set -euo pipefail

install_dig() {
    if command -v dig >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "dig-test.sh: dig is missing and installing dnsutils needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "dig-test.sh: dig is missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    echo "dig-test.sh: installing dnsutils (for dig)" >&2
    # Try the cached package lists first; refresh them only if that fails.
    if ! apt-get "${wait[@]}" install -y -qq dnsutils >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install -y -qq dnsutils >/dev/null
    fi
    command -v dig >/dev/null 2>&1
}

case "${1:-}" in
    --install)
        install_dig
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_dig || true
        cargo test -p smt-dns --test integration dig:: -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
