#!/usr/bin/env bash
# Renders the pictures the tool draws, from fixtures, in headless Chromium and checks that no
# text runs past the SVG's edge: the flame graph of fixtures/perf-data/hook-lines.data, the
# differential graph of fixtures/folded/no-bpf.folded → sample-hook.folded, and the CDF and
# sweep plots of `overhead` from seeded rounds (examples/plots.rs).
#
# Each SVG is screenshotted to a PNG in a window 1000 px wide (where a long title would run into
# "Search"), then loaded again with a small script (scripts/svg-screenshots/measure.js) that
# measures every text's box; scripts/svg-screenshots/check.py fails naming a text that runs past
# the window's edge, past its frame, or into another text.
#
# Installs Debian's chromium when it is missing (needs root then). Uses a new, empty profile
# directory and no network. Leaves the SVGs and PNGs in $OUT (default target/svg-screenshots/).
# Usage: scripts/svg-screenshots.sh
# Exit: 0 when every text fits, 1 when one does not, 2 when something could not be rendered.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/target/svg-screenshots}
WIDTH=1000

if ! command -v chromium >/dev/null; then
  echo "svg-screenshots: installing chromium" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null ||
    { echo "svg-screenshots: cannot install chromium (apt-get install chromium as root)" >&2; exit 2; }
fi
cargo build --quiet --bin ebpf-prof --example plots || exit 2
BIN=$REPO/target/debug/ebpf-prof

mkdir -p "$OUT"
PROFILE=$(mktemp -d /tmp/svg-screenshots.XXXXXX)
trap 'rm -rf -- "$PROFILE"' EXIT

"$BIN" flame fixtures/perf-data/hook-lines.data -o "$OUT/flame.svg" --force
"$BIN" diff fixtures/folded/no-bpf.folded fixtures/folded/sample-hook.folded -o "$OUT/diff.svg" --force
"$REPO/target/debug/examples/plots" "$OUT"

chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$PROFILE" --hide-scrollbars "$@" 2>/dev/null
}

status=0
for name in flame diff cdf sweep; do
  svg=$OUT/$name.svg
  height=$(grep -o 'height="[0-9.]*"' "$svg" | head -1 | tr -dc '0-9.')
  height=${height%.*}
  chrome --window-size="$WIDTH,${height:-800}" --screenshot="$OUT/$name.png" "file://$svg" >/dev/null ||
    { echo "svg-screenshots: chromium could not screenshot $svg" >&2; exit 2; }
  measured=$OUT/$name.measured.svg
  # The measuring script goes in before the SVG's last end tag, in CDATA as inferno's is.
  python3 - "$svg" scripts/svg-screenshots/measure.js > "$measured" <<'PY'
import sys
svg, script = (open(path, encoding="utf-8").read() for path in sys.argv[1:3])
end = svg.rindex("</svg>")
print(svg[:end] + '<script type="text/ecmascript"><![CDATA[\n' + script + "]]></script>" + svg[end:])
PY
  chrome --window-size="$WIDTH,${height:-800}" --virtual-time-budget=3000 --dump-dom "file://$measured" |
    python3 scripts/svg-screenshots/check.py "$name" || status=1
done
echo "svg-screenshots: PNGs in $OUT"
exit $status
