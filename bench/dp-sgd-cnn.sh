#!/bin/bash
# dp-sgd-cnn.sh - DP-SGD on the judge, cg-train-step --example-clip
# against Opacus, run for run on the same initial weights, sampling law,
# noise multiplier, clip, steps, optimizer and learning rate.
#
# The judge is the CNN (cg-init -a cclf --conv CONV --hidden 256 --layers
# 1: 3x3 convolutions to CONV, 2 CONV and 4 CONV channels at strides 1, 2,
# 2, ReLU, the 7x7 map to 256 to 10; CONV=0: the MLP 784-256-10) trained
# for one pass over the first N Fashion-MNIST training images: N/B steps
# of Poisson samples at rate B/N, each example's gradient clipped to 1,
# Gaussian noise at the multiplier cg's RDP accountant picks for epsilon
# 1, 3 and 8 (delta 1e-5), Adam at 1e-3; and without DP for reference
# (N/B shuffled batches of B).  For each seed S: cg-init --seed S, the
# model given to both sides (cg-convert to safetensors, torch_dp.py
# --init), cg with --dp-seed S, PyTorch with --seed S (its own Poisson
# draw and noise), torch_dp.py --sample-rate B/N --steps N/B --sigma
# (cg's multiplier): Opacus' make_private clips and adds the noise.
#
# One line per run: side, conv, target epsilon (0: none), seed, noise
# multiplier, epsilon spent (as each side's accountant records it), test
# accuracy (the 10000 test images), training examples per wall second
# and per CPU second (user + system: cg's whole cg-train-step process,
# PyTorch's training loop alone), peak RSS in MiB (cg: the
# cg-train-step process; PyTorch: its process up to the end of
# training), threads.  Then, per side and epsilon, the runs' mean and
# standard deviation of the accuracy and their mean speeds and largest
# RSS.  cg runs first, then PyTorch, one process at a time.
#
# usage: bench/dp-sgd-cnn.sh (from the top of the source tree, after a
# build in build/; CG_BIN, PYTHON (default /opt/cg-bench-venv/bin/python),
# DATA, THREADS (2), N (20000), B (256), CONV (8), EPS ("1 3 8"), NODP
# (1; 0: no row without DP), SEEDS ("1") override)
#        bench/dp-sgd-cnn.sh --summary FILE... (the summary of the run
# lines of earlier outputs, e.g. of runs split over several seeds)
set -eu

summary() {
	awk '$1 == "cg" || $1 == "opacus" || $1 == "torch" {
		k = $1 " " $2 " " $3; if (!(k in n)) order[++nk] = k
		n[k]++; s[k] += $7; ss[k] += $7 * $7; w[k] += $8; c[k] += $9
		if ($10 > r[k]) r[k] = $10 }
	END {
		printf "# summary: side conv eps runs acc-mean acc-sd ex/s ex/cpu-s max-rss-MiB\n"
		for (i = 1; i <= nk; i++) { k = order[i]; m = s[k] / n[k]
			v = n[k] > 1 ? (ss[k] - n[k] * m * m) / (n[k] - 1) : 0
			printf "%-24s %3d %8.4f %7.4f %9.0f %9.0f %6.0f\n", k, n[k],
				m, (v > 0 ? sqrt(v) : 0), w[k] / n[k], c[k] / n[k], r[k] } }' "$@"
}
if [ "${1:-}" = --summary ]; then
	shift
	summary "$@"
	exit
fi

bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-2}
n=${N:-20000}
b=${B:-256}
conv=${CONV:-8}
eps=${EPS:-1 3 8}
nodp=${NODP:-1}
seeds=${SEEDS:-1}
steps=$((n / b))
q=$(awk -v b="$b" -v n="$n" 'BEGIN { printf "%.10g", b / n }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cclf conv $conv hidden 256; $n images, rate $q, $steps steps, clip 1, Adam 1e-3, threads $threads"
"$bin/cg-shard" -q -n 1 --limit "$n" -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
net="--hidden 256 --layers 1"
[ "$conv" = 0 ] || net="--conv $conv $net"
list=$eps
[ "$nodp" = 0 ] || list="0 $eps"

printf '%-6s %4s %4s %4s %7s %7s %7s %7s %8s %6s %3s\n' side conv eps seed \
	sigma spent acc ex/s ex/cpu-s rssMiB thr
for s in $seeds; do
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" $net --seed "$s" \
		-o "$tmp/m.cgm"
	"$bin/cg-convert" -t safetensors -o "$tmp/m.safetensors" "$tmp/m.cgm"
	for e in $list; do
		dp=()
		[ "$e" = 0 ] || dp=(--example-clip 1 --target-epsilon "$e"
			--dp-seed "$s")
		/usr/bin/time -f '%e %U %S %M' -o "$tmp/time" \
			"$bin/cg-train-step" -q -m "$tmp/m.cgm" \
			-d "$tmp/train-0.cgd" --emit model --steps "$steps" \
			--batch "$b" --lr 1e-3 --seed "$s" --threads "$threads" \
			"${dp[@]}" -o "$tmp/t.cgm"
		tar xOf "$tmp/t.cgm" cg.json >"$tmp/man.json"
		"$bin/cg-eval" -q --json -m "$tmp/t.cgm" -d "$tmp/test-0.cgd" \
			--seed 1 --threads "$threads" >"$tmp/eval.json"
		sigma=$(jq -r '.dp.history[0].sigma // 0' "$tmp/man.json")
		jq -r --arg t "$(cat "$tmp/time")" --arg e "$e" --arg s "$s" \
			--arg c "$conv" --arg thr "$threads" \
			--slurpfile ev "$tmp/eval.json" \
			'($t | split(" ") | map(tonumber)) as $tt |
			 [ "cg", $c, $e, $s, (.dp.history[0].sigma // 0),
			   (.dp.epsilon // 0), $ev[0].acc, (.samples / $tt[0]),
			   (.samples / ($tt[1] + $tt[2])), ($tt[3] / 1024),
			   $thr ] | @tsv' "$tmp/man.json" |
			awk -F'\t' '{ printf "%-6s %4s %4s %4s %7.4f %7.4f %7.4f %7.0f %8.0f %6.0f %3s\n",
				$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }'
		if [ "$e" = 0 ]; then
			tdp=()
		else
			tdp=(--sample-rate "$q" --sigma "$sigma")
		fi
		"$py" bench/torch_dp.py --model cclf --conv "$conv" \
			--init "$tmp/m.safetensors" --clip 1 --batch "$b" \
			--hidden 256 --layers 1 --lr 1e-3 --limit "$n" \
			--steps "$steps" --threads "$threads" --seed "$s" \
			"${tdp[@]}" 2>"$tmp/torch.err" >"$tmp/torch.json" || {
			cat "$tmp/torch.err" >&2
			exit 1
		}
		jq -r --arg e "$e" --arg s "$s" \
			'[ .side, .conv, $e, $s, .sigma, (.epsilon_spent // 0),
			   .test_acc, .examples_per_s,
			   (.examples / .train_cpu_s), (.train_maxrss_kib / 1024),
			   .threads ] | @tsv' "$tmp/torch.json" |
			awk -F'\t' '{ printf "%-6s %4s %4s %4s %7.4f %7.4f %7.4f %7.0f %8.0f %6.0f %3s\n",
				$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }'
	done
done | tee "$tmp/runs"
summary "$tmp/runs"
