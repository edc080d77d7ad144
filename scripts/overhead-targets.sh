#!/usr/bin/env bash
# Benchmark: overhead's sensitivity (≈35 ns hook difference detected in ≥ 9/10 runs), its noise
# floor (--aa interval holds 0 in ≥ 19/20 runs) and its wall time, on this machine, as root.
# Usage: sudo scripts/overhead-targets.sh [COMPARE_RUNS=10] [AA_RUNS=20] [-- OVERHEAD ARGS…]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
cargo run --release --locked --quiet --example overhead_targets -- "$@"
