#!/usr/bin/env bash
# smt-kv against the real thing: Debian's redis-server (the differential
# oracle) and redis-benchmark (from redis-tools).
#
#   scripts/redis-test.sh --install   make sure redis-server and redis-benchmark are on
#                                     PATH. Silent and a no-op when they already are;
#                                     installs redis-server and redis-tools with apt
#                                     when running as root; otherwise says why not and
#                                     exits 1. Safe to run any number of times.
#   scripts/redis-test.sh             install as above (where possible), then run
#                                     smt-kv's tests that use them (which print SKIPPED
#                                     and pass when they are still missing).
set -euo pipefail

have_redis() {
    command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1
}

install_redis() {
    if have_redis; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "redis-test.sh: redis-server/redis-benchmark are missing and installing them needs root" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "redis-test.sh: redis-server/redis-benchmark are missing and apt-get is not available" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Wait for a concurrent apt/dpkg run (another test, CI step) instead of failing.
    local wait=(-o DPkg::Lock::Timeout=300)
    echo "redis-test.sh: installing redis-server and redis-tools" >&2
    # Try the cached package lists first; refresh them only if that fails.
    if ! apt-get "${wait[@]}" install -y -qq redis-server redis-tools >/dev/null 2>&1; then
        apt-get "${wait[@]}" update -qq >/dev/null
        apt-get "${wait[@]}" install -y -qq redis-server redis-tools >/dev/null
    fi
    have_redis
}

case "${1:-}" in
    --install)
        install_redis
        ;;
    "")
        cd "$(dirname "$0")/.."
        install_redis || true
        cargo test -p smt-kv --test integration -- --nocapture oracle:: redis_benchmark:: kv_client::
        ;;
    *)
        echo "usage: $0 [--install]" >&2
        exit 2
        ;;
esac
