#!/usr/bin/env bash
# Benchmark: the packet path at `overhead`'s defaults, one calibrated program per kind (xdp, tc,
# tcx/ingress, cgroup_skb/egress, socket, cgroup/sock_create, netfilter): the operation chosen, runs per timed operation,
# Δp50 with its interval, wall time; then 8 vs 0 look-ups XDP `--compare`, told apart in N of
# COMPARE_RUNS. As root.
# Usage: sudo scripts/packet-path.sh [COMPARE_RUNS=10] [-- OVERHEAD ARGS…]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
cargo run --release --locked --quiet --example packet_path -- "$@"
