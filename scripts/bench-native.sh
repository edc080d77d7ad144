#!/usr/bin/env bash
# The native reader's speed targets, measured side by side in one run on one perf.data (with its .kallsyms
# snapshot beside it): the native reader's `flame`, `report` and `diff` against `perf script`
# alone and against the old `--via-perf` path; wall time (median of RUNS) and peak RSS
# (/usr/bin/time -v) against the file's size. Prints the figures and PASS/FAIL per target:
#   flame <= 1.0 s wall, flame <= 0.4x perf script, peak RSS <= 2x the file,
#   report and diff <= 1.2x flame (median of the per-round ratios, the three run interleaved);
#   native runs use a PATH without perf. RUNS (5) runs of perf, ROUNDS (15) of the native trio.
#
#   scripts/bench-native.sh [PERF.DATA]     (default: /tmp/native/big.data)
#
# Record a ~400k-sample kernel-stack profile to measure (as root, ~30 s):
#   target/release/ebpf-prof record --load OPENAT_HOOK.bpf.o -F 20000 -n 2900000 -o /tmp/native/big.data
set -euo pipefail
data=${1:-/tmp/native/big.data}
[ -f "$data" ] || { echo "no $data: record one (see the header of $0)" >&2; exit 2; }
data=$(realpath -- "$data")
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
rounds=${ROUNDS:-15}
perf=${PERF:-$(command -v perf || true)}
[ -x "$perf" ] || { echo "no perf to compare with: install it or set PERF=/path/to/perf" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt install time)" >&2; exit 2; }
cargo build --release --quiet
bin=$PWD/target/release/ebpf-prof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nopath=$tmp/empty-path
mkdir "$nopath"

# one run of a command: "WALL RSS" (seconds, peak KB); a failing command stops the script,
# saying why
once() {
  local rc=0
  /usr/bin/time -f '%e %M' "$@" >/dev/null 2>"$tmp/err" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "bench-native: failed (exit $rc): $*" >&2
    head -5 "$tmp/err" >&2
    kill "$$"
    return 1
  fi
  tail -1 "$tmp/err" | awk '{print ($1 < 0.01 ? 0.01 : $1), $2}'
}
# median wall seconds and max peak RSS (KB) of a command over $runs runs: "WALL RSS"
measure() {
  local i
  for ((i = 0; i < runs; i++)); do once "$@"; done |
    sort -n | awk '{w[NR] = $1; if ($2 > r) r = $2} END {print w[int((NR + 1) / 2)], r}'
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

size=$(stat -c %s "$data")
samples=$("$bin" report "$data" 2>/dev/null | head -1 | grep -oE '[0-9]+ samples' || echo "? samples")
echo "file: $data ($((size / 1000000)) MB, $samples); perf: $runs runs; native: $rounds rounds of flame, report, diff; medians"
snap="$data.kallsyms"
read -r ps_wall _ < <(measure "$perf" script -i "$data" --kallsyms="$snap")
read -r vp_wall _ < <(runs=1 measure "$bin" flame --via-perf "$data" -o "$tmp/v.svg" --force)
# The native commands run interleaved, a round of each at a time, and each ratio is taken
# within its round: a VM's speed drifts by 1.5x over seconds (other tenants), which would
# otherwise land on whichever command ran during a slow spell.
: >"$tmp/rounds"
for ((i = 0; i < rounds; i++)); do
  read -r fl rss_f < <(once env PATH="$nopath" "$bin" flame "$data" -o "$tmp/f.svg" --force)
  read -r rp rss_r < <(once env PATH="$nopath" "$bin" report "$data")
  read -r df rss_d < <(once env PATH="$nopath" "$bin" diff "$data" "$data" -o "$tmp/d.svg" --force)
  # diff's floor: two flames at once, as its two reads run (not a target, a yardstick)
  read -r two _ < <(once env PATH="$nopath" "$BASH" -c '"$0" flame "$1" -o "$2/t1.svg" --force & p=$!
    "$0" flame "$1" -o "$2/t2.svg" --force && wait "$p"' "$bin" "$data" "$tmp")
  echo "$fl $rp $df $rss_f $rss_r $rss_d $two" >>"$tmp/rounds"
done
col() { awk -v c="$1" '{print $c}' "$tmp/rounds" | median; }
colmax() { awk -v c="$1" '$c > m {m = $c} END {print m}' "$tmp/rounds"; }
fl_wall=$(col 1) rp_wall=$(col 2) df_wall=$(col 3)
fl_rss=$(colmax 4) rp_rss=$(colmax 5) df_rss=$(colmax 6)
rp_x=$(awk '{printf "%.3f\n", $2 / $1}' "$tmp/rounds" | median)
df_x=$(awk '{printf "%.3f\n", $3 / $1}' "$tmp/rounds" | median)
two_x=$(awk '{printf "%.3f\n", $7 / $1}' "$tmp/rounds" | median)
two_wall=$(col 7)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN {print (v <= t ? "PASS" : "FAIL")}'; }
rss_x=$(awk -v r="$fl_rss" -v s="$size" 'BEGIN {printf "%.2f", r * 1024 / s}')
printf '%-34s %8s\n' "perf script alone" "${ps_wall} s"
printf '%-34s %8s\n' "flame --via-perf (old path)" "${vp_wall} s"
printf '%-34s %8s   %s (<= 1.0 s)\n' "flame (native, no perf on PATH)" "${fl_wall} s" "$(verdict "$fl_wall" 1.0)"
printf '%-34s %8s   %s (<= 0.4)\n' "flame / perf script" "$(ratio "$fl_wall" "$ps_wall")x" "$(verdict "$(ratio "$fl_wall" "$ps_wall")" 0.4)"
printf '%-34s %8s   %s (<= 2x the file)\n' "flame peak RSS / file size" "${rss_x}x" "$(verdict "$rss_x" 2)"
printf '%-34s %8s   %s (<= 1.2)\n' "report ${rp_wall} s / flame" "$(ratio "$rp_x" 1)x" "$(verdict "$rp_x" 1.2)"
printf '%-34s %8s   %s (<= 1.2)\n' "diff ${df_wall} s / flame" "$(ratio "$df_x" 1)x" "$(verdict "$df_x" 1.2)"
printf '%-34s %8s   (diff'"'"'s floor on this machine)\n' "two flames at once ${two_wall} s / flame" "$(ratio "$two_x" 1)x"
printf '%-34s %8s\n' "speed-up over --via-perf" "$(ratio "$vp_wall" "$fl_wall")x"
echo "peak RSS KB: flame $fl_rss, report $rp_rss, diff $df_rss (file $((size / 1024)) KB)"
