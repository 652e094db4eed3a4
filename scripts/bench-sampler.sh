#!/usr/bin/env bash
# Cost of `contend record`'s service-time sampler: its own CPU use (% of one CPU, from
# CLOCK_THREAD_CPUTIME_ID of the sampler thread, in meta.json) at 10 ms and 1 ms, with and
# without the sched tracepoints, for a program of THREADS threads; and the program's slowdown
# (wall time recorded / bare), runs interleaved. Usage: scripts/bench-sampler.sh [ROUNDS] [THREADS...]
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
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
share() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sampling"]; print(100*s["sampler_cpu_ns"]/s["wall_ns"])' "$1/meta.json"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
modes=("10 --no-sched-trace" "1 --no-sched-trace" "10" "1")
for t in "${threads[@]}"; do
  # Enough work that a run lasts about 2 s on 2 CPUs whatever the thread count.
  work_ms=$((4000 / t))
  declare -A wall=() cpu=()
  for ((i = 0; i < rounds; i++)); do
    wall[bare]+="$(seconds "$work/independent" -t "$t" -w "$work_ms") "
    for m in "${modes[@]}"; do
      read -r ms flag <<< "$m"
      wall[$m]+="$(seconds "$contend" record -o "$work/run" --interval "$ms" $flag -- "$work/independent" -t "$t" -w "$work_ms") "
      cpu[$m]+="$(share "$work/run") "
      rm -rf "$work"/run*
    done
  done
  bare=$(echo "${wall[bare]}" | median)
  printf '%d threads: bare median %.3f s\n' "$t" "$bare"
  for m in "${modes[@]}"; do
    w=$(echo "${wall[$m]}" | median)
    c=$(echo "${cpu[$m]}" | median)
    label="interval ${m%% *} ms, $([ "${m#* }" = "--no-sched-trace" ] && echo "schedstat only" || echo "schedstat + sched tracepoints")"
    printf '  %-46s sampler %5.2f %% of a CPU (runs: %s)  program x%.3f of bare\n' "$label" "$c" "${cpu[$m]}" "$(echo "$w / $bare" | bc -l)"
  done
  unset wall cpu
done
