#!/usr/bin/env bash
# The SMT Wireshark dissector (tools/wireshark/smt.lua) against Debian's tshark.
#
#   scripts/tshark-test.sh --install   make sure `tshark` is on PATH. Silent and a no-op
#                                      when it already is; installs Debian's tshark with apt
#                                      when running as root; otherwise says why not and
#                                      exits 1. Safe to run any number of times.
#   scripts/tshark-test.sh             install as above (where possible), then run the
#                                      dissector test (which prints SKIPPED and passes when
#                                      tshark is still missing).
set -euo pipefail

install_tshark() {
    if command -v tshark >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "tshark-test.sh: tshark is missing and installing it needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "tshark-test.sh: tshark is missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # wireshark-common asks whether non-root users may capture (a setuid
    # dumpcap). Answer it beforehand: no, tests only read capture files.
    if command -v debconf-set-selections >/dev/null 2>&1; then
        echo "wireshark-common wireshark-common/install-setuid boolean false" |
            debconf-set-selections
    fi
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    local quiet=(-y -qq --no-install-recommends)
    echo "tshark-test.sh: installing tshark" >&2
    # Try the cached package lists first; refresh them only if that fails.
    if ! apt-get "${wait[@]}" install "${quiet[@]}" tshark >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install "${quiet[@]}" tshark >/dev/null
    fi
    command -v tshark >/dev/null 2>&1
}

case "${1:-}" in
    --install)
        install_tshark
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_tshark || true
        cargo test -p smt-dump --test integration tshark:: -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
