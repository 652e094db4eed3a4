#!/usr/bin/env bash
# Cost of recording blocked futex waits (issue 22, slices 1 and 2): the program's own run time
# under `contend record --locks` in three modes, runs interleaved so that the machine's noise
# falls on all alike: `--no-waits` (the probe only), `--stack-budget 0` (the off-CPU recorder
# without user stacks: slice 1's cost), `no-wakes` (blocks with stacks, no wakes:
# CONTEND_WAKES=0, slice 2's cost) and the default (each block and each waking by the
# program with its 8 KiB user stack: slice 3), on
# examples/locks/planted_hold.c (pthread, ~400 blocks) and examples/waits/std_mutex.rs (Rust
# std Mutex, ~200 blocks), and the worst case, benches/futex_pingpong.rs (two threads handing
# a token through a std Condvar: 40 000 blocks in 20 000 round trips), and a program not
# written here, `sysbench mutex` (4 threads, pthread mutexes: the probe sees every lock call,
# the off-CPU recorder only the blocks; skipped when sysbench is not installed). The run
# time is meta.json's monotonic_span (the program's start to
# its end, as contend saw them). Prints the median of ROUNDS runs of each (default 11), the
# differences and each mode's runs. Needs root (perf tracepoints). Figures go to
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-11}"
cargo build --release -q -p contend -p probe
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -g -pthread -o "$work/planted_hold" examples/locks/planted_hold.c
rustc -O -g --edition 2021 -o "$work/std_mutex" examples/waits/std_mutex.rs
rustc -O --edition 2021 -o "$work/futex_pingpong" benches/futex_pingpong.rs
if command -v sysbench >/dev/null; then
  printf '#!/bin/sh\nexec sysbench mutex --threads=4 --mutex-locks=20000 run >/dev/null\n' >"$work/sysbench_mutex"
  chmod +x "$work/sysbench_mutex"
fi
contend="$PWD/target/release/contend"
span_ms() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); a,b=m["monotonic_span"]; print("%.3f" % ((b-a)/1e6))' "$1/meta.json"
}
blocks() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); o=m.get("offcpu") or {}; print(o.get("blocks", 0), o.get("wakings") or 0, o.get("lost", 0), o.get("stack_bytes", 0) >> 10)' "$1/meta.json"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for prog in ${PROGRAMS:-planted_hold std_mutex futex_pingpong sysbench_mutex}; do
  [ -x "$work/$prog" ] || { echo "$prog: not built (sysbench not installed?), skipped"; continue; }
  declare -A results=()
  recorded=""
  for ((i = 0; i < rounds; i++)); do
    for mode in no-waits no-stacks no-wakes stacks; do
      extra=()
      wakes=1
      [ "$mode" = no-waits ] && extra=(--no-waits)
      [ "$mode" = no-stacks ] && extra=(--stack-budget 0)
      [ "$mode" = no-wakes ] && wakes=0
      CONTEND_WAKES=$wakes "$contend" record -o "$work/run" --locks "${extra[@]}" -- "$work/$prog" >/dev/null 2>&1
      results[$mode]+="$(span_ms "$work/run") "
      [ "$mode" = stacks ] && recorded+="$(blocks "$work/run" | tr ' ' '/') "
      rm -rf "$work"/run*
    done
  done
  without=$(echo "${results[no-waits]}" | median)
  bare=$(echo "${results[no-stacks]}" | median)
  nowakes=$(echo "${results[no-wakes]}" | median)
  with=$(echo "${results[stacks]}" | median)
  pct() { echo "($1 - $without) * 100 / $without" | bc -l; }
  printf '%-15s --no-waits %8.3f ms   no stacks %8.3f ms (%+.1f %%)   no wakes %8.3f ms (%+.1f %%)   stacks+wakes %8.3f ms (%+.1f %%)\n' \
    "$prog" "$without" "$bare" "$(pct "$bare")" "$nowakes" "$(pct "$nowakes")" "$with" "$(pct "$with")"
  printf '  --no-waits runs: %s\n  no-stacks runs:  %s\n  no-wakes runs:   %s\n  stacks runs:     %s\n  blocks/wakings/lost/stack KiB per stacks run: %s\n' \
    "${results[no-waits]}" "${results[no-stacks]}" "${results[no-wakes]}" "${results[stacks]}" "$recorded"
done
