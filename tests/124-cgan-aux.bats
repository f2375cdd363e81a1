#!/usr/bin/env bats
# 124-cgan-aux.bats - the cgan's auxiliary classifier (cg-init -a cgan
# --aux LAMBDA) through the programs, and what a model's config may say
# of it.
#
# Its cross-entropies against a direct sum and every gradient against
# central differences (the MLPs and the conv nets, with R1 and
# distilled) are tests/unit/test_cgan's; PyTorch's agreement is
# torch_check.py's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	model cgan train-0.cgd gan.cgm --latent 8 --hidden 16 --layers 1
	model cgan train-0.cgd aux.cgm --latent 8 --hidden 16 --layers 1 \
		--aux 1
	model cgan train-0.cgd c.cgm --latent 8 --conv 2 --r1 0.1
	model cgan train-0.cgd caux.cgm --latent 8 --conv 2 --r1 0.1 \
		--aux 2
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

manifest() {
	tar xOf "$1" cg.json | jq -c "$2"
}

@test "cg-init -a cgan --aux: the classifier's tensors last, the others drawn as without it; 0 is no key" {
	run -0 cg-init -a cgan --help
	assert_output --partial '--aux X'
	local ncond
	ncond=$(manifest "$D/gan.cgm" '.conditions | length')
	run -0 manifest "$D/aux.cgm" '[.config.aux, (.tensors[-2:][] | [.name, .shape])]'
	assert_output "[1,[\"disc.cls.w\",[$ncond,16]],[\"disc.cls.b\",[$ncond]]]"
	run -0 manifest "$D/caux.cgm" '[.config.aux, (.tensors[-2:][] | [.name, .shape])]'
	# the conv nets' features: 7 x 7 x 2 conv
	assert_output "[2,[\"disc.cls.w\",[$ncond,196]],[\"disc.cls.b\",[$ncond]]]"
	[ "$(manifest "$D/aux.cgm" '[.tensors[:-2][].sha256]')" = \
		"$(manifest "$D/gan.cgm" '[.tensors[].sha256]')" ]
	[ "$(manifest "$D/caux.cgm" '[.tensors[:-2][].sha256]')" = \
		"$(manifest "$D/c.cgm" '[.tensors[].sha256]')" ]
	# the default writes no key: a model as made before it existed
	run -0 manifest "$D/gan.cgm" '.config | has("aux")'
	assert_output false
	cg-init -a cgan -d "$D/train-0.cgd" --seed 1 --latent 8 --hidden 16 \
		--layers 1 --aux 0 -o zero.cgm
	cmp zero.cgm "$D/gan.cgm"
	for bad in --aux=-1 --aux=x --aux=1001 --aux=nan "--aux"; do
		run -2 --separate-stderr cg-init -a cgan -d "$D/train-0.cgd" \
			$bad -o x.cgm
		[[ $stderr == cg-init:* ]]
		[ ! -e x.cgm ]
	done
}

@test "cgan --aux: one step moves both nets otherwise; it trains, scores, draws, checkpoints" {
	for m in gan aux; do
		cg-train-step -q -m "$D/$m.cgm" -d "$D/train-0.cgd" -e model \
			-k 1 --batch 16 --seed 3 -o $m-1.cgm
	done
	# G learns from the classifier (its cross-entropy of the fakes),
	# D from its cross-entropy of the reals
	local pick='[.tensors[] | select(.name == "gen.0.w" or .name == "disc.0.w") | .sha256]'
	run -0 manifest gan-1.cgm "$pick"
	local g=$output
	run -0 manifest aux-1.cgm "$pick"
	[ "$(jq -r '.[0]' <<<"$output")" != "$(jq -r '.[0]' <<<"$g")" ]
	[ "$(jq -r '.[1]' <<<"$output")" != "$(jq -r '.[1]' <<<"$g")" ]
	# and the classifier itself moved
	[ "$(manifest aux-1.cgm '.tensors[-2].sha256')" != \
		"$(manifest "$D/aux.cgm" '.tensors[-2].sha256')" ]
	# the conv nets, checkpointed: the same bytes
	cg-train-step -q -m "$D/caux.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 8 --seed 3 -o c2.cgm
	cg-train-step -q -m "$D/caux.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 8 --seed 3 --checkpoint-activations -o c2k.cgm
	cmp c2.cgm c2k.cgm
	run -0 manifest c2.cgm '[.config.aux, .config.conv, .step]'
	assert_output '[2,2,2]'
	run -0 cg-eval --json -m c2.cgm -d "$D/test.cgd" --seed 1
	jq -e '.d_hinge > 0' <<<"$output"
	cg-sample -m c2.cgm -n 2 -o c2.png
	[ -s c2.png ]
}

@test "cgan: an aux in a model that lies, or tensors that disagree with it, is one line" {
	for bad in '.aux = -1' '.aux = "1"' '.aux = null' '.aux = 1e4'; do
		with_config "$D/aux.cgm" "$bad"
		run -1 --separate-stderr cg-train-step -m odd.cgm \
			-d "$D/train-0.cgd" -e model -k 1 -o x.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-train-step: odd.cgm: "*aux* ]]
		[ ! -e x.cgm ]
	done
	# a classifier the tensors do not hold, and tensors no config names
	with_config "$D/gan.cgm" '.aux = 1'
	run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: odd.cgm: "* ]]
	with_config "$D/aux.cgm" 'del(.aux)'
	run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: odd.cgm: "* ]]
}
