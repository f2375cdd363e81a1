#!/bin/bash
# dp-fedavg-workers.sh - DiLoCo of a small cvae with 4 and 16 workers at
# the same epsilon with user-level DP at the reduction (DP-FedAvg:
# cg-reduce --dp-clip --dp-noise; one worker's whole shard is the unit),
# beside the same rounds without DP and with the clip alone.  Test-set
# negative ELBO and the (epsilon, delta) the final model's manifest
# records (where a round's workers stop on a loss that is not finite, the
# nelbo of the model they were given).  With EXAMPLE=1 it also tries example-level DP on each worker
# (cg-train-step --example-clip --example-noise inside the rounds): its
# row says why the round did not close if cg-reduce refuses the workers'
# noised deltas.
#
# The training set (60000 Fashion-MNIST images) is cut into W stratified
# shards; ROUNDS rounds of INNER local Adam steps (lr 1e-3) of batch B,
# every worker in every round, outer Nesterov.  Noise multipliers from
# Opacus' get_noise_multiplier (RDP) for EPSILON at delta 1e-5: user
# level, ROUNDS releases at q = 1; example level, ROUNDS x INNER steps at
# q = B / (60000 / W).  The user-level clip is the median L2 norm of the
# first round's deltas without DP; the example clip is ECLIP; the lines
# starting with # give the machine and its load.
#
# usage: bench/dp-fedavg-workers.sh (from the top of the source tree
# after a build; CG_BIN, PYTHON (a venv with opacus), DATA, WORKERS ("4
# 16"), EXAMPLE (0), ROUNDS (5), INNER (30), B (64), EPSILON (8), ECLIP (10), INIT
# (cg-init options of the cvae: "--hidden 64 --layers 1 --latent 8
# --class-prior=0 --cond-every=0") override)
set -eu
bin=${CG_BIN:-build/cmd}
py=${PYTHON:-/opt/cg-bench-venv/bin/python}
data=${DATA:-/usr/share/datasets/fashion-mnist}
workers=${WORKERS:-4 16}
rounds=${ROUNDS:-5}
inner=${INNER:-30}
b=${B:-64}
eps=${EPSILON:-8}
eclip=${ECLIP:-10}
init=${INIT:---hidden 64 --layers 1 --latent 8 --class-prior=0 --cond-every=0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sigma_for() { # RATE STEPS
	"$py" -W ignore -c 'import sys
from opacus.accountants.utils import get_noise_multiplier as g
print(g(target_epsilon=float(sys.argv[1]), target_delta=1e-5,
        sample_rate=float(sys.argv[2]), steps=int(sys.argv[3]),
        accountant="rdp"))' "$eps" "$1" "$2"
}
ev() { "$bin/cg-eval" -q --json -m "$1" -d "$tmp/test-0.cgd" --seed 1 | jq -r '.nelbo // "not finite"'; }
norm() {
	"$bin/cg-inspect" --json "$1" |
		jq '[.tensors[] | .count * (.std * .std + .mean * .mean)] | add | sqrt'
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cvae $init; $rounds rounds x $inner steps of batch $b; epsilon $eps, delta 1e-5"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
usig=$(sigma_for 1 "$rounds")
echo '| workers | run | sigma | clip | test nelbo | (epsilon, delta) recorded | wall s |'
echo '|---:|---|---:|---:|---:|---|---:|'
for W in $workers; do
	rm -f "$tmp"/fm-*.cgd
	"$bin/cg-shard" -q -n "$W" --strategy stratified --seed 1 -o "$tmp/fm" "$data"
	# shellcheck disable=SC2086 # options, split on purpose
	"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" $init --seed 1 -o "$tmp/init.cgm"
	[ "$W" != "${workers%% *}" ] || printf '| – | initial model | | | %s | – | – |\n' "$(ev "$tmp/init.cgm")"
	nw=$("$bin/cg-inspect" --json "$tmp/fm-0.cgd" | jq .examples)
	q=$(awk -v b="$b" -v n="$nw" 'BEGIN { printf "%.10g", b / n }')
	esig=$(sigma_for "$q" $((rounds * inner)))
	# run NAME SIGMA CLIP WORKER-OPTIONS -- REDUCE-OPTIONS
	run() {
		local name=$1 sg=$2 cl=$3 wopt=() ropt=() r=0 out="" t0 t1 pids p failed dp
		shift 3
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
		printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$W" "$name" "$sg" "$cl" "$out" "$dp" $((t1 - t0))
	}
	run plain – – --
	clip=$(cat "$tmp/clip")
	run clip – "$clip" -- --dp-clip "$clip"
	run user-level "$usig" "$clip" -- --dp-clip "$clip" --dp-noise "$usig" --seed 1
	[ "${EXAMPLE:-0}" = 0 ] ||
		run example-level "$esig" "$eclip" --example-clip "$eclip" --example-noise "$esig" --
done
