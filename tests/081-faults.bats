#!/usr/bin/env bats
#
# 081-faults.bats - cg-cluster goes on through faults, on the test hosts
# of tests/hosts.sh: a round closes with a quorum of K updates once its
# timeout has passed, the late host logged and its update left out; a host
# cut off in the middle of a round (its link down, every process in it
# killed) stops nothing, and back it trains on from the state of its last
# update used; a host put into a slot of the host file joins with that
# slot's shard and the current model; cg-reduce --min-inputs refuses too
# few updates.  Where the updates used are known, the model is the shell
# loop's on those updates, byte for byte; and no reader ever finds a part
# of a model under the published name.
#
# The tests that need hosts skip where network namespaces cannot be made
# (not root, no ip, no sshd).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers
. "$BATS_TEST_DIRNAME/hosts.sh"

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images all -n 1
	model cvae all-0.cgd init.cgm --hidden 32 --layers 1 --latent 4
	images fm -n 3 --seed 1
	hosts_setup_file 3
}

teardown_file() {
	hosts_down
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	cp "$BATS_FILE_TMPDIR"/init.cgm "$BATS_FILE_TMPDIR"/fm-*.cgd .
	PREFIX=$(hosts_prefix)
}

teardown() {
	# a watcher left running by a test that failed
	[ -z "${WATCH:-}" ] || kill "$WATCH" 2>/dev/null || true
}

needs_hosts() {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	[ -n "${HOSTS_DIR:-}" ] || skip "no test hosts"
	rm -rf "$HOSTS_DIR"/host[0-9]*/*
	# a host cut by a test that failed
	local i
	for i in 0 1 2; do
		hosts_mend $i
	done
}

# cluster ARGS...: cg-cluster on the test hosts, its directory run/
cluster() {
	cg-cluster -f hosts -m init.cgm -o run --ssh "${SSH:-$HOSTS_SSH}" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" "$@"
}

# round STEPS BATCH WORKERS...: one DiLoCo round of the README's loop on
# fm-W.cgd for each worker W given, on m.cgm, states wW.state
round() {
	local k=$1 b=$2 w
	shift 2
	for w in "$@"; do
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps "$k" \
			--batch "$b" --seed 1 --state w$w.state -o d$w.cgg &
	done
	wait
	for w in "$@"; do
		set -- "$@" "d$w.cgg"
		shift
	done
	cg-reduce "$@" | cg-apply -m m.cgm --outer nesterov -o m.cgm
}

# watch: in the background, read run/model.cgm over and over; each read
# that is not a whole model is a line in torn.log.  WATCH: its PID.
watch() {
	: >torn.log
	while :; do
		if cp run/model.cgm snap.cgm 2>/dev/null &&
			! cg-inspect --verify snap.cgm >/dev/null 2>&1; then
			echo "torn: $(stat -c %s snap.cgm) bytes" >>torn.log
		fi
		sleep 0.02
	done 3>&- &
	WATCH=$!
}

# step MODEL: its step
step() {
	cg-inspect --no-stats "$1" | sed -n 's/^step: *//p'
}

@test "cg-reduce --min-inputs K: fewer updates than K is one line, exit 1, nothing written" {
	local w
	for w in 0 1 2; do
		cg-train-step -q -m init.cgm -d fm-$w.cgd --emit delta --steps 2 \
			--batch 8 --seed 1 -o d$w.cgg
	done
	run -1 --separate-stderr cg-reduce --min-inputs 3 d0.cgg d1.cgg -o m.cgu
	[ "$stderr" = 'cg-reduce: 2 inputs, fewer than --min-inputs 3' ]
	[ ! -e m.cgu ]
	run -1 --separate-stderr cg-reduce --min-inputs 2 -o m.cgu <d0.cgg
	[ "$stderr" = 'cg-reduce: 1 input, fewer than --min-inputs 2' ]
	run -0 cg-reduce --min-inputs 2 d0.cgg d1.cgg -o m01.cgu
	cg-reduce d0.cgg d1.cgg | cmp - m01.cgu
	# a reduction's output stands for the updates it was made of
	run -0 cg-reduce --min-inputs 3 m01.cgu d2.cgg -o m.cgu
	run -2 --separate-stderr cg-reduce --min-inputs 0 d0.cgg
	[[ ${stderr_lines[0]} == 'cg-reduce: --min-inputs: '* ]]
	run -2 cg-reduce --min-inputs x d0.cgg
	run -0 cg-reduce --help
	assert_output --partial '--min-inputs K'
}

@test "cg-cluster --quorum, --round-timeout: usage errors, a quorum larger than the hosts" {
	printf 'host0\nhost1\n-\n' >hosts
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--round-timeout 3 "$FX"
	[ "${stderr_lines[0]}" = 'cg-cluster: --round-timeout: needs --quorum (all hosts are waited for)' ]
	run -2 cg-cluster -f hosts -m init.cgm -o run --quorum 0 "$FX"
	run -2 cg-cluster -f hosts -m init.cgm -o run --quorum 1 \
		--round-timeout 1.5 "$FX"
	# a slot is not a host
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--quorum 3 "$FX"
	[ "$stderr" = 'cg-cluster: --quorum 3: hosts has 2 hosts' ]
	printf -- '-\n- 2\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run "$FX"
	[ "$stderr" = 'cg-cluster: hosts: no hosts, only slots (-)' ]
	[ ! -e run ]
}

@test "cg-cluster --quorum 2: a host that never answers is left out after the timeout, logged; the model is the loop's on the others" {
	needs_hosts
	local t0
	printf 'host0\nhost1\nhost2\n' >hosts
	# host2 takes its shard, then never answers a round
	cat >slowssh <<-EOF
		#!/bin/sh
		case "\$1 \$*" in
		host2*cg-train-step*) exec sleep 60.0813 ;;
		esac
		exec $HOSTS_SSH "\$@"
	EOF
	chmod +x slowssh
	t0=$SECONDS
	SSH=$PWD/slowssh run -0 --separate-stderr cluster -r 2 -k 3 -b 8 \
		--seed 1 --quorum 2 --round-timeout 1 "$FX"
	echo "$stderr"
	echo "2 rounds in $((SECONDS - t0)) s"
	[ $((SECONDS - t0)) -lt 20 ]
	assert_equal "${#stderr_lines[@]}" 5
	[ "${stderr_lines[1]}" = 'cg-cluster: host2: round 1: no answer in 1 s: left out' ]
	[[ ${stderr_lines[2]} == 'cg-cluster: round 1/2: step 1 published, '*', 2 of 3 hosts' ]]
	[ "${stderr_lines[3]}" = 'cg-cluster: host2: round 2: no answer in 1 s: left out' ]
	# and in the run's log, with the time
	run -0 grep -c ' host2: round [12]: no answer in 1 s: left out$' run/log
	assert_output 2
	# the loop of hosts 0 and 1 alone, on the shards of three
	cp init.cgm m.cgm
	round 3 8 0 1
	round 3 8 0 1
	cmp m.cgm run/model.cgm
	run -0 cat run/states.2
	assert_output $'0 2\n1 2'
	# no stray sleep left behind: cg-cluster stopped it (a length of
	# its own, so that no other sleep on the machine is taken for it)
	run -1 pgrep -f 'sleep 60\.0813'
}

@test "cg-cluster --quorum: fewer updates than the quorum publish nothing, exit 1" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	cat >badssh <<-EOF
		#!/bin/sh
		case "\$1 \$*" in
		host[12]*cg-train-step*) echo "no such luck" >&2; exit 1 ;;
		esac
		exec $HOSTS_SSH "\$@"
	EOF
	chmod +x badssh
	SSH=$PWD/badssh run -1 --separate-stderr cluster -q -r 1 -k 2 -b 8 \
		--quorum 2 --round-timeout 5 "$FX"
	assert_equal "$stderr" $'cg-cluster: host1: round 1: no such luck\ncg-cluster: host2: round 1: no such luck\ncg-cluster: round 1: 1 update, fewer than the quorum 2: nothing published'
	cmp init.cgm run/model.cgm
	[ ! -e run/round ]
	[ ! -e run/states.1 ]
}

@test "cg-cluster: a host cut off in a round stops nothing; back, it trains on from its state; nothing torn is published" {
	needs_hosts
	local pid i p st=0 t0
	printf 'host0\nhost1\nhost2\n' >hosts
	# rounds of a second or so each; the first and the last with every
	# host
	set -- -k 1000000 -b 8 -T '--time-limit 0.8'
	run -0 cluster -q -r 1 "$@" "$FX"
	[ -e "$HOSTS_DIR/host1/w.state.1" ]
	watch
	cg-cluster -f hosts -m init.cgm -o run --ssh "$HOSTS_SSH" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" \
		-r 3 "$@" --quorum 2 --round-timeout 3 "$FX" 2>cut.err 3>&- &
	pid=$!
	# host1 cut once its cg-train-step runs
	for i in $(seq 200); do
		for p in $(ip netns pids "cgn${HOSTS_PREFIX}h1"); do
			[ "$(cat /proc/$p/comm 2>/dev/null)" != cg-train-step ] ||
				break 2
		done
		sleep 0.05
	done
	hosts_cut 1
	t0=$SECONDS
	wait "$pid" || st=$?
	cat cut.err
	echo "2 rounds in $((SECONDS - t0)) s after the cut"
	[ "$st" -eq 0 ]
	[ "$(step run/model.cgm)" = 3 ]
	grep -qx 'cg-cluster: host1: round 2: no answer in 3 s: left out' cut.err
	grep -q '^cg-cluster: host1: round 3: ' cut.err
	grep -q '^cg-cluster: round 3/3: step 3 published, .*, 2 of 3 hosts$' cut.err
	# host1 still holds the state of its last update used
	run -0 cat run/states.3
	assert_output $'0 3\n1 1\n2 3'
	# back, it trains on from that state, with the current model: no
	# quorum, every host must answer
	hosts_mend 1
	run -0 --separate-stderr cluster -r 4 "$@" "$FX"
	[[ $stderr == 'cg-cluster: round 4/4: step 4 published, '* ]]
	[[ $stderr != *'of 3 hosts' ]]
	run -0 ls "$HOSTS_DIR/host1"
	assert_output $'shard.cgd\nw.state.1\nw.state.4'
	run -0 cat run/states.4
	assert_output $'0 4\n1 4\n2 4'
	kill "$WATCH"
	WATCH=
	run -0 cat torn.log
	assert_output ''
	run -0 cg-inspect --verify run/model.cgm
	run -0 ls -A run
	refute_output --partial tmp
	refute_output --partial .model
}

@test "cg-cluster: a host put into a slot of the host file joins at round 3, with its shard and the current model" {
	needs_hosts
	printf 'host0\nhost1\n-\n' >hosts
	run -0 --separate-stderr cluster -r 2 -k 3 -b 8 --seed 1 "$FX"
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[0]} == 'cg-cluster: 2 shards sent ('*' bytes)' ]]
	[[ ${stderr_lines[2]} == *', 2 of 3 hosts' ]]
	[ ! -e "$HOSTS_DIR/host2/shard.cgd" ]
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 --separate-stderr cluster -r 4 -k 3 -b 8 --seed 1 "$FX"
	assert_equal "${#stderr_lines[@]}" 4
	[ "${stderr_lines[0]}" = 'cg-cluster: host2: takes shard 2 at step 2' ]
	[[ ${stderr_lines[1]} == 'cg-cluster: 1 shard sent ('*' bytes)' ]]
	[[ ${stderr_lines[3]} == 'cg-cluster: round 4/4: step 4 published, '* ]]
	[[ ${stderr_lines[3]} != *'of 3 hosts' ]]
	cmp fm-2.cgd "$HOSTS_DIR/host2/shard.cgd"
	# the loop: two workers, then three, the third from a fresh state
	cp init.cgm m.cgm
	round 3 8 0 1
	round 3 8 0 1
	round 3 8 0 1 2
	round 3 8 0 1 2
	cmp m.cgm run/model.cgm
	run -0 cat run/hosts
	assert_output $'host0 1\nhost1 1\nhost2 1'
	# the slots and weights stay: a line more is another run
	printf 'host0\nhost1\nhost2\nhost3\n' >hosts
	run -1 --separate-stderr cluster -r 5 -k 3 -b 8 --seed 1 "$FX"
	[[ $stderr == 'cg-cluster: run was made for other hosts '* ]]
	# a host leaves its slot: the others train on
	printf 'host0\n-\nhost2\n' >hosts
	run -0 --separate-stderr cluster -r 5 -k 3 -b 8 --seed 1 "$FX"
	[ "${stderr_lines[0]}" = 'cg-cluster: host1: leaves shard 1 after step 4' ]
	[[ ${stderr_lines[1]} == *', 2 of 3 hosts' ]]
}
