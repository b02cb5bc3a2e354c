#!/usr/bin/env bash
# A private single-node Slurm cluster on this machine, for the Slurm tests
# (tests/python/test_slurm_live.py) and for trying the Slurm path by hand.
#
#   scripts/local_slurm.sh start  [DIR]   start munged, slurmctld and slurmd; wait until the node is idle
#   scripts/local_slurm.sh stop   [DIR]   cancel its jobs, stop the daemons (logs stay in DIR)
#   scripts/local_slurm.sh status [DIR]   which daemons run, and sinfo; exit 0 when all three run, 3 if not
#   scripts/local_slurm.sh env    [DIR]   the client settings, for: eval "$(scripts/local_slurm.sh env)"
#
# DIR (default /tmp/threadburn-slurm) holds everything: slurm.conf, the munge
# key and socket, the daemons' state, spool, logs and pid files, and the job
# completion record (jobcomp.txt). Nothing under /etc or /run is used, so a
# system Slurm or munge is left alone. Clients find the cluster through
# SLURM_CONF=DIR/slurm.conf; slurm.conf's AuthInfo names the private munge
# socket, so nothing else is needed.
#
# The node is this host (`hostname -s`) with nproc CPUs and /proc/meminfo's
# memory, in one partition "threadburn" (Default=YES). CPUs are allocated one
# per task with no oversubscription: non-exclusive array tasks run side by side
# up to nproc at a time, and an --exclusive array runs its tasks one after another.
# No accounting database (sacct answers "accounting storage is disabled"):
# finished jobs stay visible to `squeue -t all` and `scontrol show job` for
# MinJobAge (1 h), and each finished job, array tasks included (ArrayJobId=,
# ArrayTaskId=, JobState=), is appended for good to DIR/jobcomp.txt.
#
# Needs root (slurmd starts jobs as the submitting user) and the Debian
# packages slurm-wlm and munge. Ports: THREADBURN_SLURM_PORT (default 6917) for
# slurmctld and that + 1 for slurmd, away from a system Slurm's 6817/6818.
set -euo pipefail
# shellcheck source=scripts/slurm_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm_conf.sh"

die() { echo "local_slurm.sh: $*" >&2; exit 1; }

usage() {
    echo "usage: $0 {start|stop|status|env} [DIR]   (DIR default: /tmp/threadburn-slurm)" >&2
    exit 2
}

if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
cmd=$1
DIR=${2:-/tmp/threadburn-slurm}
case "$cmd" in start|stop|status|env) ;; *) usage ;; esac
case "$DIR" in *[[:space:]]*|*'"'*|*"'"*|*'#'*) die "DIR must not contain spaces, quotes or '#': $DIR" ;; esac
case "$DIR" in /*) ;; *) DIR="$(pwd)/$DIR" ;; esac
DIR=${DIR%/}
# How to name this cluster in the hints printed: no DIR for the default one.
if [ $# -ge 2 ]; then HINT_DIR=" $DIR"; else HINT_DIR=""; fi

CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket
PORT=${THREADBURN_SLURM_PORT:-6917}

PIDFILE_munged=$DIR/munge/munged.pid
PIDFILE_slurmctld=$DIR/run/slurmctld.pid
PIDFILE_slurmd=$DIR/run/slurmd.pid
LOG_munged=$DIR/log/munged.log
LOG_slurmctld=$DIR/log/slurmctld.log
LOG_slurmd=$DIR/log/slurmd.log

need_root() {
    local why="slurmd must run as root to start jobs as the users who submit them"
    [ "$cmd" = stop ] && why="the daemons it stops run as root"
    [ "$EUID" -eq 0 ] || die "'$cmd' must run as root ($why); try: sudo $0 $cmd$HINT_DIR"
}

need_tools() {
    local missing=() t
    for t in munged mungekey munge slurmctld slurmd sinfo scontrol squeue scancel; do
        command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] || missing+=("$t")
    done
    [ ${#missing[@]} -eq 0 ] || die "not installed: ${missing[*]} (install slurm-wlm and munge: apt-get install slurm-wlm munge)"
}

# Debian puts the daemons in /usr/sbin, which a non-login root shell may lack.
PATH=$PATH:/usr/sbin:/sbin

# pid of a daemon when its pid file names a live process of that program, else "".
daemon_pid() {
    local name=$1 file pid
    file="PIDFILE_$name"; file=${!file}
    [ -r "$file" ] || return 0
    { read -r pid <"$file"; } 2>/dev/null || true
    pid=${pid//[!0-9]/}
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
    # comm is at most 15 characters: "slurmctld", "slurmd", "munged". A
    # zombie (dead, not reaped yet) does not count.
    proc_comm "$pid"; [ "$REPLY" = "$name" ] || return 0
    proc_stat "$pid" 3; [ "$REPLY" = Z ] || echo "$pid"
    return 0
}

running_count() {
    local n=0 d
    for d in munged slurmctld slurmd; do [ -n "$(daemon_pid "$d")" ] && n=$((n + 1)); done
    echo "$n"
}

log_tails() {
    local f
    for f in "$LOG_munged" "$LOG_slurmctld" "$LOG_slurmd"; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f:" >&2
        tail -n 15 "$f" >&2
    done
}

fail_start() {
    echo "local_slurm.sh: $*" >&2
    log_tails
    stop_daemons quiet
    exit 1
}

client() { SLURM_CONF=$CONF "$@"; }

# Wait up to $2 seconds for a process to exit.
wait_gone() {
    local pid=$1 t=$(( $2 * 10 ))
    while [ -d "/proc/$pid" ] && [ "$t" -gt 0 ]; do
        # A zombie child of ours counts as gone.
        proc_stat "$pid" 3; [ "$REPLY" = Z ] && return 0
        sleep 0.1; t=$((t - 1))
    done
    [ ! -d "/proc/$pid" ]
}

stop_one() {
    local name=$1 pid
    pid=$(daemon_pid "$name")
    [ -n "$pid" ] || return 1
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" 15; then
        echo "local_slurm.sh: $name (pid $pid) ignored SIGTERM for 15 s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" 5 || die "$name (pid $pid) does not exit"
    fi
    return 0
}

# slurmstepd processes of this cluster's slurmd: they keep slurmd's log open.
stray_stepds() {
    local p
    for p in /proc/[0-9]*; do
        proc_comm "${p#/proc/}"; [ "$REPLY" = slurmstepd ] || continue
        if find "$p/fd" -maxdepth 1 -lname "$LOG_slurmd" 2>/dev/null | grep -q .; then
            echo "${p#/proc/}"
        fi
    done
    return 0
}

# The given pids and all their descendants.
with_descendants() {
    local -A parent=()
    local p pp pid changed out=" $* "
    for p in /proc/[0-9]*; do
        proc_stat "${p#/proc/}" 4; pp=$REPLY
        [ -n "$pp" ] && parent[${p#/proc/}]=$pp
    done
    changed=1
    while [ "$changed" = 1 ]; do
        changed=0
        for pid in "${!parent[@]}"; do
            case "$out" in *" $pid "*) continue ;; esac
            case "$out" in *" ${parent[$pid]} "*) out+="$pid "; changed=1 ;; esac
        done
    done
    # shellcheck disable=SC2086 # word splitting trims the list
    echo $out
}

stop_daemons() {
    local quiet=${1:-} stopped=() d pid left
    # Cancel this cluster's jobs while slurmctld and slurmd still run, so their
    # processes are ended by Slurm rather than orphaned.
    if [ -n "$(daemon_pid slurmctld)" ] && [ -n "$(daemon_pid slurmd)" ]; then
        if [ -n "$(client squeue -h -o %i 2>/dev/null | head -n 1)" ]; then
            client squeue -h -o %i 2>/dev/null | xargs -r -n 50 env SLURM_CONF="$CONF" scancel 2>/dev/null || true
            for _ in $(seq 100); do
                [ -z "$(client squeue -h -t RUNNING,COMPLETING,PENDING,SUSPENDED -o %i 2>/dev/null | head -n 1)" ] && break
                sleep 0.1
            done
        fi
    fi
    for d in slurmd slurmctld munged; do
        stop_one "$d" && stopped+=("$d")
    done
    left=$(stray_stepds)
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        left=$(with_descendants $left)
        echo "local_slurm.sh: killing leftover job step processes: $left" >&2
        for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
        for pid in $left; do wait_gone "$pid" 5 || true; done
    fi
    rm -f "$PIDFILE_munged" "$PIDFILE_slurmctld" "$PIDFILE_slurmd"
    [ -n "$quiet" ] && return 0
    if [ ${#stopped[@]} -eq 0 ]; then
        echo "local Slurm in $DIR: nothing was running"
    else
        echo "local Slurm in $DIR: stopped ${stopped[*]} (logs in $DIR/log)"
    fi
}

write_conf() {
    local node cpus mem_kb mem smem hw topo=""
    node=$(hostname -s)
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem=$((mem_kb / 1024))
    # slurmd drains a node configured with more memory than it finds; take the
    # smaller of /proc/meminfo and slurmd's own count.
    hw=$(slurmd -C 2>/dev/null | head -n 1 || true)
    smem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
    if [ -n "$smem" ] && [ "$smem" -lt "$mem" ]; then mem=$smem; fi
    # slurmd's socket/core layout too, when it counts the CPUs as nproc does.
    if [[ "$hw" =~ CPUs=([0-9]+)\ Boards=([0-9]+)\ SocketsPerBoard=([0-9]+)\ CoresPerSocket=([0-9]+)\ ThreadsPerCore=([0-9]+) ]] \
        && [ "${BASH_REMATCH[1]}" = "$cpus" ]; then
        topo=" Boards=${BASH_REMATCH[2]} SocketsPerBoard=${BASH_REMATCH[3]} CoresPerSocket=${BASH_REMATCH[4]} ThreadsPerCore=${BASH_REMATCH[5]}"
    fi
    {
        echo "# Written by scripts/local_slurm.sh start; rewritten at every start."
        echo "ClusterName=threadburn"
        echo "SlurmctldHost=$node(127.0.0.1)"
        slurm_conf_common "$DIR" "$MUNGE_SOCKET" "$PORT"
        cat <<EOF
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$PIDFILE_slurmctld
SlurmdPidFile=$PIDFILE_slurmd
SlurmctldLogFile=$LOG_slurmctld
SlurmdLogFile=$LOG_slurmd
SlurmdTimeout=300
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus$topo RealMemory=$mem State=UNKNOWN
# OverSubscribe=NO: CPUs are never shared, but jobs share the node CPU by CPU;
# --exclusive takes the whole node.
PartitionName=threadburn Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    } >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    : >"$DIR/plugstack.conf"
}

# Every second of a wait: fail at once if a daemon died (it will not come back).
check_alive() {
    local d
    [ $(($1 % 10)) -eq 0 ] || return 0
    for d in munged slurmctld slurmd; do
        [ -n "$(daemon_pid "$d")" ] || fail_start "$d exited during start-up"
    done
}

start_cluster() {
    local n node t state since registered left
    need_tools
    if [ -e "$DIR" ] && [ ! -d "$DIR" ]; then die "$DIR exists and is not a directory"; fi
    mkdir -p "$DIR" 2>/dev/null || die "cannot create the directory $DIR"
    if ! { [ -w "$DIR" ] && touch "$DIR/.writable" 2>/dev/null; }; then die "$DIR is not writable"; fi
    rm -f "$DIR/.writable"
    n=$(running_count)
    if [ "$n" -eq 3 ]; then
        echo "local Slurm in $DIR: already running; use it with: eval \"\$($0 env$HINT_DIR)\""
        return 0
    fi
    if [ "$n" -gt 0 ]; then
        echo "local Slurm in $DIR: only partly running; restarting it" >&2
        stop_daemons quiet
    fi
    # munged refuses group/other-writable directories on its paths.
    mkdir -p "$DIR/munge" "$DIR/log" "$DIR/run" "$DIR/state" "$DIR/spool"
    # (The key is 0600; the socket's directory is readable by every user.)
    chmod 0755 "$DIR" "$DIR/munge" "$DIR/log" "$DIR/run" "$DIR/state" "$DIR/spool"
    if [ ! -s "$DIR/munge/munge.key" ]; then
        mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null 2>&1 \
            || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none \
            || die "cannot create the munge key in $DIR/munge"
    fi
    chmod 0600 "$DIR/munge/munge.key"
    write_conf
    node=$(hostname -s)

    munged --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$PIDFILE_munged" --log-file="$LOG_munged" \
        --seed-file="$DIR/munge/munged.seed" >>"$LOG_munged" 2>&1 \
        || fail_start "munged did not start"
    for t in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
    munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1 \
        || fail_start "munged runs but a munge/unmunge round trip through $MUNGE_SOCKET fails"

    slurmctld -f "$CONF" >>"$LOG_slurmctld" 2>&1 || fail_start "slurmctld did not start"
    since=$(date +%s)
    slurmd -f "$CONF" -N "$node" >>"$LOG_slurmd" 2>&1 || fail_start "slurmd did not start"

    # Wait until this slurmd has registered with slurmctld (after a restart
    # slurmctld shows the node's saved state before slurmd registers).
    registered=0
    for t in $(seq 300); do
        registered=$(client scontrol -o show node "$node" 2>/dev/null \
            | sed -n 's/.*SlurmdStartTime=\([^ ]*\).*/\1/p')
        registered=$(date -d "$registered" +%s 2>/dev/null || echo 0)
        [ "$registered" -ge "$since" ] && break
        check_alive "$t"
        sleep 0.1
    done
    [ "$registered" -ge "$since" ] || fail_start "slurmd on $node did not register with slurmctld within 30 s"
    # No job can be running yet. Jobs that slurmctld recovered from its saved
    # state were left by a stop that could not cancel them (slurmctld was
    # already dead): their processes are gone, so cancel them, pending ones too.
    left=$(client squeue -h -o %i 2>/dev/null | tr '\n' ' ' || true)
    if [ -n "${left// /}" ]; then
        echo "local_slurm.sh: cancelling jobs left from an unclean stop: $left" >&2
        # shellcheck disable=SC2086
        client scancel $left 2>/dev/null || true
    fi
    # Then wait until the node is idle.
    state=""
    for t in $(seq 300); do
        state=$(client sinfo -h -n "$node" -p threadburn -o %t 2>/dev/null | head -n 1 || true)
        [ "$state" = idle ] && break
        check_alive "$t"
        sleep 0.1
    done
    [ "$state" = idle ] || fail_start "node $node is not idle after 30 s (sinfo state: '${state:-no answer}')"
    echo "local Slurm in $DIR: running (node $node, $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) CPUs, partition threadburn); use it with: eval \"\$($0 env$HINT_DIR)\""
}

status_cluster() {
    local d pid n
    for d in munged slurmctld slurmd; do
        pid=$(daemon_pid "$d")
        if [ -n "$pid" ]; then echo "$d: running (pid $pid)"; else echo "$d: not running"; fi
    done
    n=$(running_count)
    if [ "$n" -eq 3 ]; then
        client sinfo || true
        return 0
    fi
    return 3
}

case "$cmd" in
    start)
        need_root
        start_cluster
        ;;
    stop)
        need_root
        [ -d "$DIR" ] || { echo "local Slurm in $DIR: nothing was running"; exit 0; }
        stop_daemons
        ;;
    status)
        status_cluster
        ;;
    env)
        [ -r "$CONF" ] || echo "local_slurm.sh: warning: $CONF does not exist yet (run: $0 start$HINT_DIR)" >&2
        echo "export SLURM_CONF=$CONF"
        echo "export THREADBURN_SLURM_DIR=$DIR"
        ;;
esac
