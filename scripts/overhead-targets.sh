#!/usr/bin/env bash
# Benchmark: overhead's sensitivity (pairs of hooks 14-55 ns apart told apart, and each run's
# interval holding the others' median), its noise floors (--aa, a copy of one object, --aa --load:
# the interval holds 0 in ≥ 19/20 runs) and its wall time, on this machine, as root.
# Usage: sudo scripts/overhead-targets.sh [COMPARE_RUNS=10] [AA_RUNS=20] [-- OVERHEAD ARGS…]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
cargo run --release --locked --quiet --example overhead_targets -- "$@"
