#!/usr/bin/env bash
# The README's test command: fetches the outside test vectors (once), then
# runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-vectors.sh
# Debian's dig reads the DNS ticket records in one test; installed when
# root (CI), otherwise that test reports SKIPPED.
bash scripts/dig-test.sh --install || echo "test.sh: dig not installed; its test will be skipped"
cargo test --workspace
