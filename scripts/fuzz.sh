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
#
# Targets run side by side, SMT_FUZZ_JOBS at a time (default: one per CPU;
# each libFuzzer process is single-threaded), so the 10 s CI runs of eight
# targets take 40 s on 2 cores instead of 80. SMT_FUZZ_CODEGEN_UNITS, when
# set, is passed to `cargo fuzz` as --codegen-units (its default is 1 for
# release builds: the fastest fuzzing, the slowest build on many cores). The
# build honours CARGO_TARGET_DIR like cargo does.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi
cd fuzz
opts=()
if [ -n "${SMT_FUZZ_CODEGEN_UNITS:-}" ]; then
    opts+=(--codegen-units "$SMT_FUZZ_CODEGEN_UNITS")
fi
cargo +nightly fuzz build "${opts[@]}"
[ "$secs" = build ] && exit 0
targets="${*:-$(cargo +nightly fuzz list)}"
jobs="${SMT_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# run_target TARGET: one run on a scratch copy of the corpus; its log and
# exit status go to $results/TARGET.{log,status}.
run_target() {
    local target=$1 corpus="corpus/$1" work status=0
    mkdir -p "$corpus"
    work=$(mktemp -d)
    cp -r "$corpus/." "$work/" 2>/dev/null || true
    cargo +nightly fuzz run "${opts[@]}" "$target" "$work" -- -max_total_time="$secs" \
        >"$results/$target.log" 2>&1 || status=$?
    rm -rf "$work"
    echo "$status" >"$results/$target.status"
}

echo "fuzz: $(wc -w <<<"$targets") targets for ${secs}s each, $jobs at a time"
for target in $targets; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    run_target "$target" &
done
wait
failed=0
for target in $targets; do
    log="$results/$target.log"
    status=$(cat "$results/$target.status" 2>/dev/null || echo 1)
    echo "fuzz: $target"
    # The DONE line has the executions and exec/s (docs/fuzzing.md).
    grep -E "^#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs" "$log" || true
    if [ "$status" -ne 0 ]; then
        grep -E -A30 "panicked|ERROR|SUMMARY" "$log" | head -60 || tail -40 "$log"
        echo "fuzz: $target FAILED (input saved under fuzz/artifacts/$target/)"
        failed=1
    fi
done
exit "$failed"
