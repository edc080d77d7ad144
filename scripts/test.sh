#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and lints, runs every test.
# Tests that need root (real sysctls, real BPF programs, real perf) run as root: when you are not
# root, cargo runs the test binaries through `sudo -E`. Under CI=true they must not skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
if [ "$(id -u)" -ne 0 ]; then
  triple=$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z-' 'A-Z_')
  export "CARGO_TARGET_${triple}_RUNNER=sudo -E"
fi
cargo test --locked "$@"
