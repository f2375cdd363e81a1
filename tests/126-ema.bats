#!/usr/bin/env bats
#
# 126-ema.bats - cg-train-step --ema and --ema-out: a moving average of
# the weights, written as a model of its own.
#
# The trained model (-o) is the same bytes with and without an average,
# for every architecture; the average is a model every program takes,
# with no optimizer moments, its decay in the manifest.  A --state keeps
# it between calls: two calls on one state write the average of one
# call, bit for bit.  What it cannot go with is refused before any work
# (exit 2), a state whose average lies is one line and exit 1, and no
# output is left behind by a refused call.  The formula itself is
# test_ema's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 1
	texts fort -n 1
	default_models fm-0.cgd fort-0.cgd
}

setup() {
	cd "$BATS_FILE_TMPDIR"
}

# weights FILE: the digests of a model's tensors (not its manifest,
# whose loss is the last call's)
weights() {
	tar xOf "$1" cg.json | jq -c '[.tensors[] | .sha256]'
}

@test "every architecture: -o is the same bytes with --ema; the average is a model cg-eval takes, no moments, its decay named" {
	for a in $(archs); do
		local w="cg-train-step -q -m $a.cgm -d $(arch_shard "$a") --emit model --steps 3 --batch 16 --seed 2"
		$w -o "$a-t.cgm"
		$w --ema 0.999 --ema-out "$a-e.cgm" -o "$a-te.cgm"
		cmp "$a-t.cgm" "$a-te.cgm"
		! cmp -s "$a-t.cgm" "$a-e.cgm"
		run -0 cg-eval -q -m "$a-e.cgm" -d "$(arch_shard "$a")" --json
		run -0 jq -c '[.ema, .step, has("opt_t"), ([.tensors[].name | select(startswith("opt."))] | length)]' \
			<(tar xOf "$a-e.cgm" cg.json)
		assert_output "[0.999,3,false,0]"
	done
}

@test "a --state keeps the average: 2 + 1 steps on one state write the average of 3 steps in one call" {
	local w="cg-train-step -q -d fm-0.cgd --emit model --batch 16 --seed 2 --ema 0.9"
	$w -m cvae.cgm --steps 3 --ema-out one.cgm -o one-t.cgm
	$w -m cvae.cgm --steps 2 --state s.cgs -o two-t.cgm
	$w -m two-t.cgm --steps 1 --state s.cgs --ema-out two.cgm -o two-t.cgm
	assert_equal "$(weights one-t.cgm)" "$(weights two-t.cgm)"
	assert_equal "$(weights one.cgm)" "$(weights two.cgm)"
	[ "$(weights one.cgm)" != "$(weights one-t.cgm)" ]
	# a later call without --ema refuses the state rather than lose it
	run -1 --separate-stderr cg-train-step -q -m two-t.cgm -d fm-0.cgd \
		--emit model --batch 16 --state s.cgs -o x.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"moving average"*"--ema"* ]]
	[ ! -e x.cgm ]
}

@test "refused before any work: --ema-out alone, --ema of a grad, decay 1, nowhere to keep it, one file twice, a pipeline stage" {
	local w="cg-train-step -q -m cvae.cgm -d fm-0.cgd --batch 16"
	run -2 $w --emit model --ema-out e.cgm -o t.cgm
	assert_output --partial "--ema-out needs --ema"
	run -2 $w --emit grad --ema 0.9 --ema-out e.cgm -o t.cgg
	assert_output --partial "--emit model"
	run -2 $w --emit model --ema 1 --ema-out e.cgm -o t.cgm
	assert_output --partial "below 1"
	run -2 $w --emit model --ema 0 --ema-out e.cgm -o t.cgm
	run -2 $w --emit model --ema 0.9 -o t.cgm
	assert_output --partial "--ema-out FILE"
	run -2 $w --emit model --ema 0.9 --ema-out t.cgm -o t.cgm
	assert_output --partial "same file as -o"
	run -2 $w --emit model --ema 0.9 --ema-out s.cgs --state s.cgs -o t.cgm
	assert_output --partial "same file as --state"
	cg-convert -S 1/2 cgpt.cgm -o s1.cgm
	run -2 cg-train-step -q -m s1.cgm -d fort-0.cgd --emit model --ema 0.9 \
		--ema-out e.cgm --next 'true'
	assert_output --partial "--ema: not with a pipeline stage"
	[ ! -e e.cgm ] && [ ! -e t.cgm ] && [ ! -e t.cgg ]
}

@test "a state whose average is of another size: one line, exit 1, no output" {
	local w="cg-train-step -q -d fm-0.cgd --emit model --batch 16 --ema 0.9"
	$w -m cvae.cgm --steps 1 --state ok.cgs -o a.cgm
	mkcg -x short:ema ok.cgs lie.cgs
	run -1 --separate-stderr $w -m a.cgm --steps 1 --state lie.cgs \
		--ema-out e.cgm -o b.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"tensor ema"* ]]
	[ ! -e b.cgm ] && [ ! -e e.cgm ]
}
