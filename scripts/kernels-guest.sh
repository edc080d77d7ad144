#!/usr/bin/env bash
# Runs inside a guest that scripts/kernels.sh booted: the host's root is shared read-only, OUT
# is the writable output directory. Runs each test of OUT/tests.list on its own and writes
# OUT/results ("pass|fail|skip TEST [reason]"), OUT/boot-seconds and OUT/done.
set -u
out=$1
accel=${2:-tcg}
awk '{print $1}' /proc/uptime >"$out/boot-seconds"
uname -r >"$out/uname"
# perf cannot write perf.data onto the 9p share: every test works in a tmpfs on /tmp. The
# output directory is bound elsewhere first, as it may itself lie under /tmp.
mkdir -p /run/kernels-out
mount --bind "$out" /run/kernels-out
out=/run/kernels-out
# The binaries run from memory, each bound over the path the tests know it by. They are copied
# before the tmpfs covers /tmp, where the stripped copies may lie, and bound after it.
mkdir -p /run/kernels-bin
mount -t tmpfs tmpfs /run/kernels-bin
while read -r original stripped; do
  cp "$stripped" "/run/kernels-bin/${original##*/}"
done <"$out/binaries"
# The bench opens /etc/hostname by default, which lies on the 9p share here: each openat would
# be a round trip to the host (9p keeps no dentry it is not using), which buried the hook's
# samples (on 5.10 an openat took 7.9 ms, 94% of the samples in memset_erms; on 6.1 and 6.12
# none fell in the hook). A copy in memory, bound over it,
# is opened as on a disk's page cache; the bind pins /etc's dentry, so the walk stays in the
# dcache.
cp /etc/hostname /run/kernels-bin/hostname
mount --bind /run/kernels-bin/hostname /etc/hostname
# The perf matching this kernel, where the host prepared one: put where Debian puts it, in the
# guest's own writable layer over /usr (the host's files are not touched). Its name is kept for
# the check at the end, as the tree may lie under /tmp.
perf_tree=$(cat "$out/perf-tree" 2>/dev/null || echo none)
perf_name=perf
if [ "$perf_tree" != none ]; then
  cp -a "$perf_tree/usr/." /usr/
  ldconfig
  perf_name=$(basename "$(find "$perf_tree/usr/bin" -name 'perf*' -type f | head -1)")
fi
# The repository (the tests' fixtures, and the binaries' paths) is the host's, read through its
# root: one under /tmp (a fresh clone, as CI makes) would vanish under the tmpfs, so the host's
# /tmp stays reachable at /run/kernels-host-tmp and such a repository is bound back at its path.
repo=$(head -1 "$out/binaries" | cut -d' ' -f1)
repo=${repo%/target/debug/ebpf-prof}
mkdir -p /run/kernels-host-tmp
mount --bind /tmp /run/kernels-host-tmp
mount -t tmpfs -o mode=1777 tmpfs /tmp
case $repo in
  /tmp/*)
    mkdir -p "$repo"
    mount --bind "/run/kernels-host-tmp/${repo#/tmp/}" "$repo"
    ;;
esac
while read -r original _; do
  mount --bind "/run/kernels-bin/${original##*/}" "$original"
done <"$out/binaries"
# The packet path's modules the host staged for this kernel (a module already built in, or
# loaded, refuses a second load: that is fine).
for module in "$out"/modules/*.ko; do
  [ -f "$module" ] && insmod "$module" 2>/dev/null
done
mkdir -p /tmp/home
export HOME=/tmp/home TMPDIR=/tmp EBPF_PROF_ROOT_TESTS=1
# A failing test's files (its recording, perf.data.json) would vanish with the guest's tmpfs:
# the tests copy them into the output directory, under kept/TEST-PID.
export EBPF_PROF_KEEP_FAILED=$out/kept
# Under TCG processes start, programs load and perf starts seconds slower: the tests shrink
# their iteration counts.
[ "$accel" = tcg ] && export EBPF_PROF_TEST_SLOWDOWN=100
: >"$out/results"
# Which perf doctor and record choose: the placed version-matched one, else the host's, with the
# mismatch warning exactly when its major.minor differs from the kernel's.
perf_check() {
  local kernel want doctor log=$out/version-matched-perf.log
  kernel=$(uname -r | cut -d. -f1,2)
  if [ "$perf_tree" != none ]; then
    # By the name PATH finds it under, as doctor shows it (/bin comes first where /bin is
    # /usr/bin): perf_5.10 for bullseye's, plain perf for bookworm-backports' 6.12.
    want=$(command -v "$perf_name")
  else
    want=$(command -v perf)
  fi
  doctor=$(cd /tmp && ebpf_prof doctor 2>&1)
  echo "$doctor" >"$log"
  local line
  line=$(echo "$doctor" | grep -E '^(ok|warn|fail) +perf ' | head -1)
  if ! echo "$doctor" | grep -Eq "^ok +perf choice +$want "; then
    echo "fail version-matched-perf: doctor did not choose $want"
  elif [ "$perf_tree" != none ] || "$want" --version | grep -q " $kernel\."; then
    if echo "$line" | grep -q '^ok'; then
      perf_record_check "$want" "$log"
    else
      echo "fail version-matched-perf: $want matches $kernel but doctor says: $line"
    fi
  elif echo "$line" | grep -q "^warn.*does not match"; then
    echo "pass version-matched-perf (none runs here for $kernel: $want, mismatch warned)"
  else
    echo "fail version-matched-perf: no mismatch warning for $want on $kernel: $line"
  fi
}

ebpf_prof() { "$(head -1 "$out/binaries" | cut -d' ' -f1)" "$@"; }

# record with the bundled sample hook held loaded: perf is the matched one.
perf_record_check() { # PERF LOG
  local dir hook status=0
  dir=$(mktemp -d)
  (cd "$dir" && exec "$(head -1 "$out/binaries" | cut -d' ' -f1)" hook --seconds 600) >>"$2" 2>&1 &
  hook=$!
  for _ in $(seq 120); do
    grep -q '_path_check_callback.*\[bpf\]' /proc/kallsyms && break
    sleep 1
  done
  (cd "$dir" && ebpf_prof record -n 200 -F 999 -o perf.data) >>"$2" 2>&1 || status=$?
  kill -INT "$hook"
  wait "$hook"
  if [ "$status" -eq 0 ] && grep -q "running: $1 record" "$2"; then
    echo "pass version-matched-perf ($1 chosen by doctor and record)"
  else
    echo "fail version-matched-perf: record (exit $status) did not run $1"
  fi
  rm -rf "$dir"
}

while read -r bin test; do
  log=$out/$test.log
  status=0
  started=$(awk '{print $1}' /proc/uptime)
  (cd /tmp && timeout -k 5 "${TEST_TIMEOUT:-600}" "$bin" --exact "$test" --include-ignored \
    --test-threads=1 --nocapture) >"$log" 2>&1 </dev/null || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    # A test killed at its limit leaves the ebpf-prof it ran finishing its profile after the
    # signal (slow under TCG), holding the run lock that every later test would wait for. In
    # this throwaway guest every such process is one a test started: end them, so that the
    # next test's start puts back what they changed. What they were doing goes in the log
    # first: the state and kernel wait channel of each.
    ps -eo pid,ppid,stat,wchan:32,etime,args | grep -E 'PID|ebpf-prof|perf|bench' |
      grep -v grep >>"$log"
    pkill -KILL -x ebpf-prof 2>/dev/null
    pkill -KILL -x perf 2>/dev/null
    echo "kernels-guest: $test hit its ${TEST_TIMEOUT:-600} s limit; its processes ended" >>"$log"
  fi
  # The test's wall time in the guest, in its log and its line of the results.
  took=$(awk -v from="$started" '{printf "%.0f", $1 - from}' /proc/uptime)
  echo "kernels-guest: $test took $took s" >>"$log"
  skip=$(grep -m1 "^SKIP ${test##*::}" "$log" | cut -d: -f2- | sed 's/^ *//')
  if [ "$status" -eq 0 ] && [ -n "$skip" ]; then
    echo "skip $test ${took}s $skip" >>"$out/results"
  elif [ "$status" -eq 0 ] && grep -q 'test result: ok. 1 passed' "$log"; then
    echo "pass $test ${took}s" >>"$out/results"
  else
    echo "fail $test ${took}s (exit $status)" >>"$out/results"
  fi
  echo "kernels-guest: $(tail -1 "$out/results")"
done <"$out/tests.list"
perf_check >>"$out/results"
echo "kernels-guest: $(tail -1 "$out/results")"
touch "$out/done"
