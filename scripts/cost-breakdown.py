#!/usr/bin/env python3
"""Groups a `perf report --no-children --sort dso,symbol` text dump into
cost categories (AEAD, control MAC, kernel, allocator, copies, map lookups,
clock, protocol core, I/O driver, rest) and prints each share and, given
the RPC count and the profiled CPU seconds, nanoseconds per RPC.

Usage: perf report -i perf.data --no-children --sort dso,symbol --stdio \
         | python3 scripts/cost-breakdown.py RPCS CPU_SECONDS
"""
import re
import sys

RULES = [
    ("AEAD (AES-GCM seal/open)", r"gcm|aes_|aead_|skip_iv|ghash|gmult|aesni|vaes"),
    ("control MAC (HMAC-SHA-256)", r"hmac|sha256|SHA256|sha2"),
    ("allocator", r"malloc|_int_free|free|realloc|cfree|tcache"),
    ("copies (memcpy/memmove)", r"memmove|memcpy|memset"),
    ("map lookups (B-tree, hash)", r"btree|hashbrown|Hash>::hash|foldhash|BTreeMap|BTreeSet|rol64"),
    ("clock", r"clock_gettime|Instant"),
    ("protocol core (smt_proto)", r"smt_proto::"),
    ("I/O driver and sockets (smt, smt_udp, mio)", r"smt::|smt_udp::|quinn_udp|mio::"),
]


def category(dso, symbol):
    if "kernel" in dso:
        return "kernel (system calls, UDP, scheduler)"
    for name, pattern in RULES:
        if re.search(pattern, symbol):
            return name
    return "rest (application, std)"


def main():
    rpcs = float(sys.argv[1]) if len(sys.argv) > 1 else 0
    cpu = float(sys.argv[2]) if len(sys.argv) > 2 else 0
    shares = {}
    for line in sys.stdin:
        m = re.match(r"\s+([0-9.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, symbol = float(m.group(1)), m.group(2), m.group(3)
        key = category(dso, symbol)
        shares[key] = shares.get(key, 0.0) + pct
    total = sum(shares.values())
    print(f"{'category':<45} {'share':>7} {'ns/RPC':>8}")
    for key, pct in sorted(shares.items(), key=lambda kv: -kv[1]):
        ns = cpu * 1e9 * pct / total / rpcs if rpcs and cpu else float("nan")
        print(f"{key:<45} {pct / total * 100:6.1f}% {ns:8.0f}")


if __name__ == "__main__":
    main()
