#!/usr/bin/env bats
#
# 064-crash.bats - a worker's output and state file as a pair: what the
# state names (shard, model, output), the pairs a crash can leave, and
# cg-train-step killed (SIGKILL) at many instants.
#
# The kill test runs one worker call after another, kills each at an
# instant drawn from a seeded sequence (spread over the length of a call),
# then runs the call again, as a worker that comes back does.  The calls
# are deterministic, so a reference chain run without kills says what
# every pair must be: after the next call the pair on disk is the
# reference pair of its cursor, or the next call refused the pair (exit
# 1, one line saying what to do), and doing what it says brings the
# worker back onto the reference chain.  No temporary survives a call.
# The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2 --strategy round-robin
	small_cvae fm-0.cgd model.cgm
	# one step on: another model of step 1
	cg-train-step -q -m model.cgm -d fm-0.cgd --emit model --batch 4 \
		-o step1.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
	delta=(-q -d "$D/fm-0.cgd" --emit delta --steps 2 --batch 4 --threads 1)
}

# u64 FILE TENSOR: the one value of a u64[1] tensor
u64() {
	tar xOf "$1" "$2" | od -An -tu8 | tr -d ' '
}

manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

# no_temporaries: no .NAME.XXXXXX file left in the working directory
no_temporaries() {
	local left
	left=$(ls -A | grep '^\.' || true)
	if [ -n "$left" ]; then
		echo "temporaries left: $left"
		return 1
	fi
}

@test "a state names the shard, the model and the output it was written with" {
	cg-train-step "${delta[@]}" -m "$D/model.cgm" --state w.state -o d.cgg
	run -0 manifest w.state '[.kind, .emit, .model.step, .output.path] | @tsv'
	assert_output $'state\tdelta\t0\td.cgg'
	[ "$(manifest w.state .output.sha256)" = "$(sha256sum d.cgg | cut -c1-64)" ]
	[ "$(manifest w.state .model.sha256)" = "$(manifest d.cgg .base.sha256)" ]
	[[ $(manifest w.state .shard.sha256) =~ ^[0-9a-f]{64}$ ]]
	run -0 manifest w.state '[.tensors[] | .name + ":" + .dtype] | join(" ")'
	assert_output 'cursor:u64 opt.t:u64 opt.m:f32 opt.v:f32'
	# written to standard output: a path, no digest
	cg-train-step "${delta[@]}" -m "$D/model.cgm" --state s.state >d.out
	run -0 manifest s.state '[.output.path, .output.sha256 // "none"] | @tsv'
	assert_output $'-\tnone'
	# a model names the model it wrote, which the next call starts from
	cp "$D/model.cgm" x.cgm
	cg-train-step -q -d "$D/fm-0.cgd" --emit model --steps 3 --batch 4 \
		-m x.cgm --state m.state -o x.cgm
	run -0 manifest m.state '[.emit, .model.step, .output.model.step] | @tsv'
	assert_output $'model\t0\t3'
	[ "$(manifest m.state .output.sha256)" = "$(sha256sum x.cgm | cut -c1-64)" ]
	no_temporaries
}

@test "a state made with another shard is refused" {
	cg-train-step "${delta[@]}" -m "$D/model.cgm" --state w0.state -o d0.cgg
	cp w0.state w0.before
	run -1 --separate-stderr cg-train-step -q -d "$D/fm-1.cgd" --emit delta \
		--steps 2 --batch 4 -m "$D/model.cgm" --state w0.state -o d0.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: w0.state: made with another shard: '* ]]
	cmp w0.state w0.before
	no_temporaries
}

@test "DiLoCo: a state goes on with the coordinator's next model, not an older or another one" {
	cg-train-step "${delta[@]}" -m "$D/model.cgm" --state w.state -o d.cgg
	# the next model (a later step) is what a round gives the worker
	cg-train-step "${delta[@]}" -m "$D/step1.cgm" --state w.state -o d.cgg
	[ "$(manifest w.state .model.step)" = 1 ]
	# an older model: refused
	cp w.state w.before
	run -1 --separate-stderr cg-train-step "${delta[@]}" -m "$D/model.cgm" \
		--state w.state -o d.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == *'computed from a model of step 1, newer than this one (step 0)'* ]]
	cmp w.state w.before
	# another model of the same step: refused
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-1.cgd" --emit model \
		--batch 4 -o other1.cgm
	run -1 --separate-stderr cg-train-step "${delta[@]}" -m other1.cgm \
		--state w.state -o d.cgg
	[[ $stderr == *'computed from another model of step 1'* ]]
	# the same model again: another call of the same round, allowed
	cg-train-step "${delta[@]}" -m "$D/step1.cgm" --state w.state -o d.cgg
	# another emit kind: refused
	run -1 --separate-stderr cg-train-step -q -d "$D/fm-0.cgd" \
		--emit grad -m "$D/step1.cgm" --state w.state -o g.cgg
	[[ $stderr == 'cg-train-step: w.state: written by --emit delta, not grad: '* ]]
	no_temporaries
}

@test "a new output beside the old state, or an old output beside a new state, is refused" {
	local a=("${delta[@]}" -m "$D/model.cgm" --state w.state -o d.cgg)
	cg-train-step "${a[@]}"
	cp w.state w.old
	cp d.cgg d.old
	cg-train-step "${a[@]}"
	cp w.state w.new
	cp d.cgg d.new
	# a new output beside the old state (the crash between the renames)
	cp w.old w.state
	run -1 --separate-stderr cg-train-step "${a[@]}"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: w.state: d.cgg is not the output written with it (a call cut short between the two?): remove d.cgg and rerun the call to write both again, or remove w.state to start this worker afresh' ]]
	cmp d.cgg d.new
	cmp w.state w.old
	# doing what it says writes both again, the same bytes
	rm d.cgg
	cg-train-step "${a[@]}"
	cmp d.cgg d.new
	cmp w.state w.new
	# an old output beside a new state
	cp d.old d.cgg
	run -1 --separate-stderr cg-train-step "${a[@]}"
	[[ $stderr == *'d.cgg is not the output written with it'* ]]
	# an output that is gone (taken by the coordinator) is not checked
	rm d.cgg
	cg-train-step "${a[@]}"
	no_temporaries
}

@test "--emit model -m X -o X: a model beside a state it does not match is refused" {
	local a=(-q -d "$D/fm-0.cgd" --emit model --steps 2 --batch 4
		--threads 1 -m x.cgm --state w.state -o x.cgm)
	cp "$D/model.cgm" x.cgm
	cg-train-step "${a[@]}"
	cp w.state w.old
	cp x.cgm x.old
	cg-train-step "${a[@]}"
	cp w.state w.new
	cp x.cgm x.new
	# the new model beside the old state
	cp w.old w.state
	run -1 --separate-stderr cg-train-step "${a[@]}"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: w.state: written beside the model of step 2, not this one (step 4; a call cut short?): remove it to go on from this model' ]]
	cmp x.cgm x.new
	# the old model beside the new state
	cp w.new w.state
	cp x.old x.cgm
	run -1 --separate-stderr cg-train-step "${a[@]}"
	[[ $stderr == *'written beside the model of step 4, not this one (step 2;'* ]]
	# doing what it says goes on from the model, on the same bytes
	rm w.state
	cg-train-step "${a[@]}"
	cmp x.cgm x.new
	cmp w.state w.new
	no_temporaries
}

@test "a state without a record of what it belongs to is refused" {
	cg-train-step "${delta[@]}" -m "$D/model.cgm" --state w.state -o d.cgg
	mkdir x
	(cd x && tar xf ../w.state &&
		tar xOf ../w.state cg.json | jq -c 'del(.emit)' >cg.json &&
		tar --format=ustar -cf ../old.state cg.json cursor opt.t opt.m opt.v)
	run -1 --separate-stderr cg-train-step "${delta[@]}" -m "$D/model.cgm" \
		--state old.state -o d.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: old.state: no whole record of the call that wrote it'* ]]
}

# ------------------------------------------------------------- kills

# ref_pair K: make the reference pair after K calls (ref/out.K,
# ref/state.K) by running calls without kills up to K.
ref_pair() {
	while [ "$ref_k" -lt "$1" ]; do
		(cd ref && cg-train-step "${call[@]}") || return 1
		ref_k=$((ref_k + 1))
		cp "ref/$out" "ref/out.$ref_k"
		cp ref/w.state "ref/state.$ref_k"
	done
}

# check_pair: the pair on disk is the reference pair of its step
check_pair() {
	local k
	k=$(progress)
	ref_pair "$k"
	cmp "$out" "ref/out.$k"
	cmp w.state "ref/state.$k"
}

# kill_calls N MODE: N calls, each killed at a seeded instant, each
# followed by the next call as a worker runs it.
kill_calls() {
	# (not i: bats's run sets a global i)
	local n=$1 kill_i t0 t1 us r rc before=0 between=0 after=0 refused=0
	RANDOM=$2
	ref_k=0
	mkdir ref
	start_pair
	(cd ref && start_pair)
	# the length of one call, to spread the instants over (the clock
	# sets the scale only: the instants are a seeded sequence)
	t0=$EPOCHREALTIME
	ref_pair 3
	t1=$EPOCHREALTIME
	us=$(((${t1/./} - ${t0/./}) / 3))
	for ((kill_i = 0; kill_i < n; kill_i++)); do
		local so os
		so=$(sha256sum w.state 2>/dev/null || true)
		os=$(sha256sum "$out" 2>/dev/null || true)
		# an instant in [0, the length of a call]
		r=$((RANDOM * 32768 + RANDOM))
		cg-train-step "${call[@]}" &
		local pid=$!
		r=$((r % (us + 1)))
		sleep "$(printf '%d.%06d' $((r / 1000000)) $((r % 1000000)))"
		kill -KILL $pid 2>/dev/null || true
		wait $pid && rc=0 || rc=$?
		# what the kill left: nothing renamed, the output alone, both
		if [ "$(sha256sum w.state 2>/dev/null || true)" != "$so" ]; then
			after=$((after + 1))
		elif [ "$(sha256sum "$out" 2>/dev/null || true)" != "$os" ]; then
			between=$((between + 1))
		else
			before=$((before + 1))
		fi
		# the next call: goes on from a consistent pair, or refuses
		run --separate-stderr cg-train-step "${call[@]}"
		if [ "$status" -ne 0 ]; then
			[ "$status" -eq 1 ]
			[ "${#stderr_lines[@]}" -eq 1 ]
			[[ $stderr == "cg-train-step: w.state: "*"remove "* ]]
			[[ $stderr == *"$mismatch"* ]]
			refused=$((refused + 1))
			recover
			cg-train-step "${call[@]}"
		fi
		no_temporaries
		check_pair
	done
	echo "# $mode: $n kills: $before before any rename, $between between" \
		"the renames, $after after both; $refused refused" >&3
}

@test "cg-train-step --emit delta --state killed at 50 instants: never a mismatched pair used" {
	mode=delta out=d.cgg mismatch='is not the output written with it'
	call=("${delta[@]}" -m "$D/model.cgm" --state w.state -o d.cgg)
	start_pair() { :; }
	progress() { echo $(($(u64 w.state cursor) / 8)); }
	recover() { rm d.cgg; }
	kill_calls 50 64
}

@test "cg-train-step --emit model -m X -o X --state killed at 50 instants: never a mismatched pair used" {
	mode=model out=x.cgm mismatch='written beside the model of step'
	call=(-q -d "$D/fm-0.cgd" --emit model --steps 2 --batch 4 --threads 1
		-m x.cgm --state w.state -o x.cgm)
	start_pair() { cp "$D/model.cgm" x.cgm; }
	progress() { echo $(($(manifest x.cgm .step) / 2)); }
	recover() { rm w.state; }
	kill_calls 50 65
}
