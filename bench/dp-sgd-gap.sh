#!/bin/bash
# dp-sgd-gap.sh - the judge's MLP (cclf 784-256-10) under DP-SGD, cg
# against Opacus, with the two differences of bench/dp-sgd.sh taken out
# one at a time: the sampling (Opacus' loader samples at rate 1 / its
# batches, ceil(N / B), for that many steps; cg at B / N for N / B
# steps) and the initial weights (each side its own draw).  Here the
# PyTorch side can sample as cg does (torch_dp.py --sample-rate B/N
# --steps N/B, Poisson, its own generator) and start from cg's cg-init
# model (cg-convert to safetensors, torch_dp.py --init), and cg can
# sample at Opacus' rate (--batch B' with B'/N nearest 1/ceil(N/B), for
# ceil(N/B) steps).  Runs clipping alone (noise 0) and epsilon 8, delta
# 1e-5; the clip is 1, Adam at 1e-3, N images, 2 threads.  One line per
# run: side, sampling, initial weights, noise multiplier, epsilon, seed,
# test accuracy.
#
# usage: bench/dp-sgd-gap.sh (from the top of the source tree after a
# build in build/; CG_BIN, PYTHON, DATA, THREADS, N (20000), B (256),
# SEEDS ("11 12") override)
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-2}
n=${N:-20000}
b=${B:-256}
seeds=${SEEDS:-11 12}
steps=$((n / b))
osteps=$(((n + b - 1) / b))
ob=$(((n + osteps / 2) / osteps))
q=$(awk -v b="$b" -v n="$n" 'BEGIN { printf "%.10g", b / n }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $n images; cg rate $b/$n for $steps steps; Opacus' loader rate 1/$osteps for $osteps steps (cg: batch $ob)"
"$bin/cg-shard" -q -n 1 --limit "$n" -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 256 --layers 1 \
	--seed 1 -o "$tmp/m.cgm"
"$bin/cg-convert" -t safetensors -o "$tmp/m.safetensors" "$tmp/m.cgm"

printf '%-6s %-22s %-9s %7s %7s %5s %7s\n' side sampling init sigma eps seed acc
# cg BATCH STEPS SAMPLING-NAME NOISE-OPTIONS...
cg() {
	local bb=$1 st=$2 name=$3 s
	shift 3
	for s in $seeds; do
		"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/train-0.cgd" \
			--emit model --steps "$st" --batch "$bb" --lr 1e-3 --seed 1 \
			--threads "$threads" --example-clip 1 --dp-seed "$s" "$@" \
			-o "$tmp/t.cgm"
		tar xOf "$tmp/t.cgm" cg.json >"$tmp/man.json"
		"$bin/cg-eval" -q --json -m "$tmp/t.cgm" -d "$tmp/test-0.cgd" \
			--seed 1 --threads "$threads" |
			jq -r --slurpfile m "$tmp/man.json" --arg n "$name" --arg s "$s" \
			'[$n, ($m[0].dp.history[0].sigma // 0), ($m[0].dp.epsilon // 0), $s, .acc] | @tsv' |
			awk -F'\t' '{ printf "%-6s %-22s %-9s %7.4f %7.4f %5s %7.4f\n", "cg", $1, "cg", $2, $3, $4, $5 }'
	done
}
# torch SAMPLING-NAME INIT-NAME SEED OPTIONS...
torch() {
	local name=$1 init=$2 s=$3
	shift 3
	"$py" bench/torch_dp.py --model cclf --clip 1 --epochs 1 --batch "$b" \
		--hidden 256 --layers 1 --lr 1e-3 --limit "$n" --threads "$threads" \
		--seed "$s" "$@" 2>/dev/null |
		jq -r --arg n "$name" --arg i "$init" --arg s "$s" \
		'[$n, $i, .sigma, (.epsilon_spent // 0), $s, .test_acc] | @tsv' |
		awk -F'\t' '{ printf "%-6s %-22s %-9s %7.4f %7.4f %5s %7.4f\n", "opacus", $1, $2, $3, $4, $5, $6 }'
}
cgi=(--init "$tmp/m.safetensors")
own=(--sample-rate "$q" --steps "$steps")
# clipping alone
cg "$b" "$steps" "$b/$n x $steps" --example-noise 0
cg "$ob" "$osteps" "$ob/$n x $osteps" --example-noise 0
torch "1/$osteps x $osteps" torch 1 --sigma 0
torch "1/$osteps x $osteps" cg 1 --sigma 0 "${cgi[@]}"
torch "$b/$n x $steps" torch 1 --sigma 0 "${own[@]}"
torch "$b/$n x $steps" cg 1 --sigma 0 "${own[@]}" "${cgi[@]}"
# epsilon 8
cg "$b" "$steps" "$b/$n x $steps" --target-epsilon 8
cg "$ob" "$osteps" "$ob/$n x $osteps" --target-epsilon 8
for s in 1 2; do
	torch "$b/$n x $steps" cg "$s" --epsilon 8 "${own[@]}" "${cgi[@]}"
done
