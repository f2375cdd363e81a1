# hosts.sh - test hosts: network namespaces on a bridge, each with its own
# sshd, for the tests and benches of multi-host runs.  Source it, then:
#
#   hosts_skip_reason     prints why no hosts can be made here (not root, no
#                         ip, no sshd, ...), or nothing
#   hosts_up N [RATE [RTT [LOSS]]]
#                         makes host0 .. host(N-1); RATE (e.g. 10mbit, or
#                         empty) caps each host's link both ways with a
#                         token bucket; RTT (whole milliseconds) delays
#                         it so that a round trip between two hosts
#                         takes at least RTT (RTT/4 each way on each
#                         link: a packet crosses two links, and comes
#                         back), and LOSS (0 to 1) loses that share of
#                         the frames each way on each link (linkrelay)
#   hosts_down            removes all of it; safe to call twice, and from a
#                         trap (trap hosts_down EXIT) or a bats teardown,
#                         under set -e too
#   hosts_bytes I         "RX TX": the bytes host I's link has carried from
#                         the host and to it since hosts_up
#   hosts_cut I           host I fails: its link down, then every process
#                         in it killed (its sshd, its logins, what they
#                         run), as a machine that loses its power
#   hosts_mend I          host I back: its link up, its sshd started again
#                         where none runs; returns when it answers
#   hosts_setup_file N [RATE [RTT [LOSS]]]
#                         for a bats setup_file: HOSTS_SKIP set and exported
#                         (why no hosts can be made here, or empty), else
#                         hosts_up N RATE and its variables exported for
#                         the tests; 1 if hosts_up failed
#   hosts_prefix          prints what cg-cluster's --remote-prefix wants for
#                         the hosts to run this build's programs in this
#                         environment (the thread count, BLAS kernels and
#                         sanitizer options the bytes and the runs depend on)
#   hosts_memory_skip_reason
#                         prints why no host's memory can be limited here
#                         (no memory cgroup, v1 or v2, that root can
#                         write), or nothing
#   hosts_memory I BYTES  host I's memory limited to BYTES: its sshd, and
#                         so every login and what it runs, in a memory
#                         cgroup of its own (cgm$$hI), which the kernel
#                         keeps under BYTES by reclaim and, where that is
#                         not enough, by killing (with swap, memory and
#                         swap together); hosts_down removes it
#   hosts_memory_stat I   "FAILCNT OOM_KILLS PEAK": of host I's cgroup, the
#                         times it met its limit (v1: memory.failcnt and
#                         memory.memsw.failcnt; v2: 'max' events),
#                         the processes the kernel killed there, and the
#                         most it held (bytes; page cache included) since
#                         hosts_memory or hosts_memory_reset
#   hosts_memory_reset I  sets host I's counters of hosts_memory_stat back
#                         (not the kills, which are read as differences)
#
# hosts_up sets HOSTS_DIR (a directory of its own: keys, configs, logs, and
# hostI/, a working directory for each host), HOSTS_SSH (the ssh command
# that reaches them: ssh -F HOSTS_DIR/ssh_config) and HOSTS_N.
#
# Each host is a network namespace, joined to a bridge in the root
# namespace by a veth pair, with a private address (10.77.X.I+1/24, X
# chosen among the subnets no route of this machine uses; the bridge is
# .254) and a real sshd (key-only, its own config, host key and PID file
# under HOSTS_DIR) listening on it.  The client has its own key, known
# hosts and ssh_config: nothing under ~/.ssh is read or written.  The
# namespaces share the file system, so only the hosts' own directories
# keep them apart; what goes from one to another over ssh is counted by
# its veth (hosts_bytes).  Names carry this shell's PID (cgb$$, cgv$$hI,
# cgn$$hI), so two runs do not meet, and namespaces left by a run that
# was killed (its PID gone) are removed by the next hosts_up.  Every
# removal may find its object gone already (another run's hosts_up
# cleaning the same leftovers, a veth that went with its namespace): it
# is not an error, and the functions run under set -e as without it.
# The kernel here has no netem: a delay or a loss is made in user space.
# With RTT or LOSS, a host's veth is not in the bridge: a second veth pair
# (cgr$$hI, its peer cgs$$hI in the bridge) is, and linkrelay
# (tests/unit/linkrelay.c; HOSTS_RELAY, else the one on PATH) copies
# every frame between cgv$$hI and cgr$$hI after the delay; the token
# buckets stay on the host's own veth pair.

hosts_skip_reason() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "not root: network namespaces need root"
	elif ! command -v ip >/dev/null 2>&1 ||
		! command -v tc >/dev/null 2>&1; then
		echo "no ip(8) or tc(8) (iproute2)"
	elif [ ! -x /usr/sbin/sshd ]; then
		echo "no /usr/sbin/sshd (openssh-server)"
	elif ! command -v ssh >/dev/null 2>&1 ||
		! command -v ssh-keygen >/dev/null 2>&1; then
		echo "no ssh or ssh-keygen (openssh-client)"
	elif ! ip netns add "cgn$$probe" 2>/dev/null; then
		echo "cannot make a network namespace here"
	else
		ip netns del "cgn$$probe"
	fi
}

# namespaces and bridges of runs whose PID is gone, and their processes:
# each removal may find its object gone (a bridge the run's other host
# took, another hosts_up at the same leftovers), which is no error
hosts__stale() {
	local ns pid p g
	for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(cgn[0-9]*h[0-9]*\).*/\1/p'); do
		pid=${ns#cgn}
		pid=${pid%h*}
		kill -0 "$pid" 2>/dev/null && continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill "$p" 2>/dev/null || :
		done
		ip netns del "$ns" 2>/dev/null || :
		ip link del "cgb$pid" 2>/dev/null || :
		# a relay's pair (its relay ends when its veth goes)
		ip link del "cgr${ns#cgn}" 2>/dev/null || :
	done
	# memory cgroups of such runs (hosts_memory), once empty
	for g in /sys/fs/cgroup/memory/cgm[0-9]*h[0-9]* \
		/sys/fs/cgroup/cgm[0-9]*h[0-9]*; do
		[ -d "$g" ] || continue
		pid=${g##*/cgm}
		pid=${pid%h*}
		kill -0 "$pid" 2>/dev/null || rmdir "$g" 2>/dev/null || :
	done
	return 0
}

hosts_up() {
	local n=$1 rate=${2:-} rtt=${3:-0} loss=${4:-0} d i x ns v p addr pid key
	local relay=
	case $rtt in
	'' | *[!0-9]*)
		echo "hosts_up: RTT '$rtt' is not a whole number of ms" >&2
		return 1
		;;
	esac
	if [ "$rtt" != 0 ] || [ "$loss" != 0 ]; then
		relay=${HOSTS_RELAY:-$(command -v linkrelay || :)}
		[ -x "$relay" ] || {
			echo "hosts_up: no linkrelay (HOSTS_RELAY, PATH)" >&2
			return 1
		}
	fi
	HOSTS_N=$n
	HOSTS_PREFIX=$$
	hosts__stale
	HOSTS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cg-hosts.XXXXXX") || return 1
	d=$HOSTS_DIR
	: >"$d/pids"
	# a /24 no route of this machine uses
	x=$(($$ % 250))
	for i in $(seq 250); do
		ip -4 route show | grep -q "^10\.77\.$x\." || break
		x=$(((x + 1) % 250))
	done
	HOSTS_NET=10.77.$x
	# sshd's privilege separation directory, which it checks for
	# (another run may make it meanwhile)
	[ -d /run/sshd ] || mkdir -m 755 /run/sshd 2>/dev/null ||
		[ -d /run/sshd ] || { hosts_down; return 1; }
	ssh-keygen -q -t ed25519 -N '' -C cg-test-host -f "$d/host_key" &&
		ssh-keygen -q -t ed25519 -N '' -C cg-test-client -f "$d/id" &&
		cp "$d/id.pub" "$d/authorized_keys" || { hosts_down; return 1; }
	key=$(cut -d' ' -f1,2 "$d/host_key.pub")
	{
		printf 'Host *\n'
		printf '\tUser %s\n' "$(id -un)"
		printf '\tIdentityFile %s/id\n\tIdentitiesOnly yes\n' "$d"
		printf '\tUserKnownHostsFile %s/known_hosts\n' "$d"
		printf '\tGlobalKnownHostsFile /dev/null\n'
		printf '\tStrictHostKeyChecking yes\n\tCheckHostIP no\n'
		printf '\tBatchMode yes\n\tConnectTimeout 5\n\tLogLevel ERROR\n'
		printf '\tControlMaster no\n\tControlPath none\n'
		# not the hybrid post-quantum exchange OpenSSH 9 offers
		# first: its key generation costs the client about 0.1 s of
		# CPU a connection, 8 times the whole exchange with
		# curve25519 alone, and the suite makes thousands
		printf '\tKexAlgorithms curve25519-sha256\n'
		printf '\tForwardAgent no\n\tRequestTTY no\n'
	} >"$d/ssh_config.tail"
	: >"$d/ssh_config"
	: >"$d/known_hosts"
	ip link add "cgb$$" type bridge &&
		ip addr add "$HOSTS_NET.254/24" dev "cgb$$" &&
		ip link set "cgb$$" up || { hosts_down; return 1; }
	for i in $(seq 0 $((n - 1))); do
		ns=cgn$$h$i v=cgv$$h$i p=cgp$$h$i addr=$HOSTS_NET.$((i + 1))
		mkdir -p "$d/host$i" &&
			ip netns add "$ns" &&
			ip link add "$v" type veth peer name "$p" netns "$ns" &&
			ip -n "$ns" link set lo up &&
			ip -n "$ns" addr add "$addr/24" dev "$p" &&
			ip -n "$ns" link set "$p" up || { hosts_down; return 1; }
		if [ -z "$relay" ]; then
			ip link set "$v" master "cgb$$" &&
				ip link set "$v" up || { hosts_down; return 1; }
		else
			ip link add "cgr$$h$i" type veth peer name "cgs$$h$i" &&
				ip link set "cgs$$h$i" master "cgb$$" &&
				ip link set "cgs$$h$i" up &&
				ip link set "cgr$$h$i" up &&
				ip link set "$v" up || { hosts_down; return 1; }
			"$relay" -d $((rtt * 250)) -l "$loss" -s $((i + 1)) \
				"$v" "cgr$$h$i" </dev/null >/dev/null \
				2>"$d/relay.$i.log" 3>&- &
			echo $! >>"$d/pids"
		fi
		if [ -n "$rate" ]; then
			tc qdisc add dev "$v" root tbf rate "$rate" burst 32kbit \
				latency 400ms &&
				ip netns exec "$ns" tc qdisc add dev "$p" root tbf \
					rate "$rate" burst 32kbit latency 400ms ||
				{ hosts_down; return 1; }
		fi
		cat >"$d/sshd_config.$i" <<-EOF
			ListenAddress $addr:22
			HostKey $d/host_key
			PidFile $d/sshd.$i.pid
			AuthorizedKeysFile $d/authorized_keys
			UsePAM no
			PermitRootLogin prohibit-password
			StrictModes no
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			PubkeyAuthentication yes
			X11Forwarding no
			AllowTcpForwarding no
			AllowAgentForwarding no
			PrintMotd no
			UseDNS no
			MaxStartups 64
			LogLevel ERROR
		EOF
		printf 'Host host%d\n\tHostName %s\n' "$i" "$addr" >>"$d/ssh_config"
		printf '%s %s\n' "$addr" "$key" >>"$d/known_hosts"
		hosts__sshd "$i"
	done
	cat "$d/ssh_config.tail" >>"$d/ssh_config"
	HOSTS_SSH="ssh -F $d/ssh_config"
	# ready when each answers
	for i in $(seq 0 $((n - 1))); do
		for x in $(seq 100); do
			$HOSTS_SSH -o ConnectTimeout=1 "host$i" true 2>/dev/null && break
			if [ "$x" -eq 100 ]; then
				echo "hosts_up: host$i's sshd does not answer:" \
					"$(tail -n 1 "$d/sshd.$i.log" 2>/dev/null)" >&2
				hosts_down
				return 1
			fi
			sleep 0.05
		done
	done
	for i in $(seq 0 $((n - 1))); do
		cat "/sys/class/net/cgv$$h$i/statistics/rx_bytes" \
			"/sys/class/net/cgv$$h$i/statistics/tx_bytes" |
			paste -sd' ' >"$d/bytes0.$i"
	done
}

hosts_bytes() {
	local v=cgv${HOSTS_PREFIX}h$1 rx tx rx0 tx0
	rx=$(cat "/sys/class/net/$v/statistics/rx_bytes") &&
		tx=$(cat "/sys/class/net/$v/statistics/tx_bytes") &&
		read -r rx0 tx0 <"$HOSTS_DIR/bytes0.$1" || return 1
	echo "$((rx - rx0)) $((tx - tx0))"
}

# hosts__sshd I: start host I's sshd in its namespace
hosts__sshd() {
	local d=$HOSTS_DIR i=$1
	# ip netns exec execs sshd in place: $! is sshd
	ip netns exec "cgn${HOSTS_PREFIX}h$i" /usr/sbin/sshd -D \
		-f "$d/sshd_config.$i" -E "$d/sshd.$i.log" \
		</dev/null >/dev/null 2>&1 3>&- &
	echo $! >"$d/sshd.$i.run"
	echo $! >>"$d/pids"
}

# hosts__answers I: wait until host I's sshd answers; 1 if it does not
hosts__answers() {
	local x
	for x in $(seq 100); do
		$HOSTS_SSH -o ConnectTimeout=1 "host$1" true 2>/dev/null && return 0
		sleep 0.05
	done
	echo "hosts: host$1's sshd does not answer:" \
		"$(tail -n 1 "$HOSTS_DIR/sshd.$1.log" 2>/dev/null)" >&2
	return 1
}

hosts_cut() {
	local p
	ip link set "cgv${HOSTS_PREFIX}h$1" down || return 1
	for p in $(ip netns pids "cgn${HOSTS_PREFIX}h$1" 2>/dev/null); do
		kill -KILL "$p" 2>/dev/null || :
	done
	return 0
}

hosts_mend() {
	ip link set "cgv${HOSTS_PREFIX}h$1" up || return 1
	kill -0 "$(cat "$HOSTS_DIR/sshd.$1.run" 2>/dev/null)" 2>/dev/null ||
		hosts__sshd "$1"
	hosts__answers "$1"
}

# hosts__alive PID: PID has not exited (a zombie has, though kill -0
# finds it until it is reaped: by init, which some inits do only every
# few seconds, for a daemon)
hosts__alive() {
	local s
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
	case ${s##*) } in Z* | X*) return 1 ;; esac
}

hosts_down() {
	local d=${HOSTS_DIR:-} pid i p pfx=${HOSTS_PREFIX:-$$}
	[ -n "$d" ] || return 0
	if [ -f "$d/pids" ]; then
		while read -r pid; do
			kill "$pid" 2>/dev/null || :
		done <"$d/pids"
		while read -r pid; do
			for i in $(seq 40); do
				hosts__alive "$pid" || break
				sleep 0.05
			done
		done <"$d/pids"
	fi
	for i in $(seq 0 $((${HOSTS_N:-0} - 1))); do
		# what the sessions started and left behind; the veth goes
		# with its namespace, the relay's pair may not exist
		for p in $(ip netns pids "cgn${pfx}h$i" 2>/dev/null); do
			kill "$p" 2>/dev/null || :
		done
		ip netns del "cgn${pfx}h$i" 2>/dev/null || :
		ip link del "cgv${pfx}h$i" 2>/dev/null || :
		ip link del "cgr${pfx}h$i" 2>/dev/null || :
	done
	ip link del "cgb$pfx" 2>/dev/null || :
	hosts__memory_down "$pfx"
	rm -rf "$d"
	HOSTS_DIR=
	return 0
}

hosts_setup_file() {
	export HOSTS_SKIP
	HOSTS_SKIP=$(hosts_skip_reason)
	[ -z "$HOSTS_SKIP" ] || return 0
	hosts_up "$@" || {
		HOSTS_SKIP=
		return 1
	}
	export HOSTS_DIR HOSTS_SSH HOSTS_N HOSTS_PREFIX HOSTS_NET
}

hosts_prefix() {
	local v env=
	for v in OMP_NUM_THREADS OPENBLAS_CORETYPE CG_QKERNEL ASAN_OPTIONS \
		UBSAN_OPTIONS; do
		[ -z "${!v+set}" ] || env="$env$v=${!v} "
	done
	echo "env $env$(dirname "$(command -v cg-train-step)")/"
}

# ------------------------------------------------- memory-limited hosts

# the memory cgroups' root, and its version: "v1 DIR", "v2 DIR", or
# "none -"
hosts__memory_root() {
	if [ -w /sys/fs/cgroup/memory/memory.limit_in_bytes ] ||
		[ -w /sys/fs/cgroup/memory/cgroup.procs ]; then
		echo "v1 /sys/fs/cgroup/memory"
	elif [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw memory /sys/fs/cgroup/cgroup.controllers &&
		grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
		echo "v2 /sys/fs/cgroup"
	else
		echo "none -"
	fi
}

hosts_memory_skip_reason() {
	local v root probe
	read -r v root < <(hosts__memory_root)
	if [ "$(id -u)" -ne 0 ]; then
		echo "not root: memory cgroups need root"
	elif [ "$v" = none ]; then
		echo "no memory cgroup here (neither /sys/fs/cgroup/memory nor a v2 memory controller)"
	else
		probe=$root/cgm$$probe
		if ! mkdir "$probe" 2>/dev/null; then
			echo "cannot make a memory cgroup under $root"
		else
			rmdir "$probe"
		fi
	fi
}

# hosts__memory_dir I: host I's cgroup directory
hosts__memory_dir() {
	local v root
	read -r v root < <(hosts__memory_root)
	echo "$root/cgm${HOSTS_PREFIX}h$1"
}

hosts_memory() {
	local i=$1 bytes=$2 v root g pid p
	read -r v root < <(hosts__memory_root)
	[ "$v" != none ] || {
		echo "hosts_memory: no memory cgroup here" >&2
		return 1
	}
	g=$root/cgm${HOSTS_PREFIX}h$i
	mkdir -p "$g" || return 1
	if [ "$v" = v1 ]; then
		# with swap, memory and swap together are limited too (the
		# kernel refuses a memsw limit below the memory limit: memory
		# first); without, a memsw limit would leave memory.failcnt
		# at 0 when the limit is met
		echo "$bytes" >"$g/memory.limit_in_bytes" || return 1
		if [ "$(wc -l </proc/swaps)" -gt 1 ] &&
			[ -w "$g/memory.memsw.limit_in_bytes" ]; then
			echo "$bytes" >"$g/memory.memsw.limit_in_bytes" ||
				return 1
		fi
		echo 0 >"$g/memory.failcnt" 2>/dev/null || :
		echo 0 >"$g/memory.max_usage_in_bytes" 2>/dev/null || :
	else
		echo "$bytes" >"$g/memory.max" || return 1
		[ ! -w "$g/memory.swap.max" ] || echo 0 >"$g/memory.swap.max"
	fi
	pid=$(cat "$HOSTS_DIR/sshd.$i.run") || return 1
	echo "$pid" >"$g/cgroup.procs" || return 1
	# and whatever its logins run now
	for p in $(ip netns pids "cgn${HOSTS_PREFIX}h$i" 2>/dev/null); do
		echo "$p" >"$g/cgroup.procs" 2>/dev/null || :
	done
	return 0
}

hosts_memory_stat() {
	local v root g fail kills peak
	read -r v root < <(hosts__memory_root)
	g=$root/cgm${HOSTS_PREFIX}h$1
	[ -d "$g" ] || return 1
	if [ "$v" = v1 ]; then
		# the memory and swap limit is the same: either may be met
		fail=$(cat "$g/memory.failcnt")
		[ ! -r "$g/memory.memsw.failcnt" ] ||
			fail=$((fail + $(cat "$g/memory.memsw.failcnt")))
		kills=$(sed -n 's/^oom_kill //p' "$g/memory.oom_control")
		peak=$(cat "$g/memory.max_usage_in_bytes")
	else
		fail=$(sed -n 's/^max //p' "$g/memory.events")
		kills=$(sed -n 's/^oom_kill //p' "$g/memory.events")
		peak=$(cat "$g/memory.peak" 2>/dev/null || echo 0)
	fi
	echo "${fail:-0} ${kills:-0} ${peak:-0}"
}

hosts_memory_reset() {
	local v root g
	read -r v root < <(hosts__memory_root)
	g=$root/cgm${HOSTS_PREFIX}h$1
	if [ "$v" = v1 ]; then
		echo 0 >"$g/memory.failcnt" &&
			echo 0 >"$g/memory.max_usage_in_bytes" || return 1
		[ ! -w "$g/memory.memsw.failcnt" ] ||
			echo 0 >"$g/memory.memsw.failcnt"
	else
		# v2 counts its events for ever, and its peak since a write
		# of its own (6.12 and later)
		echo 0 >"$g/memory.peak" 2>/dev/null || :
		return 0
	fi
}

# hosts__memory_down PREFIX: the cgroups of run PREFIX removed, once
# the processes hosts_down killed have left them
hosts__memory_down() {
	local v root g x
	read -r v root < <(hosts__memory_root)
	[ "$v" != none ] || return 0
	for g in "$root"/cgm"$1"h[0-9]*; do
		[ -d "$g" ] || continue
		for x in $(seq 40); do
			rmdir "$g" 2>/dev/null && break
			sleep 0.05
		done
	done
	return 0
}
