#!/bin/bash
# Slowdown of the sharing runtime: each program built uninstrumented (plain), and with
# -fsanitize=thread linked against libcontend_sharing.so, run with the runtime inactive (empty
# hooks: CONTEND_SHARING_DIR unset) and active. Prints the median wall time of RUNS runs of
# each and the ratios, then the geometric means.
#
# usage: crates/sharing/bench/bench.sh [gcc|clang]   (after cargo build -p sharing --release)
#   RUNS (default 3), CFLAGS (default -O2 -g), OUT (default a temporary directory)
#   Programs: crates/sharing/bench/counters.c (together / padded) and, when present,
#   examples/sharing/*.c (default / padded), each with the arguments in PROGRAMS below.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cc=${1:-gcc}
runs=${RUNS:-3}
cflags=${CFLAGS:--O2 -g}
lib=$root/target/release/deps
[ -f "$lib/libcontend_sharing.so" ] || { echo "build it first: cargo build -p sharing --release" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out/run"

# name|source|arguments (one line per run configuration)
PROGRAMS="counters|$here/counters.c|together 20000000
counters-padded|$here/counters.c|padded 20000000"
# The examples with a quarter of their default iterations (about 75 ms uninstrumented).
for ex in reader_writer:50000000 accumulators:5000000 histograms:20000000 \
    atomic_counter:2500000 lock_and_data:2500000; do
    src=$root/examples/sharing/${ex%%:*}.c
    [ -f "$src" ] || continue
    PROGRAMS="$PROGRAMS
${ex%%:*}|$src|-n ${ex#*:}
${ex%%:*}-padded|$src|-n ${ex#*:} padded"
done
[ -f "$root/examples/sharing/negligible.c" ] &&
    PROGRAMS="$PROGRAMS
negligible|$root/examples/sharing/negligible.c|-n 5000000"

build() { # source -> $out/NAME.plain and $out/NAME
    local src=$1 name
    name=$(basename "$src" .c)
    [ -x "$out/$name" ] && return
    # shellcheck disable=SC2086
    $cc $cflags -pthread "$src" -o "$out/$name.plain"
    # shellcheck disable=SC2086
    $cc $cflags -fsanitize=thread -c "$src" -o "$out/$name.o"
    $cc "$out/$name.o" -pthread -o "$out/$name" -L"$lib" -lcontend_sharing -Wl,-rpath,"$lib"
}

median_ms() { # command... -> median wall ms of $runs runs
    local t=()
    for _ in $(seq "$runs"); do
        local s e
        s=$(date +%s%N)
        "$@" >/dev/null
        e=$(date +%s%N)
        t+=($(((e - s) / 1000000)))
    done
    printf '%s\n' "${t[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}

printf '%-24s %9s %9s %9s %8s %8s\n' program plain_ms empty_ms active_ms act/plain act/empty
lp=0; le=0; n=0
while IFS='|' read -r name src args; do
    build "$src"
    exe=$out/$(basename "$src" .c)
    # shellcheck disable=SC2086
    p=$(median_ms "$exe.plain" $args)
    # shellcheck disable=SC2086
    e=$(median_ms env -u CONTEND_SHARING_DIR "$exe" $args)
    # shellcheck disable=SC2086
    a=$(median_ms env CONTEND_SHARING_DIR="$out/run" "$exe" $args)
    printf '%-24s %9d %9d %9d %8.2f %8.2f\n' "$name" "$p" "$e" "$a" \
        "$(echo "$a / ($p + 0.5)" | bc -l)" "$(echo "$a / ($e + 0.5)" | bc -l)"
    lp=$(echo "$lp + l($a / ($p + 0.5))" | bc -l)
    le=$(echo "$le + l($a / ($e + 0.5))" | bc -l)
    n=$((n + 1))
done <<<"$PROGRAMS"
printf 'geomean (%d programs, %s): active/plain %.2f  active/empty %.2f\n' "$n" "$cc" \
    "$(echo "e($lp / $n)" | bc -l)" "$(echo "e($le / $n)" | bc -l)"
