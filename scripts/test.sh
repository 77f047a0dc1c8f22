#!/usr/bin/env bash
# The README's test command: fetches the outside test vectors (once), then
# runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-vectors.sh
# smt without default features leaves out the NIC model, pcapng and serde.
bash scripts/features-test.sh
# Debian's dig reads the DNS ticket records in one test; installed when
# root (CI), otherwise that test reports SKIPPED.
bash scripts/dig-test.sh --install || echo "test.sh: dig not installed; its test will be skipped"
# Debian's tshark runs the Wireshark dissector (tools/wireshark) in one
# test; installed when root (CI), otherwise that test reports SKIPPED.
bash scripts/tshark-test.sh --install || echo "test.sh: tshark not installed; its test will be skipped"
# Debian's redis-server and redis-benchmark check smt-kv (the differential
# and benchmark tests); installed when root, otherwise those tests report
# SKIPPED.
bash scripts/redis-test.sh --install || echo "test.sh: redis-server/redis-tools not installed; their tests will be skipped"
# libsmt's tests build C programs with cc; they also check the header as
# C++ (c++) and link an installed copy through pkg-config: Debian's g++ and
# pkg-config are installed when root, otherwise those two checks report
# SKIPPED.
bash scripts/c-api-test.sh --install || echo "test.sh: c++/pkg-config not installed; their checks of libsmt will be skipped"
# The in-network topology tests (smt-forwarder) build network namespaces
# with iproute2's ip and tc; installed when root and missing, otherwise
# those tests report SKIPPED.
bash scripts/innetwork-topo.sh --install || echo "test.sh: iproute2 not installed; the smt-forwarder topology tests will be skipped"
# The remote-memory crates: Debian's libclang-dev (the userfaultfd crate
# generates its bindings with bindgen at build time), libssl-dev and
# pkg-config (the openssl crate), and Python's cryptography (the
# independent decryption in smt-farmem's tests, SKIPPED without it).
bash scripts/memnode-test.sh --install || echo "test.sh: a remote-memory dependency is missing (see above)"
# iproute2's ip and ss run smt-hostile's outside-in suite in its own
# network namespace; installed when root (the suite needs root anyway),
# otherwise it reports SKIPPED.
bash scripts/hostile-test.sh --install || echo "test.sh: ip/ss not installed; smt-hostile's suite will be skipped"
# Debian's prometheus package ships promtool, which checks the metrics
# pages (several endpoints in one) as Prometheus would; installed when
# root, otherwise those checks report SKIPPED.
bash scripts/promtool-test.sh --install || echo "test.sh: promtool not installed; its checks of the metrics pages will be skipped"
# A hung test must not use up CI's whole budget in silence: past the
# limit the run stops, and cargo's "has been running for over 60 seconds"
# lines above name the test. A clean run takes ~15 minutes on 2 cores.
limit=${SMT_TEST_LIMIT:-2700}
status=0
timeout -k 30 "$limit" cargo test --workspace || status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "test.sh: the tests did not finish within ${limit} s; a test hangs (named above)" >&2
fi
exit "$status"
