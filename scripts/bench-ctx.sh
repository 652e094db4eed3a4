#!/usr/bin/env bash
# contend bench ctx against `perf bench sched pipe`, with the same pinning, and the run-to-run
# coefficient of variation of each over RUNS runs (docs/benchmarks.md, "Context switch ring").
#
# perf's figure is µs per round trip of its two tasks (A writes, B reads and writes back, A
# reads): two hops of contend's ring of 2. So contend's comparable figure is 2 × its median hop
# time (the raw time, before the overhead is subtracted); its switch time (hop − overhead) is
# printed beside it.
#
# Pinnings:
#   one CPU      perf under `taskset -c 0`; contend --cpus 0
#   across two   one task on CPU 0, the other on CPU 1. perf 6.1 has no pinning option, so its
#                two tasks are pinned with `taskset -p` right after it starts (its first
#                milliseconds run unpinned); contend --cpus 0,1
#   free on two  both under `taskset -c 0,1`, the scheduler places the tasks
#
#   scripts/bench-ctx.sh                 10 runs of each (about 3 minutes)
#   RUNS=3 LOOPS=50000 scripts/bench-ctx.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
LOOPS=${LOOPS:-100000}
command -v perf >/dev/null || { echo "bench-ctx: needs perf (Debian: apt-get install linux-perf)" >&2; exit 1; }
cargo build --release -q -p contend
CONTEND=$PWD/target/release/contend
echo "load before: $(uptime)"
echo
echo "| pinning | tool | µs per round trip: median of $RUNS runs | min | max | CoV over $RUNS runs (%) | contend switch, µs (hop − overhead), median |"
echo "|---|---|---:|---:|---:|---:|---:|"
stats() { python3 -c '
import sys, statistics as s
v = [float(x) for x in sys.stdin.read().split()]
print(f"{s.median(v):.2f} | {min(v):.2f} | {max(v):.2f} | {100*s.stdev(v)/s.mean(v):.1f}")'; }
median() { python3 -c 'import sys,statistics as s; print(f"{s.median([float(x) for x in sys.stdin.read().split()]):.2f}")'; }

perf_run() { # $1: one | across | free
  case $1 in
    one) taskset -c 0 perf bench sched pipe -l "$LOOPS" ;;
    free) taskset -c 0,1 perf bench sched pipe -l "$LOOPS" ;;
    across)
      local out; out=$(mktemp)
      perf bench sched pipe -l "$LOOPS" >"$out" 2>&1 &
      local pid=$! child=""
      while [ -z "$child" ]; do child=$(ps -o pid= --ppid "$pid" | head -1 | tr -d ' '); done
      taskset -pc 0 "$pid" >/dev/null; taskset -pc 1 "$child" >/dev/null
      wait "$pid"; cat "$out"; rm -f "$out" ;;
  esac 2>/dev/null | awk '/usecs\/op/ {print $1}'
}
contend_run() {
  local json
  case $1 in
    one) json=$("$CONTEND" bench ctx --cpus 0 -N 11 -W 1 --json 2 2>/dev/null) ;;
    across) json=$("$CONTEND" bench ctx --cpus 0,1 -N 11 -W 1 --json 2 2>/dev/null) ;;
    free) json=$(taskset -c 0,1 "$CONTEND" bench ctx -N 11 -W 1 --json 2 2>/dev/null) ;;
  esac
  python3 -c 'import json,sys; p=json.load(sys.stdin)["sizes"][0]["points"][0]; print(2*p["hop"]["median"], p["switch"]["median"])' <<<"$json"
}
for pin in one across free; do
  perf_v=(); contend_v=()
  for _ in $(seq "$RUNS"); do
    perf_v+=("$(perf_run $pin)")
    contend_v+=("$(contend_run $pin)")
  done
  case $pin in one) where="one CPU (0)";; across) where="across two (0 and 1)";; free) where="free on two (0,1)";; esac
  echo "| $where | perf bench sched pipe | $(printf '%s\n' "${perf_v[@]}" | stats) | |"
  echo "| $where | contend bench ctx 2 (2 × hop) | $(printf '%s\n' "${contend_v[@]}" | awk '{print $1}' | stats) | $(printf '%s\n' "${contend_v[@]}" | awk '{print $2}' | median) |"
done
echo
echo "load after: $(uptime)"
