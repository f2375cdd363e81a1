#!/bin/bash
# dp-fedavg-workers.sh - DiLoCo of a small cvae with 4 and 16 workers at
# the same epsilon: user-level DP at the reduction (DP-FedAvg: cg-reduce
# --dp-clip --dp-noise; one worker's whole shard is the unit), and
# example-level DP-SGD on each worker inside the rounds (cg-train-step
# --example-clip --example-noise; cg-reduce takes the deltas of disjoint
# shards together, the round spending one worker's epsilon), beside the
# same rounds without DP and with the clip alone, and single-machine
# DP-SGD on the whole training set at the same epsilon, steps and
# examples.  Test-set negative ELBO, the (epsilon, delta) the final
# model's manifest records, the bytes the workers sent up (their deltas,
# every round; the model they are sent back is the same size a worker),
# and wall seconds (where a round's workers stop on a loss that is not
# finite, the nelbo of the model they were given).
#
# The training set (60000 Fashion-MNIST images) is cut into W stratified
# shards; ROUNDS rounds of INNER local Adam steps (lr 1e-3) of batch B,
# every worker in every round, outer Nesterov.  Noise multipliers from
# Opacus' get_noise_multiplier (RDP) for each of EPSILONS at delta 1e-5:
# user level, ROUNDS releases at q = 1; example level, ROUNDS x INNER
# steps at q = B / (60000 / W).  Single machine: ROUNDS x INNER DP-SGD
# steps of batch W x B on the 60000 (the same rate, so the same noise
# multiplier and epsilon, and the same examples a step as the W workers
# together), SINGLE_THREADS threads.  The user-level clip is the median
# L2 norm of the first round's deltas without DP; the example clip is
# ECLIP; the lines starting with # give the machine and its load.
#
# usage: bench/dp-fedavg-workers.sh (from the top of the source tree
# after a build; CG_BIN, PYTHON (a venv with opacus), DATA, WORKERS ("4
# 16"), ROUNDS (5), INNER (30), B (64), EPSILONS ("8"; EPSILON, the older
# name, too), USER_LEVEL (1: the user-level rows; 0: none), EXAMPLE (0: no
# example-level rows; 1: DiLoCo and single machine), SINGLE_THREADS (2),
# ECLIP (10), INIT (cg-init options of the cvae: "--hidden 64 --layers 1
# --latent 8 --class-prior=0 --cond-every=0") override)
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
workers=${WORKERS:-4 16}
rounds=${ROUNDS:-5}
inner=${INNER:-30}
b=${B:-64}
epsilons=${EPSILONS:-${EPSILON:-8}}
user=${USER_LEVEL:-1}
sthreads=${SINGLE_THREADS:-2}
eclip=${ECLIP:-10}
init=${INIT:---hidden 64 --layers 1 --latent 8 --class-prior=0 --cond-every=0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sigma_for() { # EPSILON RATE STEPS
	"$py" -W ignore -c 'import sys
from opacus.accountants.utils import get_noise_multiplier as g
print(g(target_epsilon=float(sys.argv[1]), target_delta=1e-5,
        sample_rate=float(sys.argv[2]), steps=int(sys.argv[3]),
        accountant="rdp"))' "$1" "$2" "$3"
}
ev() { "$bin/cg-eval" -q --json -m "$1" -d "$tmp/test-0.cgd" --seed 1 | jq -r '.nelbo // "not finite"'; }
norm() {
	"$bin/cg-inspect" --json "$1" |
		jq '[.tensors[] | .count * (.std * .std + .mean * .mean)] | add | sqrt'
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cvae $init; $rounds rounds x $inner steps of batch $b; epsilons $epsilons, delta 1e-5"
echo "# commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
[ "${EXAMPLE:-0}" = 0 ] || "$bin/cg-shard" -q -n 1 -o "$tmp/all" "$data"
echo '| workers | run | epsilon | sigma | clip | test nelbo | (epsilon, delta) recorded | bytes up | wall s |'
echo '|---:|---|---:|---:|---:|---:|---|---:|---:|'
for W in $workers; do
	rm -f "$tmp"/fm-*.cgd
	"$bin/cg-shard" -q -n "$W" --strategy stratified --seed 1 -o "$tmp/fm" "$data"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" $init --seed 1 -o "$tmp/init.cgm"
	[ "$W" != "${workers%% *}" ] || printf '| – | initial model | – | – | – | %s | – | – | – |\n' "$(ev "$tmp/init.cgm")"
	nw=$("$bin/cg-inspect" --json "$tmp/fm-0.cgd" | jq .examples)
	q=$(awk -v b="$b" -v n="$nw" 'BEGIN { printf "%.10g", b / n }')
	# run NAME EPSILON SIGMA CLIP WORKER-OPTIONS -- REDUCE-OPTIONS
	run() {
		local name=$1 ep=$2 sg=$3 cl=$4 wopt=() ropt=() r=0 out="" t0 t1 pids p failed dp bytes=0
		shift 4
		while [ $# -gt 0 ] && [ "$1" != -- ]; do wopt+=("$1"); shift; done
		[ $# -eq 0 ] || shift
		ropt=("$@")
		: >"$tmp/rerr"
		cp "$tmp/init.cgm" "$tmp/$name.cgm"
		rm -f "$tmp"/w*.state "$tmp"/d*.cgg
		t0=$(date +%s)
		while [ "$r" -lt "$rounds" ]; do
			pids=
			for ((w = 0; w < W; w++)); do
				"$bin/cg-train-step" -q -m "$tmp/$name.cgm" -d "$tmp/fm-$w.cgd" \
					--emit delta --steps "$inner" --batch "$b" --lr 1e-3 \
					--seed 1 --state "$tmp/w$w.state" -j 1 "${wopt[@]}" \
					-o "$tmp/d$w.cgg" 2>"$tmp/err$w" &
				pids="$pids $!"
			done
			failed=0
			for p in $pids; do wait "$p" || failed=1; done
			[ "$failed" -eq 1 ] ||
				bytes=$((bytes + $(cat "$tmp"/d*.cgg | wc -c)))
			if [ "$failed" -eq 1 ]; then
				out="diverged in round $((r + 1))"
				[ "$r" -eq 0 ] ||
					out="$out (after round $r: $(ev "$tmp/$name.cgm"))"
				break
			fi
			if [ "$r" -eq 0 ] && [ "$name" = plain ]; then
				for ((w = 0; w < W; w++)); do norm "$tmp/d$w.cgg"; done | sort -g |
					awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }' \
					>"$tmp/clip"
			fi
			if ! "$bin/cg-reduce" --model "$tmp/$name.cgm" "${ropt[@]}" \
				"$tmp"/d*.cgg >"$tmp/mean.cgg" 2>"$tmp/rerr"; then
				out="round $((r + 1)) not reduced: $(head -1 "$tmp/rerr" | sed 's|^[^ ]* [^ ]*/||')"
				break
			fi
			"$bin/cg-apply" -m "$tmp/$name.cgm" --outer nesterov \
				-o "$tmp/$name.cgm" "$tmp/mean.cgg"
			r=$((r + 1))
		done
		t1=$(date +%s)
		dp=$(tar xOf "$tmp/$name.cgm" cg.json |
			jq -r 'if .dp then "\(.dp.epsilon) at \(.dp.delta)" else "–" end')
		[ -n "$out" ] || out=$(ev "$tmp/$name.cgm")
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$W" "$name" "$ep" "$sg" "$cl" "$out" "$dp" "$bytes" $((t1 - t0))
	}
	# single EPSILON SIGMA: DP-SGD on one machine, the W workers'
	# examples a step in one batch
	single() {
		local name=single ep=$1 sg=$2 t0 t1 out dp
		t0=$(date +%s)
		if "$bin/cg-train-step" -q -m "$tmp/init.cgm" -d "$tmp/all-0.cgd" \
			--emit model --steps $((rounds * inner)) --batch $((W * b)) \
			--lr 1e-3 --seed 1 -j "$sthreads" --example-clip "$eclip" \
			--example-noise "$sg" -o "$tmp/$name.cgm" 2>"$tmp/serr"; then
			out=$(ev "$tmp/$name.cgm")
			dp=$(tar xOf "$tmp/$name.cgm" cg.json |
				jq -r 'if .dp then "\(.dp.epsilon) at \(.dp.delta)" else "–" end')
		else
			out="failed: $(head -1 "$tmp/serr")"
			dp=–
		fi
		t1=$(date +%s)
		printf '| %s | one machine, batch %s | %s | %s | %s | %s | %s | %s | %s |\n' "$W" $((W * b)) "$ep" "$sg" "$eclip" "$out" "$dp" 0 $((t1 - t0))
	}
	run plain – – – --
	clip=$(cat "$tmp/clip")
	if [ "$user" != 0 ]; then
		run clip – – "$clip" -- --dp-clip "$clip"
		for eps in $epsilons; do
			usig=$(sigma_for "$eps" 1 "$rounds")
			run user-level "$eps" "$usig" "$clip" -- --dp-clip "$clip" \
				--dp-noise "$usig" --seed 1
		done
	fi
	if [ "${EXAMPLE:-0}" != 0 ]; then
		for eps in $epsilons; do
			esig=$(sigma_for "$eps" "$q" $((rounds * inner)))
			run example-level "$eps" "$esig" "$eclip" --example-clip "$eclip" \
				--example-noise "$esig" -- --target-epsilon "$eps"
			single "$eps" "$esig"
		done
	fi
	echo "# load after W=$W: $(cut -d' ' -f1-3 /proc/loadavg)"
done
