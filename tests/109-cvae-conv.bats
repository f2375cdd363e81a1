#!/usr/bin/env bats
# 109-cvae-conv.bats - the convolutional cvae (cg-init -a cvae --conv C)
# through the programs: its tensors in the model file, a model of the
# MLPs made as before (no "conv" key), training, cg-eval with the judge,
# cg-sample, --max-memory in chunks, a DiLoCo round, a quantized model
# that evaluates and draws, and what it refuses (DP-SGD, a teacher,
# structured pruning, Wanda), each in one line.
#
# Every gradient against finite differences is tests/unit/test_cvae's;
# PyTorch's agreement is torch_check.py's; a manifest that lies about the
# image or the width is 030-hostile's.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	images rr -n 2 --strategy round-robin
	model cvae train-0.cgd vae.cgm --conv 4 --latent 4
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# manifest FILE FILTER: jq -c FILTER over FILE's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -c "$2"
}

# changed A B: the names of the tensors that differ between models A and B
changed() {
	local t
	for t in $(manifest "$1" '.tensors[].name' | tr -d '"'); do
		cmp -s <(cg-inspect --tensor "$t" "$1") \
			<(cg-inspect --tensor "$t" "$2") || echo "$t"
	done
}

@test "cg-init -a cvae --conv: its tensors; the MLP's model has no conv key" {
	run -0 manifest "$D/vae.cgm" '[.tensors[] | .name + ":" + (.shape | map(tostring) | join("x"))] | join(" ")'
	assert_output '"enc.c1.w:4x1x3x3 enc.c1.b:4 enc.n1.g:4 enc.n1.b:4 enc.c2.w:8x4x3x3 enc.c2.b:8 enc.n2.g:8 enc.n2.b:8 enc.mu.w:4x402 enc.mu.b:4 enc.logvar.w:4x402 enc.logvar.b:4 dec.0.w:392x14 dec.0.b:392 dec.n0.g:8 dec.n0.b:8 dec.c1.w:4x8x3x3 dec.c1.b:4 dec.n1.g:4 dec.n1.b:4 dec.c2.w:4x4x3x3 dec.c2.b:4 dec.n2.g:4 dec.n2.b:4 dec.out.w:1x4x3x3 dec.out.b:1 prior.mu:10x4 prior.logvar:10x4 enc.n1.cond:10x8 enc.n2.cond:10x16 dec.n0.cond:10x16 dec.n1.cond:10x8 dec.n2.cond:10x8"'
	run -0 manifest "$D/vae.cgm" '.config.conv'
	assert_output 4
	small_cvae "$D/train-0.cgd" mlp.cgm
	run -0 manifest mlp.cgm '.config | has("conv")'
	assert_output false
	# without either option: no prior, no FiLM tables
	model cvae "$D/train-0.cgd" bare.cgm --conv 4 --latent 4 \
		--class-prior=0 --cond-every=0
	run -0 manifest bare.cgm '.tensors | length'
	assert_output 26
	# a width past the limit: a usage error, nothing written
	run -2 cg-init -a cvae -d "$D/train-0.cgd" --conv 4097 -o big.cgm
	[ ! -e big.cgm ]
}

@test "cvae --conv: it trains, evaluates with the judge, and draws" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/train-0.cgd" --emit model \
		--steps 6 --batch 15 --seed 1 -o t.cgm
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test.cgd" --seed 1
	before=$(jq .nelbo <<<"$output")
	run -0 cg-eval --json -m t.cgm -d "$D/test.cgd" --seed 1
	jq -e --argjson b "$before" \
		'.arch == "cvae" and .step == 6 and .nelbo < $b' <<<"$output"
	model cclf "$D/train-0.cgd" clf.cgm --hidden 16 --layers 1
	run -0 cg-eval --json -m t.cgm -d "$D/test.cgd" --judge clf.cgm \
		--judge-samples 3 --seed 1
	jq -e '(.cond_acc >= 0 and .cond_acc <= 1) and (.frechet | isfinite)' \
		<<<"$output"
	cg-sample -m t.cgm -n 2 --seed 1 -o grid.png
	[ "$(head -c 8 grid.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
	cg-sample -m t.cgm -n 2 --seed 1 -o again.png
	cmp grid.png again.png
}

@test "cvae --conv --max-memory: chunks under the budget, the same gradient to rounding" {
	g() {
		cg-train-step -q -m "$D/vae.cgm" -d "$D/train-0.cgd" --batch 60 \
			--seed 2 -j 1 "$@"
	}
	g --log a.jsonl -o a.cgg
	full=$(jq -r .memory_plan a.jsonl)
	[ "$(jq -r .chunk a.jsonl)" = 0 ]
	budget=$((((full - 4000000) * 3 / 4 + 4000000) >> 20))
	g --max-memory ${budget}M --log b.jsonl -o b.cgg
	chunk=$(jq -r .chunk b.jsonl)
	[ "$chunk" -ge 1 ] && [ "$chunk" -lt 60 ]
	[ "$(jq -r .memory_plan b.jsonl)" -le $((budget << 20)) ]
	run -1 cg-inspect --diff -q a.cgg b.cgg
	# each tensor within 1e-5 relative L2 (the decoder's gradients are
	# sums over 784 pixels, tens in size: an absolute bound says little;
	# oneDNN's convolutions sum a chunk's examples in their own order)
	cg-inspect --diff -j a.cgg b.cgg >d.jsonl || true
	run -0 jq -s -e '[.[] | select(.tensor)] | length == 33 and all(.[]; (.status == "identical" or .status == "differs") and (.rel_l2 // 0) <= 1e-5)' d.jsonl
}

@test "cvae --conv: a DiLoCo round of two workers' deltas moves the model" {
	for w in 0 1; do
		cg-train-step -q -m "$D/vae.cgm" -d "$D/rr-$w.cgd" -e delta -k 3 \
			--batch 10 --seed 1 --state w$w.state -o d$w.cgg
	done
	cg-reduce d0.cgg d1.cgg | cg-apply -m "$D/vae.cgm" --outer nesterov \
		-o round.cgm
	run -0 changed "$D/vae.cgm" round.cgm
	assert_line 'enc.c1.w'
	assert_line 'dec.out.w'
	run -0 cg-eval --json -m round.cgm -d "$D/test.cgd" --seed 1
	jq -e '.arch == "cvae" and (.nelbo | isnormal)' <<<"$output"
}

@test "cvae --conv: quantized to q8_0, it evaluates and draws near the f32 model" {
	cg-quantize "$D/vae.cgm" q8_0 -o q.cgm
	run -0 cg-eval --json -m "$D/vae.cgm" -d "$D/test.cgd" --seed 1
	f=$(jq .nelbo <<<"$output")
	run -0 cg-eval --json -m q.cgm -d "$D/test.cgd" --seed 1
	jq -e --argjson f "$f" '(.nelbo - $f) | fabs < 0.01 * $f' <<<"$output"
	cg-sample -m q.cgm -n 1 --seed 1 -o q.png
	[ -s q.png ]
}

@test "cvae --conv: DP-SGD, a teacher, structured pruning and Wanda are refused in one line" {
	run -1 --separate-stderr cg-train-step -m "$D/vae.cgm" \
		-d "$D/train-0.cgd" --emit model --batch 10 --example-clip 1 \
		--example-noise 1 -o o.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"convolutional"* ]]
	[ ! -e o.cgm ]
	small_cvae "$D/train-0.cgd" mlp.cgm
	run -1 --separate-stderr cg-train-step -m mlp.cgm -d "$D/train-0.cgd" \
		--emit model --teacher "$D/vae.cgm" -o o.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"convolutional"* ]]
	[ ! -e o.cgm ]
	run -1 --separate-stderr cg-prune --structured units --remove 0.5 \
		"$D/vae.cgm" -o o.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"convolutional"* ]]
	[ ! -e o.cgm ]
	run -1 --separate-stderr cg-prune -i wanda -d "$D/train-0.cgd" \
		-s 0.5 "$D/vae.cgm" -o o.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[ ! -e o.cgm ]
}
