#!/usr/bin/env bash
# Times `ebpf-prof annotate` against `ebpf-prof flame` on the same perf.data (issue 10's target:
# annotate takes at most 1.2x what flame takes on a 400k-sample profile). Prints the median of
# RUNS runs of each and the ratio. Both read the file once with the built-in reader; flame renders
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
time_it() { # median wall seconds of "$@" over $runs runs
    local t=()
    for _ in $(seq "$runs"); do
        local s e
        s=$(date +%s.%N)
        "$@" >/dev/null
        e=$(date +%s.%N)
        t+=("$(echo "$e - $s" | bc)")
    done
    printf '%s\n' "${t[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p"
}
nsamples=$(perf script -F period -i "$data" 2>/dev/null | wc -l)
flame=$(time_it "$bin" flame "$data" -o "$tmp/f.svg" --force)
annotate=$(time_it "$bin" annotate "$data")
echo "profile: $data ($nsamples samples)"
echo "flame:    ${flame} s (median of $runs)"
echo "annotate: ${annotate} s (median of $runs)"
echo "ratio annotate/flame: $(echo "scale=2; $annotate / $flame" | bc) (target <= 1.2)"
