#!/usr/bin/env bash
# How fast `contend report` reads a long lock recording, and in how much memory: records
# examples/locks/lock_loop.c (2 threads, mostly uncontended lock+unlock pairs, every 64th on a
# shared lock) with `contend record --locks` (every acquisition recorded, not sampled), then
# times `contend report` on it ROUNDS times (default 3) with /usr/bin/time -v and prints the
# events, the median wall time, events/s and the largest max RSS. BASE=path/to/other/contend
# times that binary on the same run too (e.g. one built from an earlier commit).
# Figures go to docs/benchmarks.md ("Reading a long lock recording").
#
#   scripts/bench-report.sh [ROUNDS]        # ACQUISITIONS per thread (default 14000000)
#                                           # SHARED_EVERY=K: every Kth acquisition on the
#                                           #   shared lock (default 64; 1: all of them)
#                                           # KEEP=DIR keeps the run directory there
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
acquisitions="${ACQUISITIONS:-14000000}"
shared_every="${SHARED_EVERY:-64}"
cargo build --release -q -p contend
contend="$PWD/target/release/contend"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run="${KEEP:-$work/run}"
rm -rf "$run"
cc -O2 -pthread -o "$work/lock_loop" examples/locks/lock_loop.c
# A 256 MiB ring per thread and 30 steps of work between acquisitions: the recorder's drain
# keeps up, so nothing is dropped (the report says so on its "events:" line).
"$contend" record --locks --ring-kb 262144 -o "$run" -- \
  "$work/lock_loop" -n "$acquisitions" -t 600 -w 30 -k "$shared_every" >/dev/null
events=$("$contend" report "$run" 2>/dev/null | awk '/^  events:/ && !seen {print $2; seen = 1}')
dropped=$("$contend" report "$run" 2>/dev/null | awk '/^  events:/ && !seen {print $6; seen = 1}')
echo "run: $events events, $dropped dropped, $(du -sh "$run" | cut -f1) on disk"

measure() {
  local binary=$1 label=$2 walls=() rss=0
  for ((i = 0; i < rounds; i++)); do
    /usr/bin/time -v "$binary" report "$run" >/dev/null 2>"$work/time"
    walls+=("$(awk -F': ' '/Elapsed/ {n = split($2, p, ":"); s = 0; for (j = 1; j <= n; j++) s = s * 60 + p[j]; print s}' "$work/time")")
    r=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time")
    ((r > rss)) && rss=$r
  done
  wall=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  awk -v l="$label" -v e="$events" -v w="$wall" -v r="$rss" -v all="${walls[*]}" 'BEGIN {
    printf "%-8s median wall %.2f s (runs: %s)  %.1f M events/s  max RSS %.0f MB\n", l, w, all, e / w / 1e6, r / 1024 }'
}
[[ -n "${BASE:-}" ]] && measure "$BASE" before
measure "$contend" after
