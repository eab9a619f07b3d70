#!/usr/bin/env bash
# slurm-local.sh - a single-host Slurm "cluster" (munged + slurmctld + slurmd) for Trident's
# Slurm tests (tests/slurm/run.sh) and for trying slurm/*.sbatch on a workstation, on Debian 12,
# started WITHOUT systemd. Adapted from a single-host recipe proven on Debian 12; what it adds:
# its own state dir, free ports picked when the defaults are taken, only the Slurm and munge
# packages installed here (the rest is `make deps`), and a requeued job restarting in about
# 11 s instead of 30-60 (cred_expire 10 s, scheduling passes every 2 s).
#
# Usage:  slurm-local.sh start     install slurm-wlm + munge if missing (idempotent), write
#                                  configs, start munged/slurmctld/slurmd, wait for the idle node
#         slurm-local.sh stop      cancel jobs, stop exactly the daemons started here (their pid
#                                  files, checked against each process's command line)
#         slurm-local.sh status    show daemons and sinfo
#         slurm-local.sh env       print 'export SLURM_CONF=...' (use with eval)
#         slurm-local.sh restart   stop + start
#
# Environment (all optional):
#   SLURM_LOCAL_DIR          state dir (configs, logs, pids, spool) [/tmp/trident-slurm]
#   SLURM_LOCAL_CPUS         CPUs advertised for the node, may exceed real cores [8]
#   SLURM_LOCAL_MEM_MB       RealMemory of the node in MB [90% of MemTotal]
#   SLURM_LOCAL_CTLD_PORT    slurmctld port [the first free one from 6817]
#   SLURM_LOCAL_SLURMD_PORT  slurmd port [the first free one after the slurmctld port]
#   SLURM_LOCAL_CRED_EXPIRE  cred lifetime (s); also the delay before a requeued
#                            job may start again (Slurm default 120) [10]
#   SLURM_LOCAL_NO_INSTALL=1 never call apt-get (fail if packages are missing)
#   SLURM_LOCAL_TIMEOUT      seconds to wait for the node to become idle [60]
#
# Needs root (daemons, apt-get). Clients need SLURM_CONF:
#   eval "$(tests/slurm/slurm-local.sh env)"; sbatch job.sh
set -euo pipefail
umask 022

DIR=${SLURM_LOCAL_DIR:-/tmp/trident-slurm}
CPUS=${SLURM_LOCAL_CPUS:-8}
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-}
SLURMD_PORT=${SLURM_LOCAL_SLURMD_PORT:-}
CRED_EXPIRE=${SLURM_LOCAL_CRED_EXPIRE:-10}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
NODE=localhost
CONF=$DIR/etc/slurm.conf
MUNGE_SOCK=$DIR/munge/munge.socket.2
PID_MUNGED=$DIR/munge/munged.pid
PID_CTLD=$DIR/run/slurmctld.pid
PID_SLURMD=$DIR/run/slurmd.pid

# The local cluster's packages (the build's and the tests' other packages come from `make deps`).
PACKAGES=(slurm-wlm slurmctld slurmd slurm-client munge)

log() { printf '[slurm-local] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $DIR == /* && $DIR != / ]] || die "SLURM_LOCAL_DIR must be an absolute path other than /"

need_root() { [[ $(id -u) == 0 ]] || die "must run as root (daemons, apt-get)"; }

# ---------------------------------------------------------------- packages
ensure_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    [[ ${SLURM_LOCAL_NO_INSTALL:-0} == 1 ]] && die "missing packages: ${missing[*]}"
    log "installing: ${missing[*]}"
    local t0=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    # Lock timeout: other processes may be running apt/dpkg at the same time.
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    log "packages installed in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- pid helpers
# pid_of FILE NAME: print the pid in FILE if that process is alive, is NAME and
# belongs to this state dir (guards against stale files and pid reuse).
pid_of() {
    local file=$1 name=$2 pid cmd
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    [[ $cmd == *"$name"* && $cmd == *"$DIR/"* ]] || return 1
    echo "$pid"
}

wait_for_pidfile() {  # FILE NAME SECONDS
    local i
    for ((i = 0; i < $3 * 10; i++)); do pid_of "$1" "$2" >/dev/null && return 0; sleep 0.1; done
    return 1
}

# orphan_pid NAME: pid of a NAME daemon started by this script for this state dir
# whose pid file is gone (e.g. the state dir was deleted while it ran). Matches the
# exact command line this script uses, so it never hits other daemons.
orphan_pid() {
    local want p cmd
    case $1 in
        munged) want="munged --key-file=$DIR/munge/munge.key " ;;
        slurmctld) want="slurmctld -c -f $CONF " ;;
        slurmd) want="slurmd -f $CONF -N $NODE " ;;
    esac
    for p in /proc/[0-9]*; do
        cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
        [[ $cmd == "$want"* ]] && { echo "${p#/proc/}"; return 0; }
    done
    return 1
}

stop_daemon() {  # FILE NAME
    local pid i
    if ! pid=$(pid_of "$1" "$2"); then
        [[ -e $1 ]] && { log "$2: stale pid file removed"; rm -f "$1"; }
        pid=$(orphan_pid "$2") || return 0
        log "$2: no pid file, but found pid $pid started for $DIR"
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        log "$2 (pid $pid) ignored SIGTERM for 15s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$1"
    log "stopped $2 (pid $pid)"
}

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# pick_ports: the configured ports, or the first free pair from 6817 (another Slurm, e.g. a
# developer's own local cluster, may hold the defaults).
pick_ports() {
    local p
    if [[ -z $CTLD_PORT ]]; then
        for ((p = 6817; p < 6917; p++)); do port_busy "$p" || { CTLD_PORT=$p; break; }; done
    fi
    if [[ -z $SLURMD_PORT ]]; then
        for ((p = CTLD_PORT + 1; p < CTLD_PORT + 100; p++)); do port_busy "$p" || { SLURMD_PORT=$p; break; }; done
    fi
    [[ -n $CTLD_PORT && -n $SLURMD_PORT ]] || die "no free TCP ports for slurmctld/slurmd"
    for p in "$CTLD_PORT" "$SLURMD_PORT"; do
        port_busy "$p" && die "TCP port $p is already in use (another slurm?). Set SLURM_LOCAL_CTLD_PORT/SLURM_LOCAL_SLURMD_PORT."
    done
    return 0
}

# ---------------------------------------------------------------- configs
write_configs() {
    mkdir -p "$DIR"/{etc,munge,state,spool,log,run}
    chmod 755 "$DIR" "$DIR/munge"   # munged: socket dir must be o+x, not group/other writable
    if [[ ! -s $DIR/munge/munge.key ]]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$DIR/munge/munge.key"
        else
            dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
        fi
    fi
    chmod 600 "$DIR/munge/munge.key"

    local mem
    mem=${SLURM_LOCAL_MEM_MB:-$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)}
    : >"$DIR/etc/plugstack.conf"   # isolate from /etc/slurm/plugstack.conf
    # TaskProlog: "export NAME=VALUE" lines on stdout go into every task's environment.
    # The node advertises more CPUs than the machine has, so Open MPI cannot see that it is
    # oversubscribed under srun and busy-polls: measured 112 s instead of 0.25 s for 2000
    # MPI_Allreduce with 8 ranks on 2 cores. Yielding fixes it (unless the user set it).
    cat >"$DIR/etc/task_prolog.sh" <<'PROLOG'
#!/bin/sh
[ -n "${OMPI_MCA_mpi_yield_when_idle:-}" ] || echo "export OMPI_MCA_mpi_yield_when_idle=1"
PROLOG
    chmod 755 "$DIR/etc/task_prolog.sh"
    cat >"$CONF.tmp" <<EOF
# Generated by tests/slurm/slurm-local.sh - single-host test cluster. Do not edit; rerun start.
ClusterName=local
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK,cred_expire=$CRED_EXPIRE
PlugStackConfig=$DIR/etc/plugstack.conf
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$PID_CTLD
SlurmdPidFile=$PID_SLURMD
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups / systemd needed:
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Schedule every 2 s and backfill every second (defaults 60 s and 30 s): a requeued job becomes
# eligible CRED_EXPIRE + 1 seconds after its requeue and only a periodic pass starts it.
SchedulerParameters=bf_interval=1,sched_interval=2
# Debian's Open MPI 4.1 only works with srun through PMIx (pmi2/none fail in MPI_Init):
MpiDefault=pmix
ReturnToService=2
KillWait=5
MailProg=/bin/true
TaskProlog=$DIR/etc/task_prolog.sh
# Accept CPUs=$CPUS although the machine may have fewer cores (testing only):
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
}

# ---------------------------------------------------------------- commands
node_state() { SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1; }

all_running() {
    pid_of "$PID_MUNGED" munged >/dev/null && pid_of "$PID_CTLD" slurmctld >/dev/null &&
        pid_of "$PID_SLURMD" slurmd >/dev/null
}

usage_hint() {
    cat <<EOF
Local Slurm cluster is up (state dir $DIR, node $NODE with $CPUS CPUs, partition debug).
  export SLURM_CONF=$CONF        # or: eval "\$($0 env)"
  sinfo; sbatch -n 8 job.sh; squeue; scontrol show job <id>
  In job scripts: srun -n 8 ./app   (MpiDefault=pmix; 'mpirun' inside sbatch works too)
  Logs: $DIR/log/   Stop: $0 stop
EOF
}

cmd_start() {
    need_root
    local t0=$SECONDS
    ensure_packages
    if all_running; then
        log "already running"
        usage_hint
        return 0
    fi
    # Partially running (e.g. one daemon crashed) or orphaned (state dir deleted while
    # running): stop what is left, then start everything cleanly.
    local n
    for n in munged slurmctld slurmd; do
        if orphan_pid "$n" >/dev/null; then
            log "partially running or orphaned daemons - stopping them first"
            cmd_stop
            break
        fi
    done
    pick_ports
    write_configs
    rm -f "$PID_MUNGED" "$PID_CTLD" "$PID_SLURMD"

    munged --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCK" --pid-file="$PID_MUNGED" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" ||
        die "munged failed to start, see $DIR/log/munged.log"
    wait_for_pidfile "$PID_MUNGED" munged 10 || die "munged did not start, see $DIR/log/munged.log"
    munge -n -S "$MUNGE_SOCK" | unmunge -S "$MUNGE_SOCK" >/dev/null || die "munge self-test failed"

    # -c: start from a clean controller state (no jobs/node states from earlier runs).
    slurmctld -c -f "$CONF" || die "slurmctld failed, see $DIR/log/slurmctld.log"
    wait_for_pidfile "$PID_CTLD" slurmctld 15 || { tail -n 20 "$DIR/log/slurmctld.log" >&2; die "slurmctld did not start"; }
    slurmd -f "$CONF" -N "$NODE" || die "slurmd failed, see $DIR/log/slurmd.log"
    wait_for_pidfile "$PID_SLURMD" slurmd 15 || { tail -n 20 "$DIR/log/slurmd.log" >&2; die "slurmd did not start"; }

    local i st=""
    for ((i = 0; i < TIMEOUT * 5; i++)); do
        st=$(node_state || true)
        [[ $st == idle ]] && break
        sleep 0.2
    done
    if [[ $st != idle ]]; then
        SLURM_CONF=$CONF sinfo -N -o '%N %T %E' >&2 || true
        tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2
        die "node not idle after ${TIMEOUT}s (state '$st')"
    fi
    log "started in $((SECONDS - t0))s (munged $(<"$PID_MUNGED"), slurmctld $(<"$PID_CTLD"), slurmd $(<"$PID_SLURMD"))"
    usage_hint
}

cmd_stop() {
    need_root
    if pid_of "$PID_CTLD" slurmctld >/dev/null && [[ -e $CONF ]]; then
        local jobs=() i
        mapfile -t jobs < <(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true)
        if ((${#jobs[@]})); then
            log "cancelling jobs: ${jobs[*]}"
            SLURM_CONF=$CONF scancel "${jobs[@]}" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                [[ -z $(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_daemon "$PID_SLURMD" slurmd
    stop_daemon "$PID_CTLD" slurmctld
    stop_daemon "$PID_MUNGED" munged
}

cmd_status() {
    local n p
    for n in munged:$PID_MUNGED slurmctld:$PID_CTLD slurmd:$PID_SLURMD; do
        if p=$(pid_of "${n#*:}" "${n%%:*}"); then echo "${n%%:*}: running (pid $p)"; else echo "${n%%:*}: not running"; fi
    done
    if pid_of "$PID_CTLD" slurmctld >/dev/null; then SLURM_CONF=$CONF sinfo; SLURM_CONF=$CONF squeue; fi
    all_running
}

case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart) cmd_stop; cmd_start ;;
    status) cmd_status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
