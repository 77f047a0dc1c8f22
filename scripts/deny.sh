#!/usr/bin/env bash
# Licences, bans and sources of the dependency tree, checked offline with
# cargo-deny against deny.toml (which says what is allowed and why).
#
#   scripts/deny.sh --install   make sure cargo-deny is installed: a no-op when
#                               it is, `cargo install --locked cargo-deny` (0.20.2) from
#                               crates.io otherwise (a few minutes of building).
#   scripts/deny.sh             install as above, then run the check.
#
# The check runs with --offline: it reads the lock file, the local registry
# index and the crates' sources in cargo's cache (fetched by any earlier
# build; `cargo fetch --locked` does it alone) and reaches no network. The
# advisories check is left out: its database is a git repository on GitHub
# (see deny.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
deny_version=0.20.2

install_deny() {
    if cargo deny --version >/dev/null 2>&1; then
        return 0
    fi
    # A fixed version: a new release may read deny.toml differently.
    echo "deny.sh: installing cargo-deny $deny_version from crates.io (cargo install --locked)"
    cargo install --locked cargo-deny --version "$deny_version"
}

case "${1:-}" in
    --install)
        install_deny
        exit 0
        ;;
    "") ;;
    *)
        echo "usage: scripts/deny.sh [--install]" >&2
        exit 2
        ;;
esac

install_deny
echo "deny.sh: $(cargo deny --version): cargo deny --offline check licenses bans sources"
cargo deny --offline check licenses bans sources
