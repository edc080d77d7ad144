#!/usr/bin/env bash
# Benchmark: the Rust harness (`ebpf-prof bench`) against the reference C harness
# (scripts/ref-bench.c), run side by side, interleaved, on the same CPU at the same SCHED_FIFO
# priority. Prints each round's p50/p99 and the ratio of the medians over rounds (Rust / C).
# Target: both ratios within 2% of 1.
#
# Usage: sudo scripts/compare-harness.sh [ROUNDS=10] [N=200000] [CPU=highest online] [PATH=/etc/hostname]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
n=${2:-200000}
cpu=${3:-$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)}
path=${4:-/etc/hostname}
prio=99

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/ref-bench" scripts/ref-bench.c
cargo build --release --quiet
rust=target/release/ebpf-prof

# nearest-rank percentile of a file of integers
pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {r=int((p/100)*NR); if (r<(p/100)*NR) r++; if (r<1) r=1; print a[r]}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

: > "$work/c50"; : > "$work/c99"; : > "$work/r50"; : > "$work/r99"
printf '%-6s %10s %10s %10s %10s\n' round C_p50 Rust_p50 C_p99 Rust_p99
for i in $(seq 1 "$rounds"); do
  # alternate which goes first, so neither always runs on a warmer cache
  if (( i % 2 )); then order="c r"; else order="r c"; fi
  for who in $order; do
    if [ "$who" = c ]; then
      taskset -c "$cpu" chrt -f "$prio" "$work/ref-bench" "$path" "$n" > "$work/c.txt"
    else
      taskset -c "$cpu" chrt -f "$prio" "$rust" bench --path "$path" -n "$n" > "$work/r.txt" 2>/dev/null
    fi
  done
  c50=$(pct "$work/c.txt" 50); c99=$(pct "$work/c.txt" 99)
  r50=$(pct "$work/r.txt" 50); r99=$(pct "$work/r.txt" 99)
  echo "$c50" >> "$work/c50"; echo "$c99" >> "$work/c99"
  echo "$r50" >> "$work/r50"; echo "$r99" >> "$work/r99"
  printf '%-6s %10s %10s %10s %10s\n' "$i" "$c50" "$r50" "$c99" "$r99"
done
mc50=$(median < "$work/c50"); mc99=$(median < "$work/c99")
mr50=$(median < "$work/r50"); mr99=$(median < "$work/r99")
awk -v r="$rounds" -v c="$mc50" -v x="$mr50" 'BEGIN {printf "median over %s rounds: C p50 %s ns, Rust p50 %s ns, ratio %.4f\n", r, c, x, x / c}'
awk -v r="$rounds" -v c="$mc99" -v x="$mr99" 'BEGIN {printf "median over %s rounds: C p99 %s ns, Rust p99 %s ns, ratio %.4f\n", r, c, x, x / c}'
