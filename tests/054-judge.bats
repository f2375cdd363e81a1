#!/usr/bin/env bats
# 054-judge.bats - the cclf classifier through the programs, and cg-eval
# --judge: options, hostile judges, the JSON and table figures, their
# consistency with the judge's own scores, and determinism.
#
# From the Fashion-MNIST fixture (100 training images, 20 test images):
# a cvae, and a small cclf trained for a few seconds, made once per file.
# That a set's Fréchet distance to itself is 0 and that the figures are
# the ones computed by hand from the judge's features is
# tests/unit/test_judge's; the distance against scipy is test_frechet's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train
	images test --test
	model cvae train-0.cgd vae.cgm --hidden 64 --layers 1 --latent 8
	model cclf train-0.cgd clf0.cgm --hidden 32 --layers 1
	cg-train-step -q -m clf0.cgm -d train-0.cgd --emit model --steps 60 \
		--batch 20 --seed 1 -o clf.cgm
	model cddpm train-0.cgd dm.cgm --hidden 16 --layers 1 --embed 8 \
		--timesteps 50
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# ------------------------------------------------------------- cclf

@test "cg-init -a cclf: its options and config; --help lists them" {
	run -0 cg-init -a cclf --help
	assert_output --partial '-a cclf: image classifier (MLP or CNN)'
	assert_output --partial "hidden width (the judge's features)"
	assert_output --partial '(default 1024; 1 to 1048576)'
	assert_output --partial "a CNN trunk's first channels"
	run -0 bash -c "tar xOf '$D/clf0.cgm' cg.json | jq -c .config"
	assert_output '{"in_dim":784,"ncond":10,"hidden":32,"layers":1,"conv":0}'
	run -0 bash -c "tar tf '$D/clf0.cgm' | tr '\n' ' '"
	assert_output 'cg.json hid.0.w hid.0.b out.w out.b '
}

@test "cg-init -a cclf --conv: a CNN whose tensors are nn.Conv2d's; it trains" {
	cg-init -a cclf -d "$D/train-0.cgd" --conv 4 --hidden 16 --layers 1 \
		-o cnn.cgm
	run -0 bash -c "tar tf cnn.cgm | tr '\n' ' '"
	assert_output 'cg.json conv.0.w conv.0.b conv.1.w conv.1.b conv.2.w conv.2.b hid.0.w hid.0.b out.w out.b '
	assert_equal "$(tar xOf cnn.cgm cg.json | jq -r '.tensors[2].shape | join(",")')" 8,4,3,3
	assert_equal "$(tar xOf cnn.cgm cg.json | jq -r '.tensors[6].shape | join(",")')" 16,784
	cg-eval -q --json -m cnn.cgm -d "$D/train-0.cgd" >before.json
	cg-train-step -q -m cnn.cgm -d "$D/train-0.cgd" --emit model --steps 30 \
		--lr 3e-3 -o cnn1.cgm
	cg-eval -q --json -m cnn1.cgm -d "$D/train-0.cgd" >after.json
	run -0 jq -n --slurpfile a before.json --slurpfile b after.json \
		'$b[0].xent < $a[0].xent * 0.9'
	assert_output true
}

@test "cg-init -a cclf refuses text data, and one condition" {
	cg-shard -q -o tx "$BATS_TEST_DIRNAME/fixtures/text/cond.jsonl"
	run -1 --separate-stderr cg-init -a cclf -d tx-0.cgd -o x.cgm
	[[ $stderr == 'cg-init: '*'cclf needs image data' ]]
	[ ! -e x.cgm ]
}

@test "cg-eval on a cclf: xent and acc, no bits/dim; training helps" {
	run -0 cg-eval -m "$D/clf.cgm" -d "$D/test-0.cgd"
	assert_line --index 1 --regexp '^ +examples +xent +acc +data$'
	run -0 cg-eval --json -m "$D/clf0.cgm" -d "$D/train-0.cgd"
	before=$output
	run -0 cg-eval --json -m "$D/clf.cgm" -d "$D/train-0.cgd"
	jq -e --argjson b "$before" \
		'.arch == "cclf" and .step == 60 and (has("bits_per_dim") | not)
		 and .xent < $b.xent - 1 and .acc > 0.7 and .acc > $b.acc' \
		<<<"$output"
}

@test "cg-sample refuses a cclf model: one line, exit 1, no file" {
	run -1 --separate-stderr cg-sample -m "$D/clf.cgm" -o a.png
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: '*'clf.cgm: cclf models cannot be sampled' ]]
	[ ! -e a.png ]
}

# ------------------------------------------------------ cg-eval --judge

@test "cg-eval --help documents --judge and --judge-samples" {
	run -0 cg-eval --help
	assert_output --partial '--judge CLF'
	assert_output --partial '--judge-samples N'
	assert_output --partial 'Image models:'
}

@test "cg-eval --judge: usage errors" {
	run -2 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge-samples 10
	[[ ${stderr_lines[0]} == 'cg-eval: --judge-samples needs --judge' ]]
	for n in 0 1 -3 12x 2000000; do
		run -2 --separate-stderr cg-eval -m "$D/vae.cgm" \
			-d "$D/test-0.cgd" --judge "$D/clf.cgm" --judge-samples $n
		[[ ${stderr_lines[0]} == 'cg-eval: --judge-samples'* ]]
	done
	run -2 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --generate
	[[ ${stderr_lines[0]} == 'cg-eval: --judge is for image models'* ]]
	run -2 --separate-stderr cg-eval -m - -d "$D/test-0.cgd" --judge - \
		<"$D/vae.cgm"
	[[ ${stderr_lines[0]} == 'cg-eval: only one input can be standard input' ]]
}

@test "cg-eval --judge: a missing judge is one line, exit 1, nothing on stdout" {
	run -1 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge nope.cgm
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-eval: nope.cgm:'* ]]
}

@test "cg-eval --judge: a judge that is not a classifier, a model that draws no images" {
	run -1 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/vae.cgm"
	[ -z "$output" ]
	[ "$stderr" = "cg-eval: $D/vae.cgm: the judge is a cvae model, not a classifier" ]
	run -1 --separate-stderr cg-eval -m "$D/clf.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm"
	[ "$stderr" = "cg-eval: $D/clf.cgm: the model is a cclf model, which draws no images" ]
	# a text model
	cg-shard -q -o tx "$BATS_TEST_DIRNAME/fixtures/text/cond.jsonl"
	cg-init -a cgpt -d tx-0.cgd --width 16 --heads 2 --layers 1 \
		--context 16 -o gpt.cgm
	run -1 --separate-stderr cg-eval -m gpt.cgm -d tx-0.cgd \
		--judge "$D/clf.cgm"
	[ -z "$output" ]
	[ "$stderr" = "cg-eval: $D/clf.cgm: the model is a cgpt model, which draws no images" ]
}

# lie FILTER: clf.cgm with its manifest changed by jq FILTER, as lie.cgm
lie() {
	mkdir -p m
	tar -xf "$D/clf.cgm" -C m
	jq -c "$1" m/cg.json >m/cg.json.new
	mv m/cg.json.new m/cg.json
	tar --format=ustar -cf lie.cgm -C m $(tar -tf "$D/clf.cgm")
}

@test "cg-eval --judge: a judge of other images or other conditions is refused" {
	lie '.image.height = 14 | .image.width = 56'
	run -1 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge lie.cgm
	[ -z "$output" ]
	[ "$stderr" = 'cg-eval: lie.cgm: the judge reads images of 14x56x1, the model draws 28x28x1' ]
	lie '.conditions[3] = "Frock"'
	run -1 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge lie.cgm
	[ "$stderr" = 'cg-eval: lie.cgm: condition 3 is "Frock" to the judge but "Dress" to the model' ]
	lie '.conditions = .conditions[:9] | .config.ncond = 9'
	run -1 --separate-stderr cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge lie.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-eval: lie.cgm: '* ]]
}

@test "cg-eval --judge --json: every field, consistent with the judge's own scores" {
	run -0 cg-eval --json -m "$D/clf.cgm" -d "$D/test-0.cgd"
	own=$output
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 30 --seed 4
	[ "${#lines[@]}" -eq 1 ]
	jq -e --argjson own "$own" --arg j "$D/clf.cgm" '. as $r |
		.judge == $j and .judge_samples == 30 and .judge_features == 32
		and .seed == 4 and has("nelbo") and has("bits_per_dim")
		and (.per_condition | length) == 10
		and ([.per_condition[].drawn] | add) == 300
		and ([.per_condition[].real] | add) == 20
		and .judge_real_acc == $own.acc
		and ([.per_condition[] | select(.real > 0) | .real_acc * .real]
		     | add / 20 - $r.judge_real_acc | fabs) < 1e-12
		and ([.per_condition[].acc] | add / 10 - $r.cond_acc | fabs)
		    < 1e-12
		and .cond_acc >= 0 and .cond_acc <= 1
		and .frechet > 0
		and (.per_condition[0].cond == "T-shirt/top")
		and all(.per_condition[]; (.real >= 2) == (.frechet != null))' \
		<<<"$output"
}

@test "cg-eval --judge: a table per shard, a row per condition and all" {
	run -0 cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" -d "$D/train-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 10
	assert_line --index 0 "model $D/vae.cgm (cvae, step 0)"
	assert_line --index 3 "judge $D/clf.cgm (10 images per condition, seed 0, 32 features)"
	assert_line --index 4 --regexp '^condition +drawn +acc +real +real_acc +frechet$'
	assert_line --index 5 --regexp '^T-shirt/top +10 +[01]\.[0-9]{4} +[0-9]+ '
	assert_line --index 15 --regexp '^all +100 +[01]\.[0-9]{4} +20 +[01]\.[0-9]{4} +[0-9]+\.[0-9]{4}$'
	# the second shard has its own header, row and judge table
	assert_line --index 16 --regexp '^ +examples +nelbo'
	assert_line --index 30 --regexp '^all +100 +[01]\.[0-9]{4} +100 '
	[ "${#lines[@]}" -eq 31 ]
}

@test "cg-eval --judge: the same seed gives the same figures, another seed others" {
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3
	a=$output
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3
	[ "$output" = "$a" ]
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 5
	jq -e --argjson a "$a" '.frechet != $a.frechet' <<<"$output"
}

@test "cg-eval --judge --temperature: the scale of the noise, recorded; 1 is the default" {
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3
	a=$output
	jq -e '.temperature == 1' <<<"$a"
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3 --temperature 1
	[ "$output" = "$a" ]
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3 --temperature 0.5
	jq -e --argjson a "$a" '.temperature == 0.5 and .frechet != $a.frechet' \
		<<<"$output"
	# no noise at all: every image of a condition is the same one, so
	# each condition's images are all one class or all another
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 20 --seed 3 --temperature 0
	jq -e 'all(.per_condition[]; .acc == 0 or .acc == 1)' <<<"$output"
	run -0 cg-eval -m "$D/vae.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 10 --temperature 0.5
	assert_line --index 3 "judge $D/clf.cgm (10 images per condition, seed 0, 32 features; temperature 0.5)"
	for t in -1 x 1001; do
		run -2 --separate-stderr cg-eval -m "$D/vae.cgm" \
			-d "$D/test-0.cgd" --judge "$D/clf.cgm" --temperature "$t"
		[[ ${stderr_lines[0]} == 'cg-eval: --temperature'* ]]
	done
}

# ------------------------------------- a diffusion model's drawing options

@test "cg-eval --help documents --guidance, --steps and --sampler" {
	run -0 cg-eval --help
	assert_output --partial 'Diffusion models (cddpm), with --judge'
	assert_output --partial '--guidance W'
	assert_output --partial '--steps N'
	assert_output --partial '--sampler NAME'
	assert_output --partial '[--guidance W] [--steps N] [--sampler ddim|ddpm]'
}

@test "cg-eval --guidance, --steps, --sampler: usage errors as cg-sample's" {
	for opt in "--guidance 1" "--steps 5" "--sampler ddpm" \
		"--guidance-interval 0:0.5"; do
		run -2 --separate-stderr cg-eval -m "$D/dm.cgm" \
			-d "$D/test-0.cgd" $opt
		[[ ${stderr_lines[0]} == "cg-eval: ${opt%% *} needs --judge" ]]
		run -2 --separate-stderr cg-eval -m "$D/vae.cgm" \
			-d "$D/test-0.cgd" --judge "$D/clf.cgm" $opt
		[ -z "$output" ]
		[[ ${stderr_lines[0]} == "cg-eval: $D/vae.cgm: ${opt%% *} is for diffusion models (cvae is not one)" ]]
	done
	for bad in "--guidance -1" "--guidance nan" "--guidance 1e9" \
		"--steps 0" "--steps 1.5" "--steps 100001" "--sampler ddpm2" \
		"--guidance-interval 0.9:0.1" "--guidance-interval 0:2"; do
		run -2 --separate-stderr cg-eval -m "$D/dm.cgm" \
			-d "$D/test-0.cgd" --judge "$D/clf.cgm" $bad
		[[ ${stderr_lines[0]} == "cg-eval: ${bad%% *}"* ]]
		# the same words, the same message, as cg-sample's
		run -2 --separate-stderr cg-sample -m "$D/dm.cgm" -o x.png $bad
		[[ ${stderr_lines[0]} == "cg-sample: ${bad%% *}"* ]]
	done
	[ ! -e x.png ]
}

@test "cg-eval --judge --steps past the model's T: one line, exit 1" {
	run -1 --separate-stderr cg-eval -m "$D/dm.cgm" -d "$D/test-0.cgd" \
		--judge "$D/clf.cgm" --judge-samples 2 --steps 51
	refute_output --partial 'judge '
	refute_output --partial 'mse' 
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: $D/test-0.cgd: "*"51 steps: not in [1, 50]" ]]
}

@test "cg-eval --judge draws a cddpm as the options say, and records them" {
	j() {
		cg-eval --json -m "$D/dm.cgm" -d "$D/test-0.cgd" \
			--judge "$D/clf.cgm" --judge-samples 6 --seed 2 "$@"
	}
	dflt=$(j)
	jq -e '.guidance == 0 and .sampler == "ddim" and .steps == null' \
		<<<"$dflt"
	# the defaults said aloud draw the same images (T = 50: 50 steps)
	run -0 j --guidance 0 --sampler ddim --steps 50
	jq -e --argjson d "$dflt" '.steps == 50 and .frechet == $d.frechet
		and .per_condition == $d.per_condition' <<<"$output"
	# each option changes what is drawn
	for opt in "--guidance 3" "--sampler ddpm" "--steps 7"; do
		run -0 j $opt
		jq -e --argjson d "$dflt" '.frechet != $d.frechet' <<<"$output"
	done
	run -0 j --guidance 1.5 --steps 7 --sampler ddpm
	jq -e '.guidance == 1.5 and .sampler == "ddpm" and .steps == 7' \
		<<<"$output"
	jq -e 'has("guidance_interval") | not' <<<"$output"
	# guidance on a part of the schedule: recorded, and other draws than
	# guidance everywhere; over the whole of it, the same draws
	g3=$(j --guidance 3)
	run -0 j --guidance 3 --guidance-interval 0.2:0.8
	jq -e --argjson g "$g3" '.guidance_interval == [0.2, 0.8]
		and .frechet != $g.frechet' <<<"$output"
	run -0 j --guidance 3 --guidance-interval 0:1
	jq -e --argjson g "$g3" '.guidance_interval == [0, 1]
		and .frechet == $g.frechet and .per_condition == $g.per_condition' \
		<<<"$output"
	# and the table's header says them
	run -0 cg-eval -m "$D/dm.cgm" -d "$D/test-0.cgd" --judge "$D/clf.cgm" \
		--judge-samples 2 --guidance 3 --steps 5
	assert_line --index 3 "judge $D/clf.cgm (2 images per condition, seed 0, 32 features; guidance 3, ddim, 5 steps)"
	run -0 cg-eval -m "$D/dm.cgm" -d "$D/test-0.cgd" --judge "$D/clf.cgm" \
		--judge-samples 2 --guidance 3 --guidance-interval 0.25:0.5 --steps 5
	assert_line --index 3 "judge $D/clf.cgm (2 images per condition, seed 0, 32 features; guidance 3 at t/T in [0.25, 0.5], ddim, 5 steps)"
	run -0 cg-eval -m "$D/dm.cgm" -d "$D/test-0.cgd" --judge "$D/clf.cgm" \
		--judge-samples 2 --sampler ddpm
	assert_line --index 3 "judge $D/clf.cgm (2 images per condition, seed 0, 32 features; guidance 0, ddpm, its default steps)"
}

@test "pipeline: a judge from standard input scores a trained model" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/train-0.cgd" -e model -k 30 \
		--batch 30 --lr 3e-3 -o trained.cgm
	run -0 --separate-stderr cg-eval --json -m trained.cgm \
		-d "$D/test-0.cgd" --judge - --judge-samples 20 <"$D/clf.cgm"
	jq -e '.judge == "-" and .step == 30 and .frechet > 0' <<<"$output"
}
