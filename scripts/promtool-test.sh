#!/usr/bin/env bash
# The metrics pages checked by Prometheus's own linter: `promtool check
# metrics` (Debian's prometheus package ships promtool).
#
#   scripts/promtool-test.sh --install   make sure promtool is on PATH. Silent and a
#                                        no-op when it already is; installs Debian's
#                                        prometheus package with apt when running as
#                                        root; otherwise says why not and exits 1.
#                                        Safe to run any number of times.
#   scripts/promtool-test.sh             install as above (where possible), then run the
#                                        tests that use it (which print SKIPPED and pass
#                                        when it is still missing).
set -euo pipefail

have_promtool() {
    command -v promtool >/dev/null 2>&1
}

install_promtool() {
    if have_promtool; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "promtool-test.sh: promtool is missing and installing it needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "promtool-test.sh: promtool is missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    echo "promtool-test.sh: installing prometheus (for promtool)" >&2
    # Only promtool is wanted: no recommended exporters.
    local opts=(-y -qq --no-install-recommends)
    if ! apt-get "${wait[@]}" install "${opts[@]}" prometheus >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install "${opts[@]}" prometheus >/dev/null
    fi
    have_promtool
}

case "${1:-}" in
    --install)
        install_promtool
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_promtool || true
        cargo test -p smt --test integration metrics:: -- --nocapture
        cargo test -p smt-cli --test integration metrics:: -- --nocapture
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
