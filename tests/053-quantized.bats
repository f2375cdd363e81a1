#!/usr/bin/env bats
# 053-quantized.bats - cg-eval and cg-sample on f16, q8_0 and q4_0 cgpt
# and cvae models, run through the kernels that multiply the stored
# weights, on every kernel path this CPU has (CG_QKERNEL).
#
# Made once per file: a cgpt model (width 64, 2 blocks, context 32)
# trained 100 steps on the fortunes fixture, a cvae (hidden 64, 2 layers,
# latent 32) trained 30 steps on the Fashion-MNIST fixture, their copies
# in f16, q8_0 and q4_0 (mkcg -t), and each copy decoded back to f32
# (mkcg -t f32): the dequantized model, whose figures are those of the
# decode path.  The
# programs come from PATH; JSON is read with jq.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 1
	model cgpt fort-0.cgd m.cgm --context 32 --width 64 --layers 2 \
		--heads 2
	cg-train-step -q -m m.cgm -d fort-0.cgd --emit model --steps 100 \
		--batch 12 --lr 3e-3 -o t.cgm
	images fm --holdout fm-test.cgd
	model cvae fm-0.cgd cv.cgm --hidden 64 --layers 2 --latent 32
	cg-train-step -q -m cv.cgm -d fm-0.cgd --emit model --steps 30 \
		--batch 30 -o cvt.cgm
	for d in f16 q8_0 q4_0; do
		mkcg -t $d t.cgm t-$d.cgm
		mkcg -t f32 t-$d.cgm t-$d-deq.cgm
		mkcg -t $d cvt.cgm cv-$d.cgm
		mkcg -t f32 cv-$d.cgm cv-$d-deq.cgm
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# paths: the kernel paths this CPU runs (cg-eval refuses the others).
paths() {
	local p
	for p in portable avx2 avx512vnni neon; do
		if CG_QKERNEL=$p cg-eval -m "$D/t-q8_0.cgm" -d "$D/fort-0.cgd" \
			>/dev/null 2>err; then
			echo $p
		else
			grep -q 'this CPU lacks it' err
		fi
	done
}

# nats MODEL: cg-eval's nats per token of MODEL on the shard.
nats() {
	cg-eval --json -m "$1" -d "$D/fort-0.cgd" | jq -r .nats_per_token
}

@test "the portable path runs everywhere; a path this CPU lacks is refused by name" {
	run -0 paths
	assert_line --index 0 portable
	run -1 --separate-stderr env CG_QKERNEL=sse9 \
		cg-eval -m "$D/t-q8_0.cgm" -d "$D/fort-0.cgd"
	[ "$stderr" = "cg-eval: CG_QKERNEL=sse9: not portable, avx2, avx512vnni or neon" ]
	[ -z "$output" ]
}

@test "a q8_0 model is not decoded whole: cg-eval's peak memory is lower by about the files' difference" {
	# A model of 3.2M parameters (12.9 MB in f32).  The f32 model is
	# decoded into its parameters (its file's mapping is let go before
	# the scoring, whose workspace of some 30 MB is the peak's most);
	# the q8_0 model stays as its file holds it, so its peak is lower by
	# about the difference in file size, 9.5 MB: at least 3/4 of it is
	# asked (decoded, the q8_0 model would cost more than the f32 one,
	# its file's mapping and its decoded copy both).  Checked in
	# the builds without sanitizers: their shadow memory and quarantine
	# of freed blocks are not the program's.
	[ "${CG_SANITIZED:-0}" != 1 ] || skip "peak memory under sanitizers"
	local f32 q8 mf mq
	cg-init -a cgpt -d "$D/fort-0.cgd" --context 32 --width 256 \
		--layers 4 --heads 4 --seed 2 -o big.cgm
	mkcg -t q8_0 big.cgm big-q8.cgm
	f32=$(stat -c %s big.cgm)
	q8=$(stat -c %s big-q8.cgm)
	run -0 /usr/bin/time -f 'rss %M' cg-eval -j1 -m big-q8.cgm -d "$D/fort-0.cgd"
	mq=$(sed -n 's/^rss //p' <<<"$output")
	run -0 /usr/bin/time -f 'rss %M' cg-eval -j1 -m big.cgm -d "$D/fort-0.cgd"
	mf=$(sed -n 's/^rss //p' <<<"$output")
	echo "peak: q8_0 $mq KiB, f32 $mf KiB; files: q8_0 $((q8 / 1024)) KiB, f32 $((f32 / 1024)) KiB"
	[ $(( (mf - mq) * 1024 * 4 )) -ge $(( (f32 - q8) * 3 )) ]
}

@test "cg-eval through the kernels: within 0.5% of the dequantized model's nats per token (f16: 1e-5)" {
	# q8_0 and q4_0 weights meet inputs rounded to q8_0: each Linear's
	# output moves by at most sum_b d_b/2 sum |w| (qlinear.h), a few
	# 1e-3 of its size, and the loss by less; 0.5% leaves a margin over
	# the 0.04% (q8_0) and 0.004% (q4_0) measured.  f16 weights meet
	# the f32 input itself: the same products summed in another
	# order, to 1e-5 relative.
	local p d got want
	for p in $(paths); do
		for d in q8_0 q4_0 f16; do
			want=$(nats "$D/t-$d-deq.cgm")
			got=$(CG_QKERNEL=$p nats "$D/t-$d.cgm")
			tol=$([ $d = f16 ] && echo 1e-5 || echo 5e-3)
			echo "$p $d: $got, dequantized $want"
			jq -ne --argjson a "$got" --argjson b "$want" \
				--argjson t "$tol" \
				'($a - $b | fabs) <= $t * $b and $a > 0'
		done
	done
}

@test "cg-eval through the kernels: the paths agree (the same integer products, sums in another order)" {
	# A product's outputs agree across paths to f32 rounding
	# (test_qlinear).  Through the network f16 stays that close (1e-5);
	# with q8_0 and q4_0 a last-bit difference can carry a later input
	# across a rounding boundary of its 8-bit blocks, a step of a
	# block's scale: 1e-3 (4.2e-5 the most measured, q8_0 in the
	# portable build).
	local d p ref got
	for d in q8_0 q4_0 f16; do
		ref=$(CG_QKERNEL=portable nats "$D/t-$d.cgm")
		for p in $(paths); do
			got=$(CG_QKERNEL=$p nats "$D/t-$d.cgm")
			echo "$d $p: $got, portable $ref"
			jq -ne --argjson a "$got" --argjson b "$ref" \
				--argjson t "$([ $d = f16 ] && echo 1e-5 || echo 1e-3)" \
				'($a - $b | fabs) <= $t * $b'
		done
	done
}

@test "cg-sample at temperature 0: the asked length, the same bytes on every run and at 1 and 2 threads" {
	# Each output of a product is summed by one thread in one order, so
	# the thread count cannot change a logit; the bytes per path are a
	# function of the model.  (Greedy bytes of the quantized and the
	# dequantized model need not agree: a near tie may fall either way.)
	local p d a b
	for p in $(paths); do
		for d in q8_0 q4_0 f16; do
			a=$(CG_QKERNEL=$p cg-sample -j1 -m "$D/t-$d.cgm" -c 0 \
				--temperature 0 --max-bytes 40 | od -An -tx1)
			b=$(CG_QKERNEL=$p cg-sample -j2 -m "$D/t-$d.cgm" -c 0 \
				--temperature 0 --max-bytes 40 | od -An -tx1)
			[ "$a" = "$b" ]
			CG_QKERNEL=$p cg-sample -m "$D/t-$d.cgm" -c 0 \
				--temperature 0 --max-bytes 40 --separator '' >out
			n=$(stat -c %s out)
			echo "$p $d: $n bytes"
			# 40, or fewer where the model chose end-of-text
			[ "$n" -ge 1 ] && [ "$n" -le 40 ]
		done
	done
}

@test "cg-eval --generate of a quantized model: greedy continuations scored" {
	run -0 --separate-stderr cg-eval --json --generate --limit 3 \
		--temperature 0 --max-bytes 16 -m "$D/t-q8_0.cgm" -d "$D/fort-0.cgd"
	run -0 jq -e '.bleu >= 0 and .rouge_l >= 0' <<<"$output"
}

@test "cvae through the kernels: cg-eval within 0.5% of the dequantized model's nelbo (f16: 1e-5); cg-sample's picture the same run after run" {
	# The same reasoning as cgpt's (0.0014% and 0.007% measured for
	# q8_0 and q4_0).  The first encoder and decoder layers take 794 and
	# 42 inputs, not whole blocks: they are decoded, the rest kept.
	local p d got want
	for p in $(paths); do
		for d in q8_0 q4_0 f16; do
			want=$(cg-eval --json -m "$D/cv-$d-deq.cgm" \
				-d "$D/fm-test.cgd" | jq -r .nelbo)
			got=$(CG_QKERNEL=$p cg-eval --json -m "$D/cv-$d.cgm" \
				-d "$D/fm-test.cgd" | jq -r .nelbo)
			tol=$([ $d = f16 ] && echo 1e-5 || echo 5e-3)
			echo "$p $d: $got, dequantized $want"
			jq -ne --argjson a "$got" --argjson b "$want" \
				--argjson t "$tol" \
				'($a - $b | fabs) <= $t * $b and $a > 0'
			CG_QKERNEL=$p cg-sample -m "$D/cv-$d.cgm" --seed 3 -o a.png
			CG_QKERNEL=$p cg-sample -m "$D/cv-$d.cgm" --seed 3 -o b.png
			cmp a.png b.png
		done
	done
}

@test "hostile quantized models: a matrix of more blocks than its view, a NaN scale: one line, exit 1" {
	local how prog
	for how in row-blocks scale-nan; do
		mkcg -x "$how:h.1.mlp.proj.w" "$D/t-q8_0.cgm" bad.cgm
		mkcg -x "$how:h.0.attn.qkv.w" "$D/t-q4_0.cgm" bad4.cgm
		mkcg -x "$how:dec.1.w" "$D/cv-q8_0.cgm" badcv.cgm
		for prog in eval sample; do
			for f in bad.cgm bad4.cgm badcv.cgm; do
				if [ $prog = eval ]; then
					run -1 --separate-stderr cg-eval -m $f \
						-d "$D/$([ $f = badcv.cgm ] && echo fm-test || echo fort-0).cgd"
				else
					run -1 --separate-stderr cg-sample -m $f \
						-c 0 -o x.png
				fi
				echo "$stderr"
				[ "${#stderr_lines[@]}" -eq 1 ]
				[[ "$stderr" == "cg-$prog: $f: tensor "[hd]* ]]
				[ -z "$output" ]
			done
		done
	done
}

@test "a model read to run it is not a model to train: cg-train-step on a q8_0 model still decodes it" {
	run -0 cg-train-step -q -m "$D/t-q8_0.cgm" -d "$D/fort-0.cgd" \
		--emit model --steps 1 --batch 4 -o again.cgm
	run -0 cg-eval --json -m again.cgm -d "$D/fort-0.cgd"
}
