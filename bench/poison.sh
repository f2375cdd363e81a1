#!/bin/sh
# poison.sh - one poisoned worker of 4: DiLoCo on the cvae, each round's
# deltas reduced with each operation of cg-reduce, worker 3's delta
# replaced every round by a poisoned copy; the held-out negative ELBO at
# the end, against the clean run with the mean.
#
# usage: bench/poison.sh [ROUNDS] [INNER]
#   ROUNDS rounds (20) of INNER local Adam steps (50) of batch 32 on 4
#   workers (stratified shards, state files), the deltas reduced by
#   cg-reduce --op OP and applied by cg-apply --outer nesterov, as
#   bench/diloco.sh runs DiLoCo.  Attacks, on worker 3 every round,
#   made by tests/unit/poison from its honest delta (valid digests):
#     none       the clean run
#     x1e6       the delta times 1e6 (poison scale:1e6)
#     nan        every value a nan (poison nan), cg-reduce as it is
#     nan-skip   the same, cg-reduce --skip-nonfinite
#     flip       the delta sign-flipped (poison scale:-1)
#     flip4      sign-flipped and 4 times as long (poison scale:-4): the
#                one worker outweighs the other three in a mean
#   A run whose cg-reduce refuses the round because of worker 3's input
#   is "refused"; one where any program fails on an honest worker's
#   file, or whose model ends with a loss that is not finite, is
#   "diverged" (the round is given).
#
# Environment: CG_BIN (programs, default build/cmd), POISON (the tool,
# default CG_BIN/../tests/unit/poison: make check builds it), DATA,
# OPS (default "mean median trimmed-mean:$TRIM clip-mean:$TAU"), TRIM
# (0.25: one of 4 values dropped at each end), TAU (5), ATTACKS
# (default "none x1e6 nan nan-skip flip flip4"), WORKER_THREADS (1),
# OUTER_LR (0.7), OUTER_MOMENTUM (0.9), INIT_OPTS (more cg-init
# options).
set -eu
rounds=${1:-20}
inner=${2:-50}
bin=${CG_BIN:-build/cmd}
poison=${POISON:-$bin/../tests/unit/poison}
data=${DATA:-/usr/share/datasets/fashion-mnist}
trim=${TRIM:-0.25}
tau=${TAU:-5}
ops=${OPS:-"mean median trimmed-mean:$trim clip-mean:$tau"}
attacks=${ATTACKS:-"none x1e6 nan nan-skip flip flip4"}
wt=${WORKER_THREADS:-1}
olr=${OUTER_LR:-0.7}
omu=${OUTER_MOMENTUM:-0.9}
[ -x "$poison" ] || {
	echo "poison.sh: no $poison (make check builds it; or POISON=)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/w" "$data"
"$bin/cg-shard" -q -n 1 -o "$tmp/all" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/held" "$data"
# shellcheck disable=SC2086
"$bin/cg-init" -a cvae ${INIT_OPTS:-} -d "$tmp/all-0.cgd" --seed 1 \
	-o "$tmp/init.cgm"
ev() {
	"$bin/cg-eval" --json -m "$1" -d "$tmp/held-0.cgd" 2>/dev/null |
		jq -r .nelbo || echo nan
}
finite() { awk -v x="$1" 'BEGIN { exit !(x ~ /^[-+0-9.eE]+$/ && x + 0 < 1e30) }'; }

# run OP ATTACK: sets result (a number, "refused (round R)" or
# "diverged (round R)") and secs
run() {
	op=$1 attack=$2
	how='' skip=''
	case $attack in
	none) ;;
	x1e6) how=scale:1e6 ;;
	nan) how=nan ;;
	nan-skip) how=nan skip=--skip-nonfinite ;;
	flip) how=scale:-1 ;;
	flip4) how=scale:-4 ;;
	*)
		echo "poison.sh: no attack '$attack'" >&2
		exit 2
		;;
	esac
	d=$tmp/run
	rm -rf "$d"
	mkdir "$d"
	cp "$tmp/init.cgm" "$d/m.cgm"
	t0=$(date +%s)
	result=
	r=0
	while [ "$r" -lt "$rounds" ] && [ -z "$result" ]; do
		r=$((r + 1))
		pids=
		for w in 0 1 2 3; do
			"$bin/cg-train-step" -q -m "$d/m.cgm" -d "$tmp/w-$w.cgd" \
				--emit delta --steps "$inner" --batch 32 --seed 1 \
				--state "$d/w$w.state" -j "$wt" -o "$d/d$w.cgg" \
				2>>"$d/err" &
			pids="$pids $!"
		done
		fail=0
		for p in $pids; do wait "$p" || fail=1; done
		if [ "$fail" = 1 ]; then
			result="diverged (round $r)"
			break
		fi
		# what worker 3 sends (its own output stays: its state file
		# names it, and the next call checks it)
		cp "$d/d3.cgg" "$d/s3.cgg"
		[ -z "$how" ] || "$poison" "$how" "$d/d3.cgg" "$d/s3.cgg"
		# shellcheck disable=SC2086
		if ! "$bin/cg-reduce" -q --op "$op" $skip "$d"/d[012].cgg \
			"$d/s3.cgg" -o "$d/r.cgg" 2>"$d/rerr"; then
			if grep -qv "^cg-reduce: $d/s3.cgg: " "$d/rerr"; then
				result="diverged (round $r)"
			else
				result="refused (round $r)"
			fi
			sed 's/^/  /' "$d/rerr" >&2
			break
		fi
		"$bin/cg-apply" -m "$d/m.cgm" --outer nesterov --outer-lr "$olr" \
			--outer-momentum "$omu" "$d/r.cgg" -o "$d/m.cgm" \
			2>>"$d/err" || result="diverged (round $r)"
	done
	if [ -z "$result" ]; then
		result=$(ev "$d/m.cgm")
		finite "$result" || result="diverged (nelbo $result)"
	fi
	secs=$(($(date +%s) - t0))
}

params=$("$bin/cg-inspect" --json "$tmp/init.cgm" | jq -r "[.tensors[].count] | add")
printf '# cvae, %s parameters; 4 workers x %d rounds x %d Adam steps of batch 32, outer Nesterov lr %s momentum %s; worker 3 poisoned every round\n' \
	"$params" "$rounds" "$inner" "$olr" "$omu"
# one row: OP ATTACK after run
row() {
	gap=-
	if finite "$result"; then
		gap=$(awk -v x="$result" -v c="$clean" \
			'BEGIN { printf "%+.2f%%", 100 * (x - c) / c }')
		result=$(awk -v x="$result" 'BEGIN { printf "%.3f", x }')
	fi
	printf '| %s | %s | %s | %s | %d |\n' "$1" "$2" "$result" "$gap" "$secs"
}

printf '| op | attack | held-out nelbo | gap to clean mean | wall s |\n'
printf '|---|---|---:|---:|---:|\n'
# the reference first: the clean run with the mean
echo "poison.sh: mean, none" >&2
run mean none
finite "$result" || {
	echo "poison.sh: the clean mean run ended $result" >&2
	exit 1
}
clean=$result
row mean none
for attack in $attacks; do
	for op in $ops; do
		[ "$op/$attack" != mean/none ] || continue
		echo "poison.sh: $op, $attack" >&2
		run "$op" "$attack"
		row "$op" "$attack"
	done
done
