#!/usr/bin/env bash
# The MPI wrapper's cost per unsuccessful MPI_Test (benches/mpi_poll_cost.c), Open MPI and
# MPICH: bare, recorded by `contend record --mpi` (polling runs: one event per run), and
# recorded with CONTEND_MPI_POLL_RUNS=0 (every poll its own event, as before runs existed).
# ROUNDS rounds, the three configurations interleaved; medians of the CPU time per call.
#
#   scripts/bench-mpi-poll.sh [ROUNDS] [CALLS] [test|testany]   (defaults 5, 20000000, test)
#   CONTEND=path/to/contend scripts/bench-mpi-poll.sh   (another build, e.g. before runs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
calls="${2:-20000000}"
call="${3:-test}"
if [ -z "${CONTEND:-}" ]; then
  cargo build --release -q -p contend
  CONTEND="$PWD/target/release/contend"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-mpi-poll.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for impl in openmpi mpich; do
  command -v "mpicc.$impl" >/dev/null || { echo "no mpicc.$impl: skipped" >&2; continue; }
  "mpicc.$impl" -O2 -g -o "$work/poll-$impl" benches/mpi_poll_cost.c
  for r in $(seq "$rounds"); do
    for config in bare runs each; do
      case $config in
        bare) line=$("mpirun.$impl" -np 1 "$work/poll-$impl" "$calls" "$call") ;;
        runs) line=$("$CONTEND" record --mpi --interval 0 -o "$work/run" -- \
                "mpirun.$impl" -np 1 "$work/poll-$impl" "$calls" "$call" 2>/dev/null) ;;
        each) line=$(CONTEND_MPI_POLL_RUNS=0 "$CONTEND" record --mpi --interval 0 \
                -o "$work/run" -- "mpirun.$impl" -np 1 "$work/poll-$impl" "$calls" "$call" 2>/dev/null) ;;
      esac
      rm -rf "$work/run"
      ns=$(sed -n 's/.*ns_per_call=\([0-9.]*\).*/\1/p' <<<"$line")
      [ -n "$ns" ] || { echo "bench-mpi-poll: $impl $config: no result: $line" >&2; exit 1; }
      echo "$impl $config $ns" >>"$work/results"
    done
  done
  bare=$(awk -v i="$impl" '$1==i && $2=="bare" {print $3}' "$work/results" | median)
  for config in bare runs each; do
    m=$(awk -v i="$impl" -v c="$config" '$1==i && $2==c {print $3}' "$work/results" | median)
    all=$(awk -v i="$impl" -v c="$config" '$1==i && $2==c {printf "%s ", $3}' "$work/results")
    printf '%-8s %-5s median %8.2f ns/call  wrapper %+8.2f ns  (runs: %s)\n' \
      "$impl" "$config" "$m" "$(awk -v a="$m" -v b="$bare" 'BEGIN{print a-b}')" "$all"
  done
done
