#!/usr/bin/env bats
#
# 086-parallel.bats - examples/parallel/run.sh trains under GNU parallel:
# each round one job a worker (parallel --sshlogin), then cg-reduce and
# cg-apply here.  With the same seeds the model is, byte for byte, the
# README's DiLoCo loop in one directory, whether parallel runs the jobs
# on this machine (-S :) or over ssh on the test hosts (tests/hosts.sh,
# which share this file system); a job that fails stops the round, one
# line, nothing published; run again, it goes on.
#
# The ssh test skips where no test hosts can be made, saying why.
# Every program runs on one thread: the bytes depend on the thread count.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers
. "$BATS_TEST_DIRNAME/hosts.sh"

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini
RUN=$BATS_TEST_DIRNAME/../examples/parallel/run.sh

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	images all -n 1
	model cvae all-0.cgd init.cgm --hidden 32 --layers 1 --latent 4
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
	cp "$BATS_FILE_TMPDIR/init.cgm" .
}

teardown() {
	hosts_down
}

# local_diloco ROUNDS STEPS BATCH: the README's DiLoCo loop on three
# shards in this directory, into m.cgm (waiting for its own workers
# only: the test hosts' sshds are this shell's children too)
local_diloco() {
	local r w pids
	cg-shard -q -n 3 --seed 1 -o fm "$FX"
	cp init.cgm m.cgm
	for r in $(seq "$1"); do
		pids=
		for w in 0 1 2; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta \
				--steps "$2" --batch "$3" --seed 1 \
				--state w$w.state -o d$w.cgg &
			pids="$pids $!"
		done
		# shellcheck disable=SC2086
		wait $pids
		cg-reduce d0.cgg d1.cgg d2.cgg |
			cg-apply -m m.cgm --outer nesterov -o m.cgm
	done
}

@test "examples/parallel/run.sh: --help, usage errors exit 2" {
	run -0 "$RUN" --help
	assert_line --index 0 --partial 'run.sh - DiLoCo rounds under GNU parallel'
	run -2 --separate-stderr "$RUN" --bogus
	[ "${stderr_lines[0]}" = "run.sh: unknown option '--bogus'" ]
	run -2 --separate-stderr "$RUN" -m init.cgm -o run
	[ "${stderr_lines[0]}" = 'run.sh: no number of workers (-n)' ]
	run -2 "$RUN" -n 0 -m init.cgm -o run
	run -2 "$RUN" -n 3 -m init.cgm -o run -r x
	run -2 --separate-stderr "$RUN" -n 3 -m init.cgm -o run
	[ "${stderr_lines[0]}" = 'run.sh: no DATA to shard into run' ]
}

@test "examples/parallel/run.sh -S :: a job a worker a round gives the shell loop's model, byte for byte" {
	run -0 --separate-stderr "$RUN" -n 3 -m init.cgm -o run -r 3 -k 5 \
		-b 8 --seed 1 "$FX"
	echo "$stderr"
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[2]} == 'run.sh: round 3/3: step 3 published, '* ]]
	local_diloco 3 5 8
	cmp m.cgm run/model.cgm
	# each job had its log; the states of the last model stay
	[ -e run/parallel/train-3-2.log ] && [ -e run/parallel/jobs-3.log ]
	run -0 ls run
	assert_line w2.state.3
	refute_line w2.state.2
	# run again: done already; with more rounds, it goes on
	run -0 --separate-stderr "$RUN" -n 3 -m init.cgm -o run -r 3 -k 5 -b 8 \
		--seed 1
	[[ $stderr == *'3 rounds done already' ]]
	run -0 "$RUN" -q -n 3 -m init.cgm -o run -r 4 -k 5 -b 8 --seed 1
	rm -f w*.state
	local_diloco 4 5 8
	cmp m.cgm run/model.cgm
}

@test "examples/parallel/run.sh: a job that fails stops the round, one line, nothing published" {
	run -0 "$RUN" -q -n 3 -m init.cgm -o run -r 1 -k 2 -b 8 --seed 1 "$FX"
	cp run/model.cgm one.cgm
	# worker 1 loses its state
	mv run/w1.state.1 w1.state.1
	run -1 --separate-stderr "$RUN" -q -n 3 -m init.cgm -o run -r 2 -k 2 \
		-b 8 --seed 1
	echo "$stderr"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr =~ ^run\.sh:\ round\ 2:\ worker\ 1\ failed:\ cp:\ .*w1\.state\.1.*:\ nothing\ published$ ]]
	cmp one.cgm run/model.cgm
	# put back, the round runs again
	cp w1.state.1 run/w1.state.1
	run -0 "$RUN" -q -n 3 -m init.cgm -o run -r 2 -k 2 -b 8 --seed 1
	[ "$(cg-inspect --no-stats run/model.cgm | sed -n 's/^step: *//p')" = 2 ]
	rm -f w*.state
	local_diloco 2 2 8
	cmp m.cgm run/model.cgm
}

@test "examples/parallel/run.sh over ssh on three test hosts: the shell loop's model, byte for byte" {
	local why
	why=$(hosts_skip_reason)
	[ -z "$why" ] || skip "$why"
	hosts_up 3
	run -0 --separate-stderr "$RUN" -n 3 -m init.cgm -o run -r 2 -k 4 \
		-b 8 --seed 1 -S 1/host0,1/host1,1/host2 --ssh "$HOSTS_SSH" \
		-P "$(hosts_prefix)" "$FX"
	echo "$stderr"
	# the jobs ran on the hosts, not here
	run -0 cut -f 2 run/parallel/jobs-1.log
	assert_line --regexp '^host[0-2]$'
	refute_line ':'
	local_diloco 2 4 8
	cmp m.cgm run/model.cgm
}
