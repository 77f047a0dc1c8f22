#!/usr/bin/env bash
# The README's test command: fetches the outside test vectors (once), then
# runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-vectors.sh
cargo test --workspace
