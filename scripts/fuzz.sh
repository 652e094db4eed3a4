#!/usr/bin/env bash
# Fuzzes the event-stream reader (fuzz/fuzz_targets/stream_reader.rs) for two thirds of SECONDS
# (default 60) and the perf.data reader of the PMU back end (fuzz_targets/perf_data.rs) for the
# rest.
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
stream_seconds=$(( seconds * 2 / 3 ))
perf_seconds=$(( seconds - stream_seconds ))
cargo +nightly fuzz run stream_reader "$corpus" -- \
  -max_total_time="$stream_seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || status=$?
grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
if [ "$status" != 0 ]; then
  tail -n 40 "$log" >&2
  echo "fuzzing the stream reader failed (exit $status); full log: $log, crash inputs: fuzz/artifacts/stream_reader/" >&2
  exit 1
fi
echo "fuzzed the stream reader for ${stream_seconds} s: no crash"

perf_corpus=fuzz/corpus/perf_data
mkdir -p "$perf_corpus"
cp fixtures/perf/*.data "$perf_corpus"/
# A file with memory samples, so that the fuzzer reaches the conversion to the sharing model.
cargo run -q --release -p observe --features perf-writer --example perf_data_synth -- 300 "$perf_corpus/synth-300.data"
status=0
cargo +nightly fuzz run perf_data "$perf_corpus" -- \
  -max_total_time="$perf_seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || status=$?
grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
if [ "$status" != 0 ]; then
  tail -n 40 "$log" >&2
  echo "fuzzing the perf.data reader failed (exit $status); full log: $log, crash inputs: fuzz/artifacts/perf_data/" >&2
  exit 1
fi
echo "fuzzed the perf.data reader for ${perf_seconds} s: no crash"
