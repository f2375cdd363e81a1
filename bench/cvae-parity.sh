#!/bin/sh
# cvae-parity.sh - cg against PyTorch on the same conditional VAE:
# test-set negative ELBO (nats per image) after each of EPOCHS epochs on the
# full Fashion-MNIST training set, Adam 1e-3, batch 128, 784-512-512-32.
#
# usage: bench/cvae-parity.sh [EPOCHS] (from the top of the source tree,
# after a build in build/; CG_BIN and PYTHON override where the programs and
# the PyTorch interpreter are).  Prints one table, cg and torch side by side.
set -eu
epochs=${1:-5}
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/usr/bin/python3}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
# the prior N(0, I) and the condition at the first layers only, as
# bench/torch_cvae.py's model
"$bin/cg-init" -a cvae -d "$tmp/train-0.cgd" --hidden 512 --layers 2 \
	--latent 32 --class-prior=0 --cond-every=0 --seed 1 -o "$tmp/m.cgm"
# 60000 / 128 = 468.75 batches an epoch: whole steps, spread evenly
echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads"
printf '%5s %12s %9s %12s %9s\n' epoch cg_nelbo cg_s torch_nelbo torch_s
"$py" bench/torch_cvae.py --epochs "$epochs" --threads "$threads" --json \
	>"$tmp/torch.jsonl" &
tpid=$!
wait $tpid || { echo "torch run failed" >&2; exit 1; }
total=0
e=1
prev=0
while [ "$e" -le "$epochs" ]; do
	upto=$(( (e * 60000 + 127) / 128 ))
	k=$((upto - prev))
	prev=$upto
	t0=$(date +%s.%N)
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$k" --batch 128 --lr 1e-3 --seed 1 \
		--threads "$threads" -o "$tmp/m.cgm"
	t1=$(date +%s.%N)
	total=$(echo "$total + $t1 - $t0" | bc -l)
	cg=$("$bin/cg-eval" --json -m "$tmp/m.cgm" -d "$tmp/test-0.cgd" |
		jq -r .nelbo)
	tline=$(sed -n "${e}p" "$tmp/torch.jsonl")
	tn=$(echo "$tline" | jq -r .test_nelbo)
	ts=$(echo "$tline" | jq -r .total_s)
	printf '%5d %12.3f %9.1f %12.3f %9.1f\n' "$e" "$cg" "$total" "$tn" "$ts"
	e=$((e + 1))
done
