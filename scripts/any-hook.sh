#!/usr/bin/env bash
# Benchmark: `overhead --load` at its defaults on hooks of other events than openat (execve,
# newfstatat, sendto, sched_process_fork, and vhangup, which no operation fires): the operation
# `--op auto` chose, the programs' runs per timed operation, Δp50 with its interval, wall time;
# then `record --load` of the execve hook and its `report`. As root.
# Usage: sudo scripts/any-hook.sh [RUNS_PER_HOOK=1] [-- OVERHEAD ARGS…]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
cargo run --release --locked --quiet --example any_hook -- "$@"
