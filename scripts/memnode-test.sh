#!/usr/bin/env bash
# What the remote-memory crates (smt-pagecrypt, smt-memnode, smt-farmem)
# need beyond Rust, from Debian and PyPI:
#   - libclang (Debian's libclang-dev): the userfaultfd crate's -sys part
#     generates its kernel bindings with bindgen at build time, so it is
#     needed to *build* the workspace;
#   - libssl-dev and pkg-config: the openssl crate (OpenSSL's EVP
#     AES-128-XTS is the XTS the page cipher uses); on the base image already;
#   - Python's `cryptography`: the independent implementation that decrypts
#     a stored page in smt-farmem's tests (skipped with a message when
#     missing).
#
#   scripts/memnode-test.sh --install   make sure all three are there. Silent and a no-op
#                                       when they are; installs with apt (root) and pip
#                                       otherwise; says what is missing and exits 1 when
#                                       it cannot. Safe to run any number of times.
#   scripts/memnode-test.sh             install as above (where possible), then run the
#                                       three crates' tests.
set -euo pipefail

have_build_deps() {
    # bindgen loads libclang at run time; clang-sys looks for libclang.so.
    ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so' \
        && command -v pkg-config >/dev/null 2>&1 \
        && pkg-config --exists openssl 2>/dev/null
}

install_build_deps() {
    if have_build_deps; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "memnode-test.sh: libclang-dev, libssl-dev or pkg-config is missing and installing needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "memnode-test.sh: libclang-dev, libssl-dev or pkg-config is missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    local pkgs=(libclang-dev libssl-dev pkg-config)
    echo "memnode-test.sh: installing ${pkgs[*]}" >&2
    # Try the cached package lists first; refresh them only if that fails.
    if ! apt-get "${wait[@]}" install -y -qq "${pkgs[@]}" >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install -y -qq "${pkgs[@]}" >/dev/null
    fi
    have_build_deps
}

have_python_cryptography() {
    python3 -c 'import cryptography.hazmat.primitives.ciphers' >/dev/null 2>&1
}

install_python_cryptography() {
    if have_python_cryptography; then
        return 0
    fi
    if ! command -v python3 >/dev/null 2>&1; then
        echo "memnode-test.sh: python3 is missing; the cross-implementation test will be skipped" >&2
        return 1
    fi
    echo "memnode-test.sh: installing Python's cryptography with pip" >&2
    python3 -m pip install --quiet cryptography >/dev/null 2>&1 || {
        echo "memnode-test.sh: pip could not install cryptography; the cross-implementation test will be skipped" >&2
        return 1
    }
    have_python_cryptography
}

install_all() {
    local status=0
    install_build_deps || status=1
    install_python_cryptography || status=1
    return "$status"
}

case "${1:-}" in
    --install)
        install_all
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_all || true
        cargo test -p smt-pagecrypt -p smt-memnode -p smt-farmem -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
