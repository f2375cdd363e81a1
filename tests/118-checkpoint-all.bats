#!/usr/bin/env bats
#
# 118-checkpoint-all.bats - activation checkpointing beyond the cgpt:
# the cddpm's U-Net, the cvae's convolutional nets and the cgan's
# convolutional generator.  With
# --checkpoint-activations a training call's model, gradient and delta
# are the same bytes as without, at one thread and at two, a step
# distillation with a U-Net student too; the plan it logs is smaller,
# and so is its measured peak; --max-memory meets a budget at the least
# a checkpointed step needs (chunking alone needs more: test_checkpoint
# says by how much) and stays under it; the MLP forms and the cclf
# refuse checkpointing in one line.  Measured peaks are checked only
# in the plain build: the sanitizers' shadow memory is not the program's.
# The same bits for every block and stage, and the planner's choice at
# each budget, are tests/unit/test_checkpoint's and test_cddpm's and
# test_cvae's.  The cgan's discriminator and the cclf keep one map a
# layer, which their backward passes read: nothing to recompute.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images img -n 1
	model cddpm img-0.cgd dm.cgm --unet 8 --hidden 32 --embed 16 \
		--timesteps 100
	model cddpm img-0.cgd dma.cgm --unet 8 --hidden 32 --embed 16 \
		--timesteps 100 --attn --film=0
	model cvae img-0.cgd vae.cgm --conv 4 --latent 4
	model cvae img-0.cgd vae0.cgm --conv 4 --latent 4 --class-prior=0 \
		--cond-every=0
	# wider: more than 512 KiB of maps an example that checkpointing
	# saves, for the budget's bisection to see past the resident
	# memory's noise between runs (100-200 KiB)
	model cddpm img-0.cgd dm16.cgm --unet 16 --hidden 32 --embed 16 \
		--timesteps 100
	model cvae img-0.cgd vae64.cgm --conv 64 --latent 4
	model cgan img-0.cgd gan.cgm --conv 4 --latent 8
	model cgan img-0.cgd ganr.cgm --conv 4 --latent 8 --r1 1
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# train MODEL OUT [options]: three AdamW steps of batch 16 on one thread
train() {
	local m=$1 out=$2
	shift 2
	cg-train-step -q -m "$D/$m" -d "$D/img-0.cgd" --emit model --steps 3 \
		--batch 16 --opt adamw --lr 1e-3 --seed 2 -j 1 "$@" -o "$out"
}

# grad MODEL OUT [options]: the gradient of one batch of $BATCH (16)
grad() {
	local m=$1 out=$2
	shift 2
	cg-train-step -q -m "$D/$m" -d "$D/img-0.cgd" --batch ${BATCH:-16} \
		--seed 2 -j 1 "$@" -o "$out"
}

@test "--checkpoint-activations: the same models, gradients and deltas, bit for bit, U-Net, conv cvae, conv cgan" {
	for m in dm dma vae vae0 gan ganr; do
		train $m.cgm a-$m.cgm
		train $m.cgm b-$m.cgm --checkpoint-activations
		cmp a-$m.cgm b-$m.cgm
		grad $m.cgm ga-$m.cgg
		grad $m.cgm gb-$m.cgg --checkpoint-activations
		cmp ga-$m.cgg gb-$m.cgg
		# two threads: the same bytes as two threads without
		grad $m.cgm g2a-$m.cgg -j 2
		grad $m.cgm g2b-$m.cgg -j 2 --checkpoint-activations
		cmp g2a-$m.cgg g2b-$m.cgg
		# a delta call with its state (which records the output's
		# name: the same in two folders): the same bytes too
		for k in a b; do
			opt=
			[ $k = b ] && opt=--checkpoint-activations
			mkdir -p $k
			(cd $k && cg-train-step -q -m "$D/$m.cgm" \
				-d "$D/img-0.cgd" -e delta -k 2 --batch 8 \
				--seed 4 -j 1 --state s.state $opt -o d.cgg)
		done
		cmp a/d.cgg b/d.cgg
		cmp a/s.state b/s.state
		rm -r a b
	done
	# the models trained: not the same as where they started
	run -1 cg-inspect --diff -q "$D/dm.cgm" a-dm.cgm
	run -1 cg-inspect --diff -q "$D/vae.cgm" a-vae.cgm
	run -1 cg-inspect --diff -q "$D/gan.cgm" a-gan.cgm
}

@test "--checkpoint-activations: a step-distilled U-Net student, the same bytes" {
	for k in a b; do
		opt=
		[ $k = b ] && opt=--checkpoint-activations
		cg-train-step -q -m "$D/dm.cgm" -d "$D/img-0.cgd" \
			--teacher "$D/dm.cgm" --distill-steps 8 \
			--distill-guidance 1 --emit model --steps 2 --batch 8 \
			--seed 3 -j 1 $opt -o s-$k.cgm
	done
	cmp s-a.cgm s-b.cgm
}

@test "--checkpoint-activations: a smaller plan and peak, logged" {
	export BATCH=128
	for m in dm vae gan; do
		grad $m.cgm a.cgg --log a-$m.jsonl
		grad $m.cgm b.cgg --checkpoint-activations --log b-$m.jsonl
		cmp a.cgg b.cgg
		[ "$(jq -r .checkpoint a-$m.jsonl)" = false ]
		[ "$(jq -r .checkpoint b-$m.jsonl)" = true ]
		pa=$(jq -r .memory_plan a-$m.jsonl)
		pb=$(jq -r .memory_plan b-$m.jsonl)
		echo "$m: planned bytes $pa, checkpointed $pb"
		[ "$pb" -lt "$pa" ]
		if [ "${CG_SANITIZED:-0}" != 1 ]; then
			ka=$(jq -r .memory_peak a-$m.jsonl)
			kb=$(jq -r .memory_peak b-$m.jsonl)
			echo "$m: peak bytes $ka, checkpointed $kb"
			[ "$kb" -lt "$ka" ]
		fi
	done
}

@test "--max-memory: the least a checkpointed step needs is enough, and the step stays under it" {
	export BATCH=16
	for m in dm16 vae64; do
		# the floor in MiB, as the refusal of a budget nothing fits
		# says it, then to 32 KiB by bisection: lo fails, hi fits
		run -1 --separate-stderr grad $m.cgm c.cgg --max-memory 1M
		[[ "$stderr" == *"a step needs at least"* ]]
		floor=$(sed -n 's/.*needs at least \([0-9]*\) MiB.*/\1/p' \
			<<<"$stderr")
		lo=$(((floor - 2) * 1024)) hi=$(((floor + 2) * 1024))
		while [ $((hi - lo)) -gt 32 ]; do
			mid=$(((lo + hi) / 2))
			run --separate-stderr grad $m.cgm c.cgg \
				--max-memory ${mid}K
			if [ "$status" -eq 0 ]; then
				hi=$mid
			else
				[[ "$stderr" == *"a step needs at least"* ]]
				lo=$mid
			fi
		done
		# 64 KiB over it: a chunk of one example without
		# checkpointing needs more (test_checkpoint).  The plan
		# counts the resident memory at the start, which moves from
		# run to run (more under the sanitizers): where a run finds
		# the floor a little higher, 64 KiB more, up to 1 MiB
		budget=$((hi + 64))
		while ! grad $m.cgm b.cgg --max-memory ${budget}K \
			--log b.jsonl 2>err.txt; do
			grep -q "a step needs at least" err.txt
			[ $budget -lt $((hi + 1024)) ]
			budget=$((budget + 64))
		done
		echo "$m: floor about $hi KiB, budget ${budget}K: $(cat b.jsonl)"
		[ "$(jq -r .checkpoint b.jsonl)" = true ]
		chunk=$(jq -r .chunk b.jsonl)
		[ "$chunk" -ge 1 ] && [ "$chunk" -lt 16 ]
		[ "$(jq -r .memory_plan b.jsonl)" -le $((budget << 10)) ]
		if [ "${CG_SANITIZED:-0}" != 1 ]; then
			[ "$(jq -r .memory_peak b.jsonl)" -le $((budget << 10)) ]
		fi
		# the whole batch's gradient, to the rounding of chunks:
		# each tensor within 1e-5 relative L2 (as 109-cvae-conv.bats
		# holds them)
		grad $m.cgm a.cgg
		run -1 cg-inspect --diff -q a.cgg b.cgg
		cg-inspect --diff -j a.cgg b.cgg >d.jsonl || true
		run -0 jq -s -e '[.[] | select(.tensor)] | length > 0 and all(.[]; (.status == "identical" or .status == "differs") and (.rel_l2 // 0) <= 1e-5)' d.jsonl
		# and those chunks without checkpointing: the same bytes
		grad $m.cgm m.cgg --micro-batches $(((16 + chunk - 1) / chunk))
		cmp m.cgg b.cgg
		rm -f a.cgg b.cgg c.cgg m.cgg b.jsonl d.jsonl
	done
}

@test "--checkpoint-activations on a form without it: one line naming the form that has it, exit 1" {
	model cddpm "$D/img-0.cgd" mlp.cgm --hidden 16 --embed 8 \
		--timesteps 100
	small_cvae "$D/img-0.cgd" v.cgm
	model cgan "$D/img-0.cgd" gm.cgm --hidden 16 --latent 8
	for m in mlp v gm; do
		run -1 --separate-stderr cg-train-step -q -m $m.cgm \
			-d "$D/img-0.cgd" --checkpoint-activations -o g.cgg
		[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
		assert_equal "${stderr%%:*}" "cg-train-step"
		[[ "$stderr" == *"the MLP has no activation checkpointing"* ]]
		if [ $m = mlp ]; then
			[[ "$stderr" == *"--unet"* ]]
		else
			[[ "$stderr" == *"--conv"* ]]
		fi
		[[ "$stderr" == *"$(tar xOf $m.cgm cg.json | jq -r .arch):"* ]]
		[ ! -e g.cgg ]
		# a budget works for them all the same, unchecked
		run -0 cg-train-step -q -m $m.cgm -d "$D/img-0.cgd" \
			--max-memory 1G --log l.jsonl -o g.cgg
		[ "$(jq -r .checkpoint l.jsonl)" = false ]
		rm -f g.cgg l.jsonl
	done
	# the cclf: none at all
	model cclf "$D/img-0.cgd" clf.cgm --conv 4 --hidden 16 --layers 1
	run -1 --separate-stderr cg-train-step -q -m clf.cgm \
		-d "$D/img-0.cgd" --checkpoint-activations -o c.cgg
	[[ "$stderr" == *"cclf has no activation checkpointing"* ]]
	[ ! -e c.cgg ]
}
