#!/usr/bin/env bash
# libsmt, the C API (crates/smt-c), against the system's tools: its tests
# build C programs with `cc` (which the Rust toolchain needs anyway), check
# the header as C++ with `c++`, and link an installed copy through
# `pkg-config`. Without c++ or pkg-config those two checks report SKIPPED.
#
#   scripts/c-api-test.sh --install   make sure c++ and pkg-config are on PATH.
#                                     Silent and a no-op when they already are;
#                                     installs Debian's g++ and pkg-config with apt
#                                     when running as root; otherwise says why not
#                                     and exits 1. Safe to run any number of times.
#   scripts/c-api-test.sh             install as above (where possible), then run
#                                     smt-c's tests.
set -euo pipefail

# The Debian package of each tool the tests use beyond cc.
missing_packages() {
    command -v c++ >/dev/null 2>&1 || echo g++
    command -v pkg-config >/dev/null 2>&1 || echo pkg-config
}

install_tools() {
    local packages
    packages=$(missing_packages | tr '\n' ' ')
    if [ -z "${packages// /}" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "c-api-test.sh: missing $packages; installing them needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "c-api-test.sh: missing $packages and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    echo "c-api-test.sh: installing $packages" >&2
    # Try the cached package lists first; refresh them only if that fails.
    # shellcheck disable=SC2086 # one word per package
    if ! apt-get "${wait[@]}" install -y -qq $packages >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install -y -qq $packages >/dev/null
    fi
    [ -z "$(missing_packages)" ]
}

case "${1:-}" in
    --install)
        install_tools
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_tools || true
        cargo test -p smt-c -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
