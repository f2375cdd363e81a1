#!/bin/sh
# cgan-speed.sh - training throughput of the default cgan (bench/cgan.sh's
# model and settings: batch 128, Adam 4e-4, betas 0.5 0.999), cg against
# PyTorch's same model (bench/torch_cgan.py), on Fashion-MNIST.
#
# Each round times one cg-train-step call of STEPS steps (the programs'
# wall time, model and shard read and the model written included) and
# one PyTorch run of STEPS steps after 5 of warm-up (its loop alone),
# alternated, RUNS rounds.
#
# usage: bench/cgan-speed.sh (from the top of the source tree, after a
# build in build/; CG_BIN overrides where the programs are, PYTHON the
# Python with torch, /usr/bin/python3; STEPS 100, RUNS 3, THREADS all
# cores).  Prints one line per timed run.
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/usr/bin/python3}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-100}
runs=${RUNS:-3}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads; $steps steps of batch 128 a run"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-init" -a cgan -d "$tmp/train-0.cgd" --seed 1 -o "$tmp/gan.cgm"
# warm-up: the page cache and the first call's start
"$bin/cg-train-step" -q -m "$tmp/gan.cgm" -d "$tmp/train-0.cgd" \
	--emit model --steps 5 --batch 128 --threads "$threads" -o "$tmp/w.cgm"
r=1
while [ "$r" -le "$runs" ]; do
	t0=$(date +%s.%N)
	"$bin/cg-train-step" -q -m "$tmp/gan.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$steps" --batch 128 --lr 4e-4 --beta1 0.5 \
		--seed "$r" --threads "$threads" -o "$tmp/out.cgm"
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk -v s="$steps" -v t="$threads" \
		'{ d = $2 - $1; printf "cg threads %d steps %d seconds %.3f examples/s %.1f\n", t, s, d, s * 128 / d }'
	"$py" "$here/torch_cgan.py" --steps "$steps" --threads "$threads" \
		--data "$data"
	r=$((r + 1))
done
