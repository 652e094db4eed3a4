#!/bin/sh
# Builds the sharing examples: each NAME with `contend cc` (instrumented for `contend c2c
# record`) and NAME.plain without (the uninstrumented twin, for timing and for the PMU back end).
#
# usage: examples/sharing/build.sh OUTDIR [COMPILER]
#   COMPILER: gcc (default), clang, or any name `contend cc` knows (gcc-12, clang-14, cc ...)
#   CONTEND:  the contend executable (default: `contend` on PATH, else this checkout's
#             target/release/contend or target/debug/contend, whichever is newer)
#   CFLAGS:   default -O2 -g -Wall -Wextra
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [COMPILER]" >&2
    exit 2
fi
out=$1
compiler=${2:-gcc}
here=$(cd "$(dirname "$0")" && pwd)
cflags=${CFLAGS:--O2 -g -Wall -Wextra}
if [ -z "${CONTEND:-}" ]; then
    if command -v contend >/dev/null 2>&1; then
        CONTEND=contend
    else
        for c in "$here/../../target/release/contend" "$here/../../target/debug/contend"; do
            if [ -x "$c" ] && { [ -z "${CONTEND:-}" ] || [ "$c" -nt "$CONTEND" ]; }; then
                CONTEND=$c
            fi
        done
    fi
fi
if [ -z "${CONTEND:-}" ]; then
    echo "$0: contend not found: put it on PATH, set CONTEND, or run cargo build" >&2
    exit 2
fi
mkdir -p "$out"
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    # shellcheck disable=SC2086 # CFLAGS is a list of words
    "$CONTEND" cc -- "$compiler" $cflags "$src" -o "$out/$name"
    # shellcheck disable=SC2086
    "$compiler" $cflags -pthread "$src" -o "$out/$name.plain"
    echo "built $out/$name and $out/$name.plain"
done
