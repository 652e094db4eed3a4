#!/bin/sh
# Build the MPI examples with one MPI's compiler wrapper.
#
# usage: examples/mpi/build.sh MPICC OUTDIR
#   e.g. examples/mpi/build.sh mpicc.openmpi /tmp/mpi-openmpi
#        examples/mpi/build.sh mpicc.mpich   /tmp/mpi-mpich
# CFLAGS overrides the flags (default: -std=c11 -O2 -g -Wall -Wextra -Werror).
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 MPICC OUTDIR   (e.g. $0 mpicc.mpich /tmp/mpi-mpich)" >&2
    exit 2
fi
mpicc=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
flags=${CFLAGS:--std=c11 -O2 -g -Wall -Wextra -Werror}

if ! command -v "$mpicc" >/dev/null 2>&1; then
    echo "$0: no MPI compiler wrapper '$mpicc' (Debian: apt-get install libopenmpi-dev or libmpich-dev)" >&2
    exit 1
fi
mkdir -p "$out"
for prog in late_sender late_receiver barrier wrong_order nxn nonblocking poll_test poll_iprobe; do
    # $flags is split into words on purpose.
    # shellcheck disable=SC2086
    "$mpicc" $flags -o "$out/$prog" "$here/$prog.c"
    echo "built $out/$prog"
done
# shellcheck disable=SC2086
"$mpicc" $flags -DPOLL_TESTANY -o "$out/poll_testany" "$here/poll_test.c"
echo "built $out/poll_testany"
