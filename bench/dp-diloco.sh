#!/bin/sh
# dp-diloco.sh - DiLoCo of the cvae with user-level differential privacy
# at the reduction (DP-FedAvg: cg-reduce --dp-clip --dp-noise) against
# the same rounds without it, and with the clip alone: test-set negative
# ELBO, and the (epsilon, delta) the final model's manifest records.
#
# usage: bench/dp-diloco.sh [ROUNDS] [INNER] [EPSILON]
#   ROUNDS rounds (10) of INNER local Adam steps (50) on 4 workers of
#   batch 32, every worker in every round (q = 1), delta 1e-5; the noise
#   multiplier is the one Opacus' get_noise_multiplier gives for EPSILON
#   (8) over ROUNDS releases at q = 1, read from
#   tests/rdp-vectors/opacus.txt (a row must be there); the clip is the
#   median L2 norm of the four deltas of the first round without DP.
#   CG_BIN overrides the programs' directory.
set -eu
rounds=${1:-10}
inner=${2:-50}
eps=${3:-8}
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
wt=${WORKER_THREADS:-1}
here=$(dirname "$0")
sigma=$(awk -v e="$eps" -v t="$rounds" \
	'$1 == "sigma" && $2 == 1.0 && $3 == e && $4 == t && $5 == 1e-05 { print $6 }' \
	"$here/../tests/rdp-vectors/opacus.txt")
[ -n "$sigma" ] || { echo "no Opacus sigma for epsilon $eps over $rounds rounds" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/fm" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/init.cgm"
ev() { "$bin/cg-eval" --json -m "$1" -d "$tmp/test-0.cgd" | jq -r .nelbo; }
norm() {
	"$bin/cg-inspect" --json "$1" |
		jq '[.tensors[] | .count * (.std * .std + .mean * .mean)] | add | sqrt'
}

# run NAME REDUCE-OPTIONS...: ROUNDS DiLoCo rounds from init.cgm
run() {
	name=$1
	shift
	cp "$tmp/init.cgm" "$tmp/$name.cgm"
	rm -f "$tmp"/w?.state
	r=0
	out=
	t0=$(date +%s)
	while [ "$r" -lt "$rounds" ]; do
		pids=
		for w in 0 1 2 3; do
			"$bin/cg-train-step" -q -m "$tmp/$name.cgm" -d "$tmp/fm-$w.cgd" \
				--emit delta --steps "$inner" --batch 32 --seed 1 \
				--state "$tmp/w$w.state" -j "$wt" -o "$tmp/d$w.cgg" &
			pids="$pids $!"
		done
		failed=0
		for p in $pids; do wait "$p" || failed=1; done
		# a worker whose loss is not finite ends the run
		if [ "$failed" -eq 1 ]; then
			out="diverged in round $((r + 1))"
			break
		fi
		if [ "$r" -eq 0 ] && [ "$name" = plain ]; then
			for w in 0 1 2 3; do norm "$tmp/d$w.cgg"; done | sort -g |
				awk 'NR == 2 { a = $1 } NR == 3 { print (a + $1) / 2 }' \
				>"$tmp/clip"
		fi
		"$bin/cg-reduce" --model "$tmp/$name.cgm" "$@" "$tmp"/d?.cgg |
			"$bin/cg-apply" -m "$tmp/$name.cgm" --outer nesterov \
				-o "$tmp/$name.cgm"
		r=$((r + 1))
	done
	t1=$(date +%s)
	dp=$(tar xOf "$tmp/$name.cgm" cg.json |
		jq -r 'if .dp then "\(.dp.epsilon) at delta \(.dp.delta)" else "-" end')
	[ -n "$out" ] || out=$(ev "$tmp/$name.cgm")
	printf '| %s | %s | %s | %s |\n' "$name" "$out" "$dp" $((t1 - t0))
}

echo "rounds $rounds x $inner inner steps, 4 workers, q = 1, sigma $sigma (Opacus, epsilon $eps)"
echo '| run | test nelbo | (epsilon, delta) recorded | wall s |'
echo '|---|---:|---|---:|'
printf '| init | %s | - | - |\n' "$(ev "$tmp/init.cgm")"
run plain
clip=$(cat "$tmp/clip")
echo "clip: the median norm of the first round's deltas, $clip" >&2
run clip --dp-clip "$clip"
run dp --dp-clip "$clip" --dp-noise "$sigma" --seed 1
echo "clip $clip"
