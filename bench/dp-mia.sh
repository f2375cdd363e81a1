#!/bin/bash
# dp-mia.sh - a membership-inference check of DP-SGD: the loss-threshold
# attack (Yeom et al. 2018) on the MLP classifier trained by cg-train-step
# without DP and with --example-clip at epsilon 8, 3 and 1 (delta 1e-5).
#
# The classifier (784 -> 256 -> 10) is trained on the first N (500)
# Fashion-MNIST training images for EPOCHS (40) passes of batches of B
# (50), Adam at 1e-3, clip 1: long enough for the model without DP to
# fit its training set far better than the rest.  The attacker guesses
# "member" for an example whose cross-entropy is below a threshold; the
# advantage is the best, over every threshold, of the share of the N
# members it finds less the share of N non-members (the first N test
# images) it takes for members: 0 is chance, 1 sees through.  Each
# example's loss is cg-eval's on a shard of that example alone.  Prints
# one line per run: epsilon (0: no DP), noise multiplier, the epsilon
# recorded, mean loss of members and non-members, test accuracy on the
# 10000 test images, and the attack's advantage.
#
# usage: bench/dp-mia.sh (from the top of the source tree, after a build
# in build/; CG_BIN, DATA, THREADS, N, EPOCHS, B override).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
n=${N:-500}
epochs=${EPOCHS:-40}
b=${B:-50}
steps=$((epochs * n / b))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $n members, $n non-members, $steps steps of batch $b, threads $threads"
"$bin/cg-shard" -q -n 1 --limit "$n" -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
# one shard per example: cg-eval's figure for each is its own loss
"$bin/cg-shard" -q -n "$n" --strategy round-robin --limit "$n" \
	-o "$tmp/in" "$data"
"$bin/cg-shard" -q -n "$n" --strategy round-robin --limit "$n" --test \
	-o "$tmp/out" "$data"
printf '%4s %8s %8s %9s %9s %8s %9s\n' eps sigma spent loss_in loss_out \
	test_acc advantage

for e in 0 8 3 1; do
	dp=""
	[ "$e" = 0 ] || dp="--example-clip 1 --target-epsilon $e"
	"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 256 --layers 1 \
		--seed 1 -o "$tmp/m.cgm"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$steps" --batch "$b" --lr 1e-3 --seed 1 \
		--threads "$threads" $dp -o "$tmp/t.cgm"
	args=()
	for i in $(seq 0 $((n - 1))); do
		args+=(-d "$tmp/in-$i.cgd")
	done
	for i in $(seq 0 $((n - 1))); do
		args+=(-d "$tmp/out-$i.cgd")
	done
	"$bin/cg-eval" -q --json -m "$tmp/t.cgm" "${args[@]}" \
		--threads "$threads" | jq -r '.xent' >"$tmp/loss"
	acc=$("$bin/cg-eval" -q --json -m "$tmp/t.cgm" -d "$tmp/test-0.cgd" \
		--threads "$threads" | jq -r .acc)
	man=$(tar xOf "$tmp/t.cgm" cg.json)
	sigma=$(jq -r '.dp.history[0].sigma // 0' <<<"$man")
	spent=$(jq -r '.dp.epsilon // 0' <<<"$man")
	# members are the first n lines; the best threshold over every
	# loss seen: TPR - FPR with "member" for loss <= threshold
	awk -v n="$n" -v e="$e" -v s="$sigma" -v sp="$spent" -v acc="$acc" '
		{ l[NR] = $1; m[NR] = NR <= n; if (NR <= n) si += $1; else so += $1 }
		END {
			N = NR; best = 0
			# sort indices by loss (insertion sort: 2n lines)
			for (i = 1; i <= N; i++) idx[i] = i
			for (i = 2; i <= N; i++) {
				v = idx[i]; j = i - 1
				while (j > 0 && l[idx[j]] > l[v]) { idx[j + 1] = idx[j]; j-- }
				idx[j + 1] = v
			}
			tp = 0; fp = 0
			for (i = 1; i <= N; i++) {
				if (m[idx[i]]) tp++; else fp++
				if (i < N && l[idx[i + 1]] == l[idx[i]]) continue
				a = tp / n - fp / (N - n)
				if (a > best) best = a
			}
			printf "%4s %8.4f %8.4f %9.4f %9.4f %8.4f %9.4f\n",
				e, s, sp, si / n, so / (N - n), acc, best
		}' "$tmp/loss"
done
