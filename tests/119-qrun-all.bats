#!/usr/bin/env bats
# 119-qrun-all.bats - cg-eval, cg-eval --judge and cg-sample on cclf,
# cddpm and cgan models stored in f16, bf16, q8_0, q4_0 and q4_1, run on
# their weights as stored (lib/nn/qlinear.h's weight sets): against the
# same models decoded to f32, with the peak memory it saves, what hostile
# files get, and training, which still decodes.
#
# Made once per file from the Fashion-MNIST fixture: a cclf MLP (hidden
# 64, 2 layers) trained 40 steps and a CNN (conv 4) trained 10, a cddpm
# MLP (hidden 64) and U-Net (unet 4, with attention) trained a few
# steps, a cgan MLP and a convolutional one; each quantized by
# cg-quantize into every type and each copy decoded back to f32
# (cg-quantize ... f32): the dequantized model, whose figures are those
# of decoding at load.  Where every kept weight is decoded before its
# use (bf16, q4_1, every convolution, the first Linear layer's 784
# inputs, rows that are not whole blocks) the arithmetic is the decoded
# model's, and so are the figures and the pictures, byte for byte; f16,
# q8_0 and q4_0 Linear layers are multiplied as stored, within qlinear's
# bounds (053-quantized.bats's tolerances: 1e-5 for f16, 0.5% for the
# block types).  That each arch's outputs are those of its decoded
# weights is tests/unit/test_qrun's, layer by layer in every form.  The
# programs come from PATH; JSON is read with jq.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

TYPES="f16 bf16 q8_0 q4_0 q4_1"

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm --holdout fm-test.cgd
	model cclf fm-0.cgd clf0.cgm --hidden 64 --layers 2
	cg-train-step -q -m clf0.cgm -d fm-0.cgd --emit model --steps 40 \
		--batch 20 -o clf.cgm
	model cclf fm-0.cgd cnn0.cgm --hidden 32 --layers 1 --conv 4
	cg-train-step -q -m cnn0.cgm -d fm-0.cgd --emit model --steps 10 \
		--batch 20 -o cnn.cgm
	model cddpm fm-0.cgd dm0.cgm --hidden 64 --layers 2 --embed 32 \
		--timesteps 50
	cg-train-step -q -m dm0.cgm -d fm-0.cgd --emit model --steps 20 \
		--batch 20 -o dm.cgm
	model cddpm fm-0.cgd unet0.cgm --unet 4 --hidden 32 --embed 16 \
		--timesteps 50 --attn
	cg-train-step -q -m unet0.cgm -d fm-0.cgd --emit model --steps 2 \
		--batch 10 -o unet.cgm
	model cgan fm-0.cgd gan0.cgm --latent 32 --hidden 64 --layers 2
	cg-train-step -q -m gan0.cgm -d fm-0.cgd --emit model --steps 10 \
		--batch 20 -o gan.cgm
	model cgan fm-0.cgd cgan.cgm --latent 32 --conv 8
	for m in clf cnn dm unet gan cgan; do
		for d in $TYPES; do
			cg-quantize -q -o $m-$d.cgm $m.cgm $d
			cg-quantize -q -o $m-$d-deq.cgm $m-$d.cgm f32
		done
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# exact TYPE: whether every kept weight of TYPE is decoded before use.
exact() {
	[ "$1" = bf16 ] || [ "$1" = q4_1 ]
}

# close KEY GOT WANT TYPE: GOT's KEY within TYPE's tolerance of WANT's.
close() {
	local tol
	tol=$([ "$4" = f16 ] && echo 1e-5 || echo 5e-3)
	jq -ne --argjson a "$2" --argjson b "$3" --arg k "$1" \
		--argjson t "$tol" \
		'($a[$k] - $b[$k] | fabs) <= $t * ($b[$k] | fabs) + 1e-7'
}

# evals MODEL [OPTION...]: cg-eval --json of MODEL on the held-out shard,
# less the fields that name the files.
evals() {
	local m=$1
	shift
	set -o pipefail
	cg-eval --json -j1 --seed 5 -m "$m" -d "$D/fm-test.cgd" "$@" |
		jq -c 'del(.model, .judge)'
}

@test "cg-eval of a quantized cclf, cddpm, cgan: the decoded model's figures (bit for bit where every kept weight is decoded)" {
	local m d got want key
	for m in clf cnn dm unet gan cgan; do
		case $m in
		clf | cnn) key=xent ;;
		gan | cgan) key=d_hinge ;;
		*) key=mse ;;
		esac
		for d in $TYPES; do
			want=$(evals "$D/$m-$d-deq.cgm")
			got=$(evals "$D/$m-$d.cgm")
			[ -n "$got" ] && [ -n "$want" ]
			echo "$m $d: $(jq -c "{$key}" <<<"$got"), dequantized $(jq -c "{$key}" <<<"$want")"
			if exact $d; then
				[ "$got" = "$want" ]
			else
				close $key "$got" "$want" $d
			fi
		done
	done
}

@test "cg-eval --judge with a quantized judge and a quantized generator: the decoded pair's accuracy and distance" {
	local d m got want
	for m in dm gan; do
		for d in $TYPES; do
			want=$(evals "$D/$m-$d-deq.cgm" --judge "$D/clf-$d-deq.cgm" \
				--judge-samples 20)
			got=$(evals "$D/$m-$d.cgm" --judge "$D/clf-$d.cgm" \
				--judge-samples 20)
			echo "$m $d: $(jq -c '{cond_acc, frechet}' <<<"$got"), dequantized $(jq -c '{cond_acc, frechet}' <<<"$want")"
			jq -e '(.cond_acc | isfinite) and (.frechet | isfinite)' \
				<<<"$got"
			if exact $d; then
				[ "$got" = "$want" ]
			fi
		done
	done
}

@test "cg-sample of a quantized cddpm and cgan: the same picture run after run, the decoded model's where every kept weight is decoded" {
	local m d
	for m in dm unet gan cgan; do
		for d in $TYPES; do
			cg-sample -j1 -m "$D/$m-$d.cgm" -n 2 --seed 3 -o a.png
			cg-sample -j1 -m "$D/$m-$d.cgm" -n 2 --seed 3 -o b.png
			cmp a.png b.png
			if exact $d; then
				cg-sample -j1 -m "$D/$m-$d-deq.cgm" -n 2 --seed 3 \
					-o c.png
				cmp a.png c.png
			fi
		done
	done
}

@test "the kernel paths agree on a q8_0 cclf (the same integer products, sums in another order)" {
	local p ref got
	ref=$(CG_QKERNEL=portable evals "$D/clf-q8_0.cgm")
	for p in avx2 avx512vnni neon; do
		got=$(CG_QKERNEL=$p evals "$D/clf-q8_0.cgm" 2>/dev/null) ||
			continue
		echo "$p: $(jq -c '{xent, acc}' <<<"$got"), portable $(jq -c '{xent, acc}' <<<"$ref")"
		close xent "$got" "$ref" q8_0
	done
}

# peak PROGRAM ARGS...: the peak resident KiB of a run.
peak() {
	/usr/bin/time -f 'rss %M' "$@" 2>&1 >/dev/null | sed -n 's/^rss //p'
}

@test "a q8_0 cclf and cddpm are not decoded whole: peak memory lower by the files' difference less the one layer decoded at a time" {
	# A cclf of 4 hidden layers of 1024 (4.0M parameters, 15.9 MB in
	# f32) and a cddpm of the same width: the q8_0 file is mapped, the
	# 784-input layer (not whole blocks a row) decoded into the scratch
	# before each use, the rest multiplied as stored (or, 16 rows at
	# once or more, decoded too: the scratch holds the largest layer,
	# 1024 x 1024, 4 MB).  At least 3/4 of the files' difference less
	# that scratch is asked.
	# Not under sanitizers: their shadow and quarantine are not the
	# program's.
	[ "${CG_SANITIZED:-0}" != 1 ] || skip "peak memory under sanitizers"
	local a f q mf mq scratch
	cg-init -a cclf -d "$D/fm-0.cgd" --hidden 1024 --layers 4 --seed 2 \
		-o clf.cgm
	cg-init -a cddpm -d "$D/fm-0.cgd" --hidden 1024 --layers 4 \
		--timesteps 50 --seed 2 -o dm.cgm
	for a in clf dm; do
		cg-quantize -q -o $a-q8.cgm $a.cgm q8_0
		f=$(stat -c %s $a.cgm)
		q=$(stat -c %s $a-q8.cgm)
		scratch=$((1024 * 1024 * 4))
		mq=$(peak cg-eval -j1 -m $a-q8.cgm -d "$D/fm-test.cgd")
		mf=$(peak cg-eval -j1 -m $a.cgm -d "$D/fm-test.cgd")
		echo "$a cg-eval peak: q8_0 $mq KiB, f32 $mf KiB; files: q8_0 $((q / 1024)) KiB, f32 $((f / 1024)) KiB"
		[ $(((mf - mq) * 1024 * 4)) -ge $(((f - q - scratch) * 3)) ]
	done
	mq=$(peak cg-sample -j1 -m dm-q8.cgm -n 1 --steps 5 -o a.png)
	mf=$(peak cg-sample -j1 -m dm.cgm -n 1 --steps 5 -o a.png)
	echo "cddpm cg-sample peak: q8_0 $mq KiB, f32 $mf KiB"
	[ $(((mf - mq) * 1024 * 4)) -ge $(((f - q - scratch) * 3)) ]
}

@test "hostile quantized models: more blocks than the view, a row short of its bytes, a NaN scale, a NaN minimum: one line, exit 1, nothing written" {
	local how m d t f prog
	for m in clf dm gan cnn; do
		case $m in
		clf) t=hid.1.w ;;
		dm) t=hid.1.w ;;
		gan) t=gen.1.w ;;
		cnn) t=conv.1.w ;;
		esac
		for how in row-blocks rows scale-nan min-nan; do
			# a convolution's weights are no rows of blocks
			[ $how = row-blocks -o $how = rows ] && [ $m = cnn ] &&
				continue
			d=$([ $how = min-nan ] && echo q4_1 || echo q8_0)
			mkcg -x "$how:$t" "$D/$m-$d.cgm" bad.cgm
			for prog in eval sample; do
				[ $prog = sample ] && [ $m = clf -o $m = cnn ] &&
					continue
				if [ $prog = eval ]; then
					run -1 --separate-stderr cg-eval -m bad.cgm \
						-d "$D/fm-test.cgd"
				else
					run -1 --separate-stderr cg-sample \
						-m bad.cgm -n 1 -o x.png
				fi
				echo "$m $how $prog: $stderr"
				[ "${#stderr_lines[@]}" -eq 1 ]
				[[ "$stderr" == "cg-$prog: bad.cgm: tensor $t"* ]]
				[ -z "$output" ]
				[ ! -e x.png ]
			done
		done
		# a quantized judge that lies
		if [ $m = clf ]; then
			run -1 --separate-stderr cg-eval -m "$D/dm-q8_0.cgm" \
				-d "$D/fm-test.cgd" --judge bad.cgm
			[ "${#stderr_lines[@]}" -eq 1 ]
			[[ "$stderr" == "cg-eval: bad.cgm: tensor $t"* ]]
		fi
	done
}

@test "a model read to run it is not a model to train: cg-train-step on a q8_0 cclf, cddpm, cgan decodes it" {
	local m
	for m in clf dm gan; do
		run -0 cg-train-step -q -m "$D/$m-q8_0.cgm" -d "$D/fm-0.cgd" \
			--emit model --steps 1 --batch 4 -o again.cgm
		run -0 cg-eval --json -m again.cgm -d "$D/fm-test.cgd"
	done
}

@test "a scale that lies but is finite (65504): the programs run to an end, one line and exit 1 at worst" {
	local m t prog
	for m in clf dm gan; do
		t=$([ $m = gan ] && echo gen.1.w || echo hid.1.w)
		mkcg -x "scale-big:$t" "$D/$m-q8_0.cgm" big.cgm
		for prog in eval sample; do
			[ $prog = sample ] && [ $m = clf ] && continue
			if [ $prog = eval ]; then
				run --separate-stderr cg-eval --json -m big.cgm \
					-d "$D/fm-test.cgd"
			else
				run --separate-stderr cg-sample -m big.cgm -n 1 \
					-o x.png
			fi
			echo "$m $prog: status $status: $output $stderr"
			[ "$status" -eq 0 ] || {
				[ "$status" -eq 1 ] && [ "${#stderr_lines[@]}" -eq 1 ]
			}
			rm -f x.png
		done
	done
	# as a judge
	mkcg -x "scale-big:hid.1.w" "$D/clf-q8_0.cgm" big.cgm
	run --separate-stderr cg-eval --json -m "$D/gan-q8_0.cgm" \
		-d "$D/fm-test.cgd" --judge big.cgm --judge-samples 5
	echo "judge: status $status: $output $stderr"
	[ "$status" -eq 0 ] || {
		[ "$status" -eq 1 ] && [ "${#stderr_lines[@]}" -eq 1 ]
	}
}

@test "a pruned model: views of a type without a product (bf16, q4_1) are decoded at load, so its pruned weights read 0: the decoded model's figures" {
	local d got want
	cg-prune -s 0.5 -o pruned.cgm "$D/clf.cgm"
	for d in q4_1 bf16 q8_0; do
		cg-quantize -q -o p-$d.cgm pruned.cgm $d
		cg-quantize -q -o p-$d-deq.cgm p-$d.cgm f32
		want=$(evals p-$d-deq.cgm)
		got=$(evals p-$d.cgm)
		[ -n "$got" ] && [ -n "$want" ]
		echo "$d: $(jq -c '{xent, acc}' <<<"$got"), dequantized $(jq -c '{xent, acc}' <<<"$want")"
		if exact $d; then
			[ "$got" = "$want" ]
		else
			close xent "$got" "$want" $d
		fi
	done
}
