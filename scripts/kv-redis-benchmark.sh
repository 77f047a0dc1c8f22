#!/usr/bin/env bash
# redis-benchmark against smt-kv's TCP and TLS front ends and against the
# real redis-server (TCP and TLS) on the same machine, same settings:
# -t ping,set,get, 50 clients, without and with -P 16, TLS 1.3 with
# TLS_AES_128_GCM_SHA256 on both (the suite SMT uses). Prints a Markdown
# table of requests per second (docs/apps.md).
#
#   scripts/kv-redis-benchmark.sh [--pin] [REQUESTS]
#
# --pin runs both servers and redis-benchmark on CPU 1 (taskset -c 1).
# Needs redis-server and redis-benchmark (scripts/redis-test.sh --install).
set -euo pipefail
cd "$(dirname "$0")/.."

pin=()
if [ "${1:-}" = "--pin" ]; then
    pin=(taskset -c 1)
    shift
fi
requests=${1:-200000}

bash scripts/redis-test.sh --install
cargo build --release -q -p smt-kv
bin=target/release/smt-kv
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

# One run: prints "PING_INLINE PING_MBULK SET GET" requests per second.
bench() {
    local port=$1 pipeline=$2
    shift 2
    "${pin[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t ping,set,get -n "$requests" \
        -c 50 -P "$pipeline" --csv "$@" 2>/dev/null |
        awk -F'"' '/^"(PING_INLINE|PING_MBULK|SET|GET)"/ { printf "%s ", $4 }'
}

tls=(--tls --cacert "$dir/ca.pem" --tls-ciphersuites TLS_AES_128_GCM_SHA256)
echo "| server | -P | PING_INLINE | PING_MBULK | SET | GET |"
echo "|---|---|---|---|---|---|"
for pipeline in 1 16; do
    for target in "redis-server TCP:$redis_tcp" "smt-kv TCP:$kv_tcp" \
                  "redis-server TLS:$redis_tls:tls" "smt-kv TLS:$kv_tls:tls"; do
        IFS=: read -r name port kind <<<"$target"
        if [ "${kind:-}" = tls ]; then
            result=$(bench "$port" "$pipeline" "${tls[@]}")
        else
            result=$(bench "$port" "$pipeline")
        fi
        printf "| %s | %s | %s |\n" "$name" "$pipeline" "$(echo "$result" | sed 's/ $//; s/ / | /g')"
    done
done
