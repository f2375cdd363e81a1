#!/usr/bin/env bats
#
# 069-crash-loop.bats - a whole training loop (cg-train-step with state
# files, cg-reduce, cg-apply: examples/resume/loop.sh) killed with
# SIGKILL, with every process of it, at 100 instants (CG_CRASH_KILLS
# sets how many), and run again after each kill: every file under a
# final name verifies after every kill, and the loop run to its end from
# what is on disk ends on the bytes of
# a run never cut short: the model, every state, every delta and the
# reduction.
#
# Each kill cuts one round short: a copy of the directory as an
# uninterrupted run left it after round j (j = 0, 1, 2 in turn) is run
# towards round j + 1, killed at an instant drawn from a seeded sequence
# spread over the length of a round (measured on the uninterrupted run:
# the clock sets the scale only), checked, and run again to its end,
# which must give the bytes of round j + 1.  So the kills fall in every
# part of a round: a worker's call, the gap between its two renames, the
# reduction, the outer step and the loop's own reading of where it
# stands, in a first round (no state yet) and in later ones.  An instant
# that comes after the round has ended is not a kill and is drawn again.
# The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	mkdir start
	images start/fm -n 2 --strategy stratified
	small_cvae start/fm-0.cgd start/model.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	loop=$BATS_TEST_DIRNAME/../examples/resume/loop.sh
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1 ROUNDS
}

# verify_all DIR: every file of DIR under a final name (not a .NAME.XXXXXX
# temporary) verifies: whole, every digest right (cg-inspect checks each
# and fails if any fails)
verify_all() {
	cg-inspect --verify -q "$1"/*
}

@test "examples/resume/loop.sh killed at 100 instants (CG_CRASH_KILLS): no torn file, the same bytes at the end" {
	# the uninterrupted run, a copy after every round
	local j t0 t1 total=0
	cp -r "$D/start" ref
	cp -r ref ref.0
	for j in 1 2 3; do
		t0=$EPOCHREALTIME
		ROUNDS=$j "$loop" ref
		t1=$EPOCHREALTIME
		total=$((total + ${t1/./} - ${t0/./}))
		cp -r ref "ref.$j"
	done
	# the length of a round, in microseconds
	local us=$((total / 3))

	# CG_CRASH_KILLS: fewer where a slow build runs it again (the
	# sanitizers', the portable one): what it checks is the loop's, not
	# the build's
	local want=${CG_CRASH_KILLS:-100}
	RANDOM=68
	local kills=0 tries=0 r pid temps=0 moved=0 f
	while [ $kills -lt "$want" ]; do
		tries=$((tries + 1))
		[ $tries -le $((2 * want)) ]
		j=$((tries % 3))
		rm -rf run
		cp -r "ref.$j" run
		r=$(((RANDOM * 32768 + RANDOM) % (us + 1)))
		# its own process group, so that the kill takes every job of it
		ROUNDS=$((j + 1)) setsid "$loop" run &
		pid=$!
		sleep "$(printf '%d.%06d' $((r / 1000000)) $((r % 1000000)))"
		if ! kill -KILL -- -$pid 2>/dev/null; then
			# the round ended first: not a kill
			wait $pid
			continue
		fi
		wait $pid || true
		# a worker may still be on its way out: wait for the group
		group_wait $pid
		kills=$((kills + 1))
		verify_all run
		! ls -A run | grep -q '^\.' || temps=$((temps + 1))
		cmp -s run/model.cgm "ref.$j/model.cgm" || moved=$((moved + 1))
		# run again from what is on disk: the bytes of the next round
		ROUNDS=$((j + 1)) "$loop" run
		for f in "ref.$((j + 1))"/*; do
			cmp "$f" "run/${f##*/}"
		done
		[ "$(ls -A run | wc -l)" -eq "$(ls -A "ref.$((j + 1))" | wc -l)" ]
	done
	echo "# $want kills in $tries instants: $temps left a temporary," \
		"$moved came after the outer step" >&3
}
