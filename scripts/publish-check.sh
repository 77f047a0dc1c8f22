#!/usr/bin/env bash
# Publication check: every crate meant for crates.io packs and builds from
# its own .crate file, and the API docs build without a warning.
#
#   scripts/publish-check.sh [--verify]
#
# `cargo publish --dry-run --workspace` packs each member whose manifest
# does not say `publish = false` and resolves its dependencies (crates.io's
# index for outside crates, a local overlay for the workspace's own
# unpublished ones): a path dependency without a version, a dependency on
# a `publish = false` crate or a requirement no published version meets
# fails here, in seconds (cargo only warns of missing metadata).
# `--verify` also builds each package alone from what it packed (a file
# left out of a package fails then), in the dev profile and with each
# package's own features: a cold build of most of the dependency tree
# again, about 20 min on 2 busy cores, too long for every CI run.
# Network: the crates.io index only; nothing is uploaded.
#
# Then `cargo doc` of the libraries (the API; programs' docs are their
# --help) with `-D warnings`: broken or private intra-doc links, bad
# code-block attributes and the like fail.
set -euo pipefail
cd "$(dirname "$0")/.."
verify=(--no-verify)
case "${1:-}" in
    "") ;;
    --verify) verify=() ;;
    *) echo "publish-check.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
esac
start=$SECONDS
echo "== cargo publish --dry-run --workspace"
# --allow-dirty: CI's checkout holds files the tests wrote; what is checked
# is that the committed manifests and sources pack and build.
cargo publish --dry-run --workspace --locked --allow-dirty "${verify[@]}"
echo "== cargo doc --workspace --lib --no-deps (-D warnings)"
# smt-c: its API is C (include/smt.h), and its library is named `smt` too.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude smt-c --lib --no-deps --locked
echo "publish-check: passed in $((SECONDS - start)) s"
