#!/usr/bin/env bash
# Install what building, testing and running ebpf-prof needs, only when it is missing.
# Debian and Ubuntu (apt); elsewhere it prints what to install. Uses sudo when not root.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
need() { # need PACKAGE TEST-COMMAND...
  local pkg=$1; shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}

perf_pkg() {
  if grep -qi ubuntu /etc/os-release 2>/dev/null; then
    echo "linux-tools-$(uname -r) linux-tools-common"
  else
    echo "linux-perf"
  fi
}

need clang          command -v clang
need llvm           command -v llvm-strip
need libbpf-dev     test -f /usr/include/bpf/bpf_helpers.h
need libelf-dev     test -f /usr/include/libelf.h
need zlib1g-dev     test -f /usr/include/zlib.h
need pkgconf        command -v pkg-config
need make           command -v make
need gcc            command -v cc
need bpftool        command -v bpftool
need util-linux     command -v taskset chrt runuser unshare
# `ip`, which makes the packet path's network namespace and veth pair.
need iproute2       command -v ip
# Real, unmodified programs from a public tools collection, for tests/real_tools.rs.
need libbpf-tools    test -x /usr/sbin/syscount -a -x /usr/sbin/opensnoop
# bpftrace attaches through perf events without a link: tests/real_tools/bpftrace.rs.
need bpftrace       command -v bpftrace
need bsdutils       command -v script
# A real reader of the pprof export, for tests/real_profiles.rs (`go tool pprof`).
need golang-go      command -v go
perf_ok() { command -v perf && perf --version; }
need "$(perf_pkg)"  perf_ok

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing: ${missing[*]} (no apt-get here: install the equivalents with your package manager; Fedora: clang llvm libbpf-devel elfutils-libelf-devel zlib-devel pkgconf make gcc bpftool perf util-linux)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
# shellcheck disable=SC2046
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $(printf '%s ' "${missing[@]}") >&2
