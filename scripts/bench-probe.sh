#!/usr/bin/env bash
# Cost of the lock probe per uncontended lock+unlock pair (benches/lock_pair_cost.c), bare and
# under `contend record --locks` (full and sampled), runs interleaved so that the machine's
# noise falls on all three alike. Prints the median of ROUNDS runs of each (default 7) and the
# overhead over bare. Figures go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
pairs="${PAIRS:-4000000}"
modes="${MODES:-bare full sampled}"
cargo build --release -q -p contend
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/lock_pair_cost" benches/lock_pair_cost.c
contend="$PWD/target/release/contend"
declare -A results
for ((i = 0; i < rounds; i++)); do
  for mode in $modes; do
    case $mode in
      bare) line=$("$work/lock_pair_cost" "$pairs") ;;
      *) line=$("$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks="$mode" -- "$work/lock_pair_cost" "$pairs" 2>/dev/null)
         rm -rf "$work"/run* ;;
    esac
    results[$mode]+="${line#ns_per_pair } "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
bare=$(echo "${results[bare]}" | median)
for mode in $modes; do
  m=$(echo "${results[$mode]}" | median)
  printf '%-8s median %6.2f ns/pair  (overhead %6.2f ns; runs: %s)\n' "$mode" "$m" \
    "$(echo "$m - $bare" | bc -l)" "${results[$mode]}"
done
