#!/bin/bash
# dp-sgd.sh - DP-SGD in cg-train-step (--example-clip, --target-epsilon)
# against Opacus on the same models, data, schedule and epsilon.
#
# The cvae (784+10 -> 256 -> 16 latents, N(0, I) prior, the label at the
# first layers: torch_cvae.py's model) and the MLP classifier of the
# judge (784 -> 256 -> 10: torch_cclf.py's), each trained for EPOCHS
# passes over the first N Fashion-MNIST training images, Poisson batches
# of expected size B, Adam at 1e-3, each example's gradient clipped to C
# (cvae 10, cclf 1), the noise multiplier each side's RDP accountant
# picks for epsilon 1, 3 and 8 at delta 1e-5 -- and without DP (plain
# shuffled batches) for reference.  Prints one line per run: the side,
# the model, the target epsilon (0: no DP), the noise multiplier, the
# epsilon spent as the side records it, the held-out figure on the
# 10000 test images (cvae: negative ELBO, nats per image; cclf:
# accuracy), training examples per second over wall time and over CPU
# time (user + system: the machine may be loaded by others; cg's whole
# cg-train-step process, PyTorch's training loop alone), the threads.
# cg runs first, then PyTorch, one process at a time.
#
# usage: bench/dp-sgd.sh (from the top of the source tree, after a build
# in build/; CG_BIN, PYTHON (a venv with torch and opacus: default
# /opt/cg-bench-venv/bin/python), DATA, THREADS, N (20000), EPOCHS (1),
# B (256), EPS ("1 3 8") override).
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
n=${N:-20000}
epochs=${EPOCHS:-1}
b=${B:-256}
eps=${EPS:-1 3 8}
steps=$((epochs * n / b))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $n training images, $epochs epoch(s), batch $b ($steps steps), threads $threads"
"$bin/cg-shard" -q -n 1 --limit "$n" -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

printf '%-7s %-5s %4s %8s %8s %10s %9s %9s %3s\n' side model eps sigma spent \
	held-out ex/s ex/cpu-s thr

# one cg run: model $1, epsilon $2 (0: none)
cg_run() {
	local m=$1 e=$2 clip init fig dp="" t
	if [ "$m" = cvae ]; then
		clip=10
		init="--hidden 256 --layers 1 --latent 16 --class-prior=0 --cond-every=0"
		fig=.nelbo
	else
		clip=1
		init="--hidden 256 --layers 1"
		fig=.acc
	fi
	[ "$e" = 0 ] || dp="--example-clip $clip --target-epsilon $e"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" -a "$m" -d "$tmp/train-0.cgd" $init --seed 1 -o "$tmp/m.cgm"
	# shellcheck disable=SC2086
	/usr/bin/time -f '%e %U %S' -o "$tmp/time" "$bin/cg-train-step" -q \
		-m "$tmp/m.cgm" -d "$tmp/train-0.cgd" --emit model \
		--steps "$steps" --batch "$b" --lr 1e-3 --seed 1 \
		--threads "$threads" $dp -o "$tmp/t.cgm"
	t=$(cat "$tmp/time")
	tar xOf "$tmp/t.cgm" cg.json >"$tmp/man.json"
	"$bin/cg-eval" -q --json -m "$tmp/t.cgm" -d "$tmp/test-0.cgd" --seed 1 \
		--threads "$threads" >"$tmp/eval.json"
	jq -r --arg m "$m" --arg e "$e" --arg t "$t" --arg thr "$threads" \
		--slurpfile ev "$tmp/eval.json" \
		'($t | split(" ") | map(tonumber)) as $tt |
		 [ "cg", $m, $e, (.dp.history[0].sigma // 0),
		   (.dp.epsilon // 0), ($ev[0]'"$fig"'), (.samples / $tt[0]),
		   (.samples / ($tt[1] + $tt[2])), $thr ] |
		 @tsv' "$tmp/man.json" |
		awk -F'\t' '{ printf "%-7s %-5s %4s %8.4f %8.4f %10.4f %9.0f %9.0f %3s\n",
			$1, $2, $3, $4, $5, $6, $7, $8, $9 }'
}

# one PyTorch run (Opacus where epsilon > 0)
torch_run() {
	local m=$1 e=$2 clip fig
	if [ "$m" = cvae ]; then clip=10 fig=.test_nelbo; else clip=1 fig=.test_acc; fi
	/usr/bin/time -f '%e %U %S' -o "$tmp/time" "$py" bench/torch_dp.py \
		--model "$m" --epsilon "$e" --clip "$clip" --epochs "$epochs" \
		--batch "$b" --hidden 256 --layers 1 --latent 16 --lr 1e-3 \
		--limit "$n" --threads "$threads" >"$tmp/torch.json"
	jq -r --arg t "$(cat "$tmp/time")" --arg e "$e" \
		'($t | split(" ") | map(tonumber)) as $tt |
		 [ .side, .model, $e, .sigma, (.epsilon_spent // 0),
		   ('"$fig"'), .examples_per_s,
		   (.examples / .train_cpu_s), .threads ] | @tsv' \
		"$tmp/torch.json" |
		awk -F'\t' '{ printf "%-7s %-5s %4s %8.4f %8.4f %10.4f %9.0f %9.0f %3s\n",
			$1, $2, $3, $4, $5, $6, $7, $8, $9 }'
}

for m in cclf cvae; do
	for e in 0 $eps; do
		cg_run "$m" "$e"
	done
	for e in 0 $eps; do
		torch_run "$m" "$e"
	done
done
