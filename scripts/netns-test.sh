#!/usr/bin/env bash
# Two-host test: two network namespaces joined by a veth pair, an `smt
# server` in one and an `smt client` in the other, over IPv4 and IPv6 (UDP)
# and IPv4 raw IP. Everything it makes it removes, even on failure.
#
#   scripts/netns-test.sh path/to/smt
#
# Needs root (network namespaces) and iproute2's `ip`. Uses documentation
# address ranges (192.0.2.0/24, 2001:db8::/64) that exist only inside the
# namespaces this script creates.
set -euo pipefail
smt="${1:?usage: netns-test.sh path/to/smt}"
if [ "$(id -u)" -ne 0 ]; then
    echo "netns-test: SKIPPED: needs root to create network namespaces"
    exit 0
fi
if ! command -v ip >/dev/null 2>&1; then
    echo "netns-test: SKIPPED: iproute2 'ip' not found"
    exit 0
fi

tag="$$"
a="smt-a-$tag"
b="smt-b-$tag"
va="smta$tag"
vb="smtb$tag"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$a"
ip netns add "$b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add 192.0.2.1/24 dev "$va"
ip -n "$b" addr add 192.0.2.2/24 dev "$vb"
ip -n "$a" addr add 2001:db8::1/64 dev "$va" nodad
ip -n "$b" addr add 2001:db8::2/64 dev "$vb" nodad
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
echo "netns-test: hosts $a (192.0.2.1, 2001:db8::1) and $b (192.0.2.2, 2001:db8::2) over veth"

psk="$("$smt" keygen)"
run_case() {
    local name="$1" listen="$2" server="$3"; shift 3
    ip netns exec "$a" "$smt" server --listen "$listen" --psk "$psk" --duration 20 "$@" >/dev/null &
    local spid=$!
    pids+=("$spid")
    sleep 0.3
    echo "netns-test: $name"
    ip netns exec "$b" "$smt" client --server "$server" --psk "$psk" --seconds 1 --size 2000 "$@"
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
}
run_case "UDP over IPv4" 192.0.2.1:7878 192.0.2.1:7878
run_case "UDP over IPv6" "[2001:db8::1]:7879" "[2001:db8::1]:7879"
run_case "raw IP over IPv4" 192.0.2.1:7880 192.0.2.1:7880 --raw
run_case "raw IP over IPv6" "[2001:db8::1]:7881" "[2001:db8::1]:7881" --raw
echo "netns-test: all cases passed"
