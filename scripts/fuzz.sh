#!/usr/bin/env bash
# Fuzzes the event-stream reader (fuzz/fuzz_targets/stream_reader.rs) for SECONDS (default 60).
# Installs the nightly toolchain and cargo-fuzz when missing. Seeds the corpus with valid
# streams written by the trace crate's tests, so the fuzzer starts from well-formed input.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"

if ! command -v rustup >/dev/null; then
  echo "contend fuzzing: missing rustup: cargo-fuzz needs a nightly toolchain; install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "installing the Rust nightly toolchain (cargo-fuzz needs it)" >&2
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

corpus=fuzz/corpus/stream_reader
mkdir -p "$corpus"
cargo run -q -p trace --example fuzz_seeds -- "$corpus"

log=fuzz/last-run.log
status=0
cargo +nightly fuzz run stream_reader "$corpus" -- \
  -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || status=$?
grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
if [ "$status" != 0 ]; then
  tail -n 40 "$log" >&2
  echo "fuzzing the stream reader failed (exit $status); full log: $log, crash inputs: fuzz/artifacts/stream_reader/" >&2
  exit 1
fi
echo "fuzzed the stream reader for ${seconds} s: no crash"
