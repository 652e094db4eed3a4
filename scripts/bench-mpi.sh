#!/usr/bin/env bash
# Cost of the MPI wrapper (mpi/contend_mpi.c, preloaded by `contend record --mpi`) for each
# installed MPI, and the throughput of the MPI analysis. Figures go to docs/benchmarks.md.
#
#   scripts/bench-mpi.sh [ROUNDS] [CALLS] [ROUNDTRIPS]        (defaults 11, 2000000, 200000)
#   IMPLS="mpich" PERF=1 SYNTHETIC=0 scripts/bench-mpi.sh 5
#
# benches/mpi_pingpong.c in three configurations, launched with the MPI's own mpirun:
#   bare   no wrapper;
#   pass   wrapper preloaded (LD_PRELOAD, as contend record --mpi sets it) without
#          CONTEND_MPI_DIR: every MPI function is a jump to the library's (pass-through);
#   wrap   wrapper preloaded and recording into a fresh run directory (CONTEND_MPI_DIR).
# and five tests:
#   calls      MPI_Iprobe (a local call, flag 0) in a loop, one rank pinned to a CPU: ns per
#              call; wrap - bare is the wrapper's cost per recorded call;
#   pp-free    an 8-byte ping-pong (MPI_Send/MPI_Recv), 2 ranks, --bind-to none: ns per round
#              trip and the wrap/bare slowdown;
#   pp-bound   the same, pinned one rank per CPU (--bind-to core);
#   calls-ab, pp-ab   the two pinned tests, each run alternating blocks of PMPI_ calls (a,
#              never wrapped) and MPI_ calls (b) 100 times: b - a and b/a within one run, so
#              that both halves see the same stretch of the machine (this VM's ping-pong
#              latency jumps between about 0.45 and 1.4 us from run to run, for minutes).
# ROUNDS rounds; in each, every (test, configuration) runs once, the order rotated from round
# to round so that each runs early and late; one warm-up round first, checked, not kept.
# Figures are medians over the rounds, with the range; `best-twentieth` is the median of each
# run's fastest twentieth.
#
# The machine must be quiet: before each run the script waits (up to 5 minutes) until the CPUs
# are idle for half a second (under 10 % of a CPU busy), and a run in which a rank was off its
# CPU for more than 5 % of the timed loop (the program reports it: ranks poll, so that is time
# something else took) is disturbed and run again, up to 3 times; the reruns are counted and
# reported per configuration, and a run still disturbed after them is kept and counted.
#
# Every run is checked, and the script stops if a check fails: the program reports, per rank,
# whether libcontend-mpi is mapped (bare: no; pass, wrap: yes), whether CONTEND_MPI_DIR is set
# (wrap only), the CPUs it may run on (pinned: one each, all different; unpinned: several) and
# was seen on; a pass-through run writes nothing; a recording run's directory holds one stream
# per rank, complete (trailer written), nothing dropped, no broken group or stray record, and
# exactly N/10 + b_ops MPI_Iprobe groups, or MPI_Send and MPI_Recv groups per rank (warm-up
# and the timed loop's MPI_ calls), counted by crates/analysis/examples/mpi_throughput.rs
# --check with the trace reader. A recording's directory is deleted before the next run (its
# pages are never written back during another run).
#
# Then per MPI: the parts of a recorded call, timed alone (mpi_pingpong parts: clock read,
# mutex, the wrapper's own writer mpi/cst_writer.h into /dev/null and into a file); the
# pinned ping-pong recorded by `contend record --mpi` (the real path; checked as above, and
# `contend report --json`'s call counts must agree); `contend report` and `contend report
# --json` on it, best of 3: records per second of the whole command; and the analysis alone
# on the same streams (mpi_throughput RUN_DIR: parse, decode, analyse, best of 5). PERF=1 adds
# a software-clock profile (perf record -e cpu-clock: no PMU needed) of a recording
# MPI_Iprobe run, its samples grouped by where the time goes. Finally mpi_throughput on
# synthetic ranks of SYNTHETIC calls each (default 500000; 0: skip). KEEP=1 keeps the work
# directory.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
rounds="${1:-11}"
calls="${2:-2000000}"
trips="${3:-200000}"
impls="${IMPLS:-openmpi mpich}"
synthetic="${SYNTHETIC:-500000}"
cargo build --release -q -p contend
cargo build --release -q -p analysis --example mpi_throughput
contend="$PWD/target/release/contend"
check="$PWD/target/release/examples/mpi_throughput"
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-mpi.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
# A cache of our own: the wrapper is built from this tree's mpi/ and is the only one there.
export CONTEND_CACHE="$work/cache"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The calls test times a recorded call with MPI_Iprobe that finds nothing: without this the
# wrapper would make each run of them one event (polling runs; benches/mpi_poll_cost.c and
# scripts/bench-mpi-poll.sh measure those).
export CONTEND_MPI_POLL_RUNS=0
results="$work/results"
: >"$results"

die() { echo "bench-mpi: $*" >&2; exit 1; }
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
all_are() { [ "$(tr ',' '\n' <<<"$1" | sort -u | tr -d '\n')" = "$2" ]; }

# launch IMPL PLACEMENT CONFIG NP ARGS...: runs the program; prints rank 0's line.
launch() {
  local impl=$1 placement=$2 config=$3 np=$4
  shift 4
  local env=()
  case $config in
    pass) env=(LD_PRELOAD "$lib") ;;
    wrap) env=(LD_PRELOAD "$lib" CONTEND_MPI_DIR "$work/t") ;;
  esac
  local cmd=()
  if [ "$impl" = openmpi ]; then
    cmd=(mpirun.openmpi --bind-to "$placement")
    for ((k = 0; k < ${#env[@]}; k += 2)); do cmd+=(-x "${env[k]}=${env[k + 1]}"); done
  else
    cmd=(mpirun.mpich -bind-to "$placement")
    for ((k = 0; k < ${#env[@]}; k += 2)); do cmd+=(-genv "${env[k]}" "${env[k + 1]}"); done
  fi
  "${cmd[@]}" -np "$np" "$prog" "$@"
}

# check_streams DIR NP FUNCTION... N: each rank's stream is whole and holds N groups of each.
check_streams() {
  local dir=$1 np=$2
  shift 2
  local n=${*: -1} lines line want f
  lines=$("$check" --check "$dir") || die "$dir: the streams do not parse"
  [ "$(grep -c '^check ' <<<"$lines")" = "$np" ] || die "$dir: expected $np rank streams: $lines"
  while read -r line; do
    for want in dropped=0 complete=1 broken=0 stray=0; do
      grep -q " $want\\b" <<<"$line" || die "$dir: not $want: $line"
    done
    for f in "${@:1:$#-1}"; do
      [ "$(field "$f" "$line")" = "$n" ] || die "$dir: expected $f=$n: $line"
    done
  done <<<"$lines"
}

# Waits until the machine's CPUs are idle (< 10 % of one CPU busy over 0.5 s), at most 300 s.
waited=0
wait_quiet() {
  local start=$SECONDS busy
  while :; do
    busy=$( { head -1 /proc/stat; sleep 0.5; head -1 /proc/stat; } |
      awk -v hz="$(getconf CLK_TCK)" '{b[NR] = $2 + $3 + $4 + $7 + $8} END {print (b[2] - b[1]) / hz / 0.5}')
    (($(echo "$busy < 0.1" | bc -l))) && break
    ((SECONDS - start < 300)) || { echo "bench-mpi: the machine stays busy ($busy CPUs); running anyway" >&2; break; }
    sleep 2
  done
  waited=$((waited + SECONDS - start))
}

# run_one IMPL TEST CONFIG ROUND: one run of a test in a configuration, checked, recorded; a
# disturbed run (a rank off its CPU > 5 % of the loop) is run again, at most 3 more times.
run_one() {
  local attempt line off
  for ((attempt = 0; attempt < 4; attempt++)); do
    wait_quiet
    line=$(run_checked "$@")
    off=$(field off_cpu "$line" | tr ',' '\n' | sort -g | tail -1)
    (($(echo "$off <= 0.05" | bc -l))) && break
  done
  ((attempt < 4)) || attempt=3
  [ "$4" -ge 0 ] || return 0
  local k row=("$1" "$2" "$3" "$4" "$off" "$attempt")
  for k in ns_per_op best_ns cs_per_op ran_on steal_cpu a_ns b_ns ab_ratio ab_diff; do
    row+=("$(field "$k" "$line" | grep . || echo nan)")
  done
  (IFS=$'\t'; echo "${row[*]}") >>"$results"
}

# run_checked IMPL TEST CONFIG: one run, checked (the script stops on a failed check); prints
# the program's line.
run_checked() {
  local impl=$1 test=$2 config=$3 np placement line
  case $test in
    calls | calls-ab) np=1 placement=core ;;
    pp-free) np=2 placement=none ;;
    pp-bound | pp-ab) np=2 placement=core ;;
  esac
  local ab=()
  [[ $test != *-ab ]] || ab=(ab)
  rm -rf "$work/t"
  if [[ $test == calls* ]]; then
    line=$(launch "$impl" "$placement" "$config" 1 calls "$calls" "${ab[@]}")
  else
    line=$(launch "$impl" "$placement" "$config" 2 pingpong "$trips" "${ab[@]}")
  fi
  local what="$impl $test $config: $line"
  case $config in
    bare) all_are "$(field wrapper "$line")" 0 || die "wrapper mapped: $what"
          all_are "$(field tracing "$line")" 0 || die "tracing: $what" ;;
    pass) all_are "$(field wrapper "$line")" 1 || die "wrapper not mapped: $what"
          all_are "$(field tracing "$line")" 0 || die "tracing: $what"
          [ ! -e "$work/t" ] || die "pass-through wrote $work/t: $what" ;;
    wrap) all_are "$(field wrapper "$line")" 1 || die "wrapper not mapped: $what"
          all_are "$(field tracing "$line")" 1 || die "not tracing: $what" ;;
  esac
  local allowed
  allowed=$(field allowed "$line")
  if [ "$placement" = core ]; then
    # One CPU each (a power of two), all different.
    for m in ${allowed//,/ }; do (((0x$m & (0x$m - 1)) == 0)) || die "not pinned: $what"; done
    [ "$(tr ',' '\n' <<<"$allowed" | sort -u | wc -l)" = "$np" ] || die "pinned together: $what"
  else
    for m in ${allowed//,/ }; do (((0x$m & (0x$m - 1)) != 0)) || die "pinned: $what"; done
  fi
  if [ "$config" = wrap ]; then
    # The warm-up's N/10 calls and the timed loop's calls through MPI_ (all, or half in ab).
    # (ab: 100 of the 200 blocks of N/200.)
    local n=$trips
    [[ $test != calls* ]] || n=$calls
    local b_ops=$n
    [ -z "${ab[*]}" ] || b_ops=$((100 * (n / 200)))
    [ "$(field b_ops "$line")" = "$b_ops" ] || die "expected b_ops=$b_ops: $what"
    if [[ $test == calls* ]]; then
      check_streams "$work/t" 1 MPI_Iprobe $((n / 10 + b_ops))
    else
      check_streams "$work/t" 2 MPI_Send MPI_Recv $((n / 10 + b_ops))
    fi
    # Deleted before the kernel writes it back, so that no writeback falls on the next run.
    rm -rf "$work/t"
  fi
  echo "$line"
}

host_line() {
  echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
    "hypervisor $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | grep . || echo none), kernel $(uname -r)," \
    "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
}
host_line
echo "tree: $(git log -1 --format='commit %h' 2>/dev/null || echo 'not a git checkout')$(git status --porcelain mpi 2>/dev/null | grep -q . && echo ', mpi/ with uncommitted changes')"
echo "date: $(date -u +%F), rounds $rounds, $calls MPI_Iprobe calls, $trips round trips"

for impl in $impls; do
  command -v "mpicc.$impl" >/dev/null || { echo "$impl: not installed, skipped"; continue; }
  prog="$work/pp-$impl"
  "mpicc.$impl" -O2 benches/mpi_pingpong.c -o "$prog"
  echo "== $impl: $("mpirun.$impl" --version 2>&1 | grep -m1 -E 'Open MPI|OpenRTE|Version:' | tr -s ' ')"
  # The wrapper as contend builds it: one recording builds and caches it.
  "$contend" record --mpi --interval 0 -o "$work/build-$impl" -- \
    "mpirun.$impl" -np 1 "$prog" calls 10 >/dev/null 2>&1 || die "$impl: contend record --mpi failed"
  libs=("$CONTEND_CACHE"/libcontend-mpi-"$impl"-*.so)
  [ "${#libs[@]}" = 1 ] && [ -f "${libs[0]}" ] || die "$impl: expected one cached wrapper: ${libs[*]}"
  lib=${libs[0]}
  echo "$impl: wrapper $(sha256sum mpi/contend_mpi.c | cut -c1-12) (sha256 of the contend_mpi.c it was built from)"
  # The parts of a recorded call, each alone (mpi/cst_writer.h, the wrapper's writer).
  for ((attempt = 0; attempt < 4; attempt++)); do
    wait_quiet
    parts=$("$prog" parts "$calls" "$work")
    (($(echo "$(field off_cpu "$parts") <= 0.05" | bc -l))) && break
  done
  echo "$impl: parts (best of 5, ns): $parts"
  awk -v impl="$impl" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { crc = 80 * v["crc_ns_per_byte"]
          printf "%s: a recorded 5-record group, its parts: 2 clock reads %.0f, mutex %.0f, CRC of its 80 bytes %.0f, encoding and buffering %.0f, write(2) into the page cache %.0f: %.0f ns\n",
            impl, 2 * v["clock_ns"], v["mutex_ns"], crc, v["group_null_ns"] - crc,
            v["group_file_ns"] - v["group_null_ns"], 2 * v["clock_ns"] + v["mutex_ns"] + v["group_file_ns"] }' <<<"$parts"

  tests=(calls pp-free pp-bound calls-ab pp-ab)
  configs=(bare pass wrap)
  cells=()
  for t in "${tests[@]}"; do for c in "${configs[@]}"; do cells+=("$t:$c"); done; done
  for ((r = -1; r < rounds; r++)); do   # round -1: warm-up, checked but not kept
    n=${#cells[@]}
    for ((k = 0; k < n; k++)); do
      cell=${cells[$(((k + (r + 1) * 7) % n))]}
      run_one "$impl" "${cell%%:*}" "${cell##*:}" "$r"
    done
  done
  echo "$impl: every run checked (wrapper mapped or not, tracing or not, pinning; each recording's streams complete with every call)"

  # The real path, for the analysis: contend record --mpi of the pinned ping-pong.
  run="$work/pp-run-$impl"
  "$contend" record --mpi --interval 0 -o "$run" -- \
    "mpirun.$impl" "$([ "$impl" = openmpi ] && echo --bind-to || echo -bind-to)" core \
    -np 2 "$prog" pingpong "$trips" >"$work/record.out" 2>&1 || { cat "$work/record.out"; die "$impl: record failed"; }
  check_streams "$run" 2 MPI_Send MPI_Recv $((trips + trips / 10))
  "$contend" report --json "$run" >"$work/report.json"
  records=$(python3 - "$run/meta.json" "$work/report.json" $((2 * (trips + trips / 10))) <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
rep = json.load(open(sys.argv[2]))["mpi"]
want = int(sys.argv[3])
for f in ("MPI_Send", "MPI_Recv"):
    got = sum(c["count"] for c in rep["calls"] if c["function"] == f)
    assert got == want, f"contend report counts {got} {f}, expected {want}"
assert all(r["closed"] for r in rep["ranks"]) and not rep["missing_ranks"], rep["ranks"]
assert not any(rep["conversion"].values()), rep["conversion"]
print(sum(s["events"] for s in meta["streams"] if s["kind"] == "rank"))
EOF
  ) || die "$impl: contend report --json disagrees"
  for json in --json ""; do
    best=
    for ((i = 0; i < 3; i++)); do
      wait_quiet
      t0=$(date +%s.%N)
      "$contend" report $json "$run" >"$work/report.out"
      t1=$(date +%s.%N)
      s=$(echo "$t1 - $t0" | bc -l)
      if [ -z "$best" ] || (($(echo "$s < $best" | bc -l))); then best=$s; fi
    done
    echo "$impl: contend report ${json:-(text)} on the recorded ping-pong ($records records, 2 ranks):" \
      "$(printf '%.3f' "$best") s, $(echo "$records / $best / 1000000" | bc -l | xargs printf '%.2f') M records/s" \
      "(whole command, best of 3; output $(($(stat -c %s "$work/report.out") / 1024)) KiB)"
  done
  wait_quiet
  "$check" "$run" | grep -v '^check ' | sed "s|$work/||"

  if [ "${PERF:-0}" = 1 ] && command -v perf >/dev/null; then
    # 5 x CALLS calls, samples from 1 s after the start (past mpirun's start and MPI_Init).
    rm -rf "$work/t"
    wait_quiet
    perf record -q -e cpu-clock -F 5000 -D 1000 -o "$work/perf.data" -- \
      "mpirun.$impl" -np 1 env LD_PRELOAD="$lib" CONTEND_MPI_DIR="$work/t" "$prog" calls $((5 * calls)) >"$work/perf.out" 2>&1
    echo "$impl: where a recording MPI_Iprobe run spends its time ($(field ns_per_op "$(cat "$work/perf.out")") ns/call under perf;" \
      "perf cpu-clock samples of the program, from 1 s after the start):"
    perf report -i "$work/perf.data" --comm "pp-$impl" --percentage relative --no-children \
      --sort dso,sym -q --stdio 2>/dev/null |
      awk '{ p = $1; sub(/%/, "", p); dso = $2; sym = $NF
             if (dso ~ /vdso/) k = "clock reads (vDSO clock_gettime)"
             else if (sym ~ /crc32/) k = "CRC-32 of the chunks (cst_crc32)"
             else if (dso ~ /kernel/) k = "kernel (write(2) into the page cache, page faults)"
             else if (dso ~ /libcontend-mpi/) k = "wrapper: encoding, tables, call site"
             else if (dso ~ /libc/) k = "libc (mutex, write, clock_gettime entry)"
             else if (dso ~ /mpi|mca_|pal|rte|libuc[pstm]|pmix|fabric|hwloc|event/) k = "the MPI library (the call itself)"
             else k = "other"
             s[k] += p }
           END { for (k in s) if (s[k] >= 0.05) printf "  %5.1f %%  %s\n", s[k], k }' | sort -rn
  fi
done

echo
python3 - "$results" "$waited" <<'EOF'
import collections, statistics, sys
keys = "impl test config round off reruns ns best cs ran steal a b ratio diff".split()
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    x = dict(zip(keys, line.rstrip("\n").split("\t")))
    for k in keys[3:]:
        if k != "ran":
            x[k] = float(x[k])
    rows[x["impl"], x["test"], x["config"]].append(x)
print(f"waited {sys.argv[2]} s in all for a quiet machine")
names = {"calls": "MPI_Iprobe, 1 rank pinned (ns/call), separate runs",
         "pp-free": "ping-pong 8 B, 2 ranks unpinned (ns/round trip), separate runs",
         "pp-bound": "ping-pong 8 B, 2 ranks pinned (ns/round trip), separate runs",
         "calls-ab": "MPI_Iprobe, 1 rank pinned (ns/call), PMPI_ (a) and MPI_ (b) blocks alternating in each run",
         "pp-ab": "ping-pong 8 B, 2 ranks pinned (ns/round trip), PMPI_ (a) and MPI_ (b) blocks alternating in each run"}
med = statistics.median
for impl in dict.fromkeys(k[0] for k in rows):
    print(f"== {impl}")
    for test in names:
        if (impl, test, "bare") not in rows:
            continue
        print(f"  {names[test]}")
        m = {}
        for config in ("bare", "pass", "wrap"):
            r = rows[impl, test, config]
            ns = [x["ns"] for x in r]
            m[config] = (med(ns), med(x["best"] for x in r), {x["round"]: x["ns"] for x in r})
            if test.endswith("-ab"):
                print(f"    {config:5} b - a median {med(x['diff'] for x in r):+8.1f} ns"
                      f" (runs {min(x['diff'] for x in r):+.1f} .. {max(x['diff'] for x in r):+.1f}),"
                      f" b/a median x{med(x['ratio'] for x in r):.3f}"
                      f" (runs {min(x['ratio'] for x in r):.3f} .. {max(x['ratio'] for x in r):.3f});"
                      f" a median {med(x['a'] for x in r):.1f}, b median {med(x['b'] for x in r):.1f}")
            else:
                print(f"    {config:5} median {med(ns):8.1f}  (runs {min(ns):.1f} - {max(ns):.1f})"
                      f"  best-twentieth median {m[config][1]:8.1f}")
            print(f"          reruns {sum(int(x['reruns']) for x in r)}, still disturbed"
                  f" {sum(x['off'] > 0.05 for x in r)}; off-CPU median {med(x['off'] for x in r):.4f},"
                  f" steal median {med(x['steal'] for x in r):.3f} CPU, context switches/op"
                  f" {med(x['cs'] for x in r):.4f}; ran on {' '.join(sorted(set(x['ran'] for x in r)))}")
            if test.endswith("-ab") and config == "wrap":
                print("          runs, a -> b: " + ", ".join(f"{x['a']:.0f} -> {x['b']:.0f}" for x in r))
        if test.endswith("-ab"):
            continue
        rounds = sorted(m["bare"][2])
        def paired(c):
            return med([m[c][2][k] - m["bare"][2][k] for k in rounds])
        for c in ("pass", "wrap"):
            d, db = m[c][0] - m["bare"][0], m[c][1] - m["bare"][1]
            print(f"    {c} - bare: {d:+.1f} ns (median of the {len(rounds)} per-round differences"
                  f" {paired(c):+.1f}; best-twentieth {db:+.1f});  {c}/bare x{m[c][0] / m['bare'][0]:.3f}"
                  f" (best-twentieth x{m[c][1] / m['bare'][1]:.3f})")
EOF

if [ "$synthetic" != 0 ]; then
  echo
  wait_quiet
  "$check" "$synthetic"
fi
