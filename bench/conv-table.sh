#!/bin/bash
# conv-table.sh - the image models, fully connected and convolutional,
# trained on the same examples and scored by the same CNN judge: one
# table of conditional accuracy, Fréchet distance in the judge's
# features and its spread over the classes (a class the model collapses
# on shows there), with one row at equal wall time.
#
# The judge is bench/judge.sh's CNN (CONV=32: cg-init -a cclf --conv 32
# --hidden 256 --layers 1; 4688 steps of Adam at 1e-3, then 2344 at
# 1e-4, batch 128), trained here unless JUDGE names one, and its test
# accuracy printed first.  MLP_JUDGE, if set, names bench/judge.sh's
# MLP judge (784-1024-1024-10): every row is then scored by it too, the
# figures earlier sections of bench/RESULTS.md give.
#
# Every generator is trained STEPS steps (2345: five epochs) of batch
# 128 from cg-init's seed, in one cg-train-step call:
#   cvae        cg-init -a cvae                  Adam 1e-3
#   cvae-conv   cg-init -a cvae --conv 32        Adam 1e-3
#   cddpm       cg-init -a cddpm                 Adam 1e-3, drawn with guidance 1
#   cddpm-unet  cg-init -a cddpm --unet UNET --hidden 128 --embed 64
#                 UNET_INIT                      Adam 1e-3, UNET_GUIDANCE
#   cgan        cg-init -a cgan                  Adam 4e-4, betas 0.5 0.999
#   cgan-conv   cg-init -a cgan --conv 32 --r1 R1 --disc-kernel DK --aux AUX
#                                                the same (R1: 10, DK: 3)
# the cgans once for each seed of SEEDS ("1 2 3"), the others seed 1.
# With EMA (a decay, e.g. 0.999) the diffusion models are trained with
# cg-train-step --ema EMA and their moving average is what is scored and
# drawn (the trained weights beside it, NAME-sSEED.trained.cgm).
# Then, unless EQWALL is 0, the equal-wall-time row: the MLP cddpm
# trained for as many seconds as the U-Net's training took
# (cg-train-step --time-limit).
# cg-eval --judge draws SAMPLES images a condition (1000), seed 1, the
# diffusion models with their default 50 DDIM steps, the cvaes and cgans
# at cg-sample's temperature TEMPERATURE (1: the noise they were trained
# on; below 1 their likelier draws).
#
# usage: bench/conv-table.sh (from the top of the source tree, after a
# build in build/).  Environment: CG_BIN (build/cmd), DATA
# (/usr/share/datasets/fashion-mnist), THREADS (all cores), STEPS
# (2345), SEEDS ("1 2 3"), SAMPLES (1000), R1 (10), DISC_KERNEL (3),
# AUX (0: the auxiliary classifier's weight), UNET (16: the U-Net's
# channels), UNET_INIT (more cg-init options for it, e.g. --cosine),
# UNET_GUIDANCE (its cg-eval and cg-sample options: "--guidance 1"),
# UNET_TRAIN (more cg-train-step options for it, e.g. "--schedule cosine
# --total 2345"), UNET_BATCH (128: its batch; its steps then STEPS x 128 /
# UNET_BATCH, so that it sees the same examples as the other rows),
# EMA (none), EQWALL (1),
# TEMPERATURE (1),
# MODELS (all of the above, in that order), JUDGE, MLP_JUDGE, OUT (a
# directory that keeps the models, their scores as JSON and a grid of
# each model's draws, a row per class, seed 1).  Prints a table in
# Markdown.
set -eu
cd "$(dirname "$0")/.."
bin=$(cd "${CG_BIN:-build/cmd}" && pwd)
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-2345}
seeds=${SEEDS:-1 2 3}
samples=${SAMPLES:-1000}
models=${MODELS:-cvae cvae-conv cddpm cddpm-unet cgan cgan-conv}
r1=${R1:-10}
dk=${DISC_KERNEL:-3}
aux=${AUX:-0}
unet=${UNET:-16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${OUT:-$tmp/out}
mkdir -p "$out"

say() { printf 'conv-table.sh: %s: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

echo "# $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(grep -o 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); threads $threads; steps $steps; samples $samples a condition; temperature ${TEMPERATURE:-1}"
echo "# U-Net: --unet $unet ${UNET_INIT:-}, batch ${UNET_BATCH:-128}, trained with ${UNET_TRAIN:-(no more options)}, scored with ${UNET_GUIDANCE:---guidance 1}; moving average: ${EMA:-none}"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
train=$tmp/train-0.cgd
test=$tmp/test-0.cgd

if [ -n "${JUDGE:-}" ]; then
	cp "$JUDGE" "$out/judge.cgm"
else
	say "training the CNN judge"
	t0=$(date +%s)
	"$bin/cg-init" -a cclf -d "$train" --conv 32 --hidden 256 --layers 1 \
		--seed 1 -o "$out/judge.cgm"
	"$bin/cg-train-step" -q -m "$out/judge.cgm" -d "$train" --emit model \
		--steps "${JUDGE_STEPS1:-4688}" --batch 128 --lr 1e-3 --seed 1 \
		--state "$tmp/judge.state" --threads "$threads" -o "$out/judge.cgm"
	"$bin/cg-train-step" -q -m "$out/judge.cgm" -d "$train" --emit model \
		--steps "${JUDGE_STEPS2:-2344}" --batch 128 --lr 1e-4 --seed 1 \
		--state "$tmp/judge.state" --threads "$threads" -o "$out/judge.cgm"
	say "judge trained in $(($(date +%s) - t0)) s"
fi
judge_acc=$("$bin/cg-eval" --json -q -m "$out/judge.cgm" -d "$test" \
	--threads "$threads" | jq -r '.acc')
echo "# CNN judge: test accuracy $judge_acc (goal >= 0.92)"
if [ -n "${MLP_JUDGE:-}" ]; then
	mlp_acc=$("$bin/cg-eval" --json -q -m "$MLP_JUDGE" -d "$test" \
		--threads "$threads" | jq -r '.acc')
	echo "# MLP judge ($MLP_JUDGE): test accuracy $mlp_acc"
fi

# make NAME SEED TIME-LIMIT: cg-init and cg-train-step for row NAME;
# prints the training's wall seconds.
make_model() {
	local name=$1 seed=$2 limit=${3:-} init lr=1e-3 extra="" batch=128
	case $name in
	cvae) init="-a cvae" ;;
	cvae-conv) init="-a cvae --conv 32" ;;
	cddpm|cddpm-eqwall) init="-a cddpm" ;;
	cddpm-unet) init="-a cddpm --unet $unet --hidden 128 --embed 64 ${UNET_INIT:-}"
		extra="${UNET_TRAIN:-}"; batch=${UNET_BATCH:-128} ;;
	cgan) init="-a cgan"; lr=4e-4; extra="--beta1 0.5 --beta2 0.999" ;;
	cgan-conv) init="-a cgan --conv 32 --r1 $r1 --disc-kernel $dk --aux $aux"; lr=4e-4
		extra="--beta1 0.5 --beta2 0.999" ;;
	*) echo "conv-table.sh: no model $name" >&2; exit 1 ;;
	esac
	local n=$((steps * 128 / batch)) m=$out/$name-s$seed.cgm
	[ -n "$limit" ] && { n=$((steps * 1000)); extra="$extra --time-limit $limit"; }
	# the moving average is the model scored, the weights beside it
	case $name in cddpm*) [ -z "${EMA:-}" ] ||
		{ extra="$extra --ema $EMA --ema-out $m"; m=$out/$name-s$seed.trained.cgm; } ;;
	esac
	# shellcheck disable=SC2086
	"$bin/cg-init" $init -d "$train" --seed "$seed" -o "$m"
	local t0 t1
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	"$bin/cg-train-step" -q -m "$m" -d "$train" \
		--emit model --steps "$n" --batch "$batch" --lr "$lr" $extra \
		--seed "$seed" --threads "$threads" -o "$m"
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc
}

# guidance NAME: the diffusion models' guidance weight, the others'
# temperature (TEMPERATURE, when set), scored and drawn.
guidance() {
	case $1 in
	cddpm-unet) echo "${UNET_GUIDANCE:---guidance 1}" ;;
	cddpm*) echo "--guidance 1" ;;
	*) [ -z "${TEMPERATURE:-}" ] || echo "--temperature $TEMPERATURE" ;;
	esac
}

# score NAME SEED JUDGE: cg-eval --judge's JSON line.
score() {
	local g
	g=$(guidance "$1")
	# shellcheck disable=SC2086
	"$bin/cg-eval" --json -q -m "$out/$1-s$2.cgm" -d "$test" --judge "$3" \
		--judge-samples "$samples" --seed 1 $g --threads "$threads"
}

row() {
	local name=$1 seed=$2 secs=$3 json params st
	json=$(score "$name" "$seed" "$out/judge.cgm")
	echo "$json" > "$out/$name-s$seed.json"
	params=$("$bin/cg-inspect" --json "$out/$name-s$seed.cgm" |
		jq '[.tensors[] | select(.name | startswith("opt.") | not) | .count] | add')
	st=$("$bin/cg-inspect" --json "$out/$name-s$seed.cgm" | jq -r '.step')
	# shellcheck disable=SC2046
	"$bin/cg-sample" -m "$out/$name-s$seed.cgm" -n 10 --seed 1 \
		$(guidance "$name") -o "$out/$name-s$seed.png" 2>/dev/null || true
	local mlp="| |"
	if [ -n "${MLP_JUDGE:-}" ]; then
		mlp=$(score "$name" "$seed" "$MLP_JUDGE" |
			jq -r '"| \(.cond_acc * 10000 | round / 10000) | \(.frechet * 100 | round / 100) |"')
	fi
	echo "$json" | jq -r --arg n "$name" --arg s "$seed" --arg p "$params" \
		--arg st "$st" --arg t "$(printf '%.0f' "$secs")" --arg mlp "$mlp" '
		[.per_condition[] | select(.frechet != null)] as $pc
		| ($pc | min_by(.frechet)) as $lo | ($pc | max_by(.frechet)) as $hi
		| "| \($n) | \($s) | \($p) | \($st) | \($t) | \(.cond_acc * 10000 | round / 10000) | \(.frechet * 100 | round / 100) | \($lo.cond) \($lo.frechet * 100 | round / 100) - \($hi.cond) \($hi.frechet * 100 | round / 100) \($mlp)"'
}

echo
echo "| model | seed | parameters | steps | train s | cond. acc | Fréchet distance | per class, lowest - highest | MLP judge: cond. acc | FD |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"
unet_secs=
for name in $models; do
	case $name in cgan|cgan-conv) ss=$seeds ;; *) ss=1 ;; esac
	for seed in $ss; do
		say "training $name seed $seed"
		secs=$(make_model "$name" "$seed")
		[ "$name" = cddpm-unet ] && unet_secs=$secs
		say "scoring $name seed $seed"
		row "$name" "$seed" "$secs"
	done
done
if [ -n "$unet_secs" ] && [ "${EQWALL:-1}" != 0 ]; then
	limit=$(printf '%.0f' "$unet_secs")
	say "training cddpm-eqwall for $limit s"
	secs=$(make_model cddpm-eqwall 1 "$limit")
	row cddpm-eqwall 1 "$secs"
fi
echo
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
