#!/usr/bin/env bash
# Cost of `contend record`'s service-time sampler: its own CPU use (% of one CPU, from
# CLOCK_THREAD_CPUTIME_ID of the sampler thread, in meta.json) at 10 ms and 1 ms, with and
# without the sched tracepoints, for a program of THREADS threads; the program's slowdown (its
# own wall time, from its truth line, recorded / bare) and contend's fixed cost (start-up and
# shutdown: contend's wall time minus the program's), runs interleaved.
# Usage: scripts/bench-sampler.sh [ROUNDS] [THREADS...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
shift || true
threads=("${@:-4 16}")
[ ${#threads[@]} -eq 1 ] && read -r -a threads <<< "${threads[0]}"
cargo build --release -q -p contend
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread examples/scaling/independent.c -o "$work/independent"
contend="$PWD/target/release/contend"
# Runs the command; prints the program's own wall time (truth line) and the command's, in s.
seconds() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$@" 2>/dev/null)
  t1=$(date +%s.%N)
  echo "$(echo "$out" | tr ' ' '\n' | sed -n 's/^wall_ns=//p' | awk '{print $1/1e9}') $(echo "$t1 - $t0" | bc -l)"
}
share() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sampling"]; print(100*s["sampler_cpu_ns"]/s["wall_ns"])' "$1/meta.json"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
modes=("10 --no-sched-trace" "1 --no-sched-trace" "10" "1")
for t in "${threads[@]}"; do
  # Enough work that a run lasts about 2 s on 2 CPUs whatever the thread count.
  work_ms=$((4000 / t))
  declare -A wall=() cpu=() fixed=()
  for ((i = 0; i < rounds; i++)); do
    read -r prog _ <<< "$(seconds "$work/independent" -t "$t" -w "$work_ms")"
    wall[bare]+="$prog "
    for m in "${modes[@]}"; do
      read -r ms flag <<< "$m"
      read -r prog total <<< "$(seconds "$contend" record -o "$work/run" --interval "$ms" $flag -- "$work/independent" -t "$t" -w "$work_ms")"
      wall[$m]+="$prog "
      fixed[$m]+="$(echo "$total - $prog" | bc -l) "
      cpu[$m]+="$(share "$work/run") "
      rm -rf "$work"/run*
    done
  done
  bare=$(echo "${wall[bare]}" | median)
  printf '%d threads: bare median %.3f s (the program'"'"'s own wall time)\n' "$t" "$bare"
  for m in "${modes[@]}"; do
    w=$(echo "${wall[$m]}" | median)
    c=$(echo "${cpu[$m]}" | median)
    f=$(echo "${fixed[$m]}" | median)
    label="interval ${m%% *} ms, $([ "${m#* }" = "--no-sched-trace" ] && echo "schedstat only" || echo "schedstat + sched tracepoints")"
    printf '  %-46s sampler %5.2f %% of a CPU  program x%.3f of bare  contend start+stop %.0f ms\n' "$label" "$c" "$(echo "$w / $bare" | bc -l)" "$(echo "$f * 1000" | bc -l)"
  done
  unset wall cpu fixed
done
