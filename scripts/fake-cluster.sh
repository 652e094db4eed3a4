#!/usr/bin/env bash
# A cluster on one machine, for tests of MPI recording across hosts (issue 20): N "hosts", each
# a set of Linux namespaces made here, as different as real hosts are where it matters to
# contend and to the MPIs:
#
#   network  its own network namespace, eth0 = 10.77.0.(i+1)/24, joined to the others by a
#            bridge in a namespace of its own (nothing is added to the machine's network:
#            traffic stays between the hosts); IPv6 off;
#   name     nodeI (UTS namespace), and an /etc/hosts naming every node (bind-mounted);
#   clocks   its own time namespace: CLOCK_MONOTONIC and CLOCK_BOOTTIME ahead by
#            i x (STEP s + 7.3 ms) (STEP = 3 h by default: hosts booted hours apart);
#            CLOCK_REALTIME is the machine's on every host (no namespace offsets it), as
#            on a cluster kept in step by PTP;
#   files    its own /tmp and /dev/shm (empty tmpfs) and SysV IPC; everything else is the
#            machine's file system, and the shared directory is at the same path on every
#            host, as a cluster's shared file system.
#
# All hosts' processes are in one PID namespace of the cluster's, whose first process dies
# when this script does (unshare --kill-child): then every process of the cluster dies, and
# the namespaces, links and mounts go with the last of them.
#
# Launchers reach the hosts through a stand-in for ssh ($FAKE_CLUSTER_RSH) that enters a host's
# namespaces and runs the command there with a fresh environment, as sshd would: a rank has
# only what the launcher passed on (Open MPI's -x, Hydra's -genv).
#
# usage:
#   fake-cluster.sh run [OPTIONS] -- COMMAND [ARG...]
#       starts the cluster, runs COMMAND on node0 (the head), tears everything down, and exits
#       with COMMAND's status (1 if the cluster could not be made, 2 for bad usage).
#   fake-cluster.sh start [OPTIONS]        starts it in the background, prints its state
#                                          directory (kept until stop)
#   fake-cluster.sh exec STATE HOST -- COMMAND [ARG...]   COMMAND on HOST (nodeI or I)
#   fake-cluster.sh stop STATE             tears a started cluster down
# OPTIONS:
#   --hosts N       hosts (default 4, at most 200)
#   --step SECONDS  clock offset between consecutive hosts, whole seconds (default 10800);
#                   host i is i x (SECONDS s + 7.3 ms) ahead of node0
#   --shared DIR    the shared directory: an existing directory of the caller's (kept);
#                   default a new one in the state directory, removed at the end
#   --keep DIR      a directory under /tmp or /dev/shm that every host still sees (each host
#                   has its own empty ones): the programs' and contend's, if they are there;
#                   this script's checkout always is
#
# COMMAND (and every exec) has in its environment:
#   FAKE_CLUSTER_HOSTS    node0,node1,...          (Open MPI --host, Hydra -hosts)
#   FAKE_CLUSTER_RSH      the ssh stand-in         (Open MPI --mca plm_rsh_agent,
#                                                   Hydra -launcher ssh -launcher-exec)
#   FAKE_CLUSTER_IFACE    eth0                     (Hydra -iface, UCX_NET_DEVICES)
#   FAKE_CLUSTER_SUBNET   10.77.0.0/24             (Open MPI btl_tcp_if_include, oob_tcp_if_include)
#   FAKE_CLUSTER_SHARED   the shared directory
#   FAKE_CLUSTER_OFFSETS_NS  each host's CLOCK_MONOTONIC offset, ns, comma-separated
#   FAKE_CLUSTER_DIR      the state directory
# e.g.
#   scripts/fake-cluster.sh run -- sh -c 'mpirun.openmpi --host "$FAKE_CLUSTER_HOSTS" \
#       --mca plm_rsh_agent "$FAKE_CLUSTER_RSH" --mca btl self,tcp \
#       --mca btl_tcp_if_include "$FAKE_CLUSTER_SUBNET" \
#       --mca oob_tcp_if_include "$FAKE_CLUSTER_SUBNET" -np 4 hostname'
#   scripts/fake-cluster.sh run -- sh -c 'mpirun.mpich -hosts "$FAKE_CLUSTER_HOSTS" \
#       -launcher ssh -launcher-exec "$FAKE_CLUSTER_RSH" -iface "$FAKE_CLUSTER_IFACE" -np 4 hostname'
#
# Needs root, Linux >= 5.6 (time namespaces), util-linux >= 2.36 (unshare and nsenter with
# --time), iproute2 (ip; the kernel's veth and bridge), perl (sets clock offsets finer than
# unshare's whole seconds). Safe on a shared machine: its state is a private directory
# (mktemp -d in $TMPDIR), it uses no fixed path, and it removes all it made on exit, on error
# and on INT/TERM/HUP; killed with SIGKILL, its processes die too and only the state directory
# is left.
set -euo pipefail

readonly prog=fake-cluster
readonly SUBNET_PREFIX=10.77.0
readonly IFACE=eth0
readonly EXTRA_NS=7300000 # 7.3 ms per host beyond the whole seconds: offsets are not round

die() { # MESSAGE [STATUS]: one line naming the problem and what to do; status 1 (failure)
    printf '%s: %s\n' "$prog" "$1" >&2
    exit "${2:-1}"
}
usage() {
    die "$1 (usage: fake-cluster.sh run [--hosts N] [--step SECONDS] [--shared DIR] -- COMMAND; or start, exec, stop: see the script's header)" 2
}
need() { # COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 || die "\`$1\` is missing (Debian package $2): install it and rerun"
}

check_machine() {
    [ "$(id -u)" = 0 ] || die "needs root (it makes network, mount, time and PID namespaces): run it as root"
    need unshare util-linux
    need nsenter util-linux
    need mount mount
    need ip iproute2
    need perl perl-base
    [ -e /proc/self/ns/time ] ||
        die "this kernel ($(uname -r)) has no time namespaces: needs Linux >= 5.6 with CONFIG_TIME_NS"
    unshare --help 2>&1 | grep -q -- '--monotonic' ||
        die "this unshare has no --time: needs util-linux >= 2.36"
    nsenter --help 2>&1 | grep -q -- '--time' ||
        die "this nsenter has no --time: needs util-linux >= 2.36"
}

# ---- processes -----------------------------------------------------------------------------

start_time() { # PID: field 22 of /proc/PID/stat, to tell a reused pid from ours
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"
}

first_child() { # PID: its first child, or nothing
    local parent=$1 children stat f
    if children=$(cat "/proc/$parent/task/$parent/children" 2>/dev/null); then
        echo "${children%% *}"
        return 0
    fi
    # Kernels without CONFIG_PROC_CHILDREN: the process whose parent it is.
    for f in /proc/[0-9]*/stat; do
        stat=$(cat "$f" 2>/dev/null) || continue
        stat=${stat##*) }
        # shellcheck disable=SC2086
        set -- $stat
        if [ "$2" = "$parent" ]; then
            f=${f#/proc/}
            echo "${f%/stat}"
            return 0
        fi
    done
}

inner_pid() { # PID: its pid in the innermost PID namespace it is in (the cluster's)
    local line
    while read -r line; do
        case $line in NSpid:*)
            # shellcheck disable=SC2086
            set -- $line
            shift $(($# - 1))
            echo "$1"
            return 0
            ;;
        esac
    done <"/proc/$1/status"
}

# The first child of PID once it runs `sleep` (a holder's set-up ends by exec'ing it); the
# script stops with the first line of LOG if PID died first.
wait_ready() { # NAME PID LOG
    local child i why
    for ((i = 0; i < 1000; i++)); do
        child=$(first_child "$2")
        if [ -n "$child" ] && [ "$(cat "/proc/$child/comm" 2>/dev/null || true)" = sleep ]; then
            echo "$child"
            return 0
        fi
        kill -0 "$2" 2>/dev/null || break
        sleep 0.01
    done
    why=$(grep -v '^ *$' "$3" 2>/dev/null | head -n 1 || true)
    die "$1 could not be made: ${why:-its set-up did not finish within 10 s}"
}

# ---- making the cluster --------------------------------------------------------------------
# STATE/ (mode 0700; visible on every host, at the same path)
#   env        the FAKE_CLUSTER_* variables, NAME=VALUE lines
#   nodes      per host: name, pid (here), its start time, pid in the cluster, address
#   cluster    pid (here) of the cluster's unshare and of its first process, and its PID namespace
#   hosts      every host's /etc/hosts
#   rsh        the ssh stand-in (runs this script's `rsh` with this state directory)
#   shared/    the shared directory, unless --shared
#   NAME/      per holder: log (its stderr), stage-N (its tmpfs before they move into place)

state=""
cluster_unshare=""

# The cluster's PID namespace: its first process (sleep) is killed when unshare dies, and every
# process in the namespace with it.
start_pid_namespace() {
    "${session[@]}" unshare --pid --fork --kill-child --mount --mount-proc --propagation private \
        -- sleep infinity </dev/null >/dev/null 2>"$state/cluster.log" &
    cluster_unshare=$!
    cluster_first=$(wait_ready "the cluster's PID namespace" "$cluster_unshare" "$state/cluster.log")
    echo "$cluster_unshare $(start_time "$cluster_unshare") $cluster_first $(readlink "/proc/$cluster_first/ns/pid")" \
        >"$state/cluster"
}

# One host's (or the switch's) namespaces, held by a process in the cluster's PID namespace:
# perl unshares a time namespace and writes its offsets (finer than unshare --monotonic's whole
# seconds; only possible before any process is in it), then execs unshare, which makes the
# other namespaces and runs SETUP (which ends by exec'ing sleep) in all of them. Prints the
# pid of the nsenter whose child the holder is.
start_holder() { # NAME OFFSET_NS SETUP
    local name=$1 total=$2 setup=$3 dir=$state/$1
    mkdir -m 700 "$dir"
    nsenter -t "$cluster_first" --pid -- perl -e '
        use strict;
        my ($s, $ns, @cmd) = @ARGV;
        my $nr = eval { require "syscall.ph"; &SYS_unshare() };
        my %unshare_nr = (x86_64 => 272, aarch64 => 97, riscv64 => 97, ppc64le => 282, s390x => 303);
        $nr //= $unshare_nr{(POSIX::uname())[4]} if eval { require POSIX; 1 };
        defined $nr or die "no unshare system call number known for this architecture\n";
        syscall($nr, 0x80) == 0 or die "unshare(CLONE_NEWTIME): $!\n";
        open(my $t, ">", "/proc/self/timens_offsets") or die "timens_offsets: $!\n";
        syswrite($t, "monotonic $s $ns\n") or die "CLOCK_MONOTONIC offset: $!\n";
        syswrite($t, "boottime $s $ns\n") or die "CLOCK_BOOTTIME offset: $!\n";
        close $t;
        exec @cmd or die "$cmd[0]: $!\n";
    ' $((total / 1000000000)) $((total % 1000000000)) \
        unshare --net --uts --ipc --mount --propagation private -- /bin/sh -c "$setup" "$name" \
        </dev/null >/dev/null 2>"$dir/log" &
    echo $!
}

# What a host's holder runs: its hostname, /etc/hosts, /proc of the cluster's PID namespace,
# fresh /tmp and /dev/shm in which the shared and state directories keep their paths. Each
# tmpfs is staged in the state directory, the kept directories bound inside it if they lie
# below, and then moved into place (the one holding the state directory last, so that the
# other's stage is still in reach).
host_setup() { # NAME
    local mp stage keep n=0 order=()
    for mp in /dev/shm /tmp; do
        case $state in "$mp"/*) order+=("$mp") ;; *) order=("$mp" "${order[@]}") ;; esac
    done
    echo "set -eu"
    printf "echo %q > /proc/sys/kernel/hostname\n" "$1"
    printf "mount --bind %q /etc/hosts\n" "$state/hosts"
    echo "mount -t proc -o nosuid,nodev,noexec proc /proc"
    for mp in "${order[@]}"; do
        stage=$state/$1/stage-$n
        printf "mkdir -m 700 %q\n" "$stage"
        printf "mount -t tmpfs -o mode=1777,nosuid,nodev,size=25%% %q %q\n" "$prog" "$stage"
        for keep in "$shared" "$state" "${keeps[@]}"; do
            case $keep in "$mp"/*)
                printf "mkdir -p %q\n" "$stage/${keep#"$mp"/}"
                printf "mount --bind %q %q\n" "$keep" "$stage/${keep#"$mp"/}"
                ;;
            esac
        done
        n=$((n + 1))
    done
    n=0
    for mp in "${order[@]}"; do
        printf "mount --move %q %q\n" "$state/$1/stage-$n" "$mp"
        n=$((n + 1))
    done
    echo "exec sleep infinity"
}

in_net() { # PID COMMAND...: COMMAND in PID's network namespace
    local pid=$1
    shift
    nsenter -t "$pid" --net -- "$@"
}

start_cluster() { # HOSTS STEP
    local hosts=$1 step=$2 i p total switch launcher pids=() launchers=() offsets=() names=()
    check_machine
    state=$(mktemp -d -t fake-cluster.XXXXXXXXXX)
    state=$(cd -P "$state" && pwd)
    case $state in *$'\n'*) die "\$TMPDIR holds a newline: use another" 2 ;; esac
    if [ -z "$shared" ]; then
        mkdir -m 700 "$state/shared"
        shared=$state/shared
    fi
    {
        echo "127.0.0.1 localhost"
        for ((i = 0; i < hosts; i++)); do echo "$SUBNET_PREFIX.$((i + 1)) node$i"; done
    } >"$state/hosts"
    chmod 644 "$state/hosts"

    start_pid_namespace
    launcher=$(start_holder switch 0 'exec sleep infinity')
    for ((i = 0; i < hosts; i++)); do
        names+=("node$i")
        total=$((i * (step * 1000000000 + EXTRA_NS)))
        offsets+=("$total")
        launchers+=("$(start_holder "node$i" "$total" "$(host_setup "node$i")")")
    done
    switch=$(wait_ready "the network switch" "$launcher" "$state/switch/log")
    for ((i = 0; i < hosts; i++)); do
        p=$(wait_ready "host node$i" "${launchers[$i]}" "$state/node$i/log")
        pids+=("$p")
    done

    in_net "$switch" ip link add br0 type bridge ||
        die "cannot make a bridge (ip link add type bridge): the kernel needs CONFIG_BRIDGE"
    in_net "$switch" ip link set br0 up
    for ((i = 0; i < hosts; i++)); do
        p=${pids[$i]}
        # IPv6 off before the link is up: no link-local addresses for an MPI to pick.
        in_net "$p" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6' 2>/dev/null || true
        in_net "$p" ip link add "$IFACE" type veth peer name "port$i" netns "$switch" ||
            die "cannot make a veth pair (ip link add type veth): the kernel needs CONFIG_VETH"
        in_net "$p" ip addr add "$SUBNET_PREFIX.$((i + 1))/24" dev "$IFACE"
        in_net "$p" ip link set lo up
        in_net "$p" ip link set "$IFACE" up
        in_net "$switch" ip link set "port$i" master br0
        in_net "$switch" ip link set "port$i" up
    done

    for ((i = 0; i < hosts; i++)); do
        p=${pids[$i]}
        echo "node$i $p $(start_time "$p") $(inner_pid "$p") $SUBNET_PREFIX.$((i + 1))"
    done >"$state/nodes"
    {
        echo "FAKE_CLUSTER_DIR=$state"
        echo "FAKE_CLUSTER_SHARED=$shared"
        echo "FAKE_CLUSTER_HOSTS=$(
            IFS=,
            echo "${names[*]}"
        )"
        echo "FAKE_CLUSTER_RSH=$state/rsh"
        echo "FAKE_CLUSTER_IFACE=$IFACE"
        echo "FAKE_CLUSTER_SUBNET=$SUBNET_PREFIX.0/24"
        echo "FAKE_CLUSTER_OFFSETS_NS=$(
            IFS=,
            echo "${offsets[*]}"
        )"
    } >"$state/env"
    # The launchers take one executable: this script's `rsh` with this cluster's state.
    printf '#!/bin/sh\nexec %q rsh %q "$@"\n' "$self" "$state" >"$state/rsh.tmp"
    chmod 700 "$state/rsh.tmp"
    mv "$state/rsh.tmp" "$state/rsh"
}

# ---- running on a host ---------------------------------------------------------------------

# The pid to enter HOST by (nodeI, I or its address) and whether the PID namespace must be
# entered too: "PID pid" from outside the cluster (checked against its start time: a pid
# reused after the cluster died is not entered), "PID" from inside it (the pid there).
host_target() { # STATE HOST
    local want=$2 name pid started inner address cluster_pidns
    case $want in *[!0-9]*) ;; *) want=node$want ;; esac
    read -r _ _ _ cluster_pidns <"$1/cluster"
    while read -r name pid started inner address; do
        [ "$name" = "$want" ] || [ "$address" = "$want" ] || continue
        if [ "$(readlink /proc/self/ns/pid)" = "$cluster_pidns" ]; then
            echo "$inner"
        else
            [ "$(start_time "$pid")" = "$started" ] ||
                die "host $want of $1 is gone (the cluster was stopped or died): start one again"
            echo "$pid pid"
        fi
        return 0
    done <"$1/nodes"
    die "no host $2 in the cluster $1 (its hosts: $(cut -d' ' -f1 "$1/nodes" | tr '\n' ' '))" 2
}

enter() { # TARGET (from host_target): the nsenter command entering that host, in $entered
    # shellcheck disable=SC2086
    set -- $1
    entered=(nsenter -t "$1" --net --uts --ipc --mount --time)
    [ $# -lt 2 ] || entered+=(--pid)
    entered+=(--)
}

# COMMAND on HOST with the cluster's variables; in the caller's working directory if the host
# sees it, else in the shared directory.
exec_on() { # STATE HOST COMMAND...
    local dir=$1 target line vars=() shared_dir=""
    target=$(host_target "$dir" "$2")
    shift 2
    while IFS= read -r line; do
        vars+=("$line")
        case $line in FAKE_CLUSTER_SHARED=*) shared_dir=${line#*=} ;; esac
    done <"$dir/env"
    enter "$target"
    "${entered[@]}" env "${vars[@]}" \
        /bin/sh -c 'cd "$1" 2>/dev/null || cd "$2" || exit 1; shift 2; exec "$@"' \
        sh "$PWD" "$shared_dir" "$@"
}

# The ssh stand-in: `rsh STATE [SSH OPTIONS] HOST COMMAND...` runs COMMAND (its words joined by
# spaces and read by a shell, as ssh does) on HOST, with a fresh environment (PATH and the
# user's names, as sshd sets them) in $HOME. Options are skipped (Hydra passes -x). Exit status
# 255 for its own errors, as ssh.
rsh() { # STATE ARGS...
    local dir=$1 target
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
        --)
            shift
            break
            ;;
        -*) shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "rsh: no host and command (rsh STATE [OPTIONS] HOST COMMAND)" 255
    target=$(host_target "$dir" "$1") || exit 255
    shift
    enter "$target"
    exec "${entered[@]}" env -i PATH="$PATH" HOME="${HOME:-/}" USER="${USER:-$(id -un)}" \
        LOGNAME="${LOGNAME:-$(id -un)}" SHELL=/bin/sh \
        /bin/sh -c 'cd "$HOME" 2>/dev/null || cd /; exec /bin/sh -c "$1"' sh "$*"
}

# ---- tearing down --------------------------------------------------------------------------

# Kills the cluster's unshare: its first process gets SIGKILL (--kill-child), and with it
# every process of the cluster; the namespaces, links and mounts go with their last process.
# Waits (bounded) until the first process is gone, removes the state directory (a --shared
# directory is the caller's and stays).
stop_cluster() { # STATE
    local dir=$1 unshare_pid started first i
    if [ -n "$cluster_unshare" ]; then
        kill -KILL "$cluster_unshare" 2>/dev/null || true
        wait "$cluster_unshare" 2>/dev/null || true
    fi
    if read -r unshare_pid started first _ <"$dir/cluster" 2>/dev/null; then
        # Only the unshare this cluster started (a reused pid runs something else).
        if [ "$(start_time "$unshare_pid")" = "$started" ]; then kill -KILL "$unshare_pid" 2>/dev/null || true; fi
        for ((i = 0; i < 500; i++)); do
            [ -d "/proc/$first" ] || break
            sleep 0.01
        done
    fi
    # Nothing of the hosts is mounted in this mount namespace (theirs were private).
    rm -rf --one-file-system -- "$dir"
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    if [ -n "$state" ]; then stop_cluster "$state"; fi
    exit "$status"
}

# ---- the commands --------------------------------------------------------------------------

parse_options() { # sets hosts, step, shared; the rest in $rest
    hosts=4
    step=10800
    while [ $# -gt 0 ]; do
        case $1 in
        --hosts | --step | --shared | --keep)
            [ $# -ge 2 ] || usage "$1 needs a value"
            case $1 in
            --hosts) hosts=$2 ;;
            --step) step=$2 ;;
            --shared) shared=$2 ;;
            --keep)
                [ -d "$2" ] && [ ! -L "$2" ] || usage "--keep $2: not a directory"
                keeps+=("$(cd -P "$2" && pwd)")
                ;;
            esac
            shift 2
            ;;
        --)
            shift
            break
            ;;
        *) usage "unknown option $1" ;;
        esac
    done
    case $hosts in '' | *[!0-9]*) usage "--hosts $hosts: not a number" ;; esac
    [ ${#hosts} -le 3 ] && ((10#$hosts >= 1 && 10#$hosts <= 200)) || usage "--hosts $hosts: from 1 to 200"
    hosts=$((10#$hosts))
    case $step in '' | *[!0-9]*) usage "--step $step: not a whole number of seconds" ;; esac
    [ ${#step} -le 8 ] || usage "--step $step: at most 99999999 s"
    step=$((10#$step))
    if [ -n "$shared" ]; then
        [ -d "$shared" ] && [ ! -L "$shared" ] || usage "--shared $shared: not a directory"
        shared=$(cd -P "$shared" && pwd)
        [ -O "$shared" ] || usage "--shared $shared: not yours (owner $(stat -c %U "$shared"))"
        [ "$shared" != / ] || usage "--shared /: give a directory of its own"
        case $shared in *$'\n'*) usage "--shared: a path with a newline" ;; esac
    fi
    rest=("$@")
}

self=$(cd "$(dirname "$0")" && pwd -P)/$(basename "$0")
shared=""
# Directories under /tmp or /dev/shm that stay visible on every host (its own tmpfs hides the
# rest): this script's checkout (the script is the hosts' ssh stand-in) and each --keep.
keeps=("$(dirname "$(dirname "$self")")")
session=()
[ $# -ge 1 ] || usage "no command"
cmd=$1
shift
case $cmd in
run)
    parse_options "$@"
    [ ${#rest[@]} -ge 1 ] || usage "run: no COMMAND after --"
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    start_cluster "$hosts" "$step"
    # In the background, so that a signal to this script tears down at once (the command, in
    # the cluster, dies with it); its standard input is this script's.
    exec_on "$state" node0 "${rest[@]}" <&0 &
    set +e
    wait $!
    status=$?
    set -e
    exit "$status"
    ;;
start)
    parse_options "$@"
    [ ${#rest[@]} -eq 0 ] || usage "start takes no COMMAND (use run, or exec after start)"
    # A session of its own: the cluster outlives this script and the caller's terminal.
    session=(setsid)
    trap cleanup EXIT INT TERM HUP
    start_cluster "$hosts" "$step"
    trap - EXIT INT TERM HUP
    echo "$state"
    ;;
exec)
    [ $# -ge 4 ] && [ "$3" = -- ] || usage "exec STATE HOST -- COMMAND"
    [ -r "$1/nodes" ] || usage "exec: $1 is not a fake cluster's state directory"
    dir=$1 host=$2
    shift 3
    exec_on "$dir" "$host" "$@"
    ;;
rsh)
    [ $# -ge 1 ] && [ -r "$1/nodes" ] || die "rsh: no fake cluster's state directory given" 255
    rsh "$@"
    ;;
stop)
    [ $# -eq 1 ] || usage "stop STATE"
    [ -r "$1/cluster" ] && [ -O "$1" ] || usage "stop: $1 is not a fake cluster's state directory of yours"
    stop_cluster "$(cd -P "$1" && pwd)"
    ;;
*) usage "unknown command $cmd" ;;
esac
