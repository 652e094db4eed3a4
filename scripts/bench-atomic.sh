#!/usr/bin/env bash
# Reference comparison for `contend bench atomic` and `contend bench latency`
# (docs/benchmarks.md, "Contention generators"):
#   - xadd and cmpxchg at 1 and 2 CPUs (cpu-increase on the first two CPUs) against the
#     figures of ccont's method quoted in issue 7 (a fixed ccont build on this machine:
#     xadd 5.3 -> 19.7 ns, cmpxchg 5.2 -> 17.9 ns);
#   - the core-to-core latency of the first two CPUs, cas and rw modes, against the
#     core-to-core-latency crate's benches 1 (CAS) and 2 (single writer, single reader),
#     run alternately ROUNDS times so drift and neighbours hit both alike.
# Prints the load before and after (run it on an otherwise idle machine) and a Markdown table.
#
#   scripts/bench-atomic.sh                    # ROUNDS=5 ITERATIONS=500000 REPEAT=9
# (short runs: on a busy machine a run of a few ms is less often cut by another process)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
ITERATIONS=${ITERATIONS:-500000}
REPEAT=${REPEAT:-9}

command -v python3 >/dev/null || { echo "bench-atomic: needs python3" >&2; exit 1; }
command -v core-to-core-latency >/dev/null ||
  cargo install --quiet core-to-core-latency ||
  { echo "bench-atomic: needs core-to-core-latency (cargo install core-to-core-latency)" >&2; exit 1; }
cargo build --release --quiet -p contend
contend=target/release/contend
read -r A B < <(python3 -c 'import os; c=sorted(os.sched_getaffinity(0)); print(c[0], c[1])')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "load before: $(uptime)"
"$contend" bench atomic --op xadd,cmpxchg,load --load cpu-increase --cpus "$A,$B" \
  --iterations "$ITERATIONS" --repeat "$REPEAT" --json >"$work/atomic.json"
for r in $(seq "$ROUNDS"); do
  "$contend" bench latency --cpus "$A,$B" --mode cas --json >"$work/cas.$r.json"
  core-to-core-latency -b 1 -c "$A,$B" --csv 2>/dev/null >"$work/crate-cas.$r.csv"
  "$contend" bench latency --cpus "$A,$B" --mode rw --json >"$work/rw.$r.json"
  core-to-core-latency -b 2 -c "$A,$B" --csv 2>/dev/null >"$work/crate-rw.$r.csv"
done
echo "load after:  $(uptime)"

python3 - "$work" "$ROUNDS" "$ITERATIONS" "$REPEAT" "$A" "$B" <<'EOF'
import json, statistics, sys
work, rounds, iterations, repeat, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
atomic = json.load(open(f"{work}/atomic.json"))

def step(op, n):
    s = next(s for s in atomic["steps"] if s["op"] == op and len(s["cpus"]) == n)
    return statistics.median(s["repeat_means"]), min(s["repeat_means"]), max(s["repeat_means"])

ccont = {"xadd": (5.3, 19.7), "cmpxchg": (5.2, 17.9), "load": (None, None)}
print(f"\nbench atomic, cpu-increase on CPUs {a},{b}, {iterations} iterations per CPU, {repeat} runs; "
      "median of the runs' means (min-max), ns/op\n")
print("| operation | 1 CPU | 2 CPUs | 2/1 | ccont's method, 1 -> 2 CPUs |")
print("|---|---|---|---|---|")
for op in ["xadd", "cmpxchg", "load"]:
    one, two = step(op, 1), step(op, 2)
    ref = ccont[op]
    refs = f"{ref[0]} -> {ref[1]} ns" if ref[0] else "-"
    print(f"| {op} | {one[0]:.2f} ({one[1]:.2f}-{one[2]:.2f}) | {two[0]:.2f} ({two[1]:.2f}-{two[2]:.2f}) "
          f"| {two[0] / one[0]:.2f} | {refs} |")

def contend_lat(mode, key):
    return [json.load(open(f"{work}/{mode}.{r}.json"))["pairs"][0][key] for r in range(1, rounds + 1)]

def crate_lat(mode):
    out = []
    for r in range(1, rounds + 1):
        lines = [l for l in open(f"{work}/crate-{mode}.{r}.csv").read().splitlines() if l.strip()]
        out.append(float(lines[1].split(",")[0]))
    return out

print(f"\nbench latency between CPUs {a} and {b}, one-way ns, {rounds} alternating rounds "
      "(median, min-max of the rounds)\n")
print("| method | contend (disturbed samples left out) | contend, every sample (the crate's mean) "
      "| core-to-core-latency | every sample vs crate |")
print("|---|---|---|---|---|")
rng = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
for mode, label in [("cas", "CAS, one line (crate bench 1)"), ("rw", "store/load, two lines (crate bench 2)")]:
    c, a, k = contend_lat(mode, "mean_ns"), contend_lat(mode, "mean_all_ns"), crate_lat(mode)
    ma, mk = statistics.median(a), statistics.median(k)
    print(f"| {label} | {rng(c)} | {rng(a)} | {rng(k)} | {100 * (ma - mk) / mk:+.1f} % |")
EOF
