#!/bin/sh
# finetune.sh - the fortunes cgpt adapted to a category it never saw:
# low-rank adapters (cg-init --lora) against full fine-tuning and against
# a model trained from scratch, at equal steps; held-out bits per byte of
# the new category, and the bytes of one DiLoCo round's delta with
# adapters and without.
#
# usage: bench/finetune.sh FORTUNES CATEGORY OUT
#   FORTUNES  a directory of fortune files, one category each
#             (/usr/share/games/fortunes)
#   CATEGORY  the category held out of the base model (science)
#   OUT       a directory for the shards and models (made)
#
# The base model is examples/fortunes-cgpt's (context 128, width 256, 4
# layers, 4 heads) trained BASE AdamW steps (batch 16, lr 1e-3, WARMUP
# steps of warm-up; BASE_SCHEDULE=cosine decays it along a half cosine
# to 5e-5 at BASE, as the README's training does) on every category but
# CATEGORY, unless BASE_MODEL names a base trained so (the same
# categories and seed).  CATEGORY is split 80/20 (seed 1)
# into a training shard and a held-out one.  The base is made over for
# the new shard's condition (cg-init --from: its one condition row new,
# everything else kept), then for STEPS steps of batch 16:
#   lora     adapters of rank R (scale 1) on the matrices LORA_ON names
#            (globs, 'h.*.w' by default: qkv, proj, fc, proj of each
#            layer; 'h.*.w wte lm_head.w' adds the embedding, whose rows
#            hold the new condition's, and the head), lr LORA_LR; LORA
#            lists more than one as R or R:ALPHA (the scale is ALPHA /
#            R), each its own row
#   full     every tensor, lr 1e-3
#   scratch  cg-init's model for the new shard alone, lr 1e-3
# and the held-out shard scored (cg-eval: bpb).  Then one worker call of
# a DiLoCo round (--emit delta, 2 steps) from each adapted model and from
# the fully fine-tuned one: the bytes of each delta.  Prints one line per
# figure.
#
# Environment: CG_BIN (programs, default build/cmd), BASE (200), WARMUP
# (30), BASE_SCHEDULE (constant), BASE_MODEL, STEPS (60), R (8), LORA
# (R), LORA_ON (h.*.w), LORA_LR (3e-3), SEED (1: the base, the shards'
# split), TRAIN_SEED (SEED: the adapters' first values and the batches
# of every fine-tuning row), THREADS (2).
set -eu
src=${1:?usage: bench/finetune.sh FORTUNES CATEGORY OUT}
cat=${2:?usage: bench/finetune.sh FORTUNES CATEGORY OUT}
out=${3:?usage: bench/finetune.sh FORTUNES CATEGORY OUT}
bin=${CG_BIN:-build/cmd}
base=${BASE:-200}
warmup=${WARMUP:-30}
base_sched=${BASE_SCHEDULE:-constant}
steps=${STEPS:-60}
r=${R:-8}
lora=${LORA:-$r}
lora_on=${LORA_ON:-h.*.w}
lora_lr=${LORA_LR:-3e-3}
seed=${SEED:-1}
tseed=${TRAIN_SEED:-$seed}
j=${THREADS:-2}
arch="--context 128 --width 256 --layers 4 --heads 4"
base_train="--batch 16 --opt adamw --wd 0.1 --seed $seed -j $j -q"
train="--batch 16 --opt adamw --wd 0.1 --seed $tseed -j $j -q"

mkdir -p "$out/base" "$out/new"
for f in "$src"/*; do
	b=$(basename "$f")
	case $b in *.*) continue ;; esac
	[ -f "$f" ] || continue
	if [ "$b" = "$cat" ]; then cp "$f" "$out/new/"; else cp "$f" "$out/base/"; fi
done
"$bin/cg-shard" -q -n 1 --seed "$seed" -o "$out/b" "$out/base"
"$bin/cg-shard" -q -n 1 --holdout-fraction 0.2 --holdout "$out/held.cgd" \
	--seed "$seed" -o "$out/s" "$out/new"

case $base_sched in
constant) sched= ;;
cosine) sched="--schedule cosine --total $base --lr-min 5e-5" ;;
*)
	echo "finetune.sh: BASE_SCHEDULE=$base_sched: not constant or cosine" >&2
	exit 2
	;;
esac
if [ -n "${BASE_MODEL:-}" ]; then
	[ "$BASE_MODEL" = "$out/base.cgm" ] || cp "$BASE_MODEL" "$out/base.cgm"
	echo "base: $BASE_MODEL"
else
	t0=$(date +%s)
	"$bin/cg-init" -a cgpt -d "$out/b-0.cgd" $arch --seed "$seed" \
		-o "$out/init.cgm"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-train-step" -m "$out/init.cgm" -d "$out/b-0.cgd" \
		--emit model --steps "$base" $base_train --lr 1e-3 \
		--warmup "$warmup" $sched -o "$out/base.cgm"
	echo "base: $base steps ($base_sched, warm-up $warmup) in" \
		"$(($(date +%s) - t0)) s"
fi

bpb() { "$bin/cg-eval" --json -m "$1" -d "$out/held.cgd" -j "$j" | jq .bpb; }

"$bin/cg-init" --from "$out/base.cgm" -d "$out/s-0.cgd" --seed "$seed" \
	-o "$out/grown.cgm"
echo "base, made over for $cat, 0 steps: held-out bpb $(bpb "$out/grown.cgm")"

# the adapters: lora-R (alpha R) or lora-R-ALPHA for each of LORA
adapters=
on=
set -f
for g in $lora_on; do on="$on --lora-on $g"; done
for v in $lora; do
	ra=${v%%:*} al=
	case $v in *:*) al=${v#*:} ;; esac
	name=lora-$ra${al:+-$al}
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" --from "$out/grown.cgm" --lora "$ra" \
		${al:+--lora-alpha "$al"} $on --seed "$tseed" \
		-o "$out/${name}0.cgm"
	adapters="$adapters $name"
done
set +f
echo "adapters on:$on"
"$bin/cg-init" -a cgpt -d "$out/s-0.cgd" $arch --seed "$tseed" \
	-o "$out/scratch0.cgm"
for m in full $adapters scratch; do
	case $m in
	full) from=$out/grown.cgm lr=1e-3 ;;
	lora-*) from=$out/${m}0.cgm lr=$lora_lr ;;
	scratch) from=$out/scratch0.cgm lr=1e-3 ;;
	esac
	t0=$(date +%s)
	"$bin/cg-train-step" -m "$from" -d "$out/s-0.cgd" --emit model \
		--steps "$steps" $train --lr "$lr" -o "$out/$m.cgm"
	echo "$m: $steps steps (lr $lr) in $(($(date +%s) - t0)) s: held-out bpb $(bpb "$out/$m.cgm")"
done
for m in $adapters; do
	"$bin/cg-convert" -M "$out/$m.cgm" -o "$out/$m-merged.cgm"
	echo "$m merged (cg-convert -M): held-out bpb $(bpb "$out/$m-merged.cgm")"
done

# one worker's part of a DiLoCo round from each fine-tuned model
for m in $adapters full; do
	"$bin/cg-train-step" -m "$out/$m.cgm" -d "$out/s-0.cgd" --emit delta \
		--steps 2 $train --lr 1e-3 -o "$out/$m-delta.cgg"
	echo "$m: one round's delta $(stat -c %s "$out/$m-delta.cgg") bytes," \
		"$(tar tf "$out/$m-delta.cgg" | grep -vc '^cg.json$') tensors"
done
