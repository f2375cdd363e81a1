#!/usr/bin/env bats
# 108-cos-r1.bats - the cddpm's cosine noise schedule (--cosine), the
# cgan's R1 penalty (--r1) and its discriminator's 4x4 kernels
# (--disc-kernel 4) through the programs, and what a model's config may
# say of them.
#
# The schedule's values against their closed form, the loss, the
# gradient and both samplers on it are tests/unit/test_cddpm's; the
# penalty against differences of D in x and its gradient against
# central differences, tests/unit/test_cgan's; PyTorch's agreement
# (double backpropagation for R1) is torch_check.py's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	model cddpm train-0.cgd lin.cgm --hidden 24 --layers 1 --embed 8 \
		--timesteps 100
	model cddpm train-0.cgd cos.cgm --hidden 24 --layers 1 --embed 8 \
		--timesteps 100 --cosine
	model cgan train-0.cgd gan.cgm --latent 8 --hidden 16 --layers 1
	model cgan train-0.cgd r1.cgm --latent 8 --hidden 16 --layers 1 \
		--r1 10
	model cgan train-0.cgd cr1.cgm --latent 8 --conv 2 --r1 10
	model cgan train-0.cgd c3.cgm --latent 8 --conv 2
	model cgan train-0.cgd c4.cgm --latent 8 --conv 2 --disc-kernel 4
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

manifest() {
	tar xOf "$1" cg.json | jq -c "$2"
}

@test "cg-init --cosine: the key in the config, the same weights" {
	run -0 manifest "$D/cos.cgm" '.config.cosine'
	assert_output 1
	run -0 manifest "$D/lin.cgm" '.config.cosine'
	assert_output 0
	a=$(manifest "$D/cos.cgm" '[.tensors[].sha256]')
	b=$(manifest "$D/lin.cgm" '[.tensors[].sha256]')
	[ "$a" = "$b" ]
	cg-init -a cddpm -d "$D/train-0.cgd" --hidden 24 --layers 1 \
		--embed 8 --timesteps 100 --cosine=0 --seed 1 -o zero.cgm
	cmp zero.cgm "$D/lin.cgm"
}

@test "cg-init: a bad --cosine is a usage error; --schedule does not exist" {
	for bad in --cosine=2 --cosine=x --cosine=-1 "--schedule cosine"; do
		run -2 --separate-stderr cg-init -a cddpm -d "$D/train-0.cgd" \
			$bad -o x.cgm
		[ "${#stderr_lines[@]}" -ge 1 ]
		[[ $stderr == cg-init:* ]]
		[ ! -e x.cgm ]
	done
}

@test "cddpm: a model without the cosine key has the linear schedule" {
	with_config "$D/lin.cgm" 'del(.cosine)'
	run -0 cg-eval --json -m odd.cgm -d "$D/test.cgd" --seed 1
	old=$output
	run -0 cg-eval --json -m "$D/lin.cgm" -d "$D/test.cgd" --seed 1
	jq -e --argjson o "$old" '.mse == $o.mse' <<<"$output"
	cg-sample -m odd.cgm -n 2 --steps 5 --seed 2 --sampler ddpm -f pgm \
		-o a.pgm
	cg-sample -m "$D/lin.cgm" -n 2 --steps 5 --seed 2 --sampler ddpm \
		-f pgm -o b.pgm
	cmp a.pgm b.pgm
	cg-train-step -q -m odd.cgm -d "$D/train-0.cgd" -e model -k 2 \
		--batch 10 --seed 1 -o old2.cgm
	cg-train-step -q -m "$D/lin.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 10 --seed 1 -o new2.cgm
	[ "$(manifest old2.cgm '[.loss, [.tensors[].sha256]]')" = \
		"$(manifest new2.cgm '[.loss, [.tensors[].sha256]]')" ]
	run -0 manifest old2.cgm '.config | has("cosine")'
	assert_output false
}

@test "cddpm: a bad cosine in a model is one line, exit 1" {
	for bad in '.cosine = 2' '.cosine = 0.5' '.cosine = "1"' \
		'.cosine = null' '.cosine = -1'; do
		with_config "$D/cos.cgm" "$bad"
		run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-eval: odd.cgm: "*cosine* ]]
		run -1 --separate-stderr cg-sample -m odd.cgm -n 1 -o x.png
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ ! -e x.png ]
	done
}

@test "cddpm --cosine: training, eval and every sampler follow the schedule" {
	# the same weights and draws under another schedule: another loss
	run -0 cg-eval --json -m "$D/cos.cgm" -d "$D/test.cgd" --seed 1
	c=$output
	run -0 cg-eval --json -m "$D/lin.cgm" -d "$D/test.cgd" --seed 1
	jq -e --argjson c "$c" '(.mse - $c.mse) | fabs > 1e-4' <<<"$output"
	cg-train-step -q -m "$D/cos.cgm" -d "$D/train-0.cgd" -e model -k 3 \
		--batch 10 --seed 1 -o c3.cgm
	cg-train-step -q -m "$D/lin.cgm" -d "$D/train-0.cgd" -e model -k 3 \
		--batch 10 --seed 1 -o l3.cgm
	run -0 manifest c3.cgm '[.config.cosine, .step]'
	assert_output '[1,3]'
	[ "$(manifest c3.cgm .loss)" != "$(manifest l3.cgm .loss)" ]
	for s in "--sampler ddim" "--sampler ddpm" "--guidance 2 --sampler ddim" \
		"--guidance 2 --sampler ddpm"; do
		cg-sample -m c3.cgm -c 2 -n 2 --steps 7 --seed 4 $s -f pgm \
			-o c.pgm
		cg-sample -m c3.cgm -c 2 -n 2 --steps 7 --seed 4 $s -f pgm \
			-o c2.pgm
		cmp c.pgm c2.pgm
		with_config c3.cgm '.cosine = 0'
		cg-sample -m odd.cgm -c 2 -n 2 --steps 7 --seed 4 $s -f pgm \
			-o l.pgm
		! cmp -s c.pgm l.pgm
	done
}

# ------------------------------------------------------------ cgan --r1

@test "cg-init -a cgan --r1: the key in the config, the same weights" {
	run -0 cg-init -a cgan --help
	assert_output --partial '--r1 X'
	run -0 manifest "$D/r1.cgm" '.config.r1'
	assert_output 10
	run -0 manifest "$D/gan.cgm" '.config.r1'
	assert_output 0
	[ "$(manifest "$D/r1.cgm" '[.tensors[].sha256]')" = \
		"$(manifest "$D/gan.cgm" '[.tensors[].sha256]')" ]
	for bad in --r1=-1 --r1=x --r1=1e7 --r1=nan "--r1"; do
		run -2 --separate-stderr cg-init -a cgan -d "$D/train-0.cgd" \
			$bad -o x.cgm
		[[ $stderr == cg-init:* ]]
		[ ! -e x.cgm ]
	done
}

@test "cgan --r1: one step moves D otherwise and G as without it" {
	for m in gan r1; do
		cg-train-step -q -m "$D/$m.cgm" -d "$D/train-0.cgd" -e model \
			-k 1 --batch 16 --seed 3 -o $m-1.cgm
	done
	# G's gradient, and so its first step, does not see the penalty
	run -0 manifest gan-1.cgm '[.tensors[] | select(.name | startswith("gen.")) | .sha256]'
	g=$output
	run -0 manifest r1-1.cgm '[.tensors[] | select(.name | startswith("gen.")) | .sha256]'
	[ "$output" = "$g" ]
	run -0 manifest gan-1.cgm '[.tensors[] | select(.name == "disc.0.w" or .name == "disc.emb") | .sha256]'
	d=$output
	run -0 manifest r1-1.cgm '[.tensors[] | select(.name == "disc.0.w" or .name == "disc.emb") | .sha256]'
	[ "$output" != "$d" ]
	# the convolutional nets train with it, and cg-eval reads them
	cg-train-step -q -m "$D/cr1.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 8 --seed 3 -o cr1-2.cgm
	run -0 manifest cr1-2.cgm '[.config.r1, .config.conv, .step]'
	assert_output '[10,2,2]'
	run -0 cg-eval --json -m cr1-2.cgm -d "$D/test.cgd" --seed 1
	jq -e '.d_hinge > 0' <<<"$output"
}

@test "cgan: a model without the r1 key has no penalty; a bad one is one line" {
	with_config "$D/gan.cgm" 'del(.r1)'
	cg-train-step -q -m odd.cgm -d "$D/train-0.cgd" -e model -k 2 \
		--batch 10 --seed 1 -o old2.cgm
	cg-train-step -q -m "$D/gan.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 10 --seed 1 -o new2.cgm
	[ "$(manifest old2.cgm '[.loss, [.tensors[].sha256]]')" = \
		"$(manifest new2.cgm '[.loss, [.tensors[].sha256]]')" ]
	run -0 manifest old2.cgm '.config | has("r1")'
	assert_output false
	for bad in '.r1 = -1' '.r1 = "1"' '.r1 = null' '.r1 = 1e7'; do
		with_config "$D/r1.cgm" "$bad"
		run -1 --separate-stderr cg-train-step -m odd.cgm \
			-d "$D/train-0.cgd" -e model -k 1 -o x.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-train-step: odd.cgm: "*r1* ]]
		[ ! -e x.cgm ]
	done
}

@test "cg-init -a cgan --disc-kernel 4: D's kernels 4x4, the key in the config; 3 is no key" {
	run -0 cg-init -a cgan --help
	assert_output --partial '--disc-kernel N'
	run -0 manifest "$D/c4.cgm" '[.config["disc-kernel"], (.tensors[] | select(.name == "disc.c1.w" or .name == "disc.c2.w") | .shape)]'
	assert_output '[4,[2,1,4,4],[4,2,4,4]]'
	# the default writes no key: a model as made before it existed
	run -0 manifest "$D/c3.cgm" '[(.config | has("disc-kernel")), (.tensors[] | select(.name == "disc.c1.w") | .shape)]'
	assert_output '[false,[2,1,3,3]]'
	cg-init -a cgan -d "$D/train-0.cgd" --seed 1 --latent 8 --conv 2 \
		--disc-kernel 3 -o three.cgm
	cmp three.cgm "$D/c3.cgm"
	# it trains, scores, draws
	cg-train-step -q -m "$D/c4.cgm" -d "$D/train-0.cgd" -e model -k 2 \
		--batch 8 --seed 3 -o c4-2.cgm
	run -0 cg-eval --json -m c4-2.cgm -d "$D/test.cgd" --seed 1
	jq -e '.d_hinge > 0' <<<"$output"
	cg-sample -m c4-2.cgm -n 2 -o c4.png
	for bad in --disc-kernel=2 --disc-kernel=5 --disc-kernel=x; do
		run -2 --separate-stderr cg-init -a cgan -d "$D/train-0.cgd" \
			--conv 2 $bad -o x.cgm
		[[ $stderr == cg-init:* ]]
		[ ! -e x.cgm ]
	done
	# the MLP discriminator has no kernel to set
	run -1 --separate-stderr cg-init -a cgan -d "$D/train-0.cgd" \
		--disc-kernel 4 -o x.cgm
	[[ $stderr == 'cg-init: '*'disc-kernel = 4 without conv'* ]]
	[ ! -e x.cgm ]
}

@test "cgan: a disc-kernel in a model other than 3 or 4, or without conv, is one line" {
	for bad in '.["disc-kernel"] = 5' '.["disc-kernel"] = "4"' \
		'.["disc-kernel"] = 3.5'; do
		with_config "$D/c4.cgm" "$bad"
		run -1 --separate-stderr cg-train-step -m odd.cgm \
			-d "$D/train-0.cgd" -e model -k 1 -o x.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-train-step: odd.cgm: "*disc-kernel* ]]
		[ ! -e x.cgm ]
	done
	# a kernel of 3 named on a model of 4x4 tensors: the shapes disagree
	with_config "$D/c4.cgm" '.["disc-kernel"] = 3'
	run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: odd.cgm: "* ]]
	with_config "$D/gan.cgm" '.["disc-kernel"] = 4'
	run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: odd.cgm: "*'without conv'* ]]
}
