#!/bin/bash
# dp-parity.sh - one DP-SGD step's gradient without noise, cg-train-step
# --example-clip against Opacus (and a pass per example in float64,
# bench/dp_parity.py) on the same weights and the same batch: the first
# N Fashion-MNIST training images as one batch (cg: --batch N on a shard
# of N, rate 1), clip C, the judge's MLP (cclf 784-256-10) and its CNN
# (cg-init -a cclf --conv CONV --hidden 256 --layers 1).  One JSON line
# per model: the largest differences, and the spread of the examples'
# gradient norms (how many the clip reached).
#
# usage: bench/dp-parity.sh (from the top of the source tree after a
# build in build/; CG_BIN, PYTHON, DATA, N (256), C (1), CONV (8),
# THREADS (2) override)
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
n=${N:-256}
c=${C:-1}
conv=${CONV:-8}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 1 --limit "$n" -o "$tmp/s" "$data"
for cv in 0 "$conv"; do
	opt="--hidden 256 --layers 1"
	[ "$cv" = 0 ] || opt="--conv $cv $opt"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" -a cclf -d "$tmp/s-0.cgd" $opt --seed 1 -o "$tmp/m.cgm"
	"$bin/cg-convert" -t safetensors -o "$tmp/m.safetensors" "$tmp/m.cgm"
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/s-0.cgd" --emit grad \
		--steps 1 --batch "$n" --threads "$threads" --example-clip "$c" \
		--example-noise 0 --dp-seed 1 -o "$tmp/g.cgg"
	"$bin/cg-convert" -t safetensors -o "$tmp/g.safetensors" "$tmp/g.cgg"
	"$py" bench/dp_parity.py --data "$data" --init "$tmp/m.safetensors" \
		--grad "$tmp/g.safetensors" --limit "$n" --clip "$c" \
		--conv "$cv" --threads "$threads"
done
