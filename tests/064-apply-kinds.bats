#!/usr/bin/env bats
#
# 064-apply-kinds.bats - cg-apply's options checked against the kind of
# update it is given: an outer option with a gradient and a gradient
# option with a delta are usage errors that name the option; a delta
# without --outer is averaged and says so once; cg-reduce lists the
# operations of its table; cg-inspect shows the digest a model's updates
# carry as their base.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
	cg-train-step -q -m model.cgm -d fm-0.cgd --batch 8 -o g.cgg
	cg-train-step -q -m model.cgm -d fm-0.cgd --batch 8 --emit delta \
		-o d.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

@test "cg-apply: an outer option with a gradient is a usage error" {
	local o
	for o in "--outer nesterov" "--outer avg" "--outer-lr 0.5" \
		"--outer-momentum 0.5"; do
		# shellcheck disable=SC2086
		run -2 --separate-stderr cg-apply $o -m "$D/model.cgm" \
			"$D/g.cgg" -o m.cgm
		[ -z "$output" ]
		[[ ${stderr_lines[0]} == "cg-apply: $D/g.cgg: a gradient, but ${o%% *} is for deltas: outer steps apply to deltas" ]]
		[[ $stderr == *'usage: cg-apply'* ]]
		[ ! -e m.cgm ]
	done
}

@test "cg-apply: a gradient option with a delta is a usage error" {
	local o
	for o in "--lr 0.1" "--opt sgd" "--clip 1" "--warmup 3" "--wd 0"; do
		# shellcheck disable=SC2086
		run -2 --separate-stderr cg-apply $o --outer nesterov \
			-m "$D/model.cgm" "$D/d.cgg" -o m.cgm
		[[ ${stderr_lines[0]} == "cg-apply: $D/d.cgg: a delta, but ${o%% *} is for gradients: the optimizer steps on gradients" ]]
		[ ! -e m.cgm ]
	done
}

@test "cg-apply: a delta without --outer is averaged, and says so once" {
	run -0 --separate-stderr cg-apply -m "$D/model.cgm" "$D/d.cgg" -o a.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "cg-apply: $D/d.cgg: delta added as it is (--outer avg); --outer nesterov for DiLoCo's outer step" ]
	run -0 --separate-stderr cg-apply --outer avg -m "$D/model.cgm" \
		"$D/d.cgg" -o b.cgm
	[ -z "$stderr" ]
	cmp a.cgm b.cgm
	# a gradient applies silently
	run -0 --separate-stderr cg-apply -m "$D/model.cgm" "$D/g.cgg" -o c.cgm
	[ -z "$stderr" ]
	# a delta refused is the refusal alone
	run -1 --separate-stderr cg-apply -m a.cgm "$D/d.cgg" -o x.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-apply: $D/d.cgg: computed from another model"* ]]
	[ ! -e x.cgm ]
}

@test "cg-reduce --help lists the operations, and an unknown one the same" {
	run -0 cg-reduce --help
	assert_output --regexp '--op NAME\[:P\] +how to combine \(mean\)'
	assert_line --regexp '^ +mean +the mean weighted'
	assert_line --regexp '^ +sum +the plain sum'
	assert_line --regexp '^ +median +each element.s median'
	run -2 --separate-stderr cg-reduce --op mode "$D/g.cgg" -o r.cgg
	[ "${stderr_lines[0]}" = "cg-reduce: --op: unknown operation 'mode' (mean, sum, median, trimmed-mean, clip-mean, sent-mean)" ]
	[ ! -e r.cgg ]
}

@test "cg-reduce --op median: two equal updates of three outvote the third" {
	# (the same update twice is refused but on purpose: tests/077; the
	# third is another worker's, a reduction being no input to a median)
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-1.cgd" --batch 8 -o other.cgg
	cg-reduce --allow-duplicates --op median "$D/g.cgg" other.cgg "$D/g.cgg" \
		-o med.cgg
	run -0 cg-inspect --diff "$D/g.cgg" med.cgg
	assert_line --regexp '^tensors: +[0-9]+ in A, [0-9]+ in B: [0-9]+ identical$'
	run -0 jq -r .reduce <(tar xOf med.cgg cg.json)
	[ "$output" = median ]
}

@test "cg-inspect shows a model's digest, which its updates carry as base" {
	run -0 cg-inspect "$D/model.cgm"
	local want
	want=$(tar xOf "$D/g.cgg" cg.json | jq -r .base.sha256)
	assert_line "params:     sha256 $want (an update's base)"
	# an update shows its base (digest and step) and no params line
	run -0 cg-inspect "$D/g.cgg"
	assert_line --partial "\"sha256\":\"$want\",\"step\":0"
	refute_line --partial 'params:'
}
