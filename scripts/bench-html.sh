#!/usr/bin/env bash
# How large the page of `contend report RUN --html` is for runs of about 10 M lock events, how
# long contend takes to write it (the whole command: loading, analysis, the text report and
# the page), and how soon headless Chromium reaches the page's load event (the page records
# `performance.now()` at its load event in `data-load-ms`: time since the navigation began,
# so the browser's start is not counted). Two recordings: examples/locks/sharequeue_single.c
# (4 threads on one saturated queue lock: many contended holds, what the timeline draws) and
# examples/locks/lock_loop.c (2 threads, mostly uncontended: the most events). ROUNDS
# (default 3) of each measure; medians are printed. Figures go to docs/benchmarks.md ("The
# report page of a long lock recording").
#
#   scripts/bench-html.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
command -v chromium >/dev/null || { echo "bench-html: chromium is missing (apt-get install chromium)" >&2; exit 1; }
cargo build --release -q -p contend
contend="$PWD/target/release/contend"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/lock_loop" examples/locks/lock_loop.c
cc -O2 -pthread -o "$work/sharequeue_single" examples/locks/sharequeue_single.c

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# 4 threads x 600 000 queue operations (two acquisitions each), and 2 threads x 2 500 000
# acquisitions with 300 steps of work between them (the recorder's drain keeps up).
for name in sharequeue lock_loop; do
  run="$work/run-$name"
  case $name in
    sharequeue) program=("$work/sharequeue_single" -t 4 -n 600000) ;;
    lock_loop) program=("$work/lock_loop" -n 2500000 -t 600 -w 300 -k 64) ;;
  esac
  "$contend" record --locks --ring-kb 262144 -o "$run" -- "${program[@]}" >/dev/null 2>&1
  summary=$("$contend" report "$run" 2>/dev/null | awk '/^  events:/ && !seen {print $2 " events, " $6 " dropped"; seen = 1}')
  contended=$("$contend" report --json "$run" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["locks"]["summary"]["contended"])')
  walls=() loads=()
  for ((i = 0; i < rounds; i++)); do
    page="$work/page-$name-$i.html"
    /usr/bin/time -f '%e' "$contend" report "$run" --html "$page" >/dev/null 2>"$work/time"
    walls+=("$(tail -1 "$work/time")")
    profile=$(mktemp -d "$work/profile.XXXXXX")
    load=$(chromium --headless=new --no-sandbox --disable-gpu --no-first-run \
      --user-data-dir="$profile" --dump-dom "$page" 2>/dev/null |
      grep -o 'data-load-ms="[0-9]*"' | grep -o '[0-9]*')
    loads+=("${load:-none}")
  done
  size=$(stat -c %s "$work/page-$name-0.html")
  printf '%s: %s, %s contended; page %.0f KB; contend report --html: median %s s (runs: %s); Chromium load event: median %s ms (runs: %s)\n' \
    "$name" "$summary" "$contended" "$(echo "$size / 1024" | bc -l)" \
    "$(printf '%s\n' "${walls[@]}" | median)" "${walls[*]}" \
    "$(printf '%s\n' "${loads[@]}" | median)" "${loads[*]}"
done
