#!/bin/sh
# qat.sh - quantization-aware training against post-training
# quantization, and a per-tensor bit allocation against uniform q4_0,
# for one architecture: the held-out figure of each, and its gap to f32.
#
# usage: bench/qat.sh ARCH OUT
#   ARCH  cvae (Fashion-MNIST: DATA, default
#         /usr/share/datasets/fashion-mnist; figure: negative ELBO in nats
#         per image on the 10000 test images) or cgpt (Debian's fortunes:
#         DATA, default /usr/share/games/fortunes; figure: bits per byte
#         on a 5% hold-out)
#   OUT   a directory for the shards and models (made)
#
# A model is trained BASE steps in f32 (cvae: README's sizes, hidden 512,
# 2 layers, latent 32, batch 128, Adam 1e-3; cgpt: context 64, width 128,
# 2 layers, 4 heads, batch 16, AdamW 1e-3, wd 0.1).  From it, STEPS more
# steps two ways, the same data, seed and optimizer:
#   f32   plain training; its model quantized to TYPE afterwards is the
#         post-training (PTQ) row
#   qat   cg-train-step --qat TYPE, then quantized to TYPE (the weights it
#         trained against)
# and the f32 model of the first way allocated by cg-quantize
# --bits-per-weight BITS, measured on a validation shard cut from the
# training data (a random share, 5% for cvae, 2% for cgpt; never trained
# on nor scored), against uniform TYPE (and the uniform q4_1 and q8_0
# rows beside them); OUT/alloc*.txt keep the allocations' reports.  Every figure is
# cg-eval's on the held-out shard, the quantized models run as cg-eval
# runs them (q4_0 and q8_0 through the quantized kernels), every file
# without the optimizer's state (--strip).  Prints a table.
#
# Environment: CG_BIN (programs, default build/cmd; copy them elsewhere
# if a rebuild could happen during the run), BASE (cvae 1400, cgpt 1500),
# STEPS (cvae 400, cgpt 300), TYPE (q4_0), BITS (budgets, "4.5 6"),
# SEED (1), THREADS (2), SCHED (constant, cosine or finetune: see
# below), FT_LR (3e-4) and FT_SEED (7) for SCHED=finetune, WIDTH and
# LAYERS (the cgpt's, 128 and 2);
# AGAIN=1 keeps the shards and models of an earlier run in OUT and makes
# only the quantized files and the table.
set -eu
arch=${1:?usage: bench/qat.sh ARCH OUT}
out=${2:?usage: bench/qat.sh ARCH OUT}
bin=${CG_BIN:-build/cmd}
type=${TYPE:-q4_0}
bits=${BITS:-4.5 6}
seed=${SEED:-1}
j=${THREADS:-2}
mkdir -p "$out"
# again: what an earlier run made is kept
made() { [ "${AGAIN:-0}" = 1 ] || "$@"; }

case $arch in
cvae)
	data=${DATA:-/usr/share/datasets/fashion-mnist}
	base=${BASE:-1400}
	steps=${STEPS:-400}
	fig=nelbo
	made "$bin/cg-shard" -q -w 19,1 -s random --seed "$seed" -o "$out/train" \
		"$data"
	made mv "$out/train-1.cgd" "$out/valid.cgd"
	made "$bin/cg-shard" -q -n 1 --test -o "$out/test" "$data"
	made mv "$out/test-0.cgd" "$out/held.cgd"
	made "$bin/cg-init" -a cvae -d "$out/train-0.cgd" --hidden 512 --layers 2 \
		--latent 32 --seed "$seed" -o "$out/init.cgm"
	train="--batch 128 --seed $seed -j $j -q"
	;;
cgpt)
	data=${DATA:-/usr/share/games/fortunes}
	base=${BASE:-1500}
	steps=${STEPS:-300}
	fig=bpb
	made "$bin/cg-shard" -q -w 49,1 -s random --holdout-fraction 0.05 \
		--seed "$seed" --holdout "$out/held.cgd" -o "$out/train" "$data"
	made mv "$out/train-1.cgd" "$out/valid.cgd"
	made "$bin/cg-init" -a cgpt -d "$out/train-0.cgd" --context 64 \
		--width "${WIDTH:-128}" --layers "${LAYERS:-2}" --heads 4 \
		--seed "$seed" -o "$out/init.cgm"
	train="--batch 16 --opt adamw --lr 1e-3 --wd 0.1 --seed $seed -j $j -q"
	;;
*)
	echo "qat.sh: $arch: cvae or cgpt" >&2
	exit 2
	;;
esac

# SCHED=cosine: the learning rate of both phases one cosine from its
# peak (after 30 steps of warm-up) to 1e-4 at the last step
# SCHED=finetune: the base one cosine of its own to 1e-4 (a finished
# training), then each way a fine-tune from it with a fresh optimizer:
# FT_LR after 10 steps of warm-up, one cosine to FT_LR/10 at the last
# step, the batches drawn with FT_SEED (no --state: neither way inherits
# the base's moments or cursor)
tune=
case ${SCHED:-constant} in
constant) ;;
cosine)
	train="$train --schedule cosine --warmup 30 --total $((base + steps))"
	train="$train --lr-min 1e-4"
	;;
finetune)
	ftlr=${FT_LR:-3e-4}
	tune=$(echo "$train" | sed 's/--lr [^ ]*//; s/--seed [^ ]*//')
	tune="$tune --lr $ftlr --seed ${FT_SEED:-7}"
	tune="$tune --schedule cosine --warmup 10 --total $steps"
	tune="$tune --lr-min $(awk "BEGIN { print $ftlr / 10 }")"
	train="$train --schedule cosine --warmup 30 --total $base --lr-min 1e-4"
	;;
*)
	echo "qat.sh: SCHED=$SCHED: constant, cosine or finetune" >&2
	exit 2
	;;
esac

ev() { "$bin/cg-eval" --json -j "$j" -m "$1" -d "$out/held.cgd" | jq ".$fig"; }
now() { date +%s.%N; }

t0=$(now)
made "$bin/cg-train-step" -m "$out/init.cgm" -d "$out/train-0.cgd" --emit model \
	--steps "$base" $train --state "$out/base.state" -o "$out/base.cgm"
t1=$(now)
# both ways go on from the same data cursor
made cp "$out/base.state" "$out/f32.state"
made cp "$out/base.state" "$out/qat.state"
if [ -n "$tune" ]; then
	# a fine-tune: the same fresh start both ways
	set -- $tune
else
	set -- $train --state "$out/f32.state"
fi
made "$bin/cg-train-step" -m "$out/base.cgm" -d "$out/train-0.cgd" --emit model \
	--steps "$steps" "$@" -o "$out/f32.cgm"
t2=$(now)
[ -n "$tune" ] || set -- $train --state "$out/qat.state"
made "$bin/cg-train-step" -m "$out/base.cgm" -d "$out/train-0.cgd" --emit model \
	--steps "$steps" "$@" --qat "$type" -o "$out/qat.cgm"
t3=$(now)
"$bin/cg-quantize" --strip -o "$out/f32-$type.cgm" "$out/f32.cgm" "$type" \
	2>"$out/ptq.txt"
"$bin/cg-quantize" --strip -o "$out/qat-$type.cgm" "$out/qat.cgm" "$type" \
	2>/dev/null
t4=$(now)
for b in $bits; do
	"$bin/cg-quantize" --strip --bits-per-weight "$b" -d "$out/valid.cgd" \
		-o "$out/f32-alloc$b.cgm" "$out/f32.cgm" 2>"$out/alloc$b.txt"
done
t5=$(now)
for t in q4_1 q8_0; do
	"$bin/cg-quantize" -q --strip -o "$out/f32-$t.cgm" "$out/f32.cgm" $t
done
"$bin/cg-quantize" -q --strip -o "$out/f32-strip.cgm" "$out/f32.cgm" f32

f32=$(ev "$out/f32.cgm")
row() { # NAME FILE BITS
	v=$(ev "$2")
	printf '| %s | %s | %s | %.4f | %+.4f | %+.3f%% |\n' "$1" \
		"$(stat -c %s "$2")" "$3" "$v" "$(echo "$v - $f32" | bc -l)" \
		"$(echo "100 * ($v - $f32) / $f32" | bc -l)"
}
qbits=$(sed -n 's/.*(\([0-9.]*\) bits per weight).*/\1/p' "$out/ptq.txt")
printf '# %s: %s base steps, then %s more each way, %s learning rate; %s on %s\n' \
	"$arch" "$base" "$steps" "${SCHED:-constant}" "$fig" "$out/held.cgd"
printf '| model | file bytes | bits/weight | %s | gap to f32 | gap %% |\n' "$fig"
printf '|---|---:|---:|---:|---:|---:|\n'
row "f32 ($((base + steps)) steps)" "$out/f32-strip.cgm" 32
row "PTQ $type" "$out/f32-$type.cgm" "$qbits"
row "QAT $type (last $steps steps --qat)" "$out/qat-$type.cgm" "$qbits"
"$bin/cg-quantize" -q --strip -o "$out/qat-strip.cgm" "$out/qat.cgm" f32
row "QAT masters, f32" "$out/qat-strip.cgm" 32
ptq=$(ev "$out/f32-$type.cgm")
qat=$(ev "$out/qat-$type.cgm")
for b in $bits; do
	abits=$(sed -n 's/.*: \([0-9.]*\) bits per weight over.*/\1/p' \
		"$out/alloc$b.txt")
	row "allocated, --bits-per-weight $b" "$out/f32-alloc$b.cgm" "$abits"
done
row "PTQ q4_1" "$out/f32-q4_1.cgm" 5.00
row "PTQ q8_0" "$out/f32-q8_0.cgm" 8.50
printf 'QAT removes %.0f%% of PTQ %s'"'"'s gap to f32\n' \
	"$(echo "100 * ($ptq - $qat) / ($ptq - $f32)" | bc -l)" "$type"
printf 'seconds: base %.0f, %s f32 steps %.0f, %s qat steps %.0f, quantize %.1f, allocations %.0f\n' \
	"$(echo "$t1 - $t0" | bc -l)" "$steps" "$(echo "$t2 - $t1" | bc -l)" \
	"$steps" "$(echo "$t3 - $t2" | bc -l)" "$(echo "$t4 - $t3" | bc -l)" \
	"$(echo "$t5 - $t4" | bc -l)"
