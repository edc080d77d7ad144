#!/usr/bin/env bash
# Times `ebpf-prof annotate` against `ebpf-prof flame` on the same perf.data (the target:
# annotate takes at most 1.2x what flame takes on a 400k-sample profile). Prints the median of
# RUNS interleaved runs of each and the median of the per-round ratios. Both read the file once with the built-in reader; flame renders
# an SVG.
#
#   scripts/bench-annotate.sh [PERF.DATA] [RUNS]      (default /tmp/shared/big.data, 3 runs)
#   RECORD=N scripts/bench-annotate.sh                 (as root: record ~N samples first, with
#                                                       the sample hook, into a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/ebpf-prof
data=${1:-/tmp/shared/big.data}
runs=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -n "${RECORD:-}" ]]; then
    obj=$(ls target/release/build/ebpf-prof-*/out/hooks/openat_hook.bpf.o | head -1)
    # 20 kHz on the one pinned CPU, ~2.5 us per openat with the hook: 20 iterations a sample.
    (cd "$tmp" && "$OLDPWD/$bin" record --load "$OLDPWD/$obj" -F 20000 -n $((RECORD * 20)) -o big.data >/dev/null)
    data=$tmp/big.data
fi
secs() { # wall seconds of "$@"
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null
    e=$(date +%s.%N)
    echo "$e - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# Interleaved: each round times flame and annotate back to back (the order alternating), so a
# slow spell of the machine falls on both; the ratio is the median of the per-round ratios.
: > "$tmp/flame"; : > "$tmp/annotate"; : > "$tmp/ratio"
for r in $(seq "$runs"); do
    if (( r % 2 )); then
        f=$(secs "$bin" flame "$data" -o "$tmp/f.svg" --force); a=$(secs "$bin" annotate "$data")
    else
        a=$(secs "$bin" annotate "$data"); f=$(secs "$bin" flame "$data" -o "$tmp/f.svg" --force)
    fi
    echo "$f" >> "$tmp/flame"; echo "$a" >> "$tmp/annotate"
    echo "scale=4; $a / $f" | bc >> "$tmp/ratio"
done
nsamples=$(perf script -F period -i "$data" 2>/dev/null | wc -l)
echo "profile: $data ($nsamples samples)"
echo "flame:    $(median < "$tmp/flame") s (median of $runs, interleaved with annotate)"
echo "annotate: $(median < "$tmp/annotate") s (median of $runs)"
echo "ratio annotate/flame: $(median < "$tmp/ratio") (median of the $runs per-round ratios; range $(sort -n "$tmp/ratio" | head -1)-$(sort -n "$tmp/ratio" | tail -1); target <= 1.2)"
