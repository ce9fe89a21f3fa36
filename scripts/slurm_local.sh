#!/usr/bin/env bash
# A one-node SLURM cluster on loopback, for trying and testing the sbatch template on one
# machine (tests/benchmarks/test_slurm.py, docs/slurm.md): munged, slurmctld and slurmd with all their
# state, sockets, logs and the munge key in one folder, no cgroups, no system service.
#
#   bash scripts/slurm_local.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   export SLURM_CONF=DIR/slurm.conf; sbatch ...; squeue; scontrol ...
#   bash scripts/slurm_local.sh stop DIR    # cancels the jobs, stops the three daemons
# CPUS=N before start: the CPUs the node offers (default: this machine's, at least 2); more
# than the machine has lets jobs share its cores (the test runs two 2-task jobs at once).
#
# Needs Debian's slurm-wlm (slurmctld, slurmd, slurm-client) and munge, and root (slurmd
# starts jobs as their user): scripts/install.sh installs them where apt-get exists.
# Known to work: SLURM 22.05 (Debian 12), proctrack/linuxproc, task/none, select/cons_tres.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd -P)
conf=$dir/slurm.conf

die() { echo "slurm_local: $*" >&2; exit 1; }

# a TCP port nobody listens on (the daemons of another local cluster, a real slurmctld)
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  die "no free TCP port found between 20000 and 40000"
}

pid_of() { [ -f "$dir/$1.pid" ] && cat "$dir/$1.pid" || true; }

stop_pid() {  # stop_pid NAME: TERM, then KILL after 10 s, the process whose pid file is DIR/NAME.pid
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || { rm -f "$dir/$1.pid"; return 0; }
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/$1.pid"
}

stop() {
  if [ -f "$conf" ] && [ -n "$(pid_of slurmctld)" ] && kill -0 "$(pid_of slurmctld)" 2>/dev/null; then
    # the jobs first, so slurmd's step daemons end with them
    SLURM_CONF=$conf scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 150); do  # squeue lists pending, running and completing jobs: until none is left
      [ -z "$(SLURM_CONF=$conf squeue --noheader --format=%i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop_pid slurmd
  stop_pid slurmctld
  stop_pid munged
}

start() {
  for tool in munged mungekey slurmctld slurmd sbatch; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] \
      || die "$tool not found: install SLURM and munge (scripts/install.sh, or apt-get install slurm-wlm munge)"
  done
  [ "$(id -u)" -eq 0 ] || die "slurmd must run as root to start jobs; run this as root"
  PATH=$PATH:/usr/sbin
  stop  # what an earlier start in this folder left running
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"

  # munge: its own key and socket, so the machine's munged (if any) is neither needed nor touched
  [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key"
  chmod 600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" \
    || die "munged did not start (see $dir/munged.log)"

  local cpus=${CPUS:-$(nproc)}
  [ "$cpus" -ge 2 ] || cpus=2  # two tasks need two CPUs; config_overrides lets a node claim more than it has
  cat >"$conf" <<EOF
# written by scripts/slurm_local.sh: a one-node cluster on loopback, state in $dir
ClusterName=mvssl-local
# job ids from a random start: Lightning takes its DDP port from a job id's last 4 digits,
# so the jobs of two clusters started side by side do not share ports
FirstJobId=$((1000 + RANDOM % 9000))0
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it may start again (120 s by default)
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# no cgroups: processes are tracked by their parent ids, tasks are not bound to cores
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
# a pending job whose begin time has come starts within 2 s, not at the next 30 to 60 s pass
SchedulerParameters=sched_interval=2,bf_interval=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
JobRequeue=1
# the seconds between SIGTERM and SIGKILL when a job is cancelled, requeued or times out
# (the common cluster default)
KillWait=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

  export SLURM_CONF=$conf
  slurmctld -f "$conf" -i || die "slurmctld did not start (see $dir/slurmctld.log)"
  slurmd -f "$conf" -N localhost || die "slurmd did not start (see $dir/slurmd.log)"
  for _ in $(seq 150); do
    if sinfo --noheader --format=%T 2>/dev/null | grep -qx idle; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.2
  done
  stop
  die "the node did not come up idle within 30 s (see $dir/slurmctld.log and $dir/slurmd.log)"
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
