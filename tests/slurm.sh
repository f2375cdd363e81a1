# slurm.sh - a Slurm cluster of this one machine, for the tests of
# examples/slurm: its own munged, slurmctld and slurmd, with their own
# key, sockets, ports, state and spool in a temporary directory.  Source
# it, then:
#
#   slurm_skip_reason   prints why no cluster can be made here (not root,
#                       no slurm-wlm or munge), or nothing
#   slurm_up            starts munged (checked with munge -n | unmunge),
#                       slurmctld -D and slurmd -D in the background, and
#                       returns once sinfo shows the node idle; sets and
#                       exports SLURM_CONF, SLURM_DIR
#   slurm_down          stops what slurm_up started, by PID, and removes
#                       its directory; safe to call twice, or from a trap
#
# The node is this machine under its short host name, 2 CPUs and a little
# memory, in one partition; no accounting; SlurmUser root.  Its ports are
# chosen from this shell's PID, so that two runs do not meet.

slurm_skip_reason() {
	local p
	if [ "$(id -u)" -ne 0 ]; then
		echo "not root: slurmd runs jobs as their users"
		return 0
	fi
	for p in munged munge unmunge slurmctld slurmd sbatch sinfo scontrol \
		scancel; do
		if ! command -v "$p" >/dev/null 2>&1; then
			echo "no $p (slurm-wlm, munge)"
			return 0
		fi
	done
}

slurm_up() {
	local d h port x p ctld sd
	SLURM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cg-slurm.XXXXXX") || return 1
	d=$SLURM_DIR
	: >"$d/pids"
	mkdir -m 755 "$d/munge" && mkdir "$d/state" "$d/spool" || return 1
	# munged's own key, socket, PID and seed files
	head -c 1024 /dev/urandom >"$d/munge/key" && chmod 400 "$d/munge/key" ||
		return 1
	munged -F -f --key-file "$d/munge/key" --socket "$d/munge/socket" \
		--pid-file "$d/munge/pid" --log-file "$d/munge/log" \
		--seed-file "$d/munge/seed" --force >/dev/null 2>&1 3>&- &
	echo $! >>"$d/pids"
	for x in $(seq 100); do
		munge -n -S "$d/munge/socket" 2>/dev/null |
			unmunge -S "$d/munge/socket" >/dev/null 2>&1 && break
		if [ "$x" -eq 100 ]; then
			echo "slurm_up: munged does not answer:" \
				"$(tail -n 1 "$d/munge/log" 2>/dev/null)" >&2
			slurm_down
			return 1
		fi
		sleep 0.05
	done
	h=$(hostname -s)
	port=$((20000 + ($$ % 10000) * 2))
	cat >"$d/slurm.conf" <<-EOF
		ClusterName=cgtest
		SlurmctldHost=$h(127.0.0.1)
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		CredType=cred/munge
		AuthInfo=socket=$d/munge/socket
		SlurmctldPort=$port
		SlurmdPort=$((port + 1))
		StateSaveLocation=$d/state
		SlurmdSpoolDir=$d/spool
		SlurmctldPidFile=$d/slurmctld.pid
		SlurmdPidFile=$d/slurmd.pid
		SlurmctldLogFile=$d/slurmctld.log
		SlurmdLogFile=$d/slurmd.log
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		SelectType=select/cons_tres
		SelectTypeParameters=CR_CPU
		SchedulerType=sched/builtin
		SchedulerParameters=kill_invalid_depend,sched_interval=1
		MpiDefault=none
		ReturnToService=2
		AccountingStorageType=accounting_storage/none
		JobAcctGatherType=jobacct_gather/none
		JobCompType=jobcomp/none
		MinJobAge=600
		NodeName=$h NodeAddr=127.0.0.1 CPUs=2 RealMemory=500 State=UNKNOWN
		PartitionName=cg Nodes=$h Default=YES MaxTime=INFINITE State=UP
	EOF
	SLURM_CONF=$d/slurm.conf
	export SLURM_CONF SLURM_DIR
	slurmctld -D -i -f "$SLURM_CONF" >"$d/slurmctld.out" 2>&1 3>&- &
	echo $! >>"$d/pids"
	ctld=$!
	slurmd -D -f "$SLURM_CONF" >"$d/slurmd.out" 2>&1 3>&- &
	echo $! >>"$d/pids"
	sd=$!
	# up to 15 s; a daemon that died is the end of it
	for x in $(seq 60); do
		[ "$(timeout 2 sinfo -h -o %t 2>/dev/null)" = idle ] && return 0
		for p in "$ctld slurmctld" "$sd slurmd"; do
			set -- $p
			kill -0 "$1" 2>/dev/null && continue
			echo "slurm_up: $2 ended:" \
				"$(cat "$d/$2.out" "$d/$2.log" 2>/dev/null |
					sed -n '/./h; ${x;p;}')" >&2
			slurm_down
			return 1
		done
		sleep 0.2
	done
	echo "slurm_up: the node is not idle:" \
		"$(timeout 2 sinfo -h -o %t 2>&1 | head -n 1);" \
		"$(tail -n 1 "$d/slurmctld.log" 2>/dev/null)" >&2
	slurm_down
	return 1
}

# slurm__alive PID: PID has not exited (a zombie has, though kill -0
# finds it until it is reaped: by init, which some inits do only every
# few seconds, for a daemon)
slurm__alive() {
	local s
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
	case ${s##*) } in Z* | X*) return 1 ;; esac
}

slurm_down() {
	local d=${SLURM_DIR:-} pid x
	[ -n "$d" ] || return 0
	if [ -f "$d/pids" ]; then
		# slurmd and slurmctld first, munged last
		for pid in $(tac "$d/pids"); do
			kill "$pid" 2>/dev/null
			for x in $(seq 50); do
				slurm__alive "$pid" || break
				sleep 0.05
			done
		done
	fi
	rm -rf "$d"
	SLURM_DIR=
	return 0
}
