#!/usr/bin/env bats
# 023-quantize.bats - cg-quantize: which views take the type, what the
# others keep, the report, pipes, and the programs that read the result.
#
# The values themselves (each block within its format's bound, the
# codec's bytes) are checked by tests/unit/test_quantize; here the
# programs meet the files.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm --holdout test.cgd
	model cvae fm-0.cgd cvae.cgm --hidden 64 --layers 1 --latent 4
	texts fort --holdout-fraction 0.2 --holdout held.cgd
	model cgpt fort-0.cgd init.cgm --context 32 --width 32 --layers 2 \
		--heads 2
	# a few steps, so that the moments are in the file too
	cg-train-step -q -m init.cgm -d fort-0.cgd --emit model --steps 3 \
		--batch 4 --opt adamw --lr 1e-3 -o cgpt.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# dtype_of FILE NAME: the dtype of tensor NAME
dtype_of() {
	cg-inspect --json --no-stats "$1" |
		jq -r --arg n "$2" '.tensors[] | select(.name == $n) | .dtype'
}

@test "cg-quantize: the weight matrices take the type, the rest stays f32" {
	local t
	for t in f16 bf16 q8_0 q4_1 q4_0 q2_0; do
		run -0 --separate-stderr cg-quantize -o q.cgm "$D/cgpt.cgm" $t
		[ -z "$output" ]
		assert_equal "$(dtype_of q.cgm h.0.attn.qkv.w)" $t
		assert_equal "$(dtype_of q.cgm h.1.mlp.proj.w)" $t
		assert_equal "$(dtype_of q.cgm lm_head.w)" $t
		assert_equal "$(dtype_of q.cgm wte)" f32
		assert_equal "$(dtype_of q.cgm wpe)" f32
		assert_equal "$(dtype_of q.cgm h.0.ln1.w)" f32
		assert_equal "$(dtype_of q.cgm h.0.attn.qkv.b)" f32
		# the optimizer's moments go across as they were
		assert_equal "$(dtype_of q.cgm opt.m)" f32
		cmp <(tar xOf "$D/cgpt.cgm" opt.v) <(tar xOf q.cgm opt.v)
		# the manifest too, but for the tensors
		cmp <(tar xOf "$D/cgpt.cgm" cg.json | jq -S 'del(.tensors)') \
			<(tar xOf q.cgm cg.json | jq -S 'del(.tensors)')
		[[ $stderr == "cg-quantize: $D/cgpt.cgm: 9 of 29 views $t ("*" bits per weight), 20 kept f32; weights "*" bits per parameter" ]]
	done
	# the sizes the report gives: 4 x 8.5 / 32 for the matrices
	run -0 --separate-stderr cg-quantize -o q.cgm "$D/cgpt.cgm" q8_0
	[[ $stderr == *"views q8_0 (8.50 bits per weight)"* ]]
	run -0 --separate-stderr cg-quantize -o q.cgm "$D/cgpt.cgm" q4_1
	[[ $stderr == *"views q4_1 (5.00 bits per weight)"* ]]
	[ "$(stat -c %s q.cgm)" -lt "$(stat -c %s "$D/cgpt.cgm")" ]
}

@test "cg-quantize --reference: ggml's rule where the default fits the blocks" {
	local t
	for t in q4_0 q4_1; do
		cg-quantize -q -o fit.cgm "$D/cgpt.cgm" $t
		cg-quantize -q --reference -o ref.cgm "$D/cgpt.cgm" $t
		run -1 cmp -s fit.cgm ref.cgm
		# both a model of that type, both as big
		assert_equal "$(dtype_of ref.cgm h.0.mlp.fc.w)" $t
		assert_equal "$(stat -c %s ref.cgm)" "$(stat -c %s fit.cgm)"
	done
	# q8_0 has one rule
	cg-quantize -q -o a.cgm "$D/cgpt.cgm" q8_0
	cg-quantize -q --reference -o b.cgm "$D/cgpt.cgm" q8_0
	cmp a.cgm b.cgm
}

@test "cg-quantize --strip: the optimizer's state left out, its counts 0" {
	cg-quantize -q --strip -o s.cgm "$D/cgpt.cgm" q8_0
	run -1 bash -c "tar tf s.cgm | grep '^opt\.'"
	tar xOf "$D/cgpt.cgm" cg.json | jq -e '.opt_t == 3'
	tar xOf s.cgm cg.json | jq -e 'has("opt_t") | not'
	[ "$(stat -c %s s.cgm)" -lt "$(( $(stat -c %s "$D/cgpt.cgm") / 4 ))" ]
	# it trains on, Adam's moments from zero: as the f32 model stripped
	cg-quantize -q --strip -o s32.cgm "$D/cgpt.cgm" f32
	cg-quantize -q -o s8.cgm s32.cgm q8_0
	cmp s.cgm s8.cgm
	cg-train-step -q -m s.cgm -d "$D/fort-0.cgd" --emit model --steps 2 \
		--batch 4 --opt adamw --lr 1e-3 -o t.cgm
	tar xOf t.cgm cg.json | jq -e '.opt_t == 2 and .step == 5'
}

@test "cg-quantize -v: every view, and why it stays f32" {
	run -0 --separate-stderr cg-quantize -v -o q.cgm "$D/cgpt.cgm" q4_0
	[ "${#stderr_lines[@]}" -eq 30 ]
	# (bats drops the first line's leading blanks)
	[[ ${stderr_lines[0]} == *"wte "*" f32 -> f32 "*"  kept f32: an embedding" ]]
	[[ ${stderr_lines[2]} == "  h.0.ln1.w "*" f32 -> f32 "*"  kept f32: a norm or a bias" ]]
	[[ ${stderr_lines[4]} == "  h.0.attn.qkv.w "*" f32 -> q4_0 "* ]]
	[[ ${stderr_lines[4]} != *kept* ]]
}

@test "cg-quantize: --keep, --all, and rows that are not whole blocks" {
	cg-quantize -q --keep 'h.1.*' --keep lm_head.w -o q.cgm "$D/cgpt.cgm" q8_0
	assert_equal "$(dtype_of q.cgm h.1.attn.qkv.w)" f32
	assert_equal "$(dtype_of q.cgm lm_head.w)" f32
	assert_equal "$(dtype_of q.cgm h.0.attn.qkv.w)" q8_0
	cg-quantize -q --all -o q.cgm "$D/cgpt.cgm" q8_0
	assert_equal "$(dtype_of q.cgm wte)" q8_0
	assert_equal "$(dtype_of q.cgm h.0.ln1.w)" q8_0
	# cvae: the encoder's rows hold 784 pixels and 10 conditions, not
	# whole blocks, but the matrix is (64 x 794 = 1588 blocks): it takes
	# the type, its blocks running across rows
	cg-quantize -q -o q.cgm "$D/cvae.cgm" q8_0
	assert_equal "$(dtype_of q.cgm enc.0.w)" q8_0
	assert_equal "$(dtype_of q.cgm dec.out.w)" q8_0
	assert_equal "$(dtype_of q.cgm enc.0.b)" f32
}

@test "cg-quantize f32: every view back, the values the stored ones decode to" {
	cg-quantize -q -o q.cgm "$D/cgpt.cgm" q4_1
	cg-quantize -q -o back.cgm q.cgm f32
	run -0 bash -c "cg-inspect --json --no-stats back.cgm | jq -r '[.tensors[].dtype] | unique | join(\" \")'"
	assert_output f32
	run -0 cg-inspect --tensor h.0.mlp.fc.w q.cgm
	local a=$output
	run -0 cg-inspect --tensor h.0.mlp.fc.w back.cgm
	assert_equal "$output" "$a"
	# and the two give every program the same figures
	run -0 cg-eval --json -m q.cgm -d "$D/held.cgd"
	a=$(jq -c 'del(.model)' <<<"$output")
	run -0 cg-eval --json -m back.cgm -d "$D/held.cgd"
	assert_equal "$(jq -c 'del(.model)' <<<"$output")" "$a"
	cg-sample -m q.cgm -c 0 --seed 2 --max-bytes 40 >a.txt
	cg-sample -m back.cgm -c 0 --seed 2 --max-bytes 40 >b.txt
	cmp a.txt b.txt
	# quantizing f32 again: the same bytes as the first time
	cg-quantize -q -o again.cgm back.cgm q4_1
	cmp q.cgm again.cgm
}

@test "cg-quantize: pipes, safetensors in, and a model that keeps training" {
	cg-quantize "$D/cgpt.cgm" q8_0 2>/dev/null | cg-eval -q -m - -d "$D/held.cgd" >a.txt
	[ -s a.txt ]
	cat "$D/cgpt.cgm" | cg-quantize -q - q4_0 | cg-quantize -q - f32 >b.cgm
	assert_equal "$(dtype_of b.cgm h.0.attn.qkv.w)" f32
	cg-convert "$D/cgpt.cgm" m.safetensors
	cg-quantize -q -o s.cgm m.safetensors q8_0
	cg-quantize -q -o q.cgm "$D/cgpt.cgm" q8_0
	cmp s.cgm q.cgm
	# training a quantized model: from its decoded values, written f32
	cg-train-step -q -m q.cgm -d "$D/fort-0.cgd" --emit model --steps 2 \
		--batch 4 --opt adamw --lr 1e-3 -o t.cgm
	assert_equal "$(dtype_of t.cgm h.0.attn.qkv.w)" f32
	cg-quantize -q -o t8.cgm t.cgm q8_0
	cg-eval -q -m t8.cgm -d "$D/held.cgd" >/dev/null
}

@test "cg-quantize: usage errors are exit 2, refusals exit 1 with nothing written" {
	run -2 --separate-stderr cg-quantize "$D/cgpt.cgm"
	[[ ${stderr_lines[0]} == 'cg-quantize: MODEL and TYPE are needed' ]]
	run -2 --separate-stderr cg-quantize -o q.cgm "$D/cgpt.cgm" q9_9
	[[ ${stderr_lines[0]} == "cg-quantize: unknown dtype 'q9_9'" ]]
	run -2 --separate-stderr cg-quantize -o q.cgm "$D/cgpt.cgm" u8
	[[ ${stderr_lines[0]} == 'cg-quantize: u8 holds integers, not weights' ]]
	run -2 cg-quantize -o q.cgm "$D/cgpt.cgm" q8_0 extra
	cg-quantize -q -o q8.cgm "$D/cgpt.cgm" q8_0
	run -1 --separate-stderr cg-quantize -o q.cgm q8.cgm q4_0
	assert_equal "$stderr" "cg-quantize: q8.cgm: tensor h.0.attn.qkv.w: already q8_0; quantizing it again to q4_0 compounds the error (--allow-requantize does it)"
	[ ! -e q.cgm ]
	# no temporary left either
	assert_equal "$(ls -A | grep -v '^separate-stderr-')" q8.cgm
	cg-quantize -q --allow-requantize -o q.cgm q8.cgm q4_0
	assert_equal "$(dtype_of q.cgm h.0.attn.qkv.w)" q4_0
	run -1 --separate-stderr cg-quantize -o q.cgm "$D/fort-0.cgd" q8_0
	[[ $stderr == "cg-quantize: $D/fort-0.cgd: a data file, not a model" ]]
}

@test "hostile quantized models: one line, exit 1, from every reader" {
	local how p
	cg-quantize -q -o q41.cgm "$D/cgpt.cgm" q4_1
	cg-quantize -q -o q8.cgm "$D/cgpt.cgm" q8_0
	mkcg -x scale-nan q8.cgm scale-nan.cgm
	mkcg -x min-nan q41.cgm min-nan.cgm
	mkcg -x rows q41.cgm rows.cgm
	for how in scale-nan min-nan rows; do
		run -1 --separate-stderr cg-eval -m $how.cgm -d "$D/held.cgd"
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-eval: $how.cgm: tensor h.0.attn.qkv.w: "* ]]
		[ -z "$output" ]
		run -1 --separate-stderr cg-sample -m $how.cgm -c 0 --max-bytes 5
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ -z "$output" ]
		run -1 --separate-stderr cg-quantize -o o.cgm $how.cgm f32
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ ! -e o.cgm ]
		run -1 --separate-stderr cg-train-step -m $how.cgm \
			-d "$D/fort-0.cgd" --emit model -o o.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ ! -e o.cgm ]
		run -1 cg-inspect $how.cgm
	done
	run -1 --separate-stderr cg-eval -m min-nan.cgm -d "$D/held.cgd"
	[[ $stderr == *'block 0 has a scale or minimum that is not finite' ]]
	run -1 --separate-stderr cg-eval -m rows.cgm -d "$D/held.cgd"
	[[ $stderr == *'byte length does not match dtype and shape' ]]
}
