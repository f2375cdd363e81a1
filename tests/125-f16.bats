#!/usr/bin/env bats
#
# 125-f16.bats - --precision f16 and its dynamic loss scaling.
#
# On the same weights and batch, an f16 step of every architecture gives
# a loss near the f32 one but not the same, made at the default loss
# scale (65536) with nothing skipped.  A scale whose gradient overflows
# half's range skips the step (the weights as they were, the step count
# moved on), halves the scale and says so in one line a skip; good steps
# double it every --scale-growth; a --state keeps it between calls, and
# a state whose scale lies is one line and exit 1.  A deterministic f16
# update has the same bytes at any thread count and cg-audit makes it
# again.  What f16 cannot go with is refused before any work.  The
# products themselves are test_nn's; that every arch scales every term
# of its gradient is test_fdarch's and test_checkpoint's.

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

# weights FILE: the digests of a model's weights (not its moments)
weights() {
	tar xOf "$1" cg.json |
		jq -c '[.tensors[] | select(.name | startswith("opt.") | not) | .sha256]'
}

@test "every architecture: an f16 step's loss is within 1% of f32's and not the same, at scale 65536, nothing skipped" {
	for a in $(archs); do
		rm -f "$BATS_TEST_TMPDIR/f.json" "$BATS_TEST_TMPDIR/h.json"
		cg-train-step -q -m "$a.cgm" -d "$(arch_shard "$a")" --batch 32 \
			--log "$BATS_TEST_TMPDIR/f.json" -o /dev/null
		cg-train-step -q -m "$a.cgm" -d "$(arch_shard "$a")" --batch 32 \
			--precision f16 --log "$BATS_TEST_TMPDIR/h.json" \
			-o /dev/null
		f=$(jq -r .loss "$BATS_TEST_TMPDIR/f.json")
		h=$(jq -r .loss "$BATS_TEST_TMPDIR/h.json")
		echo "$a: f32 $f f16 $h"
		within_pct "$f" "$h" && [ "$f" != "$h" ] || fail "$a: f32 $f, f16 $h"
		run -0 jq -c '[.loss_scale, .skipped]' "$BATS_TEST_TMPDIR/h.json"
		assert_output '[65536,0]'
		run -0 jq -c 'has("loss_scale")' "$BATS_TEST_TMPDIR/f.json"
		assert_output false
	done
}

@test "a scale that overflows: the step skipped (weights unchanged, step counted), the scale halved, one line a skip" {
	# the cvae's d(loss)/d(logits) is up to 1/B: at 2^24 and B 128 past
	# 65504, half's largest
	run -0 --separate-stderr cg-train-step -q -m cvae.cgm -d fm-0.cgd \
		--emit model --precision f16 --loss-scale 16777216 \
		--log l.json -o one.cgm --steps 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: step 1 of 1: the gradient at loss scale 1.67772e+07 is not finite: step skipped, the scale halved"
	run -0 jq -c '[.skipped, .loss_scale, .step]' l.json
	assert_output '[1,8388608,1]'
	[ "$(weights one.cgm)" = "$(weights cvae.cgm)" ]
	[ "$(tar xOf one.cgm cg.json | jq .step)" = 1 ]
	# on from there: as many skips as halvings needed, then training
	run -0 --separate-stderr cg-train-step -q -m cvae.cgm -d fm-0.cgd \
		--emit model --precision f16 --loss-scale 16777216 \
		--log l6.json -o six.cgm --steps 6
	n=$(jq .skipped l6.json)
	s=$(jq .loss_scale l6.json)
	echo "skipped $n, scale $s"
	[ "$n" -ge 1 ] && [ "$n" -lt 6 ]
	assert_equal "${#stderr_lines[@]}" "$n"
	[ "$s" = $((16777216 >> n)) ]
	[ "$(weights six.cgm)" != "$(weights cvae.cgm)" ]
	# a grad: the mean of the steps not skipped, weighed by them
	cg-train-step -q -m cvae.cgm -d fm-0.cgd --precision f16 \
		--loss-scale 16777216 --steps 6 --log g.json -o g.cgg 2>/dev/null
	# (the weights do not move in a grad: other steps overflow)
	n=$(jq .skipped g.json)
	[ "$n" -ge 1 ] && [ "$n" -lt 6 ]
	run -0 jq -c '.samples' g.json
	assert_output 768
	# its weight in a reduction: the examples of the steps it holds
	run -0 jq -c '.weight' <(tar xOf g.cgg cg.json)
	assert_output $((768 - 128 * n))
	run -0 cg-inspect -j --no-stats g.cgg
	jq -e '.' <<<"$output" >/dev/null
}

@test "good steps double the scale every --scale-growth; --state keeps it between calls; a state whose scale lies is one line and exit 1" {
	local w="cg-train-step -q -d fm-0.cgd --emit model --precision f16 --batch 16"
	$w -m cvae.cgm --loss-scale 1024 --scale-growth 2 --steps 5 \
		--state s.cgs --log a.json -o a.cgm
	run -0 jq -c '[.loss_scale, .skipped]' a.json
	# 1024, 2048 after two, 4096 after four
	assert_output '[4096,0]'
	# the next call starts at 4096 with one good step counted
	$w -m a.cgm --loss-scale 1024 --scale-growth 2 --steps 1 \
		--state s.cgs --log b.json -o b.cgm
	run -0 jq -c '.loss_scale' b.json
	assert_output 8192
	# no state: each call starts at --loss-scale; 0 never grows
	$w -m a.cgm --loss-scale 1024 --scale-growth 0 --steps 3 \
		--log c.json -o c.cgm
	run -0 jq -c '.loss_scale' c.json
	assert_output 1024
	# the state's scale one ulp off a power of two, digests made again
	mkcg -x nudge s.cgs lie.cgs
	run -1 --separate-stderr $w -m b.cgm --steps 1 --state lie.cgs \
		-o d.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"loss scale (amp.scale) 8192"*"not a power of two"* ]]
	[ ! -e d.cgm ]
}

@test "deterministic f16: the same bytes at 1 and 3 threads; not f32's or bf16's; cg-audit makes it again" {
	local w="cg-train-step --deterministic -q -m cvae.cgm -d fm-0.cgd --steps 2 --batch 16"
	$w -j 1 --precision f16 -o h1.cgg
	$w -j 3 --precision f16 -o h3.cgg
	cmp h1.cgg h3.cgg
	$w -j 1 --precision bf16 -o b1.cgg
	$w -j 1 -o f1.cgg
	! cmp -s h1.cgg f1.cgg
	! cmp -s h1.cgg b1.cgg
	run -0 jq -c '.call | [.precision, .loss_scale, .scale_growth]' \
		<(tar xOf h1.cgg cg.json)
	assert_output '["f16",65536,2000]'
	run -0 cg-audit -m cvae.cgm -d fm-0.cgd h1.cgg
	assert_output --partial match
}

@test "cg-eval and cg-sample take --precision f16; f16 says in one line that it is emulated, not with -q" {
	run -0 cg-eval -q --json -m cvae.cgm --precision f16 fm-0.cgd
	h=$(jq -r .nelbo <<<"$output")
	run -0 cg-eval -q --json -m cvae.cgm fm-0.cgd
	f=$(jq -r .nelbo <<<"$output")
	within_pct "$f" "$h" && [ "$f" != "$h" ] || fail "f32 $f f16 $h"
	run -0 cg-sample -m cgpt.cgm -c 0 -n 2 --seed 3 --precision f16 \
		--max-bytes 40
	[ -n "$output" ]
	run -0 --separate-stderr cg-train-step -m cvae.cgm -d fm-0.cgd \
		--batch 8 --precision f16 -o /dev/null
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: f16 products emulated in f32: the same numbers, no faster"
}

@test "what f16 cannot go with: a usage error, exit 2, before any work" {
	for bad in "--loss-scale 1024" "--scale-growth 5" \
		"--precision bf16 --loss-scale 1024" \
		"--precision f16 --loss-scale 3" \
		"--precision f16 --loss-scale 0.5" \
		"--precision f16 --loss-scale 33554432" \
		"--precision f16 --scale-growth -1" \
		"--precision f16 --example-clip 1"; do
		# shellcheck disable=SC2086 # the options split on purpose
		run -2 --separate-stderr cg-train-step -m cvae.cgm -d fm-0.cgd \
			$bad -o x.cgg
		echo "$bad: ${stderr_lines[0]}"
		[[ ${stderr_lines[0]} == cg-train-step:* ]]
		[ ! -e x.cgg ]
	done
	stages cgpt.cgm 2
	run -2 --separate-stderr cg-train-step -m s1-2.cgm -d fort-0.cgd \
		--precision f16 --next "cg-train-step -m s2-2.cgm" -o x.cgm
	[[ $stderr == *"f16: not with a pipeline stage"* ]]
	run -0 cg-train-step --help
	assert_output --partial '--loss-scale S'
	assert_output --partial '--scale-growth N'
}
