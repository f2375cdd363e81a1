#!/bin/sh
# cddpm.sh - the cddpm diffusion model on Fashion-MNIST, scored by the
# judge of cg-eval --judge: its held-out mse and the judge's verdict on
# what it draws after 0, 469 (one epoch) and 2345 (five) steps.
#
# The judge is bench/judge.sh's (cclf 784-1024-1024-10, 10 epochs of Adam
# at 1e-3, then 5 at 1e-4, batch 128), trained again here.  The cddpm is
# cg-init's default (784-512x3-784, time encoding 128, T = 1000,
# condition dropped 10% of the time), Adam at 1e-3, batch 128, as the
# README's cvae.  cg-eval --judge draws as cg-sample draws by default:
# 50 DDIM steps, guidance 0.
#
# usage: bench/cddpm.sh (from the top of the source tree, after a build
# in build/; CG_BIN overrides where the programs are, SAMPLES the images
# drawn per condition, 1000).  Prints the judge's test figures and one
# cg-eval --judge table per cddpm.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
samples=${SAMPLES:-1000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

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
"$bin/cg-eval" -m "$tmp/clf.cgm" -d "$tmp/test-0.cgd"

t0=$(date +%s)
"$bin/cg-init" -a cddpm -d "$tmp/train-0.cgd" --seed 1 -o "$tmp/dm0.cgm"
"$bin/cg-train-step" -q -m "$tmp/dm0.cgm" -d "$tmp/train-0.cgd" \
	--emit model --steps 469 --batch 128 --lr 1e-3 --seed 1 \
	--state "$tmp/dm.state" --threads "$threads" -o "$tmp/dm469.cgm"
"$bin/cg-train-step" -q -m "$tmp/dm469.cgm" -d "$tmp/train-0.cgd" \
	--emit model --steps 1876 --batch 128 --lr 1e-3 --seed 1 \
	--state "$tmp/dm.state" --threads "$threads" -o "$tmp/dm2345.cgm"
t1=$(date +%s)
echo "# cddpm trained 2345 steps in $((t1 - t0)) s"
for m in dm0 dm469 dm2345; do
	t0=$(date +%s)
	"$bin/cg-eval" -q -m "$tmp/$m.cgm" -d "$tmp/test-0.cgd" \
		--judge "$tmp/clf.cgm" --judge-samples "$samples" --seed 1 \
		--threads "$threads"
	t1=$(date +%s)
	echo "# cg-eval --judge: $((t1 - t0)) s"
done
