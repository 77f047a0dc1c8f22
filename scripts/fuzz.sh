#!/usr/bin/env bash
# Builds the cargo-fuzz targets and runs each for a short time.
#   scripts/fuzz.sh               build, then run every target for 10 s (CI)
#   scripts/fuzz.sh 3600          ... for an hour each (long runs: docs/fuzzing.md)
#   scripts/fuzz.sh 600 reassembly   ... only the targets named
#   scripts/fuzz.sh build         build only
# Each target runs on a scratch copy of its committed corpus (fuzz/corpus/),
# so runs never grow the committed seeds; a crash input is left in
# fuzz/artifacts/<target>/ and fails the script. Needs the nightly toolchain
# (on every machine of this project) and cargo-fuzz, which it installs from
# crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi
cd fuzz
cargo +nightly fuzz build
[ "$secs" = build ] && exit 0
targets="${*:-$(cargo +nightly fuzz list)}"
for target in $targets; do
    corpus="corpus/$target"
    mkdir -p "$corpus"
    work=$(mktemp -d)
    log=$(mktemp)
    cp -r "$corpus/." "$work/" 2>/dev/null || true
    echo "fuzz: $target for ${secs}s"
    status=0
    cargo +nightly fuzz run "$target" "$work" -- -max_total_time="$secs" >"$log" 2>&1 || status=$?
    # The DONE line has the executions and exec/s (docs/fuzzing.md).
    grep -E "^#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs" "$log" || true
    rm -rf "$work"
    if [ "$status" -ne 0 ]; then
        grep -E -A30 "panicked|ERROR|SUMMARY" "$log" | head -60 || tail -40 "$log"
        rm -f "$log"
        echo "fuzz: $target FAILED (input saved under fuzz/artifacts/$target/)"
        exit 1
    fi
    rm -f "$log"
done
