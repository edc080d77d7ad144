#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting, lints, the declared
# rust-version, function lengths and that src/ has no module cycle (check-layers.py), runs
# every test. Tests that need root (real sysctls, real BPF programs, real
# perf) are marked #[ignore = "needs root…"] so that a plain `cargo test` as a user shows them as
# ignored, not passed; here they run, as root: when you are not root, cargo runs the test
# binaries through `sudo -E`. Under CI=true they must not skip (tests/cli.rs checks they ran).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
# --all-targets leaves out test = false targets (guest_kprobe: only the kernel matrix's guests
# run it): linted by name.
cargo clippy --locked --test guest_kprobe -- -D warnings
python3 scripts/check-msrv.py
python3 scripts/check-fn-length.py
python3 scripts/check-layers.py
if [ "$(id -u)" -ne 0 ]; then
  triple=$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z-' 'A-Z_')
  export "CARGO_TARGET_${triple}_RUNNER=sudo -E"
fi
export EBPF_PROF_ROOT_TESTS=1
cargo test --locked "$@" -- --include-ignored
