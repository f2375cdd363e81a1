#!/usr/bin/env bats
#
# 068-robust-reduce.bats - cg-reduce against a poisoned input: the
# robust operations' parameters (--op NAME:PARAM) parsed against their
# row, a usage error of one line otherwise; an update a million times too
# large kept out by trimmed-mean and clip-mean where the mean follows it;
# a nan refused by every operation, or left out with --skip-nonfinite
# (stderr, --log, the output's counts); poisoned updates made by
# tests/unit/poison, whose files verify.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 4 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
	local w
	for w in 0 1 2 3; do
		cg-train-step -q -m model.cgm -d fm-$w.cgd --batch 8 \
			--emit delta -o d$w.cgg
	done
	poison scale:1e6 d3.cgg big.cgg
	poison nan:3 d3.cgg nan.cgg
	poison scale:-1 d3.cgg flip.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# the largest |value| of an update's tensors
absmax() {
	cg-inspect --json "$1" |
		jq '[.tensors[] | (.max | fabs), (.min | fabs)] | max'
}

@test "poison: a valid file, its numbers changed as asked" {
	run -0 cg-inspect --verify "$D/big.cgg"
	run -0 cg-inspect --verify "$D/nan.cgg"
	run -0 cg-inspect --json "$D/nan.cgg"
	[ "$(jq '[.tensors[].nan] | add' <<<"$output")" -eq 1 ]
	run -0 cg-inspect --json "$D/d3.cgg"
	local a b
	a=$(jq '.tensors[0].max' <<<"$output")
	run -0 cg-inspect --json "$D/flip.cgg"
	b=$(jq '.tensors[0].min' <<<"$output")
	[ "$(jq -n "$a + $b")" = 0 ]
	run -2 poison nan:x "$D/d3.cgg" x.cgg
	run -1 poison scale:2 "$D/model.cgm" x.cgg
	[ ! -e x.cgg ]
}

@test "cg-reduce --help lists the robust operations and --skip-nonfinite" {
	run -0 cg-reduce --help
	assert_output --regexp '--op NAME\[:P\] +how to combine \(mean\)'
	assert_output --regexp '--skip-nonfinite +leave out an input'
	assert_line --regexp '^  trimmed-mean:F +each element.s mean less'
	assert_line --regexp '^  clip-mean:TAU +centred clipping'
	local l
	while IFS= read -r l; do
		[ "${#l}" -le 80 ]
	done <<<"$output"
}

@test "cg-reduce --op: a bad parameter is a usage error of one line" {
	local spec want
	while IFS='|' read -r spec want; do
		run -2 --separate-stderr cg-reduce --op "$spec" "$D/d0.cgg" \
			-o r.cgg
		[ -z "$output" ]
		[ "${stderr_lines[0]}" = "cg-reduce: --op: $want" ]
		[[ ${stderr_lines[1]} == 'usage: cg-reduce'* ]]
		[ ! -e r.cgg ]
	done <<'EOF'
trimmed-mean|trimmed-mean: wants a parameter (trimmed-mean:F)
trimmed-mean:0.5|trimmed-mean: F '0.5' is not a number in [0, 0.5)
trimmed-mean:-1|trimmed-mean: F '-1' is not a number in [0, 0.5)
trimmed-mean:a|trimmed-mean: F 'a' is not a number in [0, 0.5)
clip-mean:0|clip-mean: TAU '0' is not a number in (0, inf)
clip-mean:|clip-mean: TAU '' is not a number in (0, inf)
median:1|median: takes no parameter
EOF
}

@test "cg-reduce: an update a million times off, kept out by trimmed-mean and clip-mean" {
	local clean
	clean=$(absmax "$D/d0.cgg")
	cg-reduce "$D"/d[012].cgg "$D/big.cgg" -o mean.cgg
	cg-reduce --op trimmed-mean:0.25 "$D"/d[012].cgg "$D/big.cgg" \
		-o trim.cgg
	cg-reduce --op clip-mean:0.5 "$D"/d[012].cgg "$D/big.cgg" -o clip.cgg
	local m t c
	m=$(absmax mean.cgg)
	t=$(absmax trim.cgg)
	c=$(absmax clip.cgg)
	echo "clean $clean mean $m trimmed $t clipped $c"
	# the mean follows the poisoned input; the others stay at the
	# honest updates' scale
	jq -en "$m > 1e4 * $clean and $t < 2 * $clean and $c < 2 * $clean"
	run -0 jq -r .reduce <(tar xOf trim.cgg cg.json)
	[ "$output" = trimmed-mean:0.25 ]
	run -0 jq -r .reduce <(tar xOf clip.cgg cg.json)
	[ "$output" = clip-mean:0.5 ]
	# and the step applies
	cg-reduce --op trimmed-mean:0.25 "$D"/d[012].cgg "$D/big.cgg" |
		cg-apply -m "$D/model.cgm" -o m.cgm
	run -0 cg-inspect --verify m.cgm
}

@test "cg-reduce: a nan is refused by every operation, naming input and tensor" {
	local op
	for op in mean sum median trimmed-mean:0.25 clip-mean:1; do
		run -1 --separate-stderr cg-reduce --op "$op" "$D/d0.cgg" \
			"$D/nan.cgg" "$D/d1.cgg" -o r.cgg
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ "$stderr" = "cg-reduce: $D/nan.cgg: tensor enc.0.w: element 3 is not finite" ]
		[ ! -e r.cgg ]
	done
}

@test "cg-reduce --skip-nonfinite: the input left out, said on stderr and in --log" {
	run -0 --separate-stderr cg-reduce --skip-nonfinite --log l.json \
		--op median "$D/d0.cgg" "$D/nan.cgg" "$D/d1.cgg" "$D/d2.cgg" \
		-o r.cgg
	[ "$stderr" = "cg-reduce: $D/nan.cgg: tensor enc.0.w: element 3 is not finite; left out" ]
	run -0 jq -c .skipped l.json
	[ "$output" = "[\"$D/nan.cgg\"]" ]
	run -0 jq -c '[.inputs, .samples]' <(tar xOf r.cgg cg.json)
	[ "$output" = '[3,24]' ]
	# what the others alone give, bit for bit
	cg-reduce --op median "$D/d0.cgg" "$D/d1.cgg" "$D/d2.cgg" -o s.cgg
	cmp r.cgg s.cgg
	# -q: said only in the log
	run -0 --separate-stderr cg-reduce -q --skip-nonfinite --log q.json \
		"$D/d0.cgg" "$D/nan.cgg" -o q.cgg
	[ -z "$stderr" ]
	run -0 jq -c .skipped q.json
	[ "$output" = "[\"$D/nan.cgg\"]" ]
	# a clean call logs none
	cg-reduce --log c.json "$D/d0.cgg" -o c.cgg
	run -0 jq -c .skipped c.json
	[ "$output" = '[]' ]
	# every input left out: nothing to write
	run -1 --separate-stderr cg-reduce --skip-nonfinite "$D/nan.cgg" \
		-o n.cgg
	[ "${stderr_lines[1]}" = "cg-reduce: no inputs: every one left out" ]
	[ ! -e n.cgg ]
	# what is left still meets --min-inputs, or fails
	run -1 --separate-stderr cg-reduce --skip-nonfinite --min-inputs 2 \
		"$D/d0.cgg" "$D/nan.cgg" -o n.cgg
	[ "${stderr_lines[1]}" = "cg-reduce: 1 input, fewer than --min-inputs 2" ]
	[ ! -e n.cgg ]
}

@test "cg-reduce: a round with a poisoned worker, robust reduce then apply" {
	# a pipeline from stdin: centred clipping of five deltas, one
	# sign-flipped, applied (flip.cgg is worker 3's delta sign-flipped,
	# standing for a fifth worker's: its manifest says worker 3, hence
	# --allow-duplicates; a mean of some of them would be refused, a
	# clipping of reductions not being the clipping of their inputs)
	cat "$D/d0.cgg" | cg-reduce --op clip-mean:10 --allow-duplicates - \
		"$D"/d[12].cgg "$D/flip.cgg" "$D/d3.cgg" |
		cg-apply -m "$D/model.cgm" --outer nesterov -o m.cgm
	run -0 cg-inspect --verify m.cgm
	run -0 cg-eval --json -m m.cgm -d "$D/fm-0.cgd"
	jq -e '.nelbo | isnormal' <<<"$output"
}
