#!/bin/sh
# Records the run directories under fixtures/runs/ that crates/contend/tests/cli/fixtures.rs
# replays: `contend report` (and `contend c2c report`) on each must print exactly what
# fixtures/runs/NAME/expected/ holds, so that moving the loading and report code (issue 17)
# cannot change a report unnoticed. Re-record only when a change of the recorded format needs
# it; a deliberate change of a report's output only needs
#   UPDATE_GOLDEN=1 cargo test -p contend --test cli fixtures::
#
# usage: scripts/record-fixtures.sh [NAME...]     (default: all of them)
#   CONTEND: the contend executable (default: this checkout's target/release/contend or
#            target/debug/contend, whichever is newer; the probe and the sharing runtime are
#            found beside it, as always)
#   CC, CXX: the compilers (default cc, c++); MPICC, MPIRUN: the MPI (default Open MPI's)
#
# The fixtures, each a small run (< 200 KB) of a bundled example:
#   locks       record --locks                  planted_hold (3 threads, 20 holds of 0.5 ms)
#   heap-locks  record --locks --alloc-sites    heap_locks (locks in `new` and malloc blocks)
#   activity    record (sampler only)           serialised (2 threads, 100 ms of work each)
#   mpi         record --mpi --interval 0       mpirun -np 2 late_sender (3 rounds, 20 ms late)
#   sharing     cc + c2c record --window 4096   reader_writer -c 100 (false sharing)
#   scale       scale --threads 2 --repeat 1    independent -t {threads} -w 100
#
# What makes them replay the same on any machine (the report reads only the run directory
# and the binaries its memory maps name):
# - The programs are built here with -ffile-prefix-map (no local path in their DWARF) and copied
#   into the fixture's bin/. In maps/*.maps the lines of those binaries are rewritten to
#   /proc/self/cwd/NAME/bin/PROG, which resolves in whatever directory the test copies the
#   fixture to (it runs contend there, on the relative name NAME, which is also what the
#   report prints as the run's name), with device 00:00 and inode 0: the symbolizer checks a
#   module's inode against the maps only when the maps give one, and a copy has another.
# - Every other file in the maps (libc, libstdc++, the MPI libraries and contend's own probe,
#   wrapper and runtime) becomes /nonexistent-contend-fixture/BASENAME (libc.so.6 stays its name):
#   no machine has it, so its frames always print as module+offset (libc.so.6+0x1234), never
#   as names read from the libc of the machine running the test.
# - contend is put on PATH and the programs run as ./PROG from the build directory, so
#   meta.json says `contend record ... -- ./planted_hold ...`, not this machine's paths.
# The test also makes each copy's meta.json newer than its binaries (the lock report does
# not trust a module changed after the run) and checks that no note names a fixture binary.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/fixtures/runs
all="locks heap-locks activity mpi sharing scale"
wanted=${*:-$all}
for n in $wanted; do
    case " $all " in *" $n "*) ;; *) echo "$0: no fixture $n (they are: $all)" >&2; exit 2 ;; esac
done

if [ -z "${CONTEND:-}" ]; then
    for c in "$repo/target/release/contend" "$repo/target/debug/contend"; do
        if [ -x "$c" ] && { [ -z "${CONTEND:-}" ] || [ "$c" -nt "$CONTEND" ]; }; then
            CONTEND=$c
        fi
    done
fi
if [ -z "${CONTEND:-}" ]; then
    echo "$0: no contend built: run cargo build (or set CONTEND)" >&2
    exit 2
fi
CONTEND=$(cd "$(dirname "$CONTEND")" && pwd)/$(basename "$CONTEND")
cc=${CC:-cc}
cxx=${CXX:-c++}
mpicc=${MPICC:-mpicc.openmpi}
mpirun=${MPIRUN:-mpirun.openmpi}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A directory holding only `contend`, first on PATH.
mkdir "$work/path" "$work/b"
ln -s "$CONTEND" "$work/path/contend"
PATH=$work/path:$PATH
export PATH
b=$work/b
cd "$b"
# No local path in the binaries' DWARF: sources as examples/..., the build directory as `.`.
cflags="-O2 -g -ffile-prefix-map=$repo/= -ffile-prefix-map=$b=."

# keep NAME RUN PROG...: the run directory RUN becomes fixtures/runs/NAME, with the programs
# PROG (built in $b) in its bin/ and its maps rewritten as described above.
keep() {
    name=$1
    run=$2
    shift 2
    dest=$out/$name
    rm -rf "$dest"
    mkdir -p "$out"
    cp -R "$run" "$dest"
    for p in "$@"; do
        mkdir -p "$dest/bin"
        cp "$b/$p" "$dest/bin/$p"
    done
    find "$dest" -name '*.maps' | while read -r maps; do
        awk -v name="$name" -v build="$b/" -v progs=" $* " '
        {
            # The path is what follows the first five fields; it may hold spaces.
            rest = $0
            for (i = 0; i < 5; i++) sub(/^[ \t]*[^ \t]+/, "", rest)
            sub(/^[ \t]+/, "", rest)
            if (substr(rest, 1, 1) != "/") { print; next }
            base = rest
            sub(/.*\//, "", base)
            if (substr(rest, 1, length(build)) == build && index(progs, " " base " ") > 0)
                path = "/proc/self/cwd/" name "/bin/" base
            else
                path = "/nonexistent-contend-fixture/" base
            print $1, $2, $3, "00:00", 0, path
        }' "$maps" >"$maps.tmp"
        mv "$maps.tmp" "$maps"
    done
    # The sharing runtime names the program by its absolute path (/proc/self/exe).
    find "$dest" -name '*.json' | while read -r f; do
        sed "s|$b/|./|g" "$f" >"$f.tmp"
        mv "$f.tmp" "$f"
    done
    if grep -rl -e "$work" -e "$repo" "$dest" --include='*.maps' --include='*.json' >/dev/null; then
        echo "$0: $name: a local path is left in its maps or JSON" >&2
        exit 1
    fi
    kb=$(du -sk "$dest" | cut -f1)
    echo "fixture $name: ${kb} KB"
    if [ "$kb" -gt 200 ]; then
        echo "$0: warning: $name is over 200 KB: use a shorter run" >&2
    fi
}

for n in $wanted; do
    case $n in
    locks)
        $cc $cflags -pthread -o planted_hold "$repo/examples/locks/planted_hold.c"
        contend record --locks -o locks.run -- ./planted_hold -t 3 -k 20 -H 500 -w 100 -c 5 >/dev/null
        keep locks locks.run planted_hold
        ;;
    heap-locks)
        $cxx $cflags -pthread -o heap_locks "$repo/examples/locks/heap_locks.cpp"
        contend record --locks --alloc-sites -o heap-locks.run -- ./heap_locks -t 2 -k 50 >/dev/null
        keep heap-locks heap-locks.run heap_locks
        ;;
    activity)
        $cc $cflags -pthread -o serialised "$repo/examples/scaling/serialised.c"
        contend record -o activity.run -- ./serialised -t 2 -w 100 -c 25 >/dev/null
        # No lock probe, so no maps: nothing to name, no binary needed.
        keep activity activity.run
        ;;
    mpi)
        $mpicc $cflags -o late_sender "$repo/examples/mpi/late_sender.c"
        launcher=$mpirun
        case $mpirun in *openmpi*) launcher="$mpirun --oversubscribe --mca btl self,vader" ;; esac
        # shellcheck disable=SC2086 # the launcher is a list of words
        contend record --mpi --interval 0 -o mpi.run -- $launcher -np 2 ./late_sender 20 3 >/dev/null
        keep mpi mpi.run late_sender
        ;;
    sharing)
        contend cc -- $cc $cflags "$repo/examples/sharing/reader_writer.c" -o reader_writer
        contend c2c record --window 4096 -o sharing.run -- ./reader_writer -c 100 >/dev/null
        keep sharing sharing.run reader_writer
        ;;
    scale)
        $cc $cflags -pthread -o independent "$repo/examples/scaling/independent.c"
        contend scale --threads 2 --repeat 1 -o scale.run -- ./independent -t '{threads}' -w 100 >/dev/null
        # `contend report SCALE_DIR` reads scale.json: no binary needed.
        keep scale scale.run
        ;;
    esac
done
echo "total: $(du -sk "$out" | cut -f1) KB in $out"
echo "now write the reports they give: UPDATE_GOLDEN=1 cargo test -p contend --test cli fixtures::"
