#!/usr/bin/env bats
#
# 122-pipe-hosts.bats - a cgpt larger than a host's memory trains as
# pipeline stages across hosts that each hold a quarter of it: four test
# hosts (tests/hosts.sh: network namespaces with an sshd each), each
# host's sshd, and so all it runs, in a memory cgroup of LIMIT bytes.
# On one host the unsplit call is killed by the kernel (or, with
# --max-memory, refused); as 4 stages, one a host, each running the next
# over ssh, it trains, and the joined stages are the very bytes of the
# unsplit call made outside any cgroup.  And a stage's --log line, which
# says where its time went.
#
# The tests that need hosts skip where network namespaces or memory
# cgroups cannot be made (not root, no ip, no sshd, no memory
# controller).  The programs come from PATH; the hosts run them from the
# same directory.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers
. "$BATS_TEST_DIRNAME/hosts.sh"

# a host's memory; the model below needs about 2.5 times it in one process
# (its weights, gradient and AdamW's moments: 16 bytes a parameter), a
# quarter of its blocks with its libraries about three quarters of it,
# leaving the host's sshd, shell and ssh client room.  Measured on one
# thread: a stage 96-98 MB of RSS, the unsplit call 338 MB (its
# memory_peak); under ASan, whose shadow and allocator add about a
# quarter, 120-123 MB and 366 MB: the sanitized build's hosts are larger
if [ "${CG_SANITIZED:-0}" = 1 ]; then
	LIMIT=$((152 * 1048576))
else
	LIMIT=$((128 * 1048576))
fi

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1
	# 8 blocks of width 448: 19.6M parameters
	model cgpt t-0.cgd big.cgm --context 16 --width 448 --layers 8 \
		--heads 4
	small_cgpt t-0.cgd small.cgm --layers 4
	export MEM_SKIP
	MEM_SKIP=$(hosts_memory_skip_reason)
	if [ -n "$MEM_SKIP" ]; then
		HOSTS_SKIP=$MEM_SKIP
		export HOSTS_SKIP
		return 0
	fi
	hosts_setup_file 4 || return 1
	[ -n "${HOSTS_DIR:-}" ] || return 0
	for i in 0 1 2 3; do
		hosts_memory "$i" "$LIMIT" || return 1
	done
}

teardown_file() {
	hosts_down
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	PREFIX=$(hosts_prefix)
}

needs_hosts() {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	[ -n "${HOSTS_DIR:-}" ] || skip "no test hosts"
}

# kills I: the processes the kernel has killed in host I's cgroup
kills() {
	local f k p
	read -r f k p < <(hosts_memory_stat "$1")
	echo "$k"
}

@test "a stage's --log line: its stage, schedule and where its time went" {
	for i in 1 2 3; do
		cg-convert -S "$i/3" "$D/small.cgm" -o "s$i.cgm"
	done
	run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 3 -b 8 \
		--micro-batches 4 --pipeline 1f1b --log l.1 -o o1.cgm --next \
		"cg-train-step -q -m s2.cgm -e model --log l.2 -o o2.cgm --next 'cg-train-step -q -m s3.cgm -e model --log l.3 -o o3.cgm'"
	refute_output
	# (bats's run sets i: the stage is s)
	local s
	for s in 1 2 3; do
		[ "$(wc -l <"l.$s")" -eq 1 ]
		run -0 jq -c '[.emit, .step, .steps, .samples, .stage, .stages, .schedule, .micro_batches, .wire]' "l.$s"
		assert_output "[\"model\",3,3,24,$s,3,\"1f1b\",4,\"f32\"]"
		# every stage knows the call's loss, the first stage's
		run -0 jq -e '.loss > 0 and (.loss | isfinite)' "l.$s"
		# the waits are parts of the steps, the first step a part of all
		run -0 jq -e '.seconds > 0 and .wait_seconds >= 0 and
			.wait_seconds <= .seconds and
			.first_step_seconds <= .seconds and
			.first_wait_seconds <= .wait_seconds and
			.first_wait_seconds <= .first_step_seconds and
			.memory_peak > 0 and .memory_plan > 0 and
			(.checkpoint == false) and (has("chunk") | not)' "l.$s"
	done
	run -0 jq -s -e '.[0].loss == .[1].loss and .[1].loss == .[2].loss' \
		l.1 l.2 l.3
	# the same call without --log: the same bytes
	mkdir again
	cp s?.cgm again/
	cd again
	run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 3 -b 8 \
		--micro-batches 4 --pipeline 1f1b -o o1.cgm --next \
		"cg-train-step -q -m s2.cgm -e model -o o2.cgm --next 'cg-train-step -q -m s3.cgm -e model -o o3.cgm'"
	for s in 1 2 3; do
		cmp "o$s.cgm" "../o$s.cgm"
	done
}

@test "the limit holds: a process over it, in a host, is killed" {
	needs_hosts
	local k0
	k0=$(kills 0)
	run -0 --separate-stderr $HOSTS_SSH host0 "dd if=/dev/zero of=/dev/null bs=$((2 * LIMIT)) count=1 2>/dev/null; echo \$?"
	[ "$output" -ne 0 ] || fail "dd of twice the limit: exit 0"
	[ "$(kills 0)" -gt "$k0" ] || fail "no kill counted in host0's cgroup"
}

@test "too large for one host: killed there, refused with --max-memory" {
	needs_hosts
	local k0 train
	train="${PREFIX}cg-train-step -q -m $D/big.cgm -d $D/t-0.cgd -e model --opt adamw -k 1 -b 4 -j 1"
	# the model needs more than twice a host's memory
	$train --micro-batches 2 --log whole.jsonl -o whole.cgm
	[ "$(jq .memory_peak whole.jsonl)" -gt $((2 * LIMIT)) ] ||
		fail "the unsplit call took $(jq .memory_peak whole.jsonl) bytes: it is not too large"
	k0=$(kills 0)
	run -0 --separate-stderr $HOSTS_SSH host0 "cd $PWD && $train --micro-batches 2 -o single.cgm 2>/dev/null; echo \$?"
	[ "$output" -ne 0 ] || fail "the unsplit call fit on one host"
	[ ! -e single.cgm ]
	[ "$(kills 0)" -gt "$k0" ] || fail "no kill counted in host0's cgroup"
	run -0 --separate-stderr $HOSTS_SSH host0 "cd $PWD && $train --max-memory $LIMIT -o single.cgm 2>err; echo \$?"
	assert_output 1
	[ "$(wc -l <err)" -eq 1 ] || fail "$(cat err)"
	grep -q 'max-memory' err || fail "$(cat err)"
	[ ! -e single.cgm ]
}

@test "4 stages on 4 such hosts train to the unsplit call's bytes" {
	needs_hosts
	local i k0=() next cmd
	# the reference, outside any cgroup
	run -0 cg-train-step -q -m "$D/big.cgm" -d "$D/t-0.cgd" -e model \
		--opt adamw -k 1 -b 4 --micro-batches 2 -j 1 -o whole.cgm
	for i in 1 2 3 4; do
		cg-convert -S "$i/4" "$D/big.cgm" -o "s$i.cgm"
	done
	for i in 4 3 2; do
		next=
		[ "$i" = 4 ] || next="--next '$HOSTS_SSH host$i sh $PWD/stage$((i + 1)).sh'"
		echo "cd $PWD && exec ${PREFIX}cg-train-step -q -m s$i.cgm -e model --opt adamw -j 1 -o o$i.cgm $next" >"stage$i.sh"
	done
	for i in 0 1 2 3; do
		k0[i]=$(kills "$i")
	done
	run -0 $HOSTS_SSH host0 "cd $PWD && ${PREFIX}cg-train-step -q -m s1.cgm -d $D/t-0.cgd -e model --opt adamw -k 1 -b 4 --micro-batches 2 -j 1 -o o1.cgm --next '$HOSTS_SSH host1 sh $PWD/stage2.sh'"
	refute_output
	for i in 0 1 2 3; do
		[ "$(kills "$i")" -eq "${k0[i]}" ] || fail "host$i: a process killed"
	done
	run -0 cg-convert -J o1.cgm o2.cgm o3.cgm o4.cgm -o joined.cgm
	cmp joined.cgm whole.cgm || fail "the joined stages differ from the unsplit call"
}
