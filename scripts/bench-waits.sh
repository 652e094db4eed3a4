#!/usr/bin/env bash
# Cost of recording blocked futex waits (issue 22, slice 1): the program's own run time under
# `contend record --locks` with the off-CPU recorder (on by default) against `--locks
# --no-waits`, runs interleaved so that the machine's noise falls on both alike, on
# examples/locks/planted_hold.c (pthread, ~400 blocks) and examples/waits/std_mutex.rs (Rust
# std Mutex, ~200 blocks), and the worst case, benches/futex_pingpong.rs (two threads handing
# a token through a std Condvar: 40 000 blocks in 20 000 round trips). The run time is meta.json's monotonic_span (the program's start to
# its end, as contend saw them). Prints the median of ROUNDS runs of each (default 11), the
# difference and each mode's runs. Needs root (perf tracepoints). Figures go to
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
contend="$PWD/target/release/contend"
span_ms() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); a,b=m["monotonic_span"]; print("%.3f" % ((b-a)/1e6))' "$1/meta.json"
}
blocks() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); o=m.get("offcpu") or {}; print(o.get("blocks", 0), o.get("lost", 0))' "$1/meta.json"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for prog in ${PROGRAMS:-planted_hold std_mutex futex_pingpong}; do
  declare -A results=()
  recorded=""
  for ((i = 0; i < rounds; i++)); do
    for mode in no-waits waits; do
      extra=()
      [ "$mode" = no-waits ] && extra=(--no-waits)
      "$contend" record -o "$work/run" --locks "${extra[@]}" -- "$work/$prog" >/dev/null 2>&1
      results[$mode]+="$(span_ms "$work/run") "
      [ "$mode" = waits ] && recorded+="$(blocks "$work/run" | tr ' ' '/') "
      rm -rf "$work"/run*
    done
  done
  without=$(echo "${results[no-waits]}" | median)
  with=$(echo "${results[waits]}" | median)
  printf '%-13s --no-waits median %8.3f ms   waits median %8.3f ms   (%+.3f ms, %+.1f %%)\n' \
    "$prog" "$without" "$with" "$(echo "$with - $without" | bc -l)" \
    "$(echo "($with - $without) * 100 / $without" | bc -l)"
  printf '  --no-waits runs: %s\n  waits runs:      %s\n  blocks/lost recorded per waits run: %s\n' \
    "${results[no-waits]}" "${results[waits]}" "$recorded"
done
