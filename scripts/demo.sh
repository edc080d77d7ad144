#!/usr/bin/env bash
# The main job on the bundled default: installs what is missing, builds, and runs
# `ebpf-prof demo` (sample hook, record, flame graph) as root. Files land in ./ebpf-prof-demo/,
# the script's own directory, so a rerun replaces them (--force).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release --locked
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO ./target/release/ebpf-prof demo --force "$@"
