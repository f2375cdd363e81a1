#!/usr/bin/env bats
#
# 082-slurm.bats - examples/slurm/run.sh trains under Slurm, on a cluster
# of this one machine (tests/slurm.sh: its own munged, slurmctld and
# slurmd): each round a job array of cg-train-step and a reduce/apply job
# that depends on it.  With the same seeds the model is, byte for byte,
# the README's DiLoCo loop in one directory and cg-cluster's over ssh on
# the test hosts (tests/hosts.sh); a task that fails leaves the reduce job
# unrun, and run.sh names it in one line, nothing published; run again,
# it goes on.
#
# The tests that need Slurm skip where it cannot start (not root, no
# slurm-wlm or munge, or its daemons fail), saying why; the ssh
# comparison where there are no test hosts.
# Every program runs on one thread: the bytes depend on the thread count.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers
. "$BATS_TEST_DIRNAME/slurm.sh"
. "$BATS_TEST_DIRNAME/hosts.sh"

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini
RUN=$BATS_TEST_DIRNAME/../examples/slurm/run.sh

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	images all -n 1
	model cvae all-0.cgd init.cgm --hidden 32 --layers 1 --latent 4
	export SLURM_SKIP
	SLURM_SKIP=$(slurm_skip_reason)
	[ -n "$SLURM_SKIP" ] && return 0
	# a machine where slurmctld or slurmd cannot start skips, saying why
	if ! slurm_up 2>"$BATS_FILE_TMPDIR/slurm_up.err"; then
		SLURM_SKIP="Slurm did not start: $(tail -n 1 \
			"$BATS_FILE_TMPDIR/slurm_up.err")"
	fi
}

teardown_file() {
	slurm_down
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
	cp "$BATS_FILE_TMPDIR/init.cgm" .
}

teardown() {
	hosts_down
}

needs_slurm() {
	[ -z "$SLURM_SKIP" ] || skip "$SLURM_SKIP"
	[ -n "${SLURM_CONF:-}" ] || skip "no Slurm cluster"
}

# local_diloco ROUNDS STEPS BATCH: the README's DiLoCo loop on three
# shards in this directory, into m.cgm
local_diloco() {
	local r w
	cg-shard -q -n 3 --seed 1 -o fm "$FX"
	cp init.cgm m.cgm
	for r in $(seq "$1"); do
		for w in 0 1 2; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta \
				--steps "$2" --batch "$3" --seed 1 \
				--state w$w.state -o d$w.cgg &
		done
		wait
		cg-reduce d0.cgg d1.cgg d2.cgg |
			cg-apply -m m.cgm --outer nesterov -o m.cgm
	done
}

@test "examples/slurm/run.sh: --help, usage errors exit 2" {
	run -0 "$RUN" --help
	assert_line --index 0 --partial 'run.sh - DiLoCo rounds as Slurm jobs'
	run -2 --separate-stderr "$RUN" --bogus
	[ "${stderr_lines[0]}" = "run.sh: unknown option '--bogus'" ]
	run -2 --separate-stderr "$RUN" -m init.cgm -o run
	[ "${stderr_lines[0]}" = 'run.sh: no number of workers (-n)' ]
	run -2 "$RUN" -n 0 -m init.cgm -o run
	run -2 "$RUN" -n 3 -m init.cgm -o run -r x
}

@test "examples/slurm/run.sh: a job array a round and a dependent reduce job give the shell loop's model, byte for byte" {
	needs_slurm
	local t0=$SECONDS
	run -0 --separate-stderr "$RUN" -n 3 -m init.cgm -o run -r 3 -k 5 \
		-b 8 --seed 1 "$FX"
	echo "$stderr"
	echo "3 rounds in $((SECONDS - t0)) s"
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[2]} == 'run.sh: round 3/3: step 3 published (array '* ]]
	local_diloco 3 5 8
	cmp m.cgm run/model.cgm
	# each task had its log; the states of the last model stay
	[ -e run/slurm/train-3-2.log ] && [ -e run/slurm/reduce-3.log ]
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

@test "examples/slurm/run.sh and cg-cluster over ssh: the same model, byte for byte" {
	needs_slurm
	local why
	why=$(hosts_skip_reason)
	[ -z "$why" ] || skip "$why"
	hosts_up 3
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 cg-cluster -q -f hosts -m init.cgm -o ssh --ssh "$HOSTS_SSH" \
		--remote-dir "$HOSTS_DIR/%h" \
		--remote-prefix "$(hosts_prefix)" \
		-r 2 -k 4 -b 8 --seed 1 "$FX"
	run -0 "$RUN" -q -n 3 -m init.cgm -o slurm -r 2 -k 4 -b 8 --seed 1 "$FX"
	cmp ssh/model.cgm slurm/model.cgm
}

@test "examples/slurm/run.sh: a task that fails leaves the reduce job unrun, one line, nothing published" {
	needs_slurm
	local b
	run -0 "$RUN" -q -n 3 -m init.cgm -o run -r 1 -k 2 -b 8 --seed 1 "$FX"
	cp run/model.cgm one.cgm
	# worker 1 loses its state
	mv run/w1.state.1 w1.state.1
	run -1 --separate-stderr "$RUN" -q -n 3 -m init.cgm -o run -r 2 -k 2 \
		-b 8 --seed 1
	echo "$stderr"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr =~ ^run\.sh:\ round\ 2:\ task\ 1\ \(FAILED,\ exit\ 1:0\)\ failed:\ cp:\ .*w1\.state\.1.*\;\ reduce\ job\ ([0-9]+)\ not\ run:\ nothing\ published$ ]]
	b=${BASH_REMATCH[1]}
	cmp one.cgm run/model.cgm
	# Slurm cancelled it, and it never ran
	run -0 scontrol -o show job "$b"
	assert_output --partial 'JobState=CANCELLED Reason=DependencyNeverSatisfied'
	[ ! -e run/slurm/reduce-2.log ]
	# put back, the round runs again
	cp w1.state.1 run/w1.state.1
	run -0 "$RUN" -q -n 3 -m init.cgm -o run -r 2 -k 2 -b 8 --seed 1
	[ "$(cg-inspect --no-stats run/model.cgm | sed -n 's/^step: *//p')" = 2 ]
}
