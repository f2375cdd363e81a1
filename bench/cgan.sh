#!/bin/sh
# cgan.sh - the cgan conditional GAN on Fashion-MNIST, scored by the judge
# of cg-eval --judge: its held-out hinge losses and the judge's verdict on
# what it draws after 0, 469 (one epoch) and 2345 (five) steps of seed 1,
# and after 2345 steps of seeds 2 and 3 (whether every seed trains).
#
# The judge is bench/judge.sh's (cclf 784-1024-1024-10, 10 epochs of Adam
# at 1e-3, then 5 at 1e-4, batch 128), trained again here.  The cgan is
# cg-init's default (G 64-512-512-784, D 784-512-512 with projection,
# spectral norms by 5 power iterations), batch 128 as the README's cvae,
# Adam at LR (4e-4) with BETA1 (0.5) and BETA2 (0.999): one simultaneous
# D and G step per training step.  A seed N is both cg-init's and
# cg-train-step's --seed; SEEDS (default "1 2 3") says which are trained.
# CONV=c makes the cgan the convolutional one (cg-init --conv c: G and D
# DCGAN-like, c and 2c channels), on the same schedule.  R1=gamma adds
# the R1 penalty on D (cg-init --r1 gamma; default 0, none).
#
# usage: bench/cgan.sh (from the top of the source tree, after a build in
# build/; CG_BIN overrides where the programs are, SAMPLES the images
# drawn per condition, 1000; OUT, if set, a directory that keeps the
# models and a samples grid of each; JUDGE, if set, a judge already
# trained by that recipe, e.g. bench/judge.sh's, used instead of training
# one: the recipe is deterministic, the same judge on the same build).  Prints the judge's test figures
# and one cg-eval --judge table per cgan.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
samples=${SAMPLES:-1000}
lr=${LR:-4e-4}
seeds=${SEEDS:-1 2 3}
conv=${CONV:-0}
r1=${R1:-0}
beta1=${BETA1:-0.5}
beta2=${BETA2:-0.999}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${OUT:-$tmp}
mkdir -p "$out"

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads; Adam lr $lr, betas $beta1 $beta2"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

if [ -n "${JUDGE:-}" ]; then
	cp "$JUDGE" "$tmp/clf.cgm"
	echo "# judge: $JUDGE"
else
	t0=$(date +%s)
	"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 1024 --layers 2 \
		--seed 1 -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 4688 --batch 128 --lr 1e-3 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 2344 --batch 128 --lr 1e-4 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
	t1=$(date +%s)
	echo "# judge trained in $((t1 - t0)) s"
fi
"$bin/cg-eval" -m "$tmp/clf.cgm" -d "$tmp/test-0.cgd"

# train SEED FROM STEPS TO: TO from FROM, STEPS more steps; the data
# cursor and the noise carry on in a state file per seed.
train() {
	"$bin/cg-train-step" -q -m "$out/$2.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$3" --batch 128 --lr "$lr" \
		--beta1 "$beta1" --beta2 "$beta2" --seed "$1" \
		--state "$tmp/gan$1.state" --threads "$threads" -o "$out/$4.cgm"
}

echo "# cgan: --conv $conv --r1 $r1; seeds $seeds"
for seed in $seeds; do
	t0=$(date +%s)
	"$bin/cg-init" -a cgan -d "$tmp/train-0.cgd" --seed "$seed" \
		--conv "$conv" --r1 "$r1" -o "$out/s${seed}-0.cgm"
	train "$seed" "s${seed}-0" 469 "s${seed}-469"
	train "$seed" "s${seed}-469" 1876 "s${seed}-2345"
	t1=$(date +%s)
	echo "# cgan seed $seed trained 2345 steps in $((t1 - t0)) s"
done
models=
for seed in $seeds; do
	[ "$seed" = 1 ] && models="$models s1-0 s1-469"
	models="$models s${seed}-2345"
done
for m in $models; do
	t0=$(date +%s)
	echo "# $m"
	"$bin/cg-eval" -q -m "$out/$m.cgm" -d "$tmp/test-0.cgd" \
		--judge "$tmp/clf.cgm" --judge-samples "$samples" --seed 1 \
		--threads "$threads"
	"$bin/cg-sample" -m "$out/$m.cgm" -n 10 --seed 1 -o "$out/$m.png"
	t1=$(date +%s)
	echo "# cg-eval --judge: $((t1 - t0)) s"
done
