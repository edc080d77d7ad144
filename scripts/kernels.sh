#!/usr/bin/env bash
# The kernel matrix: boots Debian's own kernels under QEMU (virtme-ng, the host's root shared
# read-only over 9p) and runs the end-to-end subset inside each (scripts/kernels-guest.sh), then
# prints one row per kernel and exits non-zero when any kernel fails.
#
#   scripts/kernels.sh                      # 5.10 6.1 6.12 7 (the newest 7.x)
#   KERNELS="6.1 7-rt" scripts/kernels.sh   # choose; NAME-rt boots the PREEMPT_RT build
#
# Kernels come from Debian's archive through apt with a private sources list, lists and cache
# (the machine's own apt state is untouched); apt checks every package against the signed
# indexes. They are kept in $KERNEL_CACHE (default /var/cache/ebpf-prof-kernels), so a second
# run downloads nothing. Logs go to $MATRIX_OUT (default target/kernels/<time>).
#
# KVM is used only when a probe shows a guest vCPU really runs; otherwise QEMU runs under TCG,
# where a syscall is several times slower and starting a process or perf far more, so the guest
# tests shrink their iteration counts (EBPF_PROF_TEST_SLOWDOWN) and judge behaviour, not timing.
# A guest that panics, reports an RCU stall or a soft lockup, or outlives $GUEST_TIMEOUT seconds
# is killed and its row fails.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

KERNELS=${KERNELS:-"5.10 6.1 6.12 7"}
KERNEL_CACHE=${KERNEL_CACHE:-/var/cache/ebpf-prof-kernels}
GUEST_TIMEOUT=${GUEST_TIMEOUT:-2400}
GUEST_MEMORY=${GUEST_MEMORY:-2G}
GUEST_CPUS=${GUEST_CPUS:-2}
# Under TCG: "single" runs all of a guest's vCPUs on one host thread, "multi" one thread each.
GUEST_TCG=${GUEST_TCG:-single}
# Guests booted at once; by default one per host CPU under single-threaded TCG or KVM.
GUEST_PARALLEL=${GUEST_PARALLEL:-}
MATRIX_OUT=${MATRIX_OUT:-$REPO/target/kernels/$(date -u +%Y%m%dT%H%M%SZ)}
VIRTME_NG_VERSION=1.42
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
say() { echo "kernels: $*" >&2; }

# --- what the matrix needs on the host -------------------------------------------------------

install_host_tools() {
  local missing=()
  # What building the tests and running them needs (clang, libelf, bpftrace, libbpf-tools, …):
  # the guests run the host's root, so the host's installs are theirs.
  "$REPO/scripts/install-deps.sh"
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  command -v depmod >/dev/null || [ -x /usr/sbin/depmod ] || [ -x /sbin/depmod ] || missing+=(kmod)
  command -v file >/dev/null || missing+=(file)
  command -v objcopy >/dev/null || missing+=(binutils)
  command -v timeout >/dev/null || missing+=(coreutils)
  command -v xz >/dev/null || missing+=(xz-utils)
  command -v zstd >/dev/null || missing+=(zstd)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >&2
  fi
  if ! command -v vng >/dev/null || [ "$(vng --version 2>/dev/null)" != "virtme-ng $VIRTME_NG_VERSION" ]; then
    say "installing virtme-ng $VIRTME_NG_VERSION (PyPI)"
    $SUDO python3 -m pip install -q --root-user-action=ignore "virtme-ng==$VIRTME_NG_VERSION" >&2
  fi
}

# --- kernels from Debian's archive -------------------------------------------------------------

APT_OPTS=()
apt_private() {
  local dir=$KERNEL_CACHE/apt
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$KERNEL_CACHE/debs"
  {
    for suite in bullseye bookworm bookworm-backports trixie-backports; do
      echo "deb [signed-by=$KEYRING] $MIRROR $suite main"
    done
  } >"$dir/sources.list"
  APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
    -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
    -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false
    -o APT::Sandbox::User=root)
  # The indexes are fetched once a day at most; apt verifies their signatures.
  if [ -z "$(find "$dir/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
    say "apt update of the private kernel sources"
    apt-get -qq "${APT_OPTS[@]}" update >&2
  fi
}

suite_of() { # the Debian suite that carries a kernel series
  case $1 in
    5.10) echo bullseye ;;
    6.1) echo bookworm ;;
    6.12) echo bookworm-backports ;;
    7) echo trixie-backports ;;
    *) return 1 ;;
  esac
}

# The versioned image package behind a suite's meta package (linux-image-amd64 or
# linux-image-rt-amd64), e.g. linux-image-6.1.0-50-amd64.
image_package() { # SUITE FLAVOUR
  apt-cache "${APT_OPTS[@]}" show "linux-image-$2/$1" 2>/dev/null |
    sed -n 's/^Depends: //p' | head -1 | tr ',' '\n' |
    sed -n "s/^ *\(linux-image-[0-9][^ ]*-$2\) .*/\1/p" | head -1
}

# Downloads PACKAGE (from SUITE when given) into the cache unless a copy whose SHA256 matches the
# signed index is there.
fetch_deb() { # PACKAGE [SUITE] -> prints the .deb's path
  local pkg=$1 version sha file
  version=$(apt-cache "${APT_OPTS[@]}" show "$pkg${2:+/$2}" | sed -n 's/^Version: //p' | head -1)
  sha=$(apt-cache "${APT_OPTS[@]}" show "$pkg=$version" | sed -n 's/^SHA256: //p' | head -1)
  file="$KERNEL_CACHE/debs/${pkg}_${version//:/%3a}_amd64.deb"
  if [ -f "$file" ] && echo "$sha  $file" | sha256sum -c --status; then
    echo "$file"
    return
  fi
  say "downloading $pkg $version"
  (cd "$KERNEL_CACHE/debs" && apt-get -qq "${APT_OPTS[@]}" download "$pkg=$version" >&2)
  echo "$sha  $file" | sha256sum -c --status || { say "$pkg: checksum mismatch"; return 1; }
  echo "$file"
}

# The packages that make up an image: from ~6.12 on linux-image-X is empty and depends on
# linux-binary-X (vmlinuz) and linux-modules-X, with everything under /usr/lib/modules/X.
image_parts() { # IMAGE-PACKAGE
  local release=${1#linux-image-}
  echo "$1"
  apt-cache "${APT_OPTS[@]}" show "$1" | sed -n 's/^Depends: //p' | head -1 | tr ',' '\n' |
    sed -n "s/^ *\(linux-\(binary\|modules\|base\)-$release\) .*/\1/p"
}

# Unpacks a kernel once into the cache; prints the path of its vmlinuz.
unpack_kernel() { # IMAGE-PACKAGE
  local release=${1#linux-image-} root part deb
  root=$KERNEL_CACHE/root/$release
  if [ ! -f "$root/.complete" ]; then
    rm -rf "$root"
    mkdir -p "$root"
    for part in $(image_parts "$1"); do
      deb=$(fetch_deb "$part")
      dpkg-deb -x "$deb" "$root"
    done
    touch "$root/.complete"
  fi
  for vmlinuz in "$root/boot/vmlinuz-$release" "$root/usr/lib/modules/$release/vmlinuz"; do
    [ -f "$vmlinuz" ] && { echo "$vmlinuz"; return; }
  done
  say "$1: no vmlinuz in the packages"
  return 1
}

# --- the perf that matches a guest's kernel ----------------------------------------------------

# Debian's perf for a kernel series, where one can run on this (bookworm) userland: bullseye's
# perf_5.10 with three libraries of its release, bookworm-backports' perf 6.12. Trixie's 7.x perf
# needs a newer C library; 6.1's is the host's own. Prints a tree to copy over the guest's /usr,
# holding perf where Debian puts it and the libraries this userland lacks; nothing when none runs.
matched_perf() { # SERIES
  local series=$1 suite pkg tree deps dep lib
  case $series in
    5.10) suite=bullseye pkg=linux-perf-5.10 ;;
    6.12) suite=bookworm-backports pkg=linux-perf ;;
    *) return 0 ;;
  esac
  tree=$KERNEL_CACHE/perf/$series
  if [ ! -f "$tree/.complete" ]; then
    rm -rf "$tree" "$tree.deps"
    mkdir -p "$tree" "$tree.deps"
    dpkg-deb -x "$(fetch_deb "$pkg" "$suite")" "$tree.deps"
    mkdir -p "$tree/usr/bin" "$tree/usr/lib/x86_64-linux-gnu"
    cp -a "$tree.deps"/usr/bin/perf* "$tree/usr/bin/"
    deps=$(apt-cache "${APT_OPTS[@]}" show "$pkg/$suite" | sed -n 's/^Depends: //p' | head -1 |
      tr ',' '\n' | sed -n 's/^ *\(lib[^ ]*\).*/\1/p')
    # A library brought in may need another one (libopencsd_c_api needs libopencsd): a few
    # passes, until nothing is missing.
    local pass
    for pass in 1 2 3; do
      for lib in $(perf_missing_libs "$tree"); do
        perf_fetch_lib "$tree" "$lib" "$suite" $deps
      done
    done
    rm -rf "$tree.deps"
    touch "$tree/.complete"
  fi
  local binary
  binary=$(find "$tree/usr/bin" -name 'perf*' -type f | head -1)
  if [ -n "$binary" ] && LD_LIBRARY_PATH=$tree/usr/lib/x86_64-linux-gnu "$binary" --version >/dev/null 2>&1; then
    echo "$tree"
  fi
}

# Unpacks the perf package's library dependencies one by one until LIB is among them, then copies
# it (and its versioned names) into the tree.
perf_fetch_lib() { # TREE LIB SUITE DEPENDENCY...
  local tree=$1 lib=$2 suite=$3 dep libdir=usr/lib/x86_64-linux-gnu
  shift 3
  for dep in "$@"; do
    [ -e "$tree/usr/lib/x86_64-linux-gnu/$lib" ] || [ -e "$tree.deps/$libdir/$lib" ] && break
    [ -e "$tree.deps/.got-$dep" ] && continue
    dpkg-deb -x "$(fetch_deb "$dep" "$suite" 2>/dev/null || fetch_deb "$dep")" "$tree.deps"
    touch "$tree.deps/.got-$dep"
  done
  cp -a "$tree.deps/$libdir/${lib%%.so*}".so* "$tree/$libdir/" 2>/dev/null || true
}

# The shared libraries the tree's perf finds neither here nor in the tree.
perf_missing_libs() { # TREE
  local binary
  binary=$(find "$1/usr/bin" -name 'perf*' -type f | head -1)
  LD_LIBRARY_PATH=$1/usr/lib/x86_64-linux-gnu ldd "$binary" 2>/dev/null |
    sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p'
}

# --- accelerator ---------------------------------------------------------------------------------

# A boot sector that writes 0x10 to QEMU's isa-debug-exit port: QEMU then exits with status
# (0x10 << 1) | 1 = 33. It runs only if the BIOS ran on the vCPU first, so exit 33 within a few
# seconds proves that a guest vCPU really executes under that accelerator.
probe_accel() { # kvm|tcg -> exit 0 when a guest runs
  local img status
  # The CPU model virtme-ng asks for: with KVM, the host's own (which fails here on an MSR).
  local -a cpu=(-cpu max)
  [ "$1" = kvm ] && cpu=(-cpu host,topoext=on)
  img=$(mktemp /tmp/ebpf-prof-probe.XXXXXX)
  printf '\xb0\x10\xe6\xf4\xf4\xeb\xfe' >"$img"
  truncate -s 510 "$img"
  printf '\x55\xaa' >>"$img"
  status=0
  timeout -k 2 15 qemu-system-x86_64 -accel "$1" "${cpu[@]}" -m 32 -display none -nodefaults -no-reboot \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
    -drive "file=$img,format=raw,if=ide" >/dev/null 2>&1 || status=$?
  rm -f "$img"
  [ "$status" -eq 33 ]
}

choose_accel() {
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && probe_accel kvm; then
    echo kvm
  else
    echo tcg
  fi
}

# --- the tests the guests run --------------------------------------------------------------------

# Builds the binary and the test binaries on the host and writes "BINARY TEST" lines for the
# guest: the guest shares this root, so it runs exactly what was built here.
build_tests() { # LIST-FILE
  local list=$1 json
  cargo build --quiet --bin ebpf-prof >&2
  # Every target the subset names, built by name: that includes targets `cargo test` leaves
  # out (test = false, such as guest_kprobe, which needs kprobes).
  local targets
  targets=$(awk '!/^(#|$)/ { print "--test " $1 }' "$MATRIX_OUT/kernels-subset.txt" | sort -u)
  # shellcheck disable=SC2086
  if ! json=$(cargo test --quiet --no-run --message-format=json $targets); then
    say "building the tests failed (cargo test --no-run $(echo $targets))"
    exit 1
  fi
  exe() { # TEST-TARGET
    echo "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$1" | tail -1
  }
  : >"$list"
  while read -r target test; do
    case $target in '' | '#'*) continue ;; esac
    echo "$(exe "$target") $test" >>"$list"
  done <"$MATRIX_OUT/kernels-subset.txt"
  # Copies without debug info, for the guest to run from memory: a guest reads the 100 MB debug
  # binaries over 9p at every start, seconds each under TCG.
  local dir binary
  dir=$(dirname "$list")/bin
  mkdir -p "$dir"
  : >"$dir/binaries"
  for binary in "$REPO/target/debug/ebpf-prof" $(cut -d' ' -f1 "$list" | sort -u); do
    objcopy --strip-debug "$binary" "$dir/$(basename "$binary")"
    echo "$binary $dir/$(basename "$binary")" >>"$dir/binaries"
  done
}

# --- one guest -----------------------------------------------------------------------------------

# Kills the guest's process group when its console shows a panic, an RCU stall or a soft lockup.
# Samples the host's load every 10 s into LOAD-SAMPLES meanwhile.
watchdog() { # CONSOLE-LOG PGID VERDICT-FILE LOAD-SAMPLES
  local pattern='Kernel panic|detected stalls on CPUs|self-detected stall on CPU|BUG: soft lockup|watchdog: BUG:'
  local tick=0
  : >"$4"
  while kill -0 "$2" 2>/dev/null; do
    [ $((tick++ % 5)) -eq 0 ] && cut -d' ' -f1 /proc/loadavg >>"$4"
    if grep -Eq "$pattern" "$1" 2>/dev/null; then
      grep -Eo "$pattern" "$1" | head -1 >"$3"
      kill -TERM -- "-$2" 2>/dev/null || true
      sleep 5
      kill -KILL -- "-$2" 2>/dev/null || true
      return
    fi
    sleep 2
  done
}

boot_guest() { # VMLINUZ ACCEL OUT-DIR -> exit status of the guest run
  local kimg=$1 accel=$2 out=$3 pid status=0 wd
  local -a vng_args=(--run "$kimg" --force-9p --cpus "$GUEST_CPUS" --memory "$GUEST_MEMORY"
    --rwdir "$out" --verbose
    --append "panic=-1 rcupdate.rcu_cpu_stall_timeout=60"
    --exec "$MATRIX_OUT/kernels-guest.sh $out $accel")
  [ "$accel" = kvm ] || vng_args+=(--disable-kvm "--qemu-opts=-accel tcg,thread=$GUEST_TCG")
  # A process group of its own, so that a timeout or the watchdog ends QEMU with it.
  setsid timeout -k 10 "$GUEST_TIMEOUT" vng "${vng_args[@]}" </dev/null >"$out/console.log" 2>&1 &
  pid=$!
  echo "$pid" >"$out/guest-pgid"
  watchdog "$out/console.log" "$pid" "$out/watchdog" "$out/load-samples" &
  wd=$!
  wait "$pid" || status=$?
  kill "$wd" 2>/dev/null || true
  wait "$wd" 2>/dev/null || true
  return "$status"
}

count_results() { # pass|fail|skip OUT-DIR
  if [ -f "$2/results" ]; then grep -c "^$1 " "$2/results" || true; else echo 0; fi
}

# Unpacks one kernel and its perf (downloading what the cache lacks) into OUT; writes OUT/row
# instead when there is nothing to boot. One kernel at a time: apt shares its cache.
prepare_kernel() { # NAME LIST
  local name=$1 series flavour suite image kimg out perf_tree
  series=${name%-rt}
  flavour=amd64
  [ "$series" != "$name" ] && flavour=rt-amd64
  out=$MATRIX_OUT/$name
  mkdir -p "$out"
  rm -f "$out/row"
  cp "$2" "$out/tests.list"
  cp "$(dirname "$2")/bin/binaries" "$out/binaries"
  if ! suite=$(suite_of "$series"); then
    echo "$name - - 0 0 0 0 - unknown-kernel(5.10,6.1,6.12,7[-rt])" >"$out/row"
    return
  fi
  image=$(image_package "$suite" "$flavour")
  if [ -z "$image" ] || ! kimg=$(unpack_kernel "$image"); then
    echo "$name - - 0 0 0 0 - no-package-in-$suite" >"$out/row"
    return
  fi
  perf_tree=$(matched_perf "$series")
  # The guest does not see the host's /var/cache (virtme-ng lays a tmpfs over it): the tree
  # goes with the run's output.
  if [ -n "$perf_tree" ]; then
    rm -rf "$out/perf"
    cp -a "$perf_tree" "$out/perf"
    perf_tree=$out/perf
  fi
  echo "${perf_tree:-none}" >"$out/perf-tree"
  stage_modules "$KERNEL_CACHE/root/${image#linux-image-}" "${image#linux-image-}" "$out/modules"
  echo "$kimg" >"$out/vmlinuz"
  echo "${image#linux-image-}" >"$out/release"
}

# The modules the packet path needs and Debian builds as modules (veth for the private
# network's pair, sch_ingress for clsact, cls_bpf for tc programs), decompressed into DIR for
# the guest to insmod: the guest's root is the host's, whose /lib/modules holds none of this
# kernel's. None of them depends on another module.
PACKET_MODULES="veth sch_ingress cls_bpf"
stage_modules() { # KERNEL-ROOT RELEASE DIR
  local module file
  rm -rf "$3"
  mkdir -p "$3"
  for module in $PACKET_MODULES; do
    file=$(find "$1/lib/modules/$2" "$1/usr/lib/modules/$2" -name "$module.ko*" 2>/dev/null | head -1 || true)
    case $file in
      "") say "$2: no $module module in the packages" ;;
      *.xz) xz -dc "$file" >"$3/$module.ko" ;;
      *.zst) zstd -qdc "$file" >"$3/$module.ko" ;;
      *) cp "$file" "$3/$module.ko" ;;
    esac
  done
}

# Boots one prepared kernel and writes its row to OUT/row.
run_kernel() { # NAME ACCEL
  local name=$1 accel=$2 out start status=0 note="" release
  out=$MATRIX_OUT/$name
  [ -f "$out/row" ] && return
  start=$(date +%s)
  release=$(cat "$out/release")
  say "$name: booting $release under $accel (version-matched perf: $(cat "$out/perf-tree"))"
  boot_guest "$(cat "$out/vmlinuz")" "$accel" "$out" || status=$?
  local passed failed skipped boot load
  passed=$(count_results pass "$out")
  failed=$(count_results fail "$out")
  skipped=$(count_results skip "$out")
  boot=$(cat "$out/boot-seconds" 2>/dev/null || echo -)
  # The host's mean 1-minute load while the guest ran: the figure to judge its wall time by.
  load=$(awk '{ sum += $1; n++ } END { if (n) printf "%.1f", sum / n; else print "-" }' \
    "$out/load-samples" 2>/dev/null)
  if [ -s "$out/watchdog" ]; then
    note="killed:$(tr ' ' '_' <"$out/watchdog")"
  elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    note="killed:hung-after-${GUEST_TIMEOUT}s"
  elif [ ! -f "$out/done" ]; then
    note="guest-ended-early(exit-$status)"
  fi
  local expected
  expected=$(($(wc -l <"$out/tests.list") + 1))
  if [ -z "$note" ] && [ "$failed" -eq 0 ] && [ $((passed + skipped)) -eq "$expected" ]; then
    note=ok
  elif [ -z "$note" ]; then
    note=FAIL
  fi
  echo "$name $release $accel $boot $passed $failed $skipped $(($(date +%s) - start)) ${load:--} $note" \
    >"$out/row"
  say "$name: $(cat "$out/row")"
  [ "$note" = ok ] || show_failures "$name" "$out"
}

# A failed row's failing tests, each with the end of its log and where its files were kept: CI
# keeps only what a failing run printed, not the output directory.
show_failures() { # NAME OUT
  local test
  grep '^fail ' "$2/results" 2>/dev/null | while read -r _ test _; do
    say "$1: $test failed; the end of $2/$test.log:"
    tail -n 40 "$2/$test.log" 2>/dev/null | sed "s/^/  $1 | /" >&2 || true
  done
  if [ -d "$2/kept" ]; then
    say "$1: the failed tests' files are in $2/kept"
  fi
  return 0
}

print_table() {
  local format='%-8s %-22s %-5s %7s %6s %6s %7s %7s %5s  %s\n' name row
  # shellcheck disable=SC2059
  printf "$format" kernel release accel boot_s passed failed skipped wall_s load result
  for name in $KERNELS; do
    row=$(cat "$MATRIX_OUT/$name/row" 2>/dev/null || echo "$name - - - 0 0 0 0 - no-row")
    # shellcheck disable=SC2059,SC2086
    printf "$format" $row
  done
}

# How many guests run at once: one per host CPU when a guest keeps to one host thread
# (single-threaded TCG) or under KVM; one with multi-threaded TCG, whose vCPUs take every CPU.
parallel_guests() { # ACCEL
  if [ -n "$GUEST_PARALLEL" ]; then
    echo "$GUEST_PARALLEL"
  elif [ "$1" = tcg ] && [ "$GUEST_TCG" = multi ]; then
    echo 1
  else
    nproc
  fi
}

# Ends every guest this run booted (each runs in a process group of its own, which a signal to
# this script would not reach), and the background jobs that watch them, which would otherwise
# go on booting the kernels still queued.
# A guest or job already gone is no error: under `set -e` a failed kill here ended the script
# before it reached the guests still running.
stop_guests() {
  local file job
  for job in $(jobs -p); do
    kill -TERM "$job" 2>/dev/null || true
  done
  for file in "$MATRIX_OUT"/*/guest-pgid; do
    if [ -f "$file" ]; then
      kill -KILL -- "-$(cat "$file")" 2>/dev/null || true
    fi
  done
  return 0
}

main() {
  local started accel list name any_failed=0 slots running=()
  started=$(date +%s)
  trap 'stop_guests; exit 130' INT
  trap 'stop_guests; exit 143' TERM
  install_host_tools
  mkdir -p "$MATRIX_OUT"
  # The guests run these copies: editing the repository's files during a run changes nothing.
  cp scripts/kernels-guest.sh scripts/kernels-subset.txt "$MATRIX_OUT/"
  apt_private
  accel=$(choose_accel)
  if [ "$accel" = tcg ]; then
    say "accelerator: tcg, thread=$GUEST_TCG (no guest vCPU ran under KVM with the host's CPU model within 15 s)"
  else
    say "accelerator: kvm (a guest vCPU ran)"
  fi
  list=$MATRIX_OUT/tests.list
  build_tests "$list"
  for name in $KERNELS; do
    prepare_kernel "$name" "$list"
  done
  slots=$(parallel_guests "$accel")
  say "$slots guest(s) at once; host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for name in $KERNELS; do
    while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do
      wait -n || true
    done
    run_kernel "$name" "$accel" &
    running+=($!)
  done
  wait "${running[@]}" 2>/dev/null || true
  print_table | tee "$MATRIX_OUT/table.txt"
  for name in $KERNELS; do
    [ "$(awk '{ print $NF }' "$MATRIX_OUT/$name/row" 2>/dev/null)" = ok ] || any_failed=1
  done
  say "logs in $MATRIX_OUT; whole run $(($(date +%s) - started)) s; host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  return "$any_failed"
}

# One compound command, read whole before it runs: an edit of this file during a run changes
# nothing in it.
{
  main "$@"
  exit $?
}
