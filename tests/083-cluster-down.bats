#!/usr/bin/env bats
#
# 083-cluster-down.bats - cg-cluster --down-codec: each host keeps its copy
# of the model and is sent, after its first round, only the change of the
# coordinator's model coded with the codec (cg-apply --codec --change).  A
# DiLoCo run on three hosts is, byte for byte, the shell loop of
# examples/compressed-diloco in one directory, every host's copy has the
# coordinator's parameter digest after each round, and the veths carried
# far less than a model a round; a run stopped in a round resumes; a host
# left out of a round, one that joins a slot, and one whose copy was
# overwritten are sent the whole model and train on from it, never from a
# copy that is not the coordinator's.
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
	model cvae all-0.cgd other.cgm --hidden 32 --layers 1 --latent 4 \
		--seed 2
	images fm -n 3 --seed 1
	hosts_setup_file 3
}

teardown_file() {
	hosts_down
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	cp "$BATS_FILE_TMPDIR"/init.cgm "$BATS_FILE_TMPDIR"/other.cgm \
		"$BATS_FILE_TMPDIR"/fm-*.cgd .
	PREFIX=$(hosts_prefix)
	rm -f w*.cgm w*.state
}

needs_hosts() {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	[ -n "${HOSTS_DIR:-}" ] || skip "no test hosts"
	rm -rf "$HOSTS_DIR"/host[0-9]*/*
	local i
	for i in 0 1 2; do
		hosts_mend $i
	done
}

# cluster ARGS...: cg-cluster on the test hosts, its directory run/,
# DiLoCo rounds of 3 steps of 8 with the change coded q4
cluster() {
	cg-cluster -f hosts -m init.cgm -o run --ssh "${SSH:-$HOSTS_SSH}" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" \
		-k 3 -b 8 --seed 1 --down-codec q4 "$@"
}

# params MODEL: its parameter digest
params() {
	cg-inspect --no-stats "$1" | awk '$1 == "params:" { print $3 }'
}

# round WORKERS...: one round of examples/compressed-diloco's loop in
# this directory: each worker W trains from its copy wW.cgm (the
# coordinator's model stripped, at its first round), the coordinator
# applies the mean with the change coded q4, each worker applies the
# change
round() {
	local w
	for w in "$@"; do
		[ -f w$w.cgm ] || cg-quantize -q --strip m.cgm f32 -o w$w.cgm
		cg-train-step -q -m w$w.cgm -d fm-$w.cgd --emit delta --steps 3 \
			--batch 8 --seed 1 --state w$w.state -o d$w.cgg &
	done
	wait
	for w in "$@"; do
		set -- "$@" "d$w.cgg"
		shift
	done
	cg-reduce "$@" | cg-apply -m m.cgm --outer nesterov --codec q4 \
		--change change.cgu -o m.cgm
	for w in 0 1 2; do
		[ ! -f w$w.cgm ] || cg-apply -m w$w.cgm change.cgu -o w$w.cgm
	done
}

# same_params DIGEST I...: the copy of each host I has DIGEST, that of
# the model the coordinator held before its last round
same_params() {
	local i want=$1
	shift
	for i in "$@"; do
		[ "$(params "$HOSTS_DIR/host$i/model.cgm")" = "$want" ] || {
			echo "host$i: not the coordinator's model" >&2
			return 1
		}
	done
}

@test "cg-cluster --down-codec: usage errors" {
	printf 'host0\n' >hosts
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--mode sync --down-codec q4 "$FX"
	[ "${stderr_lines[0]}" = 'cg-cluster: --down-codec: with --mode diloco only' ]
	run -2 cg-cluster -f hosts -m init.cgm -o run --down-codec '' "$FX"
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--down-codec q3 "$FX"
	[[ ${stderr_lines[0]} == "cg-cluster: --down-codec: unknown codec 'q3' ("* ]]
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--down-codec topk:2 "$FX"
	[ "${stderr_lines[0]}" = "cg-cluster: --down-codec: codec 'topk:2': bad parameter '2'" ]
	run -2 cg-cluster -f hosts -m init.cgm -o run --down-codec "$FX"
	[ ! -e run ]
	run -0 cg-cluster --help
	assert_output --partial '--down-codec SPEC'
}

@test "cg-cluster --down-codec q4: 3 hosts are the compressed loop byte for byte; every copy is the coordinator's; far less than a model a round" {
	needs_hosts
	local i r rx tx tx1 whole change prev
	printf 'host0\nhost1\nhost2\n' >hosts
	cp init.cgm m.cgm
	run -0 --separate-stderr cluster -r 1 "$FX"
	echo "$stderr"
	round 0 1 2
	cmp m.cgm run/model.cgm
	same_params "$(params init.cgm)" 0 1 2
	whole=$(stat -c %s run/down.cgm)
	[[ $stderr == *"round 1/1: step 1 published, "*", $((3 * whole)) bytes down, "* ]]
	for i in 0 1 2; do
		read -r rx tx1[$i] < <(hosts_bytes $i)
	done
	for r in 2 3 4; do
		prev=$(params run/model.cgm)
		run -0 --separate-stderr cluster -r $r "$FX"
		echo "$stderr"
		same_params "$prev" 0 1 2
		round 0 1 2
		cmp m.cgm run/model.cgm
		# the loop's workers, the change applied, hold the new one
		[ "$(params w0.cgm)" = "$(params m.cgm)" ]
		# what went down is the change, three times
		change=$(stat -c %s run/change.$((r - 1)))
		[[ $stderr == *", $((3 * change)) bytes down, "* ]]
	done
	# three rounds after the first: each host received less than a third of a
	# model a round, ssh and TCP included
	for i in 0 1 2; do
		read -r rx tx < <(hosts_bytes $i)
		echo "host$i: $(((tx - tx1[$i]) / 3)) bytes down a round, the model $whole"
		[ $(((tx - tx1[$i]) / 3)) -lt $((whole / 3)) ]
	done
	cmp change.cgu run/change.4
	run -0 ls run
	refute_output --partial change.2
	refute_output --partial held.2
}

@test "cg-cluster --down-codec: stopped in a round, run again it ends with the model of a run never stopped" {
	needs_hosts
	local pid i st=0 n
	printf 'host0\nhost1\nhost2\n' >hosts
	cg-cluster -f hosts -m init.cgm -o run --ssh "$HOSTS_SSH" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" \
		-k 3 -b 8 --seed 1 --down-codec q4 -q -r 4 "$FX" 3>&- &
	pid=$!
	for i in $(seq 400); do
		n=$(cg-inspect --no-stats run/model.cgm 2>/dev/null |
			sed -n 's/^step: *//p')
		[ "${n:-0}" -lt 2 ] || break
		sleep 0.05
	done
	kill -TERM "$pid"
	wait "$pid" || st=$?
	echo "stopped with status $st at step $(cg-inspect --no-stats run/model.cgm | sed -n 's/^step: *//p')"
	[ "$st" -eq 143 ] || [ "$st" -eq 0 ]
	run -0 cluster -q -r 4 "$FX"
	cp init.cgm m.cgm
	for i in 1 2 3; do
		round 0 1 2
	done
	same_params "$(params m.cgm)" 0 1 2
	round 0 1 2
	cmp m.cgm run/model.cgm
}

@test "cg-cluster --down-codec: a host left out by the quorum, and one that joins a slot, get the whole model and train on" {
	needs_hosts
	local whole
	printf 'host0\nhost1\n-\n' >hosts
	# host1 never answers round 2
	cat >slowssh <<-EOF
		#!/bin/sh
		case "\$1 \$*" in
		host1*cg-train-step*) [ ! -e $PWD/slow ] || exec sleep 60 ;;
		esac
		exec $HOSTS_SSH "\$@"
	EOF
	chmod +x slowssh
	SSH=$PWD/slowssh run -0 cluster -q -r 1 "$FX"
	touch slow
	SSH=$PWD/slowssh run -0 --separate-stderr cluster -r 2 --quorum 1 \
		--round-timeout 2 "$FX"
	echo "$stderr"
	[ "${stderr_lines[0]}" = 'cg-cluster: host1: round 2: no answer in 2 s: left out' ]
	rm slow
	# host1 left out, host2 joins: both are sent the whole model
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 --separate-stderr cluster -r 3 "$FX"
	echo "$stderr"
	whole=$(stat -c %s run/down.cgm)
	change=$(stat -c %s run/change.2)
	[[ $stderr == *", $((2 * whole + change)) bytes down, "* ]]
	run -0 --separate-stderr cluster -r 4 "$FX"
	change=$(stat -c %s run/change.3)
	[[ $stderr == *", $((3 * change)) bytes down, "* ]]
	# the loop: host1 missed round 2 (and its change); round 3 sends it
	# the whole model, and it trains on from the state of its round 1
	cp init.cgm m.cgm
	round 0 1
	round 0
	rm -f w1.cgm
	round 0 1 2
	same_params "$(params m.cgm)" 0 1 2
	round 0 1 2
	cmp m.cgm run/model.cgm
}

@test "cg-cluster --down-codec: a host whose copy was overwritten is sent the whole model, never trains from it" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 cluster -q -r 1 "$FX"
	want=$(params run/model.cgm)
	cp other.cgm "$HOSTS_DIR/host1/model.cgm"
	run -0 --separate-stderr cluster -r 2 "$FX"
	echo "$stderr"
	grep -q '^cg-cluster: host1: round 2: model.cgm: params .*: out of step$' <<<"$stderr"
	grep -qx 'cg-cluster: round 2: again, the whole model to host1' <<<"$stderr"
	[ "${stderr_lines[0]}" = "cg-cluster: host1: round 2: model.cgm: params $(params other.cgm), not $want of step 1: out of step" ]
	cp init.cgm m.cgm
	round 0 1 2
	same_params "$(params m.cgm)" 0 1 2
	round 0 1 2
	cmp m.cgm run/model.cgm
	# both tries counted in round 2's bytes: three changes, then two and
	# the whole model
	[[ $stderr == *", $((5 * $(stat -c %s run/change.1) + $(stat -c %s run/down.cgm))) bytes down, "* ]]
}

@test "cg-cluster --down-codec: a host that applied the change in a try that failed applies nothing the next try" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 cluster -q -r 1 "$FX"
	# host1 fails round 2 once it has applied the change
	mv "$HOSTS_DIR/host1/w.state.1" state.1
	run -1 --separate-stderr cluster -q -r 2 "$FX"
	[[ $stderr == "cg-cluster: host1: round 2: cp: "*"w.state.1"* ]]
	same_params "$(params run/model.cgm)" 0 1 2
	mv state.1 "$HOSTS_DIR/host1/w.state.1"
	# the change again: a host that applied it twice would be out of step
	run -0 --separate-stderr cluster -r 2 "$FX"
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *", $((3 * $(stat -c %s run/change.1))) bytes down, "* ]]
	cp init.cgm m.cgm
	round 0 1 2
	round 0 1 2
	cmp m.cgm run/model.cgm
}
