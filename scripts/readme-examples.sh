#!/usr/bin/env bash
# Reruns every example whose output README.md and docs/*.md show, and diffs what the commands
# print now against what the documents show (the examples are regenerated from real runs).
#
# An example is a fenced block right after a marker line `<!-- example: NAME -->`. Its `$ CMD`
# lines are run in order (with bash, in one scratch directory shared by all examples, stdout and
# stderr together); the other lines are the output shown. The comparison ignores the values of
# numbers (every run of digits reads as N, hex tags and addresses as H), the width of runs of
# spaces, and elisions: a line `…` stands for any number of lines, a `…` inside a line for any
# text. It does not ignore the lines' shape: a line added, lost or reworded is a difference.
#
# Needs root for the examples that load BPF or run perf (demo, record, overhead, doctor): as a
# user it runs those through sudo. Takes about three minutes. Each command's real output is kept
# in $OUT/NAME.txt (default target/readme-examples/) to paste into the documents.
# Usage: scripts/readme-examples.sh [NAME…]    (default: every example, in the order below;
#        report, report-json, flame, flame-bpf-only and diff read the perf.data of record, so
#        name record before them: scripts/readme-examples.sh record flame)
# Exit: 0 when every example matches, 1 when one differs, 2 when one is missing or unknown.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BIN=$REPO/target/release/ebpf-prof
OUT=${OUT:-$REPO/target/readme-examples}
DOCS=(README.md docs/*.md)

# The order matters: later examples read what earlier ones wrote (record → perf.data). Each name must have exactly one marker in the documents.
ORDER=(bench demo annotate-demo doctor record report report-json annotate annotate-asm annotate-json report-reference flame flame-bpf-only
       diff overhead overhead-exec overhead-socket side-cost sweep test-run)

[ -x "$BIN" ] || { echo "readme-examples: $BIN missing: run cargo build --release first" >&2; exit 2; }

mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/readme-examples.XXXXXX)
hook_pid=""
cleanup() {
  [ -z "$hook_pid" ] || kill "$hook_pid" 2>/dev/null || true
  rm -rf -- "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/bin" "$WORK/fixtures"
cp -r fixtures/folded "$WORK/fixtures/"
cp "$BIN" "$WORK/bin/ebpf-prof"
# The objects the examples load, as the documents say to get them.
"$BIN" hook --write-objects "$WORK" >/dev/null 2>&1
cp "$WORK/openat_hook.bpf.o" "$WORK/hook.bpf.o" # the sample hook, as demo writes it
# The test run's classifier is a test fixture, built by cargo beside the bundled hooks.
classifier=$(find target/release/build -path '*/out/hooks/testrun/xdp_classify.bpf.o' -print -quit)
[ -f "$classifier" ] || { echo "readme-examples: xdp_classify.bpf.o not found under target/release/build: run cargo build --release" >&2; exit 2; }
cp "$classifier" fixtures/pcap/classifier.pcap "$WORK/"

# The commands run with the release binary first on PATH; `sudo` runs directly when root.
run_in_work() { # run_in_work COMMAND-LINE
  (cd "$WORK" && PATH="$WORK/bin:$PATH" bash -o pipefail -c '
    sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else command sudo env "PATH=$PATH" "$@"; fi; }
    '"$1" 2>&1) || true
}

# Hidden set-up before an example, when it needs files the shown commands do not make.
setup() { # setup NAME
  case $1 in
    doctor) # doctor with the sample hook held loaded, as the shown output is
      (cd "$WORK" && exec "$WORK/bin/ebpf-prof" hook --seconds 20 >/dev/null 2>&1) &
      hook_pid=$!
      # The hook may wait on the run lock behind another root run: wait for its programs
      # (up to two minutes), not for a fixed time.
      for _ in $(seq 240); do
        bpftool prog show name tail_call_security_check >/dev/null 2>&1 && break
        kill -0 "$hook_pid" 2>/dev/null || break
        sleep 0.5
      done ;;
    diff) run_in_work 'sudo ebpf-prof record --allow-no-bpf -F 4999 -o base.data' >/dev/null ;;
  esac
}
teardown() { # teardown NAME
  if [ "$1" = doctor ] && [ -n "$hook_pid" ]; then
    kill -INT "$hook_pid" 2>/dev/null || true
    wait "$hook_pid" 2>/dev/null || true
    hook_pid=""
  fi
}

# The block after `<!-- example: NAME -->` in the documents, and which file holds it.
block_of() { # block_of NAME → prints FILE on line 1, then the block's lines
  python3 - "$1" "${DOCS[@]}" <<'PY'
import sys
name, files = sys.argv[1], sys.argv[2:]
found = []
for f in files:
    lines = open(f, encoding="utf-8").read().split("\n")
    for i, l in enumerate(lines):
        if l.strip() == f"<!-- example: {name} -->":
            j = i + 1
            if j >= len(lines) or not lines[j].startswith("```"):
                sys.exit(f"{f}:{i+1}: example {name}: no fenced block right after the marker")
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            found.append((f, lines[j + 1:k]))
if len(found) != 1:
    sys.exit(f"example {name}: {len(found)} markers in {' '.join(files)} (want exactly 1)")
print(found[0][0])
print("\n".join(found[0][1]))
PY
}

# Compare shown output (file 1) with actual (file 2); print a diff of the normalised lines.
compare() {
  python3 - "$1" "$2" <<'PY'
import difflib, functools, re, sys
sys.setrecursionlimit(100000)
def norm(l):
    l = re.sub(r"bpf_prog_[0-9a-f]{16}", "bpf_prog_H", l)   # program tags
    l = re.sub(r"\b(?:0x)?[0-9a-f]*[a-f][0-9a-f]*\b",     # addresses (with a letter)
               lambda m: "H" if len(m.group()) >= 8 else m.group(), l)
    l = re.sub(r"\d+(?:[.,]\d+)*", "N", l)                # numbers, whatever their value
    return re.sub(r"\s+", " ", l).strip()
shown = [norm(l) for l in open(sys.argv[1], encoding="utf-8").read().splitlines()]
actual = [norm(l) for l in open(sys.argv[2], encoding="utf-8", errors="replace").read().splitlines()]
pats = [None if l == "…" else re.compile(".*?".join(map(re.escape, l.split("…")))) for l in shown]
def same(i, j):
    return pats[i].fullmatch(actual[j]) is not None
@functools.lru_cache(maxsize=None)
def fits(i, j):  # shown[i:] against actual[j:]; a `…` line takes any number of lines
    if i == len(shown):
        return j == len(actual)
    if pats[i] is None:
        return fits(i + 1, j) or (j < len(actual) and fits(i, j + 1))
    return j < len(actual) and same(i, j) and fits(i + 1, j + 1)
if fits(0, 0):
    sys.exit(0)
# For the diff, show each shown line that matches a line further on as that line, so only
# what really differs is marked.
display, j = [], 0
for i, l in enumerate(shown):
    k = next((k for k in range(j, len(actual)) if pats[i] and same(i, k)), None)
    if k is None:
        display.append(l)
    else:
        if display and display[-1] == "…":
            display[-1:] = actual[j:k]
        display.append(actual[k])
        j = k + 1
sys.stdout.writelines(difflib.unified_diff([d + "\n" for d in display],
                                           [a + "\n" for a in actual], "shown", "now", n=1))
sys.exit(1)
PY
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ORDER[@]}")
status=0
for name in "${names[@]}"; do
  printf '%s\n' "${ORDER[@]}" | grep -qx -- "$name" || { echo "unknown example $name (known: ${ORDER[*]})" >&2; exit 2; }
  block=$(block_of "$name") || { status=2; continue; }
  file=$(head -1 <<<"$block")
  body=$(tail -n +2 <<<"$block")
  setup "$name"
  shown_file=$OUT/$name.shown
  actual_file=$OUT/$name.txt
  : >"$shown_file"
  : >"$actual_file"
  while IFS= read -r line; do
    if [[ $line == '$ '* ]]; then
      cmd=${line#'$ '}
      echo "$line" >>"$actual_file"
      echo "$line" >>"$shown_file"
      run_in_work "$cmd" >>"$actual_file"
    else
      echo "$line" >>"$shown_file"
    fi
  done <<<"$body"
  teardown "$name"
  if compare "$shown_file" "$actual_file" >"$OUT/$name.diff"; then
    echo "ok      $name ($file)"
  else
    echo "DIFFERS $name ($file): real output in $actual_file"
    sed 's/^/    /' "$OUT/$name.diff"
    [ $status -ne 0 ] || status=1
  fi
done
exit $status
