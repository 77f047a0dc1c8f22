#!/usr/bin/env bash
# Peer benchmark: builds smt-bench in release mode and runs it with the
# given flags (e.g. --quick, --smoke --no-idle-wait, --workloads rtt).
# Results land in target/smt-bench/<timestamp>/ unless --out is given.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p smt-bench
exec target/release/smt-bench "$@"
