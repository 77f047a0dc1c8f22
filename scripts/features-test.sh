#!/usr/bin/env bash
# A project that depends on `smt` with `default-features = false` must not
# pull in the NIC model (smt-offload), the capture and trace (smt-observe,
# with the pcapng writer pcap-parser and etherparse), serde (issue #27) or
# tokio (feature `tokio`: async callers on the runtime's reactor).
# Checks the dependency tree of a scratch project generated in the target
# directory; no build, a second or two.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
scratch="$target/features-scratch"
mkdir -p "$scratch/src"
: > "$scratch/src/lib.rs"
cat > "$scratch/Cargo.toml" <<TOML
[package]
name = "smt-features-scratch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
smt = { path = "$root/crates/smt", default-features = false }

# Not a member of the SMT workspace, though it sits inside it.
[workspace]
TOML
# The workspace's lock, so the scratch resolves offline to the same versions.
cp "$root/Cargo.lock" "$scratch/Cargo.lock"
tree="$(cargo tree --manifest-path "$scratch/Cargo.toml" -e normal --offline --prefix none)"
forbidden='^(smt-offload|smt-observe|pcap-parser|pcap-file|etherparse|serde|serde_json|serde_derive|tokio) '
if found="$(grep -E "$forbidden" <<<"$tree" | sort -u)"; then
    echo "features-test: smt with default-features = false still depends on:" >&2
    echo "$found" >&2
    exit 1
fi
echo "features-test: ok (smt without default features: no smt-offload, smt-observe, pcap-parser, etherparse, serde, tokio)"
