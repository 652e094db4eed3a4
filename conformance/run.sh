#!/bin/sh
# Conformance suite for an LD_PRELOAD lock probe: every program runs once without and once
# with the probe preloaded; stdout and the exit status must be identical.
#
#   conformance/run.sh PROBE_SO [PROGRAM...]
#
# Environment: CC (default cc), CFLAGS (added to the defaults), TIMEOUT (seconds per run,
# default 60), REPEAT (runs per program and mode, default 1: a value above 1 also shows
# whether a program is deterministic), KEEP=1 keeps the work directory even when all pass.
# Builds everything into a temporary directory with $CC only (no make).  Exit status: 0 all
# passed, 1 a program failed, 2 usage error, missing probe or build failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
all_programs="mutex_kinds mutex_timed mutex_protocol robust rwlock spin cond cancel barrier
signals threads_fork_exec ctor_dlopen"

usage() {
    echo "usage: $0 PROBE_SO [PROGRAM...]" >&2
    echo "programs: $(echo $all_programs)" >&2
    exit 2
}

[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
probe=$1
shift
if [ ! -e "$probe" ]; then
    echo "conformance: probe library '$probe' does not exist (build it first, e.g." \
         "cargo build --release -p probe; the .so is under target/release/)" >&2
    exit 2
fi
if [ ! -f "$probe" ] || [ ! -r "$probe" ]; then
    echo "conformance: probe library '$probe' is not a readable file" >&2
    exit 2
fi
probe=$(cd "$(dirname "$probe")" && pwd)/$(basename "$probe")
programs=${*:-$all_programs}
for p in $programs; do
    case " $(echo $all_programs) " in *" $p "*) ;; *) echo "conformance: unknown program '$p'" >&2; usage ;; esac
done

CC=${CC:-cc}
TIMEOUT=${TIMEOUT:-60}
REPEAT=${REPEAT:-1}
command -v "$CC" >/dev/null 2>&1 || { echo "conformance: C compiler '$CC' not found (apt-get install gcc)" >&2; exit 2; }
command -v timeout >/dev/null 2>&1 || { echo "conformance: 'timeout' not found (coreutils)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/contend-conformance.XXXXXX") || exit 2
bin=$work/bin
mkdir -p "$bin" "$work/run"

# ---- build ---------------------------------------------------------------------------
flags="-O2 -g -pthread -Wall -Wextra ${CFLAGS:-}"
build() { # name, then compiler arguments
    name=$1
    shift
    if ! $CC $flags "$@" >"$work/build-$name.log" 2>&1; then
        echo "conformance: build of $name failed:" >&2
        cat "$work/build-$name.log" >&2
        echo "(work directory kept: $work)" >&2
        exit 2
    fi
    if [ -s "$work/build-$name.log" ]; then # warnings are bugs in the suite: show them
        echo "conformance: warnings building $name:" >&2
        cat "$work/build-$name.log" >&2
    fi
}
for p in $programs; do
    case $p in
    ctor_dlopen)
        build libctor_needed -fPIC -shared -DTAG=needed -o "$bin/libctor_needed.so" "$here/ctor_lib.c"
        build libctor_dl -fPIC -shared -DTAG=dl -o "$bin/libctor_dl.so" "$here/ctor_lib.c"
        build ctor_dlopen -o "$bin/ctor_dlopen" "$here/ctor_dlopen.c" -L"$bin" -lctor_needed \
            -Wl,-rpath,'$ORIGIN' -ldl
        ;;
    *) build "$p" -o "$bin/$p" "$here/$p.c" ;;
    esac
done

# ---- is the probe really loaded? ld.so only warns when it cannot preload a library -----
maps=$(env LD_PRELOAD="$probe" cat /proc/self/maps 2>"$work/preload-check.err")
case "$maps" in
*"$probe"*) ;;
*)
    echo "conformance: '$probe' is not loaded by LD_PRELOAD (not a shared object for this" \
         "architecture?):" >&2
    cat "$work/preload-check.err" >&2
    exit 2
    ;;
esac

# ---- run -----------------------------------------------------------------------------
# run MODE PROGRAM I: stdout, stderr and exit status into $work/run/PROGRAM.MODE.I.*, with
# its own working directory (a probe may write its trace there).
run() {
    mode=$1 prog=$2 i=$3
    dir=$work/run/$prog.$mode.$i
    mkdir -p "$dir"
    if [ "$mode" = probe ]; then
        (cd "$dir" && env LD_PRELOAD="$probe" timeout "$TIMEOUT" "$bin/$prog" \
            >"$dir.out" 2>"$dir.err" </dev/null)
    else
        (cd "$dir" && env -u LD_PRELOAD timeout "$TIMEOUT" "$bin/$prog" \
            >"$dir.out" 2>"$dir.err" </dev/null)
    fi
    echo $? >"$dir.status"
}

failed=0
passed=0
for prog in $programs; do
    verdict=PASS
    detail=
    i=1
    while [ "$i" -le "$REPEAT" ]; do
        run base "$prog" "$i"
        run probe "$prog" "$i"
        b=$work/run/$prog.base.$i p=$work/run/$prog.probe.$i ref=$work/run/$prog.base.1
        bs=$(cat "$b.status") ps=$(cat "$p.status")
        if [ "$ps" = 124 ]; then
            verdict=FAIL detail="timed out after ${TIMEOUT}s with the probe (run $i)"
        elif [ "$bs" = 124 ]; then
            verdict=FAIL detail="timed out after ${TIMEOUT}s WITHOUT the probe (run $i): suite or machine problem"
        elif ! cmp -s "$b.out" "$ref.out"; then
            verdict=FAIL detail="not deterministic without the probe: run $i differs from run 1"
            p=$b
        elif ! cmp -s "$p.out" "$b.out"; then
            verdict=FAIL detail="stdout differs (run $i)"
        elif [ "$ps" != "$bs" ]; then
            verdict=FAIL detail="exit status $ps with the probe, $bs without (run $i)"
        fi
        [ "$verdict" = FAIL ] && break
        i=$((i + 1))
    done
    if [ "$verdict" = PASS ]; then
        passed=$((passed + 1))
        lines=$(wc -l <"$work/run/$prog.base.1.out" | tr -d ' ')
        note=
        if [ "$(cat "$work/run/$prog.base.1.status")" != 0 ]; then
            n=$(grep -c UNEXPECTED "$work/run/$prog.base.1.out")
            note=" (note: $n line(s) differ from the documented expectation even without the probe: see $prog.base.1.out)"
            KEEP=1
        fi
        echo "PASS $prog ($lines lines, identical)$note"
    else
        failed=$((failed + 1))
        echo "FAIL $prog: $detail"
        if [ -f "$p.out" ] && [ "$p" != "$b" ]; then
            diff -u "$b.out" "$p.out" | sed -n '1,40p' | sed 's/^/    /'
        elif [ "$p" = "$b" ]; then
            diff -u "$ref.out" "$b.out" | sed -n '1,40p' | sed 's/^/    /'
        fi
        if [ -s "$p.err" ]; then
            echo "    stderr with the probe (last lines):"
            tail -n 10 "$p.err" | sed 's/^/      /'
        fi
    fi
done

total=$((passed + failed))
echo "summary: $passed/$total passed, $failed failed (probe: $probe)"
if [ "$failed" -gt 0 ] || [ "${KEEP:-0}" = 1 ]; then
    echo "outputs kept in $work/run"
else
    rm -rf "$work"
fi
[ "$failed" -eq 0 ]
