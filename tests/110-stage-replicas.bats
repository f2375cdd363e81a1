#!/usr/bin/env bats
#
# 110-stage-replicas.bats - data parallelism over pipeline stages: R = 2
# replicas of an N = 2 stage cgpt, each replica's pipeline on its own
# shard emitting a grad or a delta per stage (cg-train-step --emit grad,
# delta with --next), each stage's replicas reduced and applied apart
# (cg-reduce, cg-apply on the stage's file); joined, the stages are the
# bytes of the unsplit round of 2 workers with the same micro-batches,
# synchronous and DiLoCo's.  Then what refuses to mix: stages, a stage
# with a whole model, a stage's update with another stage.  The programs
# come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 2
	small_cgpt t-0.cgd m.cgm --layers 2
	cg-convert -S 1/2 m.cgm -o s1.cgm
	cg-convert -S 2/2 m.cgm -o s2.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# replica $1 (its shard t-$1.cgd) of stages $3, $4 emitting $2 into
# r$1-1.cgg, r$1-2.cgg; the rest of the arguments are both stages' (each
# stage steps with its own optimizer's options)
replica() {
	local r=$1 e=$2 a=$3 b=$4
	shift 4
	cg-train-step -q -m "$a" -d "$D/t-$r.cgd" -e "$e" -k 2 -b 6 \
		--micro-batches 3 -o "r$r-1.cgg" "$@" \
		--next "cg-train-step -q -m $b -e $e -o r$r-2.cgg $*"
}

@test "2 replicas x 2 stages, synchronous: reduce and apply per stage, joined, make the unsplit round's bytes" {
	# the unsplit round: 2 workers, their grads reduced and applied
	for r in 0 1; do
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-$r.cgd" -e grad \
			-k 2 -b 6 --micro-batches 3 -o "w$r.cgg"
	done
	run -0 cg-reduce -q w0.cgg w1.cgg -o g.cgg
	run -0 cg-apply -m "$D/m.cgm" g.cgg -o u.cgm
	# the same round over stages, reduced per stage
	for r in 0 1; do
		run -0 replica "$r" grad "$D/s1.cgm" "$D/s2.cgm"
		refute_output
	done
	run -0 bash -c "tar xOf r0-2.cgg cg.json | jq -c .stage"
	assert_output '{"index":1,"count":2,"layers":[1,2]}'
	for s in 1 2; do
		run -0 cg-reduce -q "r0-$s.cgg" "r1-$s.cgg" -o "g$s.cgg"
		run -0 cg-apply -m "$D/s$s.cgm" "g$s.cgg" -o "n$s.cgm"
	done
	run -0 cg-convert -J n2.cgm n1.cgm -o j.cgm
	cmp j.cgm u.cgm || fail "the joined stages are not the unsplit round's model"
	# the stage's updates hold its tensors alone, and what reduces them
	run -0 bash -c "tar tf g1.cgg | grep -c '^h\.1\.' || true"
	assert_output 0
	run -0 bash -c "tar xOf g1.cgg cg.json | jq -r '.inputs, .weight == $(tar xOf g.cgg cg.json | jq .weight)'"
	assert_output "$(printf '2\ntrue')"
	# a second round goes on from the applied stages, 1F1B this time
	for r in 0 1; do
		run -0 cg-train-step -q -m u.cgm -d "$D/t-$r.cgd" -e grad \
			-k 2 -b 6 --micro-batches 3 -o "x$r.cgg"
		run -0 replica "$r" grad n1.cgm n2.cgm --pipeline 1f1b
	done
	run -0 cg-reduce -q x0.cgg x1.cgg -o h.cgg
	run -0 cg-apply -m u.cgm h.cgg -o v.cgm
	for s in 1 2; do
		run -0 cg-reduce -q "r0-$s.cgg" "r1-$s.cgg" -o "h$s.cgg"
		run -0 cg-apply -m "n$s.cgm" "h$s.cgg" -o "o$s.cgm"
	done
	run -0 cg-convert -J o1.cgm o2.cgm -o k.cgm
	cmp k.cgm v.cgm || fail "round 2: not the unsplit round's model"
}

@test "2 replicas x 2 stages, DiLoCo: H local steps, reduce and outer step per stage, joined, make the unsplit round's bytes" {
	outer=(--outer nesterov --outer-lr 0.7 --outer-momentum 0.9)
	for r in 0 1; do
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-$r.cgd" -e delta \
			-k 2 -b 6 --micro-batches 3 --lr 0.01 -o "w$r.cgg"
	done
	run -0 cg-reduce -q w0.cgg w1.cgg -o d.cgg
	run -0 cg-apply -m "$D/m.cgm" "${outer[@]}" d.cgg -o u.cgm
	for r in 0 1; do
		run -0 replica "$r" delta "$D/s1.cgm" "$D/s2.cgm" --lr 0.01
		refute_output
	done
	for s in 1 2; do
		run -0 cg-reduce -q "r0-$s.cgg" "r1-$s.cgg" -o "d$s.cgg"
		run -0 cg-apply -m "$D/s$s.cgm" "${outer[@]}" "d$s.cgg" -o "n$s.cgm"
	done
	# the outer momentum is cut with the stage, and joined back
	run -0 bash -c "tar tf n2.cgm | grep -c '^outer\.mom$'"
	assert_output 1
	run -0 cg-convert -J n1.cgm n2.cgm -o j.cgm
	cmp j.cgm u.cgm || fail "the joined stages are not the unsplit round's model"
	# round 2, from the outer momentum of round 1
	for r in 0 1; do
		run -0 cg-train-step -q -m u.cgm -d "$D/t-$r.cgd" -e delta \
			-k 2 -b 6 --micro-batches 3 --lr 0.01 -o "x$r.cgg"
		run -0 replica "$r" delta n1.cgm n2.cgm --lr 0.01
	done
	run -0 cg-reduce -q x0.cgg x1.cgg -o e.cgg
	run -0 cg-apply -m u.cgm "${outer[@]}" e.cgg -o v.cgm
	for s in 1 2; do
		run -0 cg-reduce -q "r0-$s.cgg" "r1-$s.cgg" -o "e$s.cgg"
		run -0 cg-apply -m "n$s.cgm" "${outer[@]}" "e$s.cgg" -o "o$s.cgm"
	done
	run -0 cg-convert -J o1.cgm o2.cgm -o k.cgm
	cmp k.cgm v.cgm || fail "round 2: not the unsplit round's model"
}

@test "2 replicas x 2 stages coded by block (--codec q8): the unsplit round's bytes; a lossy codec needs --no-error-feedback" {
	c=(--codec q8 --no-error-feedback)
	for r in 0 1; do
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-$r.cgd" -e grad \
			-k 2 -b 6 --micro-batches 3 "${c[@]}" -o "w$r.cgg"
		run -0 replica "$r" grad "$D/s1.cgm" "$D/s2.cgm" "${c[@]}"
	done
	run -0 bash -c "tar xOf r1-2.cgg cg.json | jq -r '.codec.name, .stage.index'"
	assert_output "$(printf 'q8\n1')"
	[ "$(stat -c %s r0-1.cgg)" -lt "$(stat -c %s w0.cgg)" ]
	run -0 cg-reduce -q w0.cgg w1.cgg -o g.cgg
	run -0 cg-apply -m "$D/m.cgm" g.cgg -o u.cgm
	for s in 1 2; do
		run -0 cg-reduce -q "r0-$s.cgg" "r1-$s.cgg" -o "g$s.cgg"
		run -0 cg-apply -m "$D/s$s.cgm" "g$s.cgg" -o "n$s.cgm"
	done
	run -0 cg-convert -J n1.cgm n2.cgm -o j.cgm
	cmp j.cgm u.cgm || fail "q8: the joined stages are not the unsplit round's model"
	run -2 --separate-stderr cg-train-step -q -m "$D/s1.cgm" -d "$D/t-0.cgd" \
		-e grad --codec q8 -o a.cgg --next true
	[[ $stderr == *"give --no-error-feedback"* ]]
	run -2 --separate-stderr cg-train-step -q -m "$D/s1.cgm" -d "$D/t-0.cgd" \
		-e model --codec f32 -o a.cgg --next true
	[[ $stderr == *"not a model"* ]]
}

@test "stage updates refuse to mix with other stages and with whole models, one line, exit 1" {
	run -0 replica 0 grad "$D/s1.cgm" "$D/s2.cgm"
	run -0 replica 1 grad "$D/s1.cgm" "$D/s2.cgm"
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" -k 2 -b 6 -o w.cgg
	one_line() {
		[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
		[[ $stderr == "$1"* ]] || fail "$stderr"
	}
	run -1 --separate-stderr cg-reduce -q r0-1.cgg r1-2.cgg -o x.cgg
	one_line "cg-reduce: r1-2.cgg: an update of stage 2 of 2, the first input's of stage 1 of 2"
	run -1 --separate-stderr cg-reduce -q r0-1.cgg w.cgg -o x.cgg
	one_line "cg-reduce: w.cgg: an update of a whole model, the first input's of stage 1 of 2"
	run -1 --separate-stderr cg-reduce -q --model "$D/m.cgm" r0-1.cgg -o x.cgg
	one_line "cg-reduce: r0-1.cgg: a pipeline stage's update"
	[ ! -e x.cgg ]
	run -1 --separate-stderr cg-apply -m "$D/m.cgm" r0-1.cgg -o x.cgm
	one_line "cg-apply: r0-1.cgg: an update of stage 1 of 2: apply it to that stage"
	run -1 --separate-stderr cg-apply -m "$D/s2.cgm" r0-1.cgg -o x.cgm
	one_line "cg-apply: r0-1.cgg: an update of stage 1 of 2, but $D/s2.cgm is stage 2 of 2"
	run -1 --separate-stderr cg-apply -m "$D/s1.cgm" w.cgg -o x.cgm
	one_line "cg-apply: w.cgg: an update of a whole model, but $D/s1.cgm is stage 1 of 2"
	run -1 --separate-stderr cg-apply -m "$D/s1.cgm" --clip 1 r0-1.cgg -o x.cgm
	one_line "cg-apply: $D/s1.cgm: a pipeline stage takes no --clip"
	# a stage of another cut of the same model
	cg-convert -S 1/1 "$D/m.cgm" -o one.cgm
	run -1 --separate-stderr cg-apply -m one.cgm r0-1.cgg -o x.cgm
	one_line "cg-apply: r0-1.cgg: an update of stage 1 of 2, but one.cgm is stage 1 of 1"
	# a stage moved on by a step: not the update's base
	run -0 cg-apply -m "$D/s1.cgm" r0-1.cgg -o n1.cgm
	run -1 --separate-stderr cg-apply -m n1.cgm r1-1.cgg -o x.cgm
	one_line "cg-apply: r1-1.cgg: computed from another model"
	[ ! -e x.cgm ]
}

@test "the stages of one pipeline must emit alike; a stage's update fails whole" {
	run -1 --separate-stderr cg-train-step -q -m "$D/s1.cgm" -d "$D/t-0.cgd" \
		-e grad -k 1 -b 4 -o a.cgg \
		--next "cg-train-step -q -m $D/s2.cgm -e delta -o b.cgg"
	[[ $stderr == *"the previous stage emits a grad, this one a delta (--emit)"* ]]
	[ ! -e a.cgg ] && [ ! -e b.cgg ]
	# a stage's call keeps no state
	run -2 --separate-stderr cg-train-step -q -m "$D/s1.cgm" -d "$D/t-0.cgd" \
		-e delta --state st -o a.cgg --next "true"
	[[ $stderr == *"--state: not with a pipeline stage"* ]]
	# without -d and with --emit: a stage, or the file says it is none
	run -1 --separate-stderr cg-train-step -q -m "$D/m.cgm" -e grad -o a.cgg
	[[ $stderr == *"not a pipeline stage"* ]]
	[ ! -e a.cgg ]
}
