#!/usr/bin/env bash
# Cost of the MPI wrapper (contend record --mpi), for each installed MPI: ns per intercepted
# call (MPI_Iprobe loop, one rank) and the slowdown of an 8-byte ping-pong (two ranks), with
# the wrapper preloaded vs without, interleaved, median of ROUNDS; then the analysis's
# throughput (`contend report --json` on the ping-pong's run directory: records per second).
# Usage: scripts/bench-mpi.sh [ROUNDS] [CALLS] [ROUNDTRIPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
calls="${2:-1000000}"
trips="${3:-200000}"
cargo build --release -q -p contend
contend="$PWD/target/release/contend"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for impl in openmpi mpich; do
  command -v "mpicc.$impl" >/dev/null || { echo "$impl: not installed, skipped"; continue; }
  "mpicc.$impl" -O2 benches/mpi_pingpong.c -o "$work/pp-$impl"
  # The wrapper as contend builds it (one recording builds and caches it).
  "$contend" record --mpi --interval 0 -o "$work/warm-$impl" -- "mpirun.$impl" -np 1 "$work/pp-$impl" calls 10 >/dev/null 2>&1
  lib=$(ls -t "${CONTEND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contend}"/mpi/"$impl"-*/libcontend-mpi.so | head -1)
  if [ "$impl" = openmpi ]; then
    run() { local n=$1; shift; mpirun.openmpi --oversubscribe -np "$n" "$@"; }
    traced() { local n=$1; shift; mpirun.openmpi --oversubscribe -x LD_PRELOAD="$lib" -x CONTEND_MPI_DIR="$work/t" -np "$n" "$@"; }
  else
    run() { local n=$1; shift; mpirun.mpich -np "$n" "$@"; }
    traced() { local n=$1; shift; mpirun.mpich -genv LD_PRELOAD "$lib" -genv CONTEND_MPI_DIR "$work/t" -np "$n" "$@"; }
  fi
  declare -A r=()
  for ((i = 0; i < rounds; i++)); do
    r[call_off]+="$(run 1 "$work/pp-$impl" calls "$calls" | sed -n 's/ns_per_op=//p') "
    rm -rf "$work/t"; r[call_on]+="$(traced 1 "$work/pp-$impl" calls "$calls" | sed -n 's/ns_per_op=//p') "
    r[pp_off]+="$(run 2 "$work/pp-$impl" pingpong "$trips" | sed -n 's/ns_per_op=//p') "
    rm -rf "$work/t"; r[pp_on]+="$(traced 2 "$work/pp-$impl" pingpong "$trips" | sed -n 's/ns_per_op=//p') "
  done
  c0=$(echo "${r[call_off]}" | median); c1=$(echo "${r[call_on]}" | median)
  p0=$(echo "${r[pp_off]}" | median); p1=$(echo "${r[pp_on]}" | median)
  echo "$impl: MPI_Iprobe ${c0} ns bare, ${c1} ns wrapped: wrapper cost $(echo "$c1 - $c0" | bc -l | xargs printf '%.0f') ns per call"
  echo "$impl: ping-pong round trip ${p0} ns bare, ${p1} ns wrapped: x$(echo "$p1 / $p0" | bc -l | xargs printf '%.3f') (4 calls per round trip)"
  # Analysis throughput on the last traced ping-pong (two rank streams).
  "$contend" record --mpi --interval 0 -o "$work/pp-run-$impl" -- "mpirun.$impl" $([ "$impl" = openmpi ] && echo --oversubscribe) -np 2 "$work/pp-$impl" pingpong "$trips" >/dev/null 2>&1
  events=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(s["events"] for s in m["streams"] if s["kind"]=="rank"))' "$work/pp-run-$impl/meta.json")
  best=
  for ((i = 0; i < 3; i++)); do
    t0=$(date +%s.%N); "$contend" report --json "$work/pp-run-$impl" >/dev/null; t1=$(date +%s.%N)
    s=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || (( $(echo "$s < $best" | bc -l) )); then best=$s; fi
  done
  echo "$impl: contend report on $events records: $(printf '%.2f' "$best") s, $(echo "$events / $best / 1000000" | bc -l | xargs printf '%.2f') M records/s (best of 3, whole command)"
done
