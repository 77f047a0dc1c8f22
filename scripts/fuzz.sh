#!/usr/bin/env bash
# Builds the cargo-fuzz targets and runs each for a short time.
#   scripts/fuzz.sh            build, then run every target for 10 s
#   scripts/fuzz.sh 600        ... for 600 s each (long runs: docs/protocol.md)
#   scripts/fuzz.sh build      build only
# Needs the nightly toolchain (on every machine of this project) and
# cargo-fuzz, which it installs from crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi
cd fuzz
cargo +nightly fuzz build
[ "$secs" = build ] && exit 0
for target in $(cargo +nightly fuzz list); do
    corpus="corpus/$target"
    mkdir -p "$corpus"
    # Run on a scratch copy so CI runs do not grow the committed corpus.
    work=$(mktemp -d)
    cp -r "$corpus/." "$work/" 2>/dev/null || true
    echo "fuzz: $target for ${secs}s"
    cargo +nightly fuzz run "$target" "$work" -- -max_total_time="$secs" 2>&1 | grep -E "^#[0-9]+ *DONE|Done [0-9]+ runs|ERROR|panicked" || true
    status=${PIPESTATUS[0]}
    rm -rf "$work"
    if [ "$status" -ne 0 ]; then
        echo "fuzz: $target FAILED"
        exit 1
    fi
done
