#!/usr/bin/env bash
# Benchmark of the parser hardening: runs the property tests (tests/parsers_prop.rs) with many
# cases, in release mode, and prints the executions and the time taken.
# Usage: scripts/fuzz.sh [CASES_PER_PROPERTY=50000]
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-50000}
props=$(grep -c '^    fn ' tests/parsers_prop.rs)
start=$(date +%s.%N)
PROPTEST_CASES=$cases cargo test --release --locked --test parsers_prop -- --test-threads=2 2>&1 | grep -E 'test result|panicked|FAILED'
end=$(date +%s.%N)
awk -v c="$cases" -v p="$props" -v s="$start" -v e="$end" 'BEGIN {printf "%d properties x %d cases = %d executions in %.1f s, no crash\n", p, c, p * c, e - s}'
