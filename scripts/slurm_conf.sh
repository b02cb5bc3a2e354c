# Sourced by scripts/local_slurm.sh and scripts/local_fleet.sh: the settings
# their private clusters share, and their readers of /proc, in one place. slurm_conf_common prints them;
# each script adds its cluster's own (names, hosts, ports' owner, timeouts,
# nodes and partition).
#   slurm_conf_common DIR MUNGE_SOCKET PORT
# DIR holds the state, the plugstack file and the job completion record;
# slurmctld listens on PORT, slurmd on PORT + 1.
slurm_conf_common() {
    local dir=$1 munge_socket=$2 port=$3
    cat <<EOF
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$dir/state
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
# No accounting database: finished jobs stay in slurmctld's memory for
# MinJobAge seconds (squeue -t all, scontrol show job) and are appended to the
# job completion file for good, one line per job or array task.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=120
EOF
}

# What /proc says of a process, read with bash's own `read` (no program started:
# the scripts' stop and leftovers scan every process, and a fork and exec of cat
# or awk for each took seconds on a loaded machine). Each sets REPLY, "" when the
# process is gone.
proc_comm() { { read -r REPLY <"/proc/$1/comm"; } 2>/dev/null || REPLY=""; }
# Field $2 of /proc/PID/stat counted from its state (3: the state, 4: the parent's
# pid), read after the last ')' so that a command name with spaces cannot shift it.
proc_stat() {
    local line f
    REPLY=""
    { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 0
    line=${line##*) }
    read -ra f <<<"$line"
    REPLY=${f[$2 - 3]:-}
}
