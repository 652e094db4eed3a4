#!/usr/bin/env bash
# The lock what-if checked against the real fix: for each program with a planted lock, record
# it (`contend record --locks`), read the replayed prediction for that lock from
# `contend report --json`, and run the same program with a lock per thread (`-n`) ROUNDS times
# (default 5); prints program, predicted, bound, the model's replay of the run as recorded,
# measured without the lock (median and runs), and the error. Each measurement waits (up to
# 60 s) for the machine to be idle (>= 90 % over 1 s, /proc/stat): other work on the CPUs
# slows the runs, not the prediction. Figures go to docs/benchmarks.md ("Lock what-if checked
# against the real fix").
#
#   scripts/bench-whatif.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
cargo build --release -q -p contend
contend="$PWD/target/release/contend"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -g -pthread -o "$work/planted_hold" examples/locks/planted_hold.c
cc -O2 -g -pthread -o "$work/serialised" examples/scaling/serialised.c
cc -O2 -g -pthread -o "$work/mix" examples/scaling/mix.c

# Idle share of the CPUs over one second, %.
idle_pct() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  echo $(( 100 * (b[4] - a[4] + b[5] - a[5]) / (total > 0 ? total : 1) ))
}
wait_idle() {
  local i idle
  for ((i = 0; i < 60; i++)); do
    idle=$(idle_pct)
    ((idle >= 90)) && { echo "$idle"; return; }
  done
  echo "$idle"
}

# One serialised calibration for every run, so that the recorded and the fixed program do the
# same work.
iters=$("$work/serialised" -t 1 -w 20 | tr ' ' '\n' | awk -F= '$1 == "iters_per_ms" {print $2}')
mix_cal=$("$work/mix" -C | tr ' ' '\n')
mix_e=$(awk -F= '$1 == "elems_per_ms" {print $2}' <<<"$mix_cal")
mix_i=$(awk -F= '$1 == "iters_per_ms" {print $2}' <<<"$mix_cal")

check() {
  local label=$1 lock_field=$2; shift 2
  local run="$work/run" idle
  rm -rf "$run"
  idle=$(wait_idle)
  truth=$("$contend" record --locks -o "$run" -- "$@" 2>/dev/null | grep '^truth ')
  addr=$(tr ' ' '\n' <<<"$truth" | awk -F= -v k="$lock_field" '$1 == k {print $2}')
  read -r predicted bound recorded measured_run < <("$contend" report --json "$run" 2>/dev/null |
    python3 -c '
import json, sys
v = json.load(sys.stdin)["locks"]["what_if"]
addr = int(sys.argv[1], 16)
p = next(l for l in v["locks"] if l["lock"]["address"] == addr)
print(p["predicted_ns"], p["bound_ns"], v.get("replayed_as_recorded_ns") or 0, v["measured_ns"])
' "$addr")
  local walls=() w t0 t1 idles=()
  for ((i = 0; i < rounds; i++)); do
    idles+=("$(wait_idle)")
    t0=$(date +%s%N); "$@" -n >/dev/null; t1=$(date +%s%N)
    walls+=($((t1 - t0)))
  done
  median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  awk -v l="$label" -v p="$predicted" -v b="$bound" -v r="$recorded" -v m="$measured_run" \
    -v n="$median" -v all="${walls[*]}" -v idle="$idle" -v idles="${idles[*]}" 'BEGIN {
    split(all, a, " "); runs = ""
    for (i = 1; i <= length(a); i++) runs = runs sprintf("%s%.0f", i > 1 ? ", " : "", a[i] / 1e6)
    printf "| %s | %.0f | %.0f | %.0f of %.0f | %.0f (%s) | %+.1f %% | %s; %s |\n", l, p / 1e6, b / 1e6,
      r / 1e6, m / 1e6, n / 1e6, runs, 100 * (p - n) / n, idle, idles }'
}

echo "| program | predicted (ms) | bound (ms) | model's replay of the recorded run (ms) | measured with -n, median (runs) (ms) | error | idle % before record; before each -n run |"
echo "|---|---|---|---|---|---|---|"
check "planted_hold" hot_lock.addr "$work/planted_hold"
check "planted_hold -k 50 -w 200 (the issue's case)" hot_lock.addr "$work/planted_hold" -k 50 -w 200
check "serialised -t 2" big_lock.addr "$work/serialised" -t 2 -i "$iters"
check "serialised -t 4" big_lock.addr "$work/serialised" -t 4 -i "$iters"
check "mix -t 2 -w 1000 (half memory stream, half under big_lock)" big_lock.addr "$work/mix" -t 2 -w 1000 -e "$mix_e" -i "$mix_i"
