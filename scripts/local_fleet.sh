#!/usr/bin/env bash
# A private two-node Slurm cluster on this machine: two "hosts" made of Linux
# network namespaces, for the fleet tests (tests/fleet/) and for trying the
# multi-node paths (sweep --slurm over nodes, ddp_step across hosts) by hand.
#
#   scripts/local_fleet.sh start     [DIR]  the network, munged, slurmctld, one slurmd per node; wait until both are idle
#   scripts/local_fleet.sh stop      [DIR]  cancel the jobs, stop the daemons, remove the network (logs stay in DIR)
#   scripts/local_fleet.sh status    [DIR]  daemons, namespaces, sinfo; exit 0 when everything runs, 3 if not
#   scripts/local_fleet.sh env       [DIR]  the client settings, for: eval "$(scripts/local_fleet.sh env)"
#   scripts/local_fleet.sh kill-node N [DIR]  node N (1 or 2) dies: SIGKILL to every process in its namespace
#   scripts/local_fleet.sh revive-node N [DIR]  node N's slurmd again; wait until the node is idle
#   scripts/local_fleet.sh leftovers [DIR]  what a stop left behind (namespaces, links, daemons); exit 1 if any
#   scripts/local_fleet.sh on {1|2|x} CMD...  run CMD on node 1, 2 or the unreachable host (its network, name, /etc/hosts)
#
# The network, every name starting with "tbfleet":
#   tbfleet-br            a bridge on the host side, NET.1/24 (slurmctld's address)
#   tbfleet-n1, -n2       the nodes' namespaces, each joined to the bridge by a veth
#                         pair (tbfleet-h1/-h2 on the host side, eth0 inside), NET.2 and NET.3;
#                         hostname tbfleet1 / tbfleet2 (a UTS namespace of their own)
#   tbfleet-x             an unreachable "host": NET.9/24 on a veth whose peer is down,
#                         so whatever it sends into the /24 vanishes (connections time out)
# NET is the first of 10.217.91 .. 10.217.99 that no route or address of this
# machine overlaps (THREADBURN_FLEET_NET picks one). The namespaces have no
# default route, and the bridge no uplink: nothing can leave the /24, and the
# host's only route into it is the bridge. Nothing is forwarded (ip_forward is
# left alone): node to node goes over the bridge, host to node over the veth.
# Each node's /etc/hosts (ip-netns' /etc/netns/<ns>/hosts) adds the nodes'
# names, so SLURM_JOB_NODELIST's names resolve inside the nodes as on a cluster.
#
# DIR (default /tmp/threadburn-fleet) holds slurm.conf, the munge key and
# socket (a file: the nodes share the host's file system, only their network
# is their own), state, per-node spool/log/pid files and jobcomp.txt. Ports:
# THREADBURN_FLEET_PORT (default 6957) for slurmctld, + 1 for each slurmd (on
# its own address), away from local_slurm.sh's 6917/6918 and its tests' 6937.
# The nodes are virtual: both advertise this machine's CPUs, which they share.
# A node is declared DOWN SlurmdTimeout (10 s) after its slurmd stops answering.
# Needs root, slurm-wlm, munge and iproute2.
set -euo pipefail
# shellcheck source=scripts/slurm_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm_conf.sh"

die() { echo "local_fleet.sh: $*" >&2; exit 1; }
usage() {
    echo "usage: $0 {start|stop|status|env|leftovers} [DIR] | $0 {kill-node|revive-node} N [DIR] | $0 on {1|2|x} CMD..." >&2
    echo "       (DIR default: /tmp/threadburn-fleet)" >&2
    exit 2
}

[ $# -ge 1 ] || usage
cmd=$1; shift
NODE_ARG=""
if [ "$cmd" = on ]; then
    [ $# -ge 2 ] || usage
    [ "$EUID" -eq 0 ] || die "'on' must run as root (entering a namespace needs it)"
    case "$1" in 1|2) ns=tbfleet-n$1; name=tbfleet$1 ;; x) ns=tbfleet-x; name=tbfleet-x ;; *) die "on: 1, 2 or x, not '$1'" ;; esac
    shift
    [ -e "/run/netns/$ns" ] || die "on: namespace $ns does not exist (is the fleet started?)"
    ON=("$ns" "$name" "$@")
fi
if [ "$cmd" = kill-node ] || [ "$cmd" = revive-node ]; then
    [ $# -ge 1 ] || usage
    NODE_ARG=$1; shift
    case "$NODE_ARG" in 1|2) ;; *) die "$cmd: N is 1 or 2, not '$NODE_ARG'" ;; esac
fi
[ "$cmd" = on ] || [ $# -le 1 ] || usage
case "$cmd" in start|stop|status|env|leftovers|kill-node|revive-node|on) ;; *) usage ;; esac
[ "$cmd" = on ] && set --
DIR=${1:-/tmp/threadburn-fleet}
case "$DIR" in *[[:space:]]*|*'"'*|*"'"*|*'#'*|*%*) die "DIR must not contain spaces, quotes, '#' or '%': $DIR" ;; esac
case "$DIR" in /*) ;; *) DIR="$(pwd)/$DIR" ;; esac
DIR=${DIR%/}

PATH=$PATH:/usr/sbin:/sbin
CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket
PORT=${THREADBURN_FLEET_PORT:-6957}
NODES=(tbfleet1 tbfleet2)
NETNS=(tbfleet-n1 tbfleet-n2)
HOSTVETH=(tbfleet-h1 tbfleet-h2)
ISOLATED=tbfleet-x
BRIDGE=tbfleet-br
PIDFILE_munged=$DIR/munge/munged.pid
PIDFILE_slurmctld=$DIR/run/slurmctld.pid
LOG=$DIR/log

# pid of a daemon when its pid file names a live (not zombie) process of that program, else "".
pid_of() {
    local name=$1 file=$2 pid
    [ -r "$file" ] || return 0
    { read -r pid <"$file"; } 2>/dev/null || true
    pid=${pid//[!0-9]/}
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
    proc_comm "$pid"; [ "$REPLY" = "$name" ] || return 0
    proc_stat "$pid" 3; [ "$REPLY" = Z ] || echo "$pid"
}
slurmd_pidfile() { echo "$DIR/run/slurmd-$1.pid"; }

wait_gone() {  # pid, seconds
    local pid=$1 t=$(( $2 * 10 ))
    while [ -d "/proc/$pid" ] && [ "$t" -gt 0 ]; do
        proc_stat "$pid" 3; [ "$REPLY" = Z ] && return 0
        sleep 0.1; t=$((t - 1))
    done
    [ ! -d "/proc/$pid" ]
}

stop_pid() {  # pid, name
    [ -n "$1" ] || return 1
    kill -TERM "$1" 2>/dev/null || true
    if ! wait_gone "$1" 15; then
        echo "local_fleet.sh: $2 (pid $1) ignored SIGTERM for 15 s; sending SIGKILL" >&2
        kill -KILL "$1" 2>/dev/null || true
        wait_gone "$1" 5 || echo "local_fleet.sh: $2 (pid $1) does not exit" >&2
    fi
    return 0
}

client() { SLURM_CONF=$CONF timeout 30 "$@"; }
ns_exists() { [ -e "/run/netns/$1" ]; }
link_exists() { ip link show dev "$1" >/dev/null 2>&1; }

# Every process in namespace $1 gets SIGKILL (a node dying); waits until they are gone.
kill_namespace() {
    local ns=$1 pids pid _
    ns_exists "$ns" || return 0
    for _ in 1 2 3; do  # again for children forked meanwhile
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] || break
        for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
        for pid in $pids; do wait_gone "$pid" 5 || true; done
    done
}

# ---- the network -----------------------------------------------------------------

# The first candidate /24 that overlaps no address or route of this machine.
choose_net() {
    local candidates
    if [ -n "${THREADBURN_FLEET_NET:-}" ]; then candidates=$THREADBURN_FLEET_NET; else candidates=$(seq -f '10.217.%g' 91 99); fi
    { ip -4 -o addr show; ip -4 route show table all; } | /usr/bin/python3 -c '
import ipaddress, re, sys
taken = []
for line in sys.stdin:
    for word in line.split():
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+(/\d+)?", word):
            taken.append(ipaddress.ip_network(word, strict=False))
for c in sys.argv[1:]:
    try:
        net = ipaddress.ip_network(c + ".0/24")
    except ValueError:
        sys.exit(f"THREADBURN_FLEET_NET: {c!r} is not the first three numbers of an IPv4 /24")
    if not net.is_private or net.overlaps(ipaddress.ip_network("127.0.0.0/8")):
        sys.exit(f"THREADBURN_FLEET_NET: {c}.0/24 is not a private range")
    if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
        print(c)
        sys.exit(0)
sys.exit("no free /24 among " + " ".join(sys.argv[1:]) + " (set THREADBURN_FLEET_NET)")
' $candidates
}

net_up() {
    local net=$1 i ns
    echo "NET=$net" >"$DIR/net.env"
    ip link add "$BRIDGE" type bridge
    ip addr add "$net.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    mkdir -p /etc/netns
    for i in 0 1; do
        ns=${NETNS[$i]}
        ip netns add "$ns"
        ip link add "${HOSTVETH[$i]}" type veth peer name eth0 netns "$ns"
        ip link set "${HOSTVETH[$i]}" master "$BRIDGE" up
        ip -n "$ns" addr add "$net.$((i + 2))/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        # Bound over /etc/hosts on the node (on_host, and ip netns exec does the same).
        mkdir -p "/etc/netns/$ns"
        { cat /etc/hosts; echo "# tbfleet (scripts/local_fleet.sh)"
          echo "$net.2 ${NODES[0]}"; echo "$net.3 ${NODES[1]}"; } >"/etc/netns/$ns/hosts"
    done
    ip netns add "$ISOLATED"
    ip -n "$ISOLATED" link set lo up
    # eth0's peer stays down, and the neighbour entries skip ARP: packets to the
    # other hosts are dropped silently, as behind a dead link (a timeout, not a refusal).
    ip -n "$ISOLATED" link add eth0 type veth peer name void0
    ip -n "$ISOLATED" addr add "$net.9/24" dev eth0
    ip -n "$ISOLATED" link set eth0 up
    for i in 1 2 3; do ip -n "$ISOLATED" neigh add "$net.$i" lladdr "02:00:00:00:00:0$i" dev eth0 nud permanent; done
    # A bridge port forwards only after its STP-less forward delay: wait until both are.
    for _ in $(seq 100); do
        [ "$(bridge link show 2>/dev/null | grep -c "master $BRIDGE .*state forwarding")" -eq 2 ] && return 0
        sleep 0.1
    done
    echo "local_fleet.sh: the bridge's ports did not reach the forwarding state within 10 s" >&2
    return 1
}

net_down() {
    local ns i _
    # Only the DIR that brought the network up takes it down (net.env is its mark).
    [ -e "$DIR/net.env" ] || return 0
    for ns in "${NETNS[@]}" "$ISOLATED"; do
        kill_namespace "$ns"
        ns_exists "$ns" && ip netns del "$ns" 2>/dev/null || true
        [ -d "/etc/netns/$ns" ] && rm -rf "/etc/netns/${ns:?}"
    done
    rmdir /etc/netns 2>/dev/null || true   # only when empty: ours was all it held
    link_exists "$BRIDGE" && ip link del "$BRIDGE" 2>/dev/null || true
    # The veths go with their namespaces, asynchronously: wait (bounded).
    for _ in $(seq 50); do
        i=0
        for ns in "${HOSTVETH[@]}" "$BRIDGE"; do link_exists "$ns" && i=1; done
        [ "$i" = 0 ] && break
        sleep 0.1
    done
    for ns in "${HOSTVETH[@]}"; do link_exists "$ns" && ip link del "$ns" 2>/dev/null || true; done
    rm -f "$DIR/net.env"
}

# ---- Slurm -----------------------------------------------------------------------

write_conf() {
    local net=$1 host cpus mem_kb mem
    host=$(hostname -s)
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    # Each node claims half the memory (slurmd drains a node that finds less than configured).
    mem=$((mem_kb / 1024 / 2))
    {
        echo "# Written by scripts/local_fleet.sh start; rewritten at every start."
        echo "ClusterName=tbfleet"
        echo "SlurmctldHost=$host($net.1)"
        slurm_conf_common "$DIR" "$MUNGE_SOCKET" "$PORT"
        cat <<EOF
# %n: the node's name, so the two slurmd of this machine keep apart.
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldPidFile=$PIDFILE_slurmctld
SlurmctldLogFile=$LOG/slurmctld.log
# A dead node is noticed within seconds, not minutes (the node-failure test).
SlurmdTimeout=10
NodeName=${NODES[0]} NodeAddr=$net.2 CPUs=$cpus RealMemory=$mem State=UNKNOWN
NodeName=${NODES[1]} NodeAddr=$net.3 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=tbfleet Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    } >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    : >"$DIR/plugstack.conf"
}

# Runs a command "on" a host: in namespace $1's network, under hostname $2, with
# /etc/netns/$1/hosts as /etc/hosts when there is one (a private mount
# namespace, so the host's /etc/hosts is untouched). Unlike `ip netns exec`
# this keeps the host's /sys, where slurmd finds the cgroup file systems.
on_host() {
    local ns=$1 name=$2; shift 2
    local hosts=/etc/netns/$ns/hosts
    [ -e "$hosts" ] || hosts=""
    nsenter --net="/run/netns/$ns" unshare --mount --propagation private --uts -- sh -c '
        if [ -n "$1" ]; then mount --bind "$1" /etc/hosts || exit 1; fi
        hostname "$2" || exit 1
        shift 2
        exec "$@"' on_host "$hosts" "$name" "$@"
}

slurmd_in() {  # node index: slurmd inside the node's namespace, under the node's name
    local i=$1
    on_host "${NETNS[$i]}" "${NODES[$i]}" slurmd -f "$CONF" -N "${NODES[$i]}" >>"$LOG/slurmd-${NODES[$i]}.log" 2>&1
}

log_tails() {
    local f
    for f in "$LOG"/*.log; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f:" >&2
        tail -n 10 "$f" >&2
    done
}

# During start: the EXIT trap undoes everything.
fail_start() {
    echo "local_fleet.sh: $*" >&2
    exit 1
}

daemons_alive() {
    local n
    [ -n "$(pid_of munged "$PIDFILE_munged")" ] && [ -n "$(pid_of slurmctld "$PIDFILE_slurmctld")" ] || return 1
    for n in "${NODES[@]}"; do [ -n "$(pid_of slurmd "$(slurmd_pidfile "$n")")" ] || return 1; done
}

start_all() {
    local net t state i
    for t in munged mungekey munge unmunge slurmctld slurmd sinfo scontrol squeue scancel sbatch srun ip unshare nsenter bridge; do
        command -v "$t" >/dev/null 2>&1 || die "not installed: $t (apt-get install slurm-wlm munge iproute2)"
    done
    mkdir -p "$DIR/munge" "$LOG" "$DIR/run" "$DIR/state" "$DIR/spool/${NODES[0]}" "$DIR/spool/${NODES[1]}"
    chmod 0755 "$DIR" "$DIR/munge" "$LOG" "$DIR/run" "$DIR/state" "$DIR/spool" "$DIR"/spool/*
    if daemons_alive; then echo "local fleet in $DIR: already running"; return 0; fi
    # The names are fixed: one fleet per machine. Never take over another's.
    for i in "${NETNS[@]}" "$ISOLATED"; do
        ns_exists "$i" && die "namespace $i exists: a fleet runs (or was left) from another DIR; stop it first: $0 stop THAT_DIR"
    done
    link_exists "$BRIDGE" && die "link $BRIDGE exists: a fleet runs from another DIR; stop it first: $0 stop THAT_DIR"
    stop_all quiet   # daemons of this DIR left by an unclean stop
    net=$(choose_net) || exit 1
    # From here on a failure (set -e included) or an interrupt leaves nothing behind.
    trap 'rc=$?; trap - EXIT; echo "local_fleet.sh: start failed or was interrupted; undoing it" >&2; log_tails; stop_all quiet; exit $((rc ? rc : 1))' EXIT
    trap 'exit 130' INT TERM
    net_up "$net"
    [ -s "$DIR/munge/munge.key" ] || mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null 2>&1 \
        || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 0600 "$DIR/munge/munge.key"
    write_conf "$net"
    rm -rf "$DIR/state"/*   # no jobs recovered from an earlier fleet
    munged --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" --pid-file="$PIDFILE_munged" \
        --log-file="$LOG/munged.log" --seed-file="$DIR/munge/munged.seed" >>"$LOG/munged.log" 2>&1 \
        || fail_start "munged did not start"
    for t in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
    munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1 \
        || fail_start "munge/unmunge through $MUNGE_SOCKET fails"
    slurmctld -f "$CONF" >>"$LOG/slurmctld.log" 2>&1 || fail_start "slurmctld did not start"
    for i in 0 1; do slurmd_in "$i" || fail_start "slurmd of ${NODES[$i]} did not start"; done
    for t in $(seq 300); do
        state=$(client sinfo -h -p tbfleet -o '%n=%t' 2>/dev/null | sort | tr '\n' ' ' || true)
        [ "$state" = "${NODES[0]}=idle ${NODES[1]}=idle " ] && break
        if [ $((t % 10)) -eq 0 ] && ! daemons_alive; then fail_start "a daemon exited during start-up"; fi
        sleep 0.1
    done
    [ "$state" = "${NODES[0]}=idle ${NODES[1]}=idle " ] || fail_start "the nodes are not idle after 30 s (sinfo: '${state:-no answer}')"
    trap - EXIT INT TERM
    echo "local fleet in $DIR: running (nodes ${NODES[0]} at $net.2, ${NODES[1]} at $net.3, slurmctld at $net.1:$PORT, partition tbfleet); use it with: eval \"\$($0 env $DIR)\""
}

stop_all() {
    local quiet=${1:-} stopped=() n pid i
    if [ -n "$(pid_of slurmctld "$PIDFILE_slurmctld")" ] && [ -r "$CONF" ]; then
        if [ -n "$(client squeue -h -o %i 2>/dev/null | head -n 1)" ]; then
            client squeue -h -o %i 2>/dev/null | xargs -r -n 50 env SLURM_CONF="$CONF" timeout 30 scancel 2>/dev/null || true
            for _ in $(seq 100); do
                [ -z "$(client squeue -h -t RUNNING,COMPLETING,PENDING,SUSPENDED -o %i 2>/dev/null | head -n 1)" ] && break
                sleep 0.1
            done
        fi
    fi
    for i in 0 1; do
        n=${NODES[$i]}
        stop_pid "$(pid_of slurmd "$(slurmd_pidfile "$n")")" "slurmd of $n" && stopped+=("slurmd($n)")
        # Job steps and their processes: everything still in the node's namespace.
        kill_namespace "${NETNS[$i]}"
    done
    stop_pid "$(pid_of slurmctld "$PIDFILE_slurmctld")" slurmctld && stopped+=(slurmctld)
    stop_pid "$(pid_of munged "$PIDFILE_munged")" munged && stopped+=(munged)
    net_down
    rm -f "$PIDFILE_munged" "$PIDFILE_slurmctld" "$DIR"/run/slurmd-*.pid
    [ -n "$quiet" ] && return 0
    if [ ${#stopped[@]} -eq 0 ]; then echo "local fleet in $DIR: no daemon was running; network removed"
    else echo "local fleet in $DIR: stopped ${stopped[*]}, network removed (logs in $LOG)"; fi
}

# What a stop must not leave: our namespaces and links, a daemon of this DIR.
leftovers() {
    local found=0 ns l p
    for ns in "${NETNS[@]}" "$ISOLATED"; do ns_exists "$ns" && { echo "namespace $ns"; found=1; }; done
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^tbfleet' || true); do
        echo "link $l"; found=1
    done
    for ns in "${NETNS[@]}"; do [ -e "/etc/netns/$ns" ] && { echo "file /etc/netns/$ns"; found=1; }; done
    for p in /proc/[0-9]*; do
        proc_comm "${p#/proc/}"
        case "$REPLY" in munged|slurmctld|slurmd|slurmstepd) ;; *) continue ;; esac
        if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$DIR/" \
            || find "$p/fd" -maxdepth 1 -lname "$DIR/*" 2>/dev/null | grep -q .; then
            echo "process ${p#/proc/} $REPLY"; found=1
        fi
    done
    [ "$found" = 0 ] && echo "local fleet in $DIR: nothing left (no tbfleet namespace, link or /etc/netns entry, no daemon of $DIR)"
    return $found
}

status_all() {
    local n rc=0
    echo "munged: pid $(pid_of munged "$PIDFILE_munged")"
    echo "slurmctld: pid $(pid_of slurmctld "$PIDFILE_slurmctld")"
    for n in "${NODES[@]}"; do echo "slurmd $n: pid $(pid_of slurmd "$(slurmd_pidfile "$n")")"; done
    ip netns list 2>/dev/null | grep '^tbfleet' || true
    daemons_alive || rc=3
    [ "$rc" = 0 ] && client sinfo || true
    return $rc
}

need_root() { [ "$EUID" -eq 0 ] || die "'$cmd' must run as root (namespaces, veths and slurmd need it)"; }

case "$cmd" in
    on) on_host "${ON[@]}" ;;
    start) need_root; start_all ;;
    stop) need_root; stop_all ;;
    status) status_all ;;
    leftovers) leftovers ;;
    kill-node)
        need_root
        kill_namespace "${NETNS[$((NODE_ARG - 1))]}"
        echo "local fleet in $DIR: node ${NODES[$((NODE_ARG - 1))]} killed (every process in ${NETNS[$((NODE_ARG - 1))]})"
        ;;
    revive-node)
        need_root
        i=$((NODE_ARG - 1))
        [ -n "$(pid_of slurmd "$(slurmd_pidfile "${NODES[$i]}")")" ] || slurmd_in "$i" || die "slurmd of ${NODES[$i]} did not start"
        # ReturnToService=2: a DOWN node comes back when its slurmd registers.
        for _ in $(seq 300); do
            [ "$(client sinfo -h -n "${NODES[$i]}" -o %t 2>/dev/null)" = idle ] && break
            sleep 0.1
        done
        [ "$(client sinfo -h -n "${NODES[$i]}" -o %t 2>/dev/null)" = idle ] || die "node ${NODES[$i]} is not idle 30 s after its slurmd started"
        echo "local fleet in $DIR: node ${NODES[$i]} is back"
        ;;
    env)
        [ -r "$DIR/net.env" ] || die "$DIR/net.env: no fleet was started in $DIR"
        # shellcheck disable=SC1091
        . "$DIR/net.env"
        echo "export SLURM_CONF=$CONF"
        echo "export THREADBURN_FLEET_DIR=$DIR"
        echo "export THREADBURN_FLEET_NET=$NET"
        ;;
esac
