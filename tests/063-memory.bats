#!/usr/bin/env bats
#
# 063-memory.bats - cg-train-step's memory options on a text model whose
# activations outweigh its weights (context 128, 4 blocks, batch 32).
# --checkpoint-activations recomputes activations in the backward pass and
# changes no bit of the result; --max-memory picks chunks and
# checkpointing to fit a budget, keeps the effective batch (the same
# model to float rounding), and refuses a budget nothing fits; the
# convolutional image models are chunked too (118-checkpoint-all.bats
# checkpoints them), and a shard larger than the budget is read a batch
# at a time, a compressed one too (from a decompressed copy on disk).
# Measured peaks are checked only in the plain build: the sanitizers'
# shadow memory is not the program's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 1
	model cgpt fort-0.cgd init.cgm --context 128 --width 64 --layers 4 \
		--heads 2
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp "$BATS_FILE_TMPDIR/fort-0.cgd" "$BATS_FILE_TMPDIR/init.cgm" .
}

# train OUT [options]: two AdamW steps of batch 32 from init.cgm
train() {
	local out=$1
	shift
	cg-train-step -q -m init.cgm -d fort-0.cgd --emit model --steps 2 \
		--batch 32 --opt adamw --lr 1e-3 --seed 2 -j 1 "$@" -o "$out"
}

@test "--checkpoint-activations: the same model and gradient, bit for bit" {
	train a.cgm
	train b.cgm --checkpoint-activations
	cmp a.cgm b.cgm
	cg-train-step -q -m init.cgm -d fort-0.cgd --batch 32 --seed 2 \
		-o ga.cgg
	cg-train-step -q -m init.cgm -d fort-0.cgd --batch 32 --seed 2 \
		--checkpoint-activations -o gb.cgg
	cmp ga.cgg gb.cgg
}

@test "--checkpoint-activations: a smaller plan, logged" {
	train a.cgm --log a.jsonl
	train b.cgm --checkpoint-activations --log b.jsonl
	[ "$(jq -r .checkpoint a.jsonl)" = false ]
	[ "$(jq -r .checkpoint b.jsonl)" = true ]
	pa=$(jq -r .memory_plan a.jsonl)
	pb=$(jq -r .memory_plan b.jsonl)
	echo "planned bytes: $pa, checkpointed $pb"
	# four blocks of 4096 positions: about 60 MB of activations saved
	[ "$pb" -lt $((pa - 40000000)) ]
	if [ "${CG_SANITIZED:-0}" != 1 ]; then
		ka=$(jq -r .memory_peak a.jsonl)
		kb=$(jq -r .memory_peak b.jsonl)
		echo "peak bytes: $ka, checkpointed $kb"
		[ "$kb" -lt $((ka - 40000000)) ]
	fi
}

@test "--max-memory: a tight budget chunks the batch and stays under it" {
	train a.cgm --log a.jsonl
	full=$(jq -r .memory_plan a.jsonl)
	# 48 MiB less than the whole batch wants: chunks, checkpointing
	budget=$(((full >> 20) - 48))
	train b.cgm --max-memory ${budget}M --log b.jsonl
	cat b.jsonl
	chunk=$(jq -r .chunk b.jsonl)
	[ "$chunk" -ge 1 ] && [ "$chunk" -lt 32 ]
	[ "$(jq -r .memory_plan b.jsonl)" -le $((budget << 20)) ]
	if [ "${CG_SANITIZED:-0}" != 1 ]; then
		[ "$(jq -r .memory_peak b.jsonl)" -le $((budget << 20)) ]
	fi
	[ "$(tar xOf b.cgm cg.json | jq -r .samples)" = 64 ]
	# the same effective batch: the same gradient to float rounding
	cg-train-step -q -m init.cgm -d fort-0.cgd --batch 32 --seed 2 \
		-o ga.cgg
	cg-train-step -q -m init.cgm -d fort-0.cgd --batch 32 --seed 2 \
		--max-memory ${budget}M -o gb.cgg
	run -1 cg-inspect --diff -q ga.cgg gb.cgg
	run -0 cg-inspect --diff -q --tolerance 1e-6 ga.cgg gb.cgg
}

@test "--max-memory with --precision bf16 on 2 threads: its rounded operands fit too" {
	train a.cgm --precision bf16 -j 2 --log a.jsonl
	full=$(jq -r .memory_plan a.jsonl)
	budget=$(((full >> 20) - 48))
	train b.cgm --precision bf16 -j 2 --max-memory ${budget}M \
		--log b.jsonl
	cat b.jsonl
	[ "$(jq -r .chunk b.jsonl)" -ge 1 ]
	[ "$(jq -r .memory_plan b.jsonl)" -le $((budget << 20)) ]
	if [ "${CG_SANITIZED:-0}" != 1 ]; then
		[ "$(jq -r .memory_peak a.jsonl)" -le "$full" ]
		[ "$(jq -r .memory_peak b.jsonl)" -le $((budget << 20)) ]
	fi
}

@test "--max-memory: a roomy budget changes nothing" {
	train a.cgm
	train b.cgm --max-memory 64G --log b.jsonl
	cmp a.cgm b.cgm
	[ "$(jq -r .checkpoint b.jsonl)" = false ]
}

@test "--max-memory: a budget nothing fits is one line, exit 1, no output" {
	run -1 --separate-stderr train a.cgm --max-memory 1M
	[ "${#lines[@]}" -eq 0 ]
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	assert_equal "${stderr%%:*}" "cg-train-step"
	[[ "$stderr" == *"--max-memory: a step needs at least"* ]]
	[ -z "$(ls -A | grep a.cgm)" ]
}

@test "--max-memory and --checkpoint-activations: bad values, exit 2" {
	run -2 train a.cgm --max-memory 0
	run -2 train a.cgm --max-memory 12Q
	run -2 train a.cgm --max-memory -5M
	run -2 train a.cgm --checkpoint-activations=yes
	[ ! -e a.cgm ]
}

@test "--checkpoint-activations on a model without it: one line, exit 1" {
	cg-shard -q -n 1 -o img "$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	cg-init -a cvae -d img-0.cgd --hidden 16 --latent 2 -o cvae.cgm
	run -1 --separate-stderr cg-train-step -q -m cvae.cgm -d img-0.cgd \
		--checkpoint-activations -o g.cgg
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	[[ "$stderr" == *"cvae: the MLP has no activation checkpointing"* ]]
	[ ! -e g.cgg ]
	# a budget works for it all the same
	run -0 cg-train-step -q -m cvae.cgm -d img-0.cgd --max-memory 1G \
		-o g.cgg
}

# The convolutional image models: their activations counted, a tight
# budget run in chunks of the batch (the same gradient to rounding, under
# the budget), one nothing fits refused, and no checkpointing of the
# cclf.
@test "--max-memory on the convolutional cclf, cgan and cddpm: chunks, under the budget" {
	images img -n 1
	model cclf img-0.cgd clf.cgm --conv 16 --hidden 32 --layers 1
	model cgan img-0.cgd gan.cgm --conv 16
	model cddpm img-0.cgd dm.cgm --unet 8 --hidden 32 --embed 16 \
		--timesteps 100
	for m in clf gan dm; do
		g() {
			cg-train-step -q -m $m.cgm -d img-0.cgd --batch 64 \
				--seed 2 -j 1 "$@"
		}
		rm -f a.jsonl b.jsonl a.cgg b.cgg
		g --log a.jsonl -o a.cgg
		full=$(jq -r .memory_plan a.jsonl)
		[ "$(jq -r .chunk a.jsonl)" = 0 ]
		budget=$((((full - 4000000) * 3 / 4 + 4000000) >> 20))
		g --max-memory ${budget}M --log b.jsonl -o b.cgg
		echo "$m: whole batch $full bytes, budget ${budget}M: $(cat b.jsonl)"
		chunk=$(jq -r .chunk b.jsonl)
		[ "$chunk" -ge 1 ] && [ "$chunk" -lt 64 ]
		[ "$(jq -r .memory_plan b.jsonl)" -le $((budget << 20)) ]
		if [ "${CG_SANITIZED:-0}" != 1 ]; then
			[ "$(jq -r .memory_peak b.jsonl)" -le $((budget << 20)) ]
		fi
		# chunks change rounding (relative L2 about 1e-6) and
		# nothing else: a chunk's share wrong by one example would
		# move the sums by a sixtieth
		run -1 cg-inspect --diff -q a.cgg b.cgg
		run -0 cg-inspect --diff -q --tolerance 5e-5 a.cgg b.cgg
		# a budget of the weights alone: one line, exit 1, no output
		run -1 --separate-stderr g --max-memory 6M -o c.cgg
		[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
		[[ "$stderr" == *"--max-memory: a step needs at least"* ]]
		[ ! -e c.cgg ]
		# the U-Net and the conv cgan checkpoint
		# (118-checkpoint-all.bats); the cclf does not
		[ $m != clf ] && continue
		run -1 --separate-stderr g --checkpoint-activations -o c.cgg
		[[ "$stderr" == *"has no activation checkpointing"* ]]
		[ ! -e c.cgg ]
	done
	# training in chunks: the effective batch, the same model to
	# rounding (by SGD: Adam's first steps are the sign of each
	# gradient, which rounding flips where one is near 0)
	cg-train-step -q -m gan.cgm -d img-0.cgd --emit model --steps 2 \
		--batch 64 --seed 2 -j 1 --opt sgd -o a.cgm
	cg-train-step -q -m gan.cgm -d img-0.cgd --emit model --steps 2 \
		--batch 64 --seed 2 -j 1 --opt sgd --max-memory 40M -o b.cgm
	[ "$(tar xOf b.cgm cg.json | jq -r .samples)" = 128 ]
	run -1 cg-inspect --diff -q a.cgm b.cgm
	run -0 cg-inspect --diff -q --tolerance 1e-6 a.cgm b.cgm
}

@test "--max-memory: a shard larger than the budget, plain or compressed, is read a batch at a time, with the result of the shard held whole" {
	local b
	# 160 MiB of text: 1 MiB blocks of 256 records of about 4 KiB
	awk 'BEGIN { srand(1); for (i = 0; i < 256; i++) { s = "";
		while (length(s) < 4000) s = s sprintf("w%d ", int(rand() * 100000));
		printf("{\"cond\":\"c%d\",\"text\":\"%s\"}\n", i % 10, s) } }' \
		>block
	for b in $(seq 160); do cat block; done >big.jsonl
	cg-shard -q -n 1 -s contiguous -o big big.jsonl
	rm big.jsonl
	cg-init -a cgpt -d big-0.cgd --context 64 --width 32 --layers 1 \
		--heads 1 --seed 1 -o small.cgm
	[ "$(stat -c %s big-0.cgd)" -gt $((96 << 20)) ]
	cg-train-step -q -m small.cgm -d big-0.cgd --emit model --steps 3 \
		--batch 8 --seed 2 -j 1 --max-memory 96M --log b.jsonl -o b.cgm
	cat b.jsonl
	if [ "${CG_SANITIZED:-0}" != 1 ]; then
		[ "$(jq -r .memory_peak b.jsonl)" -le $((96 << 20)) ]
	fi
	# the same examples from a compressed shard, which is read whole
	# into memory without a budget: the same bytes
	for b in $(seq 160); do cat block; done >big.jsonl
	cg-shard -q -n 1 -s contiguous -z zstd -o whole big.jsonl
	rm big.jsonl
	cg-train-step -q -m small.cgm -d whole-0.cgd --emit model --steps 3 \
		--batch 8 --seed 2 -j 1 --log a.jsonl -o a.cgm
	cmp a.cgm b.cgm
	# and under the budget, decompressed to a temporary file (TMPDIR)
	# and read from there a batch at a time: the same bytes again,
	# under the budget, the copy gone after; from standard input too
	mkdir tmp
	TMPDIR=$PWD/tmp cg-train-step -q -m small.cgm -d whole-0.cgd \
		--emit model --steps 3 --batch 8 --seed 2 -j 1 \
		--max-memory 96M --log c.jsonl -o c.cgm
	cat a.jsonl c.jsonl
	cmp a.cgm c.cgm
	TMPDIR=$PWD/tmp cg-train-step -q -m small.cgm -d - --emit model \
		--steps 3 --batch 8 --seed 2 -j 1 --max-memory 96M \
		--log d.jsonl -o d.cgm <whole-0.cgd
	cmp a.cgm d.cgm
	if [ "${CG_SANITIZED:-0}" != 1 ]; then
		[ "$(jq -r .memory_peak a.jsonl)" -gt $((96 << 20)) ]
		[ "$(jq -r .memory_peak c.jsonl)" -le $((96 << 20)) ]
		[ "$(jq -r .memory_peak d.jsonl)" -le $((96 << 20)) ]
	fi
	[ -z "$(ls -A tmp)" ]
}
