#!/usr/bin/env bash
# hpcc (HPC Challenge, Debian's Open MPI build) recorded end to end by `contend record --mpi`
# (issue 20 item 5): wall time and run-directory size against bare runs, the wait states
# found, and the same wait states with and without polling runs on a smaller problem.
# Not part of CI: needs `apt-get install hpcc`.
#
#   scripts/bench-hpcc.sh [ROUNDS] [N] [SMALL_N]       (defaults 3, 4000, 1000)
#
# Input: the package's examples/_hpccinf.txt with a 1 x 2 process grid and problem size N,
# 2 ranks (mpirun.openmpi -np 2). ROUNDS rounds of a bare run and a recorded one,
# interleaved (bare first in odd rounds, recorded first in even ones). Wall time is the
# whole command's (`contend record` included: what a user waits for). Then on the last
# recording: the wait states `contend report --json` found, per pattern, and its most frequent
# calls. Then at SMALL_N: one recording with polling runs and one with CONTEND_MPI_POLL_RUNS=0
# (every poll its own event), their times and sizes; the second is analysed as recorded and
# again with its polls turned into runs as the wrapper writes them
# (crates/analysis/examples/mpi_poll_runs.rs), which must find the same wait states (the
# script fails otherwise). hpcc is stripped: call sites show as hpcc+0x... .
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
n="${2:-4000}"
small="${3:-1000}"
command -v hpcc >/dev/null || { echo "bench-hpcc: no hpcc (apt-get install hpcc)" >&2; exit 1; }
command -v mpirun.openmpi >/dev/null || { echo "bench-hpcc: no mpirun.openmpi" >&2; exit 1; }
if [ -z "${CONTEND:-}" ]; then
  cargo build --release -q -p contend
  CONTEND="$PWD/target/release/contend"
fi
cargo build --release -q -p analysis --example mpi_poll_runs
poll_runs="$PWD/target/release/examples/mpi_poll_runs"
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-hpcc.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# input SIZE DIR: hpccinf.txt for a 1 x 2 grid and problem size SIZE.
input() {
  mkdir -p "$2"
  awk -v n="$1" 'NR == 6 { print n "         Ns"; next }
                 NR == 11 { print "1            Ps"; next }
                 NR == 12 { print "2            Qs"; next }
                 { print }' /usr/share/doc/hpcc/examples/_hpccinf.txt >"$2/hpccinf.txt"
}
now() { date +%s.%N; }
# run_bare DIR, run_recorded DIR RUN [ENV...]: print the wall time in seconds.
run_bare() {
  local t0; rm -f "$1/hpccoutf.txt"; t0=$(now)
  (cd "$1" && mpirun.openmpi -np 2 hpcc >/dev/null 2>&1)
  awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}
run_recorded() {
  local dir=$1 run=$2 t0; shift 2
  rm -f "$dir/hpccoutf.txt"; t0=$(now)
  (cd "$dir" && env "$@" "$CONTEND" record --mpi -o "$run" -- mpirun.openmpi -np 2 hpcc \
    >/dev/null 2>"$run.log")
  awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}
# hpcc's own verdict on its last run (each run starts with a fresh hpccoutf.txt).
passed() { grep -q '^Success=1' "$1/hpccoutf.txt"; }
# waits RUN: one line per pattern: slug count total-wait-ms.
waits() {
  "$CONTEND" report --json "$1" | python3 -c '
import json, sys
m = json.load(sys.stdin)["mpi"]
by = {}
for i in m["waits"]["instances"]:
    c, t = by.get(i["pattern"], (0, 0))
    by[i["pattern"]] = (c + 1, t + i["wait_ns"])
for p in sorted(by):
    print(f"{p} {by[p][0]} {by[p][1] / 1e6:.1f}")
'
}

echo "hpcc, 2 ranks (Open MPI), 1 x 2 grid, N = $n; $rounds rounds, interleaved"
echo "| round | bare (s) | recorded (s) | recorded / bare | run directory (MB) |"
echo "|---|---|---|---|---|"
input "$n" "$work/big"
bares=() recs=()
for r in $(seq "$rounds"); do
  rm -rf "$work/run-big"
  if (( r % 2 )); then
    b=$(run_bare "$work/big"); passed "$work/big" || { echo "bench-hpcc: bare run failed" >&2; exit 1; }
    w=$(run_recorded "$work/big" "$work/run-big")
    passed "$work/big" || { echo "bench-hpcc: recorded run failed" >&2; exit 1; }
  else
    w=$(run_recorded "$work/big" "$work/run-big")
    passed "$work/big" || { echo "bench-hpcc: recorded run failed" >&2; exit 1; }
    b=$(run_bare "$work/big"); passed "$work/big" || { echo "bench-hpcc: bare run failed" >&2; exit 1; }
  fi
  mb=$(du -sb "$work/run-big" | awk '{ printf "%.1f", $1 / 1e6 }')
  bares+=("$b") recs+=("$w")
  echo "| $r | $b | $w | $(awk -v a="$w" -v b="$b" 'BEGIN { printf "%.3f", a / b }') | $mb |"
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mb=$(med "${bares[@]}"); mr=$(med "${recs[@]}")
echo "| median | $mb | $mr | $(awk -v a="$mr" -v b="$mb" 'BEGIN { printf "%.3f", a / b }') | |"
echo
echo "Wait states found (last recording, N = $n): pattern, instances, total wait (ms)"
waits "$work/run-big" | sed 's/^/  /'
echo
echo "Most frequent calls (last recording): function, call site, calls, time in them"
"$CONTEND" report --json "$work/run-big" | python3 -c '
import json, sys
m = json.load(sys.stdin)["mpi"]
names = m["site_names"]
for c in sorted(m["calls"], key=lambda c: -c["count"])[:6]:
    site = names[c["site"]] if c["site"] is not None else "?"
    print("  %s %s %d calls, %.1f ms" % (c["function"], site, c["count"], c["total_ns"] / 1e6))
'
echo
echo "N = $small: one recording with polling runs, one with CONTEND_MPI_POLL_RUNS=0 (every poll"
echo "its own group); the second analysed as recorded and as polling runs (mpi_poll_runs)"
input "$small" "$work/small"
rm -rf "$work/run-runs" "$work/run-each"
t1=$(run_recorded "$work/small" "$work/run-runs")
passed "$work/small" || { echo "bench-hpcc: recorded run failed" >&2; exit 1; }
t2=$(run_recorded "$work/small" "$work/run-each" CONTEND_MPI_POLL_RUNS=0)
passed "$work/small" || { echo "bench-hpcc: recorded run failed" >&2; exit 1; }
echo "  with runs: $t1 s, $(du -sb "$work/run-runs" | awk '{ printf "%.1f", $1 / 1e6 }') MB;" \
  "every poll: $t2 s, $(du -sb "$work/run-each" | awk '{ printf "%.1f", $1 / 1e6 }') MB"
"$poll_runs" "$work/run-each" | sed 's/^/  /'
