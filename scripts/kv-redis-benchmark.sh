#!/usr/bin/env bash
# redis-benchmark's default suite (every test the installed version runs:
# PING, SET, GET, INCR, lists, sets, sorted sets, hashes, LRANGE, MSET)
# against smt-kv's TCP and TLS front ends and against the real
# redis-server (TCP and TLS) on the same machine, same settings: 50
# clients, without and with -P 16, TLS 1.3 with TLS_AES_128_GCM_SHA256 on
# both (the suite SMT uses). Prints a Markdown table of requests per
# second, one row per test (docs/apps.md).
#
#   scripts/kv-redis-benchmark.sh [--pin] [--raw] [REQUESTS]
#
# --pin runs both servers and redis-benchmark on CPU 1 (taskset -c 1).
# --raw prints redis-benchmark -q's own output for smt-kv over TCP and
#       over TLS instead of the table, each after its command line.
# Needs redis-server and redis-benchmark (scripts/redis-test.sh --install).
set -euo pipefail
cd "$(dirname "$0")/.."

pin=()
raw=no
while [ $# -gt 0 ]; do
    case "$1" in
        --pin) pin=(taskset -c 1) ;;
        --raw) raw=yes ;;
        *) break ;;
    esac
    shift
done
requests=${1:-100000}

bash scripts/redis-test.sh --install
cargo build --release -q -p smt-kv
bin=${CARGO_TARGET_DIR:-target}/release/smt-kv
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$bin" certs --dir "$dir" --names 127.0.0.1,localhost 2>/dev/null
redis_tcp=$(free_port); redis_tls=$(free_port); kv_tcp=$(free_port); kv_tls=$(free_port)
"${pin[@]}" redis-server --port "$redis_tcp" --tls-port "$redis_tls" --bind 127.0.0.1 \
    --tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server-key.pem" \
    --tls-ca-cert-file "$dir/ca.pem" --tls-auth-clients no \
    --save "" --appendonly no --databases 1 --logfile "" >/dev/null 2>&1 &
pids+=($!)
"${pin[@]}" "$bin" serve --tcp "127.0.0.1:$kv_tcp" --tls "127.0.0.1:$kv_tls" \
    --cert "$dir/server.pem" --key "$dir/server-key.pem" 2>/dev/null &
pids+=($!)
sleep 1

tls=(--tls --cacert "$dir/ca.pem" --tls-ciphersuites TLS_AES_128_GCM_SHA256)

# The arguments of one run: port, pipeline, and "tls" or nothing.
bench_args() {
    local port=$1 pipeline=$2 kind=${3:-}
    local args=(-h 127.0.0.1 -p "$port" -n "$requests" -c 50 -P "$pipeline")
    if [ "$kind" = tls ]; then args+=("${tls[@]}"); fi
    echo "${args[@]}"
}

if [ "$raw" = yes ]; then
    for pipeline in 1 16; do
        for target in "smt-kv TCP:$kv_tcp:" "smt-kv TLS:$kv_tls:tls"; do
            IFS=: read -r name port kind <<<"$target"
            # shellcheck disable=SC2046
            args=$(bench_args "$port" "$pipeline" "$kind" | sed "s|$dir|DIR|g")
            echo "## $name: redis-benchmark -q $args"
            # shellcheck disable=SC2046
            "${pin[@]}" redis-benchmark -q $(bench_args "$port" "$pipeline" "$kind") 2>&1 |
                tr '\r' '\n' | grep 'requests per second'
            echo
        done
    done
    exit 0
fi

# One run's CSV as "test<TAB>rps" lines.
bench() {
    # shellcheck disable=SC2046
    "${pin[@]}" redis-benchmark --csv $(bench_args "$@") 2>/dev/null |
        awk -F'"' 'NR > 1 { printf "%s\t%s\n", $2, $4 }'
}

targets=("redis-server TCP:$redis_tcp:" "smt-kv TCP:$kv_tcp:" "redis-server TLS:$redis_tls:tls" "smt-kv TLS:$kv_tls:tls")
for pipeline in 1 16; do
    files=()
    for target in "${targets[@]}"; do
        IFS=: read -r name port kind <<<"$target"
        file="$dir/$(echo "$name" | tr ' ' _)-$pipeline.tsv"
        bench "$port" "$pipeline" "$kind" >"$file"
        files+=("$file")
    done
    echo
    echo "-P $pipeline:"
    echo
    echo "| test | redis-server TCP | smt-kv TCP | redis-server TLS | smt-kv TLS |"
    echo "|---|---|---|---|---|"
    # Rows in the suite's order, from the first file; a missing result is "—".
    awk -F'\t' '
        FNR == 1 { f++ }
        { rps[f, $1] = $2; if (f == 1) order[++n] = $1 }
        END {
            for (i = 1; i <= n; i++) {
                t = order[i]; line = "| " t
                for (j = 1; j <= f; j++) line = line " | " ((j, t) in rps ? rps[j, t] : "—")
                print line " |"
            }
        }' "${files[@]}"
done
