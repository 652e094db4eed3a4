#!/usr/bin/env bash
# Issue 20's hang cases, timed: each job bare and under `contend record --mpi`, interleaved
# (ROUNDS rounds, default 3), for each installed MPI. Prints, per MPI and case, the exit
# statuses, the median wall times and the added seconds, and for the cases whose both ranks
# are recorded the late sender found (3 planted waits of 100 ms: 300 ms). Figures go to
# docs/benchmarks.md ("MPI jobs that once hung").
#
#   scripts/bench-mpi-nohang.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
cargo build --release -q -p contend
contend="$PWD/target/release/contend"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A launcher=([openmpi]="mpirun --allow-run-as-root --oversubscribe" [mpich]="mpirun.mpich")
declare -A mpicc=([openmpi]="mpicc" [mpich]="mpicc.mpich")
cases=(timens-1s timens-1h unwrapped-rank1 unwrapped-rank0 unshared-dir)

# The second application context of `mpirun -np 1 P : -np 1 ...` for a case (rank 1), and the
# first one's prefix (rank 0).
rank1() {
  case "$1" in
    timens-1s) echo "unshare --time --fork --monotonic 1" ;;
    timens-1h) echo "unshare --time --fork --monotonic 3600" ;;
    unwrapped-rank1) echo "env -u LD_PRELOAD" ;;
    unshared-dir) echo "unshare --time --fork --monotonic 3600 env CONTEND_MPI_DIR=$2" ;;
    *) echo "" ;;
  esac
}
rank0() { [ "$1" = unwrapped-rank0 ] && echo "env -u LD_PRELOAD" || echo ""; }

secs() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for mpi in openmpi mpich; do
  command -v "${mpicc[$mpi]}" >/dev/null || { echo "$mpi: ${mpicc[$mpi]} not installed, skipped"; continue; }
  ${mpicc[$mpi]} -O2 -g -o "$work/ls-$mpi" examples/mpi/late_sender.c
done

printf '%-8s %-16s %-9s %-9s %9s %9s %8s %s\n' MPI case "rc bare" "rc rec" "bare s" "rec s" "added" "late sender (ms)"
for mpi in openmpi mpich; do
  [ -x "$work/ls-$mpi" ] || continue
  p="$work/ls-$mpi"
  for c in "${cases[@]}"; do
    : >"$work/bare" ; : >"$work/rec"; found=""; rcb=""; rcr=""
    for ((r = 0; r < rounds; r++)); do
      other="$work/other-$mpi-$c-$r"
      t0=$(secs)
      set +e
      timeout 120 ${launcher[$mpi]} -np 1 $(rank0 "$c") "$p" : -np 1 $(rank1 "$c" "$other-bare") "$p" >/dev/null 2>&1
      rcb+="$? "
      t1=$(secs)
      timeout 120 "$contend" record --mpi -o "$work/run-$mpi-$c-$r" -- ${launcher[$mpi]} -np 1 $(rank0 "$c") "$p" : -np 1 $(rank1 "$c" "$other") "$p" >/dev/null 2>&1
      rcr+="$? "
      t2=$(secs)
      set -e
      echo "$t1 - $t0" | bc >>"$work/bare"
      echo "$t2 - $t1" | bc >>"$work/rec"
      if [[ "$c" == timens-* || "$c" == unshared-dir ]]; then
        from=(); [ "$c" = unshared-dir ] && from=(--mpi-from "$other")
        found+="$("$contend" report --json "$work/run-$mpi-$c-$r" "${from[@]}" 2>/dev/null |
          python3 -c 'import json,sys; w=json.load(sys.stdin)["mpi"]["waits"]["patterns"]; print(round(sum(p["total_ns"] for p in w if p["pattern"]=="late-sender")/1e6,1))' 2>/dev/null || echo "?") "
      fi
    done
    b=$(median <"$work/bare"); x=$(median <"$work/rec")
    printf '%-8s %-16s %-9s %-9s %9.2f %9.2f %+8.2f %s\n' "$mpi" "$c" "$rcb" "$rcr" "$b" "$x" "$(echo "$x - $b" | bc)" "$found"
  done
done
