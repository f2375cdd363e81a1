#!/usr/bin/env bats
#
# 076-stale.bats - stale updates on the command line: cg-reduce --model,
# --max-staleness and --staleness-weight, cg-apply --base-model and
# --delay-comp.  Their --help and usage errors (one line, exit 2); an
# input staler than the limit left out and named (stderr, --log, the
# manifest); inputs of different bases reduced for one model, whose
# digest the result carries, each input's staleness and factor in the
# manifest; an input of a later model refused, and a --model or
# --base-model that is missing, truncated or no model; a stale gradient
# applied with DC-ASGD, and refused against a wrong base model; a real
# pipeline, three workers computing from the models of steps 3, 2 and 1
# reduced for step 3 and applied.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 3 --strategy round-robin
	small_cvae fm-0.cgd m0.cgm --latent 2
	# models of steps 1, 2, 3: one SGD step each
	local i
	for i in 1 2 3; do
		cg-train-step -q -m m$((i - 1)).cgm -d fm-0.cgd --batch 8 \
			-o g.cgg
		cg-apply -m m$((i - 1)).cgm --opt sgd --lr 0.1 g.cgg \
			-o m$i.cgm
	done
	# three workers, each from the model it last saw: steps 3, 2, 1
	for i in 0 1 2; do
		cg-train-step -q -m m$((3 - i)).cgm -d fm-$i.cgd --batch 8 \
			--emit delta --steps 2 -o w$i.cgg
	done
	# one from step 0, and a stale gradient from step 1
	cg-train-step -q -m m0.cgm -d fm-1.cgd --batch 8 --emit delta \
		-o old.cgg
	cg-train-step -q -m m1.cgm -d fm-2.cgd --batch 8 -o g1.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

manifest() {
	tar xOf "$1" cg.json
}

@test "cg-reduce and cg-apply --help name the staleness options" {
	run -0 cg-reduce --help
	assert_output --regexp '--model FILE +reduce for this model'
	assert_output --regexp '--max-staleness S +leave out inputs more than S'
	assert_output --regexp '--staleness-weight RULE'
	assert_line --regexp '^  constant +every kept update in full'
	assert_line --regexp '^  poly:A +\(1\+s\)\^-A'
	assert_line --regexp '^  hinge:A,B +1 up to s = B'
	local l
	while IFS= read -r l; do
		[ "${#l}" -le 80 ]
	done <<<"$output"
	run -0 cg-apply --help
	assert_output --regexp '--base-model FILE +the model it was computed'
	assert_output --regexp '--delay-comp L +a gradient: g \+ L g\*g\*\(w - w_base\)'
	while IFS= read -r l; do
		[ "${#l}" -le 80 ]
	done <<<"$output"
}

@test "cg-reduce: a bad staleness value is a usage error of one line" {
	local args want
	while IFS='|' read -r args want; do
		# shellcheck disable=SC2086
		run -2 --separate-stderr cg-reduce $args "$D/w0.cgg" -o r.cgg
		[ -z "$output" ]
		[ "${stderr_lines[0]}" = "cg-reduce: $want" ]
		[[ ${stderr_lines[1]} == 'usage: cg-reduce'* ]]
		[ ! -e r.cgg ]
	done <<EOF
--model $D/m3.cgm --max-staleness -1|--max-staleness: '-1' is not a whole number in [0, 9223372036854775807]
--model $D/m3.cgm --max-staleness x|--max-staleness: 'x' is not a whole number in [0, 9223372036854775807]
--model $D/m3.cgm --staleness-weight bogus|--staleness-weight: unknown rule 'bogus' (constant, poly, hinge)
--model $D/m3.cgm --staleness-weight poly|--staleness-weight: poly: wants its parameters (poly:A)
--model $D/m3.cgm --staleness-weight poly:-1|--staleness-weight: poly: '-1' is not a number >= 0
--model $D/m3.cgm --staleness-weight hinge:1|--staleness-weight: hinge: wants 2 parameters (hinge:A,B)
--model $D/m3.cgm --staleness-weight constant:1|--staleness-weight: constant takes no parameter
--max-staleness 2|--max-staleness: staleness is measured against a model: name it with --model
--staleness-weight poly:1|--staleness-weight: staleness is measured against a model: name it with --model
--model $D/m3.cgm --op median --staleness-weight poly:1|--staleness-weight poly: --op median weighs no input (the mean does)
--model -|--model: a file, not standard input (the inputs may come from there)
EOF
}

@test "cg-apply: a bad --delay-comp or --base-model is a usage error of one line" {
	local args want
	while IFS='|' read -r args want; do
		# shellcheck disable=SC2086
		run -2 --separate-stderr cg-apply -m "$D/m3.cgm" $args -o m.cgm
		[ -z "$output" ]
		[ "${stderr_lines[0]}" = "cg-apply: $want" ]
		[[ ${stderr_lines[1]} == 'usage: cg-apply'* ]]
		[ ! -e m.cgm ]
	done <<EOF
--delay-comp -1 --base-model $D/m1.cgm $D/g1.cgg|--delay-comp: '-1' is not a number in [0, 1e+06]
--delay-comp x --base-model $D/m1.cgm $D/g1.cgg|--delay-comp: 'x' is not a number in [0, 1e+06]
--delay-comp 0.5 $D/g1.cgg|--delay-comp: the gradient's base model is needed: name it with --base-model
--base-model - $D/g1.cgg|--base-model: a file, not standard input
--delay-comp 0.5 --base-model $D/m2.cgm $D/w1.cgg|$D/w1.cgg: a delta, but --delay-comp is for gradients: the optimizer steps on gradients
EOF
}

@test "cg-reduce --max-staleness: a staler input left out and named, on stderr, in --log and the manifest" {
	run -0 --separate-stderr cg-reduce --model "$D/m3.cgm" \
		--max-staleness 1 --log l.json "$D/w0.cgg" "$D/w1.cgg" \
		"$D/w2.cgg" -o r.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "cg-reduce: $D/w2.cgg: stale by 2 steps (computed from step 1, $D/m3.cgm is at 3), more than --max-staleness 1; left out" ]
	run -0 jq -c '[.inputs, .samples, .staleness.max]' <(manifest r.cgg)
	[ "$output" = '[2,32,1]' ]
	run -0 jq -c '.staleness.dropped' <(manifest r.cgg)
	[ "$output" = "[{\"input\":\"$D/w2.cgg\",\"step\":1,\"staleness\":2}]" ]
	run -0 jq -c '[.skipped, .staleness.dropped[].input]' l.json
	[ "$output" = "[[\"$D/w2.cgg\"],\"$D/w2.cgg\"]" ]
	# every one too stale: nothing written, exit 1
	run -1 --separate-stderr cg-reduce --model "$D/m3.cgm" \
		--max-staleness 0 "$D/w1.cgg" "$D/w2.cgg" -o n.cgg
	[ "${stderr_lines[2]}" = "cg-reduce: no inputs: every one left out" ]
	[ ! -e n.cgg ]
	# -q: said only in the manifest and the log
	run -0 --separate-stderr cg-reduce -q --model "$D/m3.cgm" \
		--max-staleness 1 "$D/w0.cgg" "$D/w2.cgg" -o q.cgg
	[ -z "$stderr" ]
}

@test "cg-reduce --model: inputs of different bases reduced, the result's base the model, each input's staleness listed" {
	run -0 --separate-stderr cg-reduce --model "$D/m3.cgm" \
		--staleness-weight poly:1 "$D"/w[012].cgg -o r.cgg
	[ -z "$stderr" ]
	local want
	want=$(manifest "$D/w0.cgg" | jq -c .base)
	run -0 jq -c .base <(manifest r.cgg)
	[ "$output" = "$want" ]
	# (1+s)^-1: 1, 1/2, 1/3
	run -0 jq -c '.staleness | [.rule, (.inputs[] | [.step, .staleness, (.factor * 1e9 | round)]), .dropped, has("max")]' \
		<(manifest r.cgg)
	[ "$output" = '["poly:1",[3,0,1000000000],[2,1,500000000],[1,2,333333333],[],false]' ]
	run -0 jq -c '[.inputs, .weight, .samples]' <(manifest r.cgg)
	[ "$output" = '[3,48,48]' ]
	run -0 cg-inspect --verify r.cgg
	# without --model, as before: one base or nothing
	run -1 --separate-stderr cg-reduce "$D"/w[012].cgg -o s.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: $D/w1.cgg: computed from another model (step 2, "* ]]
	[ ! -e s.cgg ]
	# every input fresh and the rule constant: the tensors of a plain
	# reduction
	cg-train-step -q -m "$D/m3.cgm" -d "$D/fm-1.cgd" --batch 8 \
		--emit delta -o v.cgg
	cg-reduce "$D/w0.cgg" v.cgg -o plain.cgg
	cg-reduce --model "$D/m3.cgm" "$D/w0.cgg" v.cgg -o fresh.cgg
	[ "$(manifest plain.cgg | jq -c .tensors)" = "$(manifest fresh.cgg | jq -c .tensors)" ]
}

@test "cg-reduce --model: an input of a later model, or not of the model's tensors, is refused" {
	run -1 --separate-stderr cg-reduce --model "$D/m2.cgm" "$D/w0.cgg" \
		"$D/w1.cgg" -o r.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-reduce: $D/w0.cgg: computed from a later model (step 3, sha256 "*"...) than $D/m2.cgm (step 2, "*"...)" ]]
	[ ! -e r.cgg ]
	# a model of other tensors: its update refused by the model's
	cg-init -a cvae -d "$D/fm-0.cgd" --hidden 8 --layers 1 --latent 2 \
		--seed 1 -o small.cgm
	cg-train-step -q -m small.cgm -d "$D/fm-0.cgd" --batch 8 \
		--emit delta -o s.cgg
	run -1 --separate-stderr cg-reduce --model "$D/m3.cgm" s.cgg \
		-o r.cgg
	[ "$stderr" = "cg-reduce: s.cgg: tensor enc.0.w: differs from the model $D/m3.cgm's enc.0.w" ]
	[ ! -e r.cgg ]
}

@test "--model and --base-model: a missing, truncated or wrong kind of file is refused in one line" {
	head -c 3000 "$D/m3.cgm" >trunc.cgm
	local cmd want
	while IFS='|' read -r cmd want; do
		# shellcheck disable=SC2086
		run -1 --separate-stderr $cmd
		[ "$stderr" = "$want" ]
		[ ! -e out ]
	done <<EOF
cg-reduce --model nosuch.cgm $D/w0.cgg -o out|cg-reduce: nosuch.cgm: No such file or directory
cg-reduce --model $D/w0.cgg $D/w0.cgg -o out|cg-reduce: $D/w0.cgg: a delta file, not a model
cg-reduce --model trunc.cgm $D/w0.cgg -o out|cg-reduce: trunc.cgm: tensor enc.0.w: 50816 bytes claimed, more than the file can hold
cg-apply -m $D/m3.cgm --base-model $D/g1.cgg --delay-comp 1 $D/g1.cgg -o out|cg-apply: $D/g1.cgg: a grad file, not a model
cg-apply -m $D/m3.cgm --base-model trunc.cgm $D/g1.cgg -o out|cg-apply: trunc.cgm: tensor enc.0.w: 50816 bytes claimed, more than the file can hold
EOF
}

@test "cg-apply --delay-comp: a stale gradient with its base model applied, recorded; a wrong base model refused in one line" {
	run -0 --separate-stderr cg-apply -m "$D/m3.cgm" \
		--base-model "$D/m1.cgm" --delay-comp 0.5 --opt sgd --lr 0.1 \
		"$D/g1.cgg" -o dc.cgm
	[ -z "$stderr" ]
	run -0 jq -c '[.step, .stale.staleness, .stale.base.step, .stale.delay_comp]' \
		<(manifest dc.cgm)
	[ "$output" = '[4,2,1,0.5]' ]
	run -0 cg-inspect --verify dc.cgm
	# the correction changes the step: lambda 0 gives another model
	cg-apply -m "$D/m3.cgm" --base-model "$D/m1.cgm" --opt sgd --lr 0.1 \
		"$D/g1.cgg" -o nodc.cgm
	run -0 jq -c '.stale.delay_comp' <(manifest nodc.cgm)
	[ "$output" = 0 ]
	run -1 cg-inspect --diff dc.cgm nodc.cgm
	assert_line --regexp '^dec.out.w +differs'
	# the wrong base model
	run -1 --separate-stderr cg-apply -m "$D/m3.cgm" \
		--base-model "$D/m2.cgm" --delay-comp 0.5 "$D/g1.cgg" -o w.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-apply: $D/g1.cgg: computed from another model (step 1, sha256 "*"...) than the base model $D/m2.cgm (step 2, "*"...)" ]]
	[ ! -e w.cgm ]
	# and no base model at all: refused as ever
	run -1 --separate-stderr cg-apply -m "$D/m3.cgm" "$D/g1.cgg" -o w.cgm
	[[ $stderr == "cg-apply: $D/g1.cgg: computed from another model (step 1, "* ]]
	[ ! -e w.cgm ]
}

@test "a real pipeline: workers from steps 3, 2 and 1 reduced for step 3 and applied; a worker from step 0 left out" {
	run -0 --separate-stderr bash -c "cg-reduce --model '$D/m3.cgm' \
		--max-staleness 2 --staleness-weight hinge:1,0 --log l.json \
		'$D'/w[012].cgg '$D/old.cgg' |
		cg-apply -m '$D/m3.cgm' --outer nesterov -o m4.cgm"
	[ "$stderr" = "cg-reduce: $D/old.cgg: stale by 3 steps (computed from step 0, $D/m3.cgm is at 3), more than --max-staleness 2; left out" ]
	run -0 cg-inspect --verify m4.cgm
	run -0 jq -c '[.step, .samples - ($m3 | .samples)]' \
		--argjson m3 "$(manifest "$D/m3.cgm")" <(manifest m4.cgm)
	[ "$output" = '[4,48]' ]
	# hinge:1,0: 1, then 1/(s+1)
	run -0 jq -c '[.staleness.inputs[] | [.staleness, (.factor * 1e9 | round)]]' l.json
	[ "$output" = '[[0,1000000000],[1,500000000],[2,333333333]]' ]
	# the next round's workers start from the new model
	cg-train-step -q -m m4.cgm -d "$D/fm-0.cgd" --batch 8 --emit delta \
		-o n.cgg
	cg-reduce --model m4.cgm n.cgg "$D/w0.cgg" |
		cg-apply -m m4.cgm --outer nesterov -o m5.cgm
	run -0 jq -c .step <(manifest m5.cgm)
	[ "$output" = 5 ]
}
