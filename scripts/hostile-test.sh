#!/usr/bin/env bash
# smt-hostile's outside-in suite needs iproute2 (`ip` for its network
# namespace, `ss` for the server socket's queues) and root.
#
#   scripts/hostile-test.sh --install   make sure `ip` and `ss` are on PATH. Silent and
#                                       a no-op when they already are; installs iproute2
#                                       with apt when running as root; otherwise says
#                                       why not and exits 1. Safe to run any number of times.
#   scripts/hostile-test.sh             install as above (where possible), then run the
#                                       short variant (which prints SKIPPED and passes
#                                       without root or without `ip`).
set -euo pipefail

install_iproute2() {
    if command -v ip >/dev/null 2>&1 && command -v ss >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "hostile-test.sh: ip/ss are missing and installing iproute2 needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "hostile-test.sh: ip/ss are missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    echo "hostile-test.sh: installing iproute2 (for ip and ss)" >&2
    # Try the cached package lists first; refresh them only if that fails.
    if ! apt-get "${wait[@]}" install -y -qq iproute2 >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install -y -qq iproute2 >/dev/null
    fi
    command -v ip >/dev/null 2>&1 && command -v ss >/dev/null 2>&1
}

case "${1:-}" in
    --install)
        install_iproute2
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_iproute2 || true
        cargo test -p smt-hostile --test short -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
