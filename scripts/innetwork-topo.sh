#!/usr/bin/env bash
# The in-network topology (docs/innetwork.md § 2): client namespaces, a
# forwarder namespace, and either one server reached over several paths or
# several server replicas, each over its own link. IPv4 and IPv6 on every
# link. The forwarder namespace does not route (ip_forward stays 0): the
# only way from a client to a server is the user-space `smt-forwarder`.
#
#   scripts/innetwork-topo.sh up TAG paths    [--clients N] [--paths N] [--rate-mbit R0,R1,..]
#   scripts/innetwork-topo.sh up TAG replicas [--clients N] [--replicas N] [--rate-mbit R0,..]
#   scripts/innetwork-topo.sh down TAG
#   scripts/innetwork-topo.sh run TAG VARIANT [options] -- COMMAND [ARGS...]
#   scripts/innetwork-topo.sh check | --install
#
# `up` builds the topology (and removes what it built if a step fails);
# `down` removes it; `run` builds it, runs COMMAND, and removes it however
# COMMAND ends (exit, failure, Ctrl-C). The exit status is COMMAND's.
# `check` prints why the topology cannot be built here (and exits 1), or
# nothing.
#
# Names (TAG: at most 6 letters or digits):
#   namespaces      smtin-TAG-c0..   clients
#                   smtin-TAG-f      the forwarder
#                   smtin-TAG-s0     the server (paths) / smtin-TAG-s0.. the replicas
#   links           client i:  c<i> (forwarder side) -- fw (client side)
#                   path k:    p<k> (forwarder) -- p<k> (server)
#                   replica k: r<k> (forwarder) -- fw (replica)
# Addresses (documentation ranges, RFC 5737 / RFC 3849, that exist only
# inside these namespaces):
#   client i link   192.0.2.(4i+1)/30 forwarder, .(4i+2) client; 2001:db8:c<i>::1 / ::2
#   path/replica k  198.51.100.(4k+1)/30 forwarder, .(4k+2) server; 2001:db8:a<k>::1 / ::2
#   inside address  203.0.113.1 and 2001:db8:ff::1 on the forwarder's lo: the
#                   address the servers see the clients at (docs/innetwork.md § 3)
# Servers route the inside address over path 0 (paths variant) or their own
# link (replicas). With --rate-mbit, path (or replica link) k gets a `tbf`
# qdisc on the forwarder side at that rate (0: none): the hard cap of the
# link; the forwarder paces at the same rate so its own queues hold the
# backlog (only tbf and htb exist here; no netem).
#
# Needs root and iproute2 (ip, tc).
set -euo pipefail

usage() {
    sed -n '8,12p' "$0" >&2
    exit 2
}

check() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "needs root to create network namespaces"
        return 1
    fi
    for tool in ip tc; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "iproute2 '$tool' not found"
            return 1
        fi
    done
}

ns() { echo "smtin-$tag-$1"; }

# Removes every namespace of TAG (their links go with them).
down() {
    local n
    for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^smtin-$tag-" || true); do
        ip netns del "$n" 2>/dev/null || true
    done
}

# A namespace whose links skip duplicate address detection: a tentative
# link-local address makes the kernel hold back neighbour solicitations
# for traffic sourced from another interface (the inside address on lo),
# so the first IPv6 packet toward a server would wait a full second for
# the link-local's DAD (and an RPC with a 1 s idle timeout would fail).
new_ns() {
    ip netns add "$1"
    ip netns exec "$1" sh -c 'echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad; echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad' 2>/dev/null || true
    ip -n "$1" link set lo up
}

# Waits (at most 3 s) until no address of TAG's namespaces is tentative.
settle() {
    local n tries
    for ((tries = 0; tries < 30; tries++)); do
        local busy=0
        for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^smtin-$tag-" || true); do
            if [ -n "$(ip -n "$n" -6 addr show tentative 2>/dev/null)" ]; then busy=1; fi
        done
        [ "$busy" = 0 ] && return 0
        sleep 0.1
    done
    echo "innetwork-topo: warning: IPv6 addresses still tentative after 3 s" >&2
}

# link NS_A IF_A ADDR_A NS_B IF_B ADDR_B V6_PREFIX: a veth pair, IPv4 /30
# and IPv6 /64 (::1 on A, ::2 on B).
link() {
    local na="$1" ia="$2" a4="$3" nb="$4" ib="$5" b4="$6" p6="$7"
    ip link add "$ia" netns "$na" type veth peer name "$ib" netns "$nb"
    ip -n "$na" addr add "$a4/30" dev "$ia"
    ip -n "$nb" addr add "$b4/30" dev "$ib"
    ip -n "$na" addr add "$p6::1/64" dev "$ia" nodad
    ip -n "$nb" addr add "$p6::2/64" dev "$ib" nodad
    ip -n "$na" link set "$ia" up
    ip -n "$nb" link set "$ib" up
}

rate_of() {
    local k="$1"
    if [ -z "$rates" ]; then echo 0; return; fi
    local r
    r=$(echo "$rates" | cut -d, -f$((k + 1)))
    echo "${r:-0}"
}

shape() {
    local dev="$1" mbit="$2"
    [ "$mbit" = 0 ] && return 0
    # burst: 64 KB absorbs the forwarder's pacing slack (a timer late by
    # a few hundred µs releases a few packets at once).
    tc -n "$(ns f)" qdisc add dev "$dev" root tbf rate "${mbit}mbit" burst 64kb latency 100ms
}

up() {
    local f
    f="$(ns f)"
    new_ns "$f"
    ip -n "$f" addr add 203.0.113.1/32 dev lo
    ip -n "$f" addr add 2001:db8:ff::1/128 dev lo nodad
    local i k
    for ((i = 0; i < clients; i++)); do
        new_ns "$(ns c$i)"
        link "$f" "c$i" "192.0.2.$((4 * i + 1))" "$(ns c$i)" fw "192.0.2.$((4 * i + 2))" "2001:db8:c$i"
    done
    case "$variant" in
    paths)
        local s
        s="$(ns s0)"
        new_ns "$s"
        for ((k = 0; k < links; k++)); do
            link "$f" "p$k" "198.51.100.$((4 * k + 1))" "$s" "p$k" "198.51.100.$((4 * k + 2))" "2001:db8:a$k"
            shape "p$k" "$(rate_of "$k")"
        done
        ip -n "$s" route add 203.0.113.1/32 via 198.51.100.1
        ip -n "$s" -6 route add 2001:db8:ff::1/128 via 2001:db8:a0::1
        ;;
    replicas)
        for ((k = 0; k < links; k++)); do
            local r
            r="$(ns s$k)"
            new_ns "$r"
            link "$f" "r$k" "198.51.100.$((4 * k + 1))" "$r" fw "198.51.100.$((4 * k + 2))" "2001:db8:a$k"
            shape "r$k" "$(rate_of "$k")"
            ip -n "$r" route add 203.0.113.1/32 via "198.51.100.$((4 * k + 1))"
            ip -n "$r" -6 route add 2001:db8:ff::1/128 via "2001:db8:a$k::1"
        done
        ;;
    esac
    settle
    echo "innetwork-topo: $tag $variant: $clients client(s), $links link(s) up"
}

cmd="${1:-}"
[ -n "$cmd" ] || usage
if [ "$cmd" = --install ]; then
    # ip and tc come with Debian's iproute2; installed when root and missing.
    if command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1; then exit 0; fi
    [ "$(id -u)" -eq 0 ] || exit 1
    (apt-get install -y iproute2 || { apt-get update && apt-get install -y iproute2; }) >/dev/null
    exit $?
fi
if [ "$cmd" = check ]; then
    check
    exit $?
fi
tag="${2:-}"
[[ "$tag" =~ ^[a-z0-9]{1,6}$ ]] || { echo "innetwork-topo: TAG must be 1-6 lowercase letters or digits" >&2; exit 2; }
if ! why=$(check); then
    echo "innetwork-topo: SKIPPED: $why"
    exit 0
fi
if [ "$cmd" = down ]; then
    down
    exit 0
fi
variant="${3:-}"
case "$variant" in paths | replicas) ;; *) usage ;; esac
shift 3
clients=1
links=2
rates=""
command=()
while [ $# -gt 0 ]; do
    case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --paths | --replicas) links="$2"; shift 2 ;;
    --rate-mbit) rates="$2"; shift 2 ;;
    --) shift; command=("$@"); break ;;
    *) usage ;;
    esac
done
[[ "$clients" =~ ^[1-8]$ ]] || { echo "innetwork-topo: --clients is 1 to 8" >&2; exit 2; }
[[ "$links" =~ ^[1-8]$ ]] || { echo "innetwork-topo: --paths/--replicas is 1 to 8" >&2; exit 2; }

case "$cmd" in
up)
    # A failed step leaves nothing behind.
    down
    trap 'down' ERR
    up
    trap - ERR
    ;;
run)
    [ ${#command[@]} -gt 0 ] || usage
    down
    trap 'down' EXIT
    trap 'exit 130' INT TERM
    up
    status=0
    "${command[@]}" || status=$?
    exit "$status"
    ;;
*) usage ;;
esac
