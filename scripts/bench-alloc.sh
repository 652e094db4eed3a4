#!/usr/bin/env bash
# Cost of the probe per malloc(64)+free pair (benches/alloc_cost.c): bare, under
# `contend record --locks` (allocations passed through) and `--locks --alloc-sites`
# (allocations recorded), runs interleaved. Prints the median of ROUNDS runs (default 7).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
pairs="${PAIRS:-4000000}"
cargo build --release -q -p contend -p probe
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/alloc_cost" benches/alloc_cost.c
contend="$PWD/target/release/contend"
declare -A results
modes="bare locks alloc-sites"
for ((i = 0; i < rounds; i++)); do
  for mode in $modes; do
    case $mode in
      bare) line=$("$work/alloc_cost" "$pairs") ;;
      locks) line=$("$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks -- "$work/alloc_cost" "$pairs" 2>/dev/null) ;;
      alloc-sites) line=$("$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks --alloc-sites -- "$work/alloc_cost" "$pairs" 2>/dev/null) ;;
    esac
    rm -rf "$work"/run*
    results[$mode]+="${line#ns_per_pair } "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
bare=$(echo "${results[bare]}" | median)
for mode in $modes; do
  m=$(echo "${results[$mode]}" | median)
  printf '%-12s median %6.2f ns/pair  (overhead %6.2f ns; runs: %s)\n' "$mode" "$m" \
    "$(echo "$m - $bare" | bc -l)" "${results[$mode]}"
done
