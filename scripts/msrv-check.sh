#!/usr/bin/env bash
# The minimum supported Rust version (the workspace's `rust-version`) is
# built in CI: when the default toolchain is that version, the clippy and
# test builds of .ci/run already are the MSRV build and this only says so;
# otherwise the workspace is checked with the `+<rust-version>` toolchain
# (installed with rustup when missing; fails if it cannot be).
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -n 1)
if [ -z "$msrv" ]; then
    echo "msrv-check: no rust-version in the workspace's Cargo.toml" >&2
    exit 1
fi
current=$(rustc --version | awk '{ print $2 }')
# "1.95" matches 1.95.0, 1.95.1, ...; "1.95.1" matches only itself.
case "$current" in
    "$msrv" | "$msrv".*)
        echo "msrv-check: the default toolchain is rustc $current, the MSRV ($msrv): the workspace's builds are the MSRV build"
        exit 0
        ;;
esac
# An installed toolchain of that version ("1.95.0" for rust-version
# "1.95"), else rustup's channel of it.
toolchain=$msrv
for name in "$msrv" "$msrv.0"; do
    if rustup run "$name" rustc --version >/dev/null 2>&1; then
        toolchain=$name
        break
    fi
done
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "msrv-check: installing Rust $msrv (the default toolchain is $current)"
    rustup toolchain install "$msrv" --profile minimal
fi
echo "msrv-check: cargo +$toolchain check --workspace --all-targets --locked (default is $current)"
cargo "+$toolchain" check --workspace --all-targets --locked
