#!/usr/bin/env bash
# Slowdown of a real multi-threaded program under the lock probe: `pigz -p 2` compressing a
# 256 MiB file, bare and under `contend record --locks` (full and sampled), runs interleaved.
# Prints the median wall time of ROUNDS runs of each (default 5) and the ratios to bare.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
command -v pigz >/dev/null || { echo "bench-pigz: missing pigz (apt-get install pigz)" >&2; exit 1; }
cargo build --release -q -p contend
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Compressible input: text and binaries, repeated to 256 MiB.
cat /usr/share/common-licenses/* /usr/bin/bash > "$work/seed" 2>/dev/null || true
: > "$work/input"
while [ "$(stat -c %s "$work/input")" -lt 268435456 ]; do cat "$work/seed" >> "$work/input"; done
contend="$PWD/target/release/contend"
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
declare -A results
for ((i = 0; i < rounds; i++)); do
  results[bare]+="$(seconds pigz -p 2 -c "$work/input") "
  results[full]+="$(seconds "$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks -- pigz -p 2 -c "$work/input") "
  rm -rf "$work"/run*
  results[sampled]+="$(seconds "$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks=sampled -- pigz -p 2 -c "$work/input") "
  rm -rf "$work"/run*
done
"$contend" record -o "$work/run" --interval "${INTERVAL:-0}" --locks -- pigz -p 2 -c "$work/input" > /dev/null
events=$("$contend" report --json "$work/run" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"], d["locks"]["summary"]["events"])')
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
bare=$(echo "${results[bare]}" | median)
for mode in bare full sampled; do
  m=$(echo "${results[$mode]}" | median)
  printf '%-8s median %6.3f s  (x%.3f of bare; runs: %s)\n' "$mode" "$m" "$(echo "$m / $bare" | bc -l)" "${results[$mode]}"
done
echo "one full run recorded: events, mutex events = $events"
