#!/usr/bin/env bats
#
# 106-dpsgd.bats - DP-SGD in cg-train-step (--example-clip,
# --example-noise, --example-delta, --target-epsilon).  With no noise, a
# clip no gradient reaches and every example in each sample (--batch N
# of N: rate 1), the gradient is plain training's mean gradient (within
# float rounding: the sum runs in another order), for the cvae and the
# classifier, MLP and CNN.  The (epsilon, delta) a call records is Opacus' figure for
# its steps, noise and rate (tests/rdp-vectors/opacus.txt) to 1e-6, a
# second call on its model composes with the first, an update carries
# the call as its release and cg-apply puts it in the model, and
# --target-epsilon refuses a call past it (one line, exit 1, nothing
# written) or, alone, picks the noise that stays within it.  The same
# --dp-seed gives the same bytes.  Every bad option is one line and exit
# 2; an arch or config not done, a batch past the shard, one line and
# exit 1.  (That the clipped sums are those of a pass per example is
# tests/unit/test_dpsgd's.)  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

VECTORS=$BATS_TEST_DIRNAME/rdp-vectors/opacus.txt

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 1
	small_cvae fm-0.cgd vae.cgm --class-prior=0 --cond-every=0
	model cclf fm-0.cgd clf.cgm --hidden 16 --layers 1
	model cclf fm-0.cgd cnn.cgm --conv 2 --hidden 16 --layers 1
	texts tx -n 1
	small_cgpt tx-0.cgd gpt.cgm
	cg-inspect --json fm-0.cgd | jq -r .examples >n.txt
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	N=$(cat "$D/n.txt")
}

# Opacus' epsilon for rate $1, noise $2, steps $3 at delta $4.
opacus() {
	awk -v q="$1" -v s="$2" -v t="$3" -v d="$4" \
		'$1 == "eps" && $2 == q && $3 == s && $4 == t && $5 == d {print $6}' \
		"$VECTORS"
}

# The manifest's dp record of $1, field $2 (jq path).
dp() {
	tar xOf "$1" cg.json | jq -r ".dp$2"
}

# |$1 - $2| <= 1e-6 |$2|
near() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d;
		exit !(d <= 1e-6 * (b < 0 ? -b : b)) }'
}

@test "cg-train-step --help names DP-SGD's options" {
	run -0 cg-train-step --help
	assert_output --partial '--example-clip C'
	assert_output --partial '--example-noise SIGMA'
	assert_output --partial '--example-delta D'
	assert_output --partial '--target-epsilon E'
	assert_output --partial 'Poisson'
}

@test "no noise, a clip never reached, rate 1: the plain mean gradient" {
	[ "$N" -gt 1 ]
	for m in vae clf cnn; do
		cg-train-step -q -m "$D/$m.cgm" -d "$D/fm-0.cgd" --batch "$N" \
			--seed 3 -o plain-$m.cgg
		cg-train-step -q -m "$D/$m.cgm" -d "$D/fm-0.cgd" --batch "$N" \
			--seed 3 --example-clip 1e30 --example-noise 0 \
			-o dp-$m.cgg
		run -0 cg-inspect --diff -q --tolerance 1e-5 plain-$m.cgg dp-$m.cgg
		# a clip that is reached changes it
		cg-train-step -q -m "$D/$m.cgm" -d "$D/fm-0.cgd" --batch "$N" \
			--seed 3 --example-clip 1e-3 --example-noise 0 \
			-o clipped-$m.cgg
		run -1 cg-inspect --diff -q --tolerance 1e-5 plain-$m.cgg \
			clipped-$m.cgg
		# noise 0 spends an unbounded epsilon: no record
		run -0 dp dp-$m.cgg ''
		assert_output null
	done
}

@test "the epsilon recorded is Opacus' for the steps, and composes" {
	# rate 10/N = 0.1 where the fixture holds 100 examples
	[ "$N" -eq 100 ]
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --emit model \
		--batch 10 --steps 3 --example-clip 1 --example-noise 1.0 \
		--dp-seed 5 -o a.cgm
	want=$(opacus 0.1 1.0 3 1e-05)
	[ -n "$want" ]
	near "$(dp a.cgm .epsilon)" "$want"
	[ "$(dp a.cgm .delta)" = 1e-05 ]
	run -0 cg-inspect a.cgm
	assert_line --regexp '^privacy: +epsilon 2\.60?7 at delta 1e-05, 3 releases'
	# seven more steps: the history's one run of ten
	cg-train-step -q -m a.cgm -d "$D/fm-0.cgd" --emit model --batch 10 \
		--steps 7 --example-clip 1 --example-noise 1.0 -o b.cgm
	near "$(dp b.cgm .epsilon)" "$(opacus 0.1 1.0 10 1e-05)"
	[ "$(dp b.cgm '.history | length')" = 1 ]
	[ "$(dp b.cgm '.history[0].steps')" = 10 ]
	# another delta than the model's is refused
	run -1 --separate-stderr cg-train-step -q -m a.cgm -d "$D/fm-0.cgd" \
		--emit model --batch 10 --example-clip 1 --example-noise 1 \
		--example-delta 1e-6 -o c.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	assert_equal "${stderr_lines[0]%%:*}" cg-train-step
	[ ! -e c.cgm ]
}

@test "an update carries its release; cg-apply puts it in the model" {
	cg-train-step -q -m "$D/clf.cgm" -d "$D/fm-0.cgd" --emit grad \
		--batch 10 --steps 3 --example-clip 1 --example-noise 1.5 \
		-o g.cgg
	[ "$(dp g.cgg .release.steps)" = 3 ]
	[ "$(dp g.cgg .release.clip)" = 1 ]
	near "$(dp g.cgg .epsilon)" "$(opacus 0.1 1.5 3 1e-05)"
	cg-apply -m "$D/clf.cgm" g.cgg -o m.cgm
	near "$(dp m.cgm .epsilon)" "$(opacus 0.1 1.5 3 1e-05)"
	cg-train-step -q -m "$D/clf.cgm" -d "$D/fm-0.cgd" --emit delta \
		--batch 10 --steps 3 --example-clip 1 --example-noise 1.5 \
		-o d.cgg
	[ "$(dp d.cgg .release.sigma)" = 1.5 ]
}

@test "--target-epsilon refuses a call past it, or picks the noise" {
	run -1 --separate-stderr cg-train-step -q -m "$D/vae.cgm" \
		-d "$D/fm-0.cgd" --emit model --batch 10 --steps 10 \
		--example-clip 1 --example-noise 1.0 --target-epsilon 3 -o x.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	assert_output ''
	[[ "$stderr" == *"past"*"3.44"* || "$stderr" == *"3.441"* ]]
	[ ! -e x.cgm ]
	# within it: done
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --emit model \
		--batch 10 --steps 10 --example-clip 1 --example-noise 1.0 \
		--target-epsilon 3.5 -o y.cgm
	# alone: the least noise within it
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --emit model \
		--batch 10 --steps 10 --example-clip 1 --target-epsilon 2 \
		-o z.cgm
	e=$(dp z.cgm .epsilon)
	awk -v e="$e" 'BEGIN { exit !(e <= 2 && e > 1.99) }'
	# a model that has spent some needs the noise said
	run -1 --separate-stderr cg-train-step -q -m z.cgm -d "$D/fm-0.cgd" \
		--emit model --batch 10 --example-clip 1 --target-epsilon 5 \
		-o w.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ ! -e w.cgm ]
}

@test "the same --dp-seed, the same bytes; the system's, others" {
	for i in 1 2; do
		cg-train-step -q -m "$D/clf.cgm" -d "$D/fm-0.cgd" --batch 10 \
			--steps 2 --example-clip 1 --example-noise 1 --dp-seed 9 \
			-o s$i.cgg
		cg-train-step -q -m "$D/clf.cgm" -d "$D/fm-0.cgd" --batch 10 \
			--steps 2 --example-clip 1 --example-noise 1 -o r$i.cgg
	done
	cmp s1.cgg s2.cgg
	! cmp -s r1.cgg r2.cgg
}

@test "bad DP-SGD options: one line, exit 2" {
	local bad
	for bad in "--example-noise 1" "--target-epsilon 1" \
		"--example-delta 1e-5" "--example-clip 1" \
		"--example-clip 0 --example-noise 1" \
		"--example-clip -1 --example-noise 1" \
		"--example-clip nan --example-noise 1" \
		"--example-clip 1 --example-noise -1" \
		"--example-clip 1 --example-noise inf" \
		"--example-clip 1 --example-noise 1 --example-delta 0.7" \
		"--example-clip 1 --example-noise 1 --example-delta 0" \
		"--example-clip 1 --example-noise 0 --target-epsilon 1" \
		"--example-clip 1 --example-noise 1 --target-epsilon -1" \
		"--example-clip 1 --example-noise 1 --teacher $D/clf.cgm" \
		"--example-clip 1 --example-noise 1 --dp-clip 1" \
		"--example-clip 1 --example-noise 1 --deterministic"; do
		# shellcheck disable=SC2086 # $bad is options, split on purpose
		run -2 --separate-stderr cg-train-step -q -m "$D/clf.cgm" \
			-d "$D/fm-0.cgd" $bad -o out.cgg
		[ "${#stderr_lines[@]}" -ge 1 ]
		assert_equal "${stderr_lines[0]%%:*}" cg-train-step
		[ ! -e out.cgg ]
	done
}

@test "not done, or past the shard: one line, exit 1, nothing written" {
	local m
	model cddpm "$D/fm-0.cgd" ddpm.cgm
	for m in "$D/gpt.cgm -d $D/tx-0.cgd" "ddpm.cgm -d $D/fm-0.cgd" \
		"$D/clf.cgm -d $D/fm-0.cgd --batch 100000"; do
		# shellcheck disable=SC2086
		run -1 --separate-stderr cg-train-step -q -m $m \
			--example-clip 1 --example-noise 1 -o out.cgg
		[ "${#stderr_lines[@]}" -eq 1 ]
		assert_equal "${stderr_lines[0]%%:*}" cg-train-step
		[ ! -e out.cgg ]
	done
}
