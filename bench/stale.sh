#!/bin/sh
# stale.sh - asynchronous SGD on gradients with unequal workers: what
# staleness costs, and whether staleness weighting (cg-reduce
# --staleness-weight) or delay compensation (cg-apply --delay-comp,
# DC-ASGD) wins it back, at the same learning rate and the same number
# of examples.
#
# usage: bench/stale.sh [MODEL]     (MODEL: cvae, the default, or cgpt)
#
# The schedule is simulated, the training is not: every gradient is a
# real cg-train-step call on the model version its worker read, and
# every update goes through cg-reduce and cg-apply as a coordinator's
# would.  Worker k finishes a gradient every P_k ticks (PERIODS, default
# "1 1 1 1 1 1 1 4": seven workers and one four times slower); at each
# tick the workers that finish, in their order, have their gradient
# applied to the newest model, then read the newest model for the next
# one.  A gradient's staleness is the number of updates applied between
# its worker's read and its own apply: here 6-7 for the fast workers
# and about 28 for the slow one.  Each worker reads its own stratified
# shard through a state file (its cursor), with its own --seed.
# The schedule is the same in every row; only the rule changes.
#
# Rows (ROWS), each STEPS updates of batch B from the same first model
# (cg-init --seed 1), SGD at LR (MOMENTUM), held-out loss at the end:
#   fresh     each gradient from the newest model (staleness 0): what
#             the same updates would give without delay
#   constant  every stale gradient at full weight
#   lr-scaled constant at LR times the mean weight poly gives this
#             schedule's staleness (a plain smaller learning rate)
#   poly      weighed by 1/(1+s)^0.5 (cg-reduce --staleness-weight)
#   hinge     weighed by hinge:0.5,4 (full weight up to 4 stale; not
#             in the default ROWS)
#   dc        corrected by DC-ASGD, cg-apply --delay-comp LAMBDA
# Every row runs once per seed in SEEDS (the workers' --seed), rows in
# turn; the table gives each row's held-out loss per seed ("diverged"
# where a step's loss was not finite), the mean, and the gap to fresh.
#
# Environment: CG_BIN (build/cmd), DATA, FORTUNES, PERIODS, STEPS (400
# for cvae, 300 for cgpt), B (128, 16), LR (0.01, 0.3), MOMENTUM (0),
# LAMBDA (100), SEEDS ("1 2 3"), ROWS (all but hinge), THREADS (2).
set -eu
model=${1:-cvae}
bin=${CG_BIN:-build/cmd}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
PATH=$bin:$PATH
data=${DATA:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
periods=${PERIODS:-1 1 1 1 1 1 1 4}
seeds=${SEEDS:-1 2 3}
rows=${ROWS:-fresh constant lr-scaled poly dc}
momentum=${MOMENTUM:-0}
lambda=${LAMBDA:-100}
threads=${THREADS:-2}
case $model in
cvae)
	steps=${STEPS:-400} b=${B:-128} lr=${LR:-0.01} metric=nelbo ;;
cgpt)
	steps=${STEPS:-300} b=${B:-16} lr=${LR:-0.3} metric=bpb ;;
*)
	echo "stale.sh: $model: not cvae or cgpt" >&2
	exit 2 ;;
esac
# shellcheck disable=SC2086 # the periods are words
set -- $periods
n=$#
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say() { echo "stale.sh: $(date +%T): $*" >&2; }

if [ "$model" = cvae ]; then
	cg-shard -q -n "$n" --strategy stratified --seed 1 -o "$tmp/w" "$data"
	cg-shard -q -n 1 --test -o "$tmp/held" "$data"
	cg-init -a cvae -d "$tmp/w-0.cgd" --seed 1 -o "$tmp/first.cgm"
else
	cg-shard -q -n "$n" --strategy stratified --holdout-fraction 0.05 \
		--holdout "$tmp/held-0.cgd" --seed 1 -o "$tmp/w" "$fortunes"
	cg-init -a cgpt -d "$tmp/w-0.cgd" --context 64 --width 64 \
		--layers 2 --heads 2 --seed 1 -o "$tmp/first.cgm"
fi
held=$tmp/held-0.cgd

# the mean poly:0.5 weight over the schedule's staleness, for lr-scaled:
# the schedule alone, no training
mean_poly() {
	awk -v steps="$steps" -v p="$periods" 'BEGIN {
		n = split(p, P, " "); v = 0; tick = 0; sum = 0
		for (k = 1; k <= n; k++) base[k] = 0
		while (v < steps) {
			tick++
			for (k = 1; k <= n && v < steps; k++) {
				if (tick % P[k]) continue
				sum += 1 / sqrt(1 + v - base[k]); v++; base[k] = v
			}
		}
		printf "%.6f\n", sum / steps
	}'
}

# grad K VERSION SEED OUT: worker K's next gradient from model VERSION
grad() {
	cg-train-step -q -m "$d/$2.cgm" -d "$tmp/w-$1.cgd" --emit grad \
		--steps 1 --batch "$b" --state "$d/s$1" --seed "$(($3 * 100 + $1))" \
		--threads "$threads" -o "$4"
}

# run ROW SEED: one row's training; prints the held-out loss and the
# staleness seen (mean, max)
run() {
	row=$1 seed=$2
	d=$tmp/run
	rm -rf "$d"
	mkdir "$d"
	cp "$tmp/first.cgm" "$d/0.cgm"
	rlr=$lr
	[ "$row" = lr-scaled ] && rlr=$(echo "$lr * $(mean_poly)" | bc -l)
	sgd="--opt sgd --lr $rlr --momentum $momentum"
	v=0
	k=0
	while [ "$k" -lt "$n" ]; do
		eval "base$k=0"
		k=$((k + 1))
	done
	tick=0 ssum=0 smax=0
	while [ "$v" -lt "$steps" ]; do
		tick=$((tick + 1))
		k=0
		for p in $periods; do
			if [ $((tick % p)) -eq 0 ] && [ "$v" -lt "$steps" ]; then
				eval "bv=\$base$k"
				[ "$row" = fresh ] && bv=$v
				s=$((v - bv))
				ssum=$((ssum + s))
				[ "$s" -gt "$smax" ] && smax=$s
				grad "$k" "$bv" "$seed" "$d/g$k.cgg"
				# shellcheck disable=SC2086 # $sgd is words
				case $row in
				fresh|constant|lr-scaled)
					cg-apply $sgd --base-model "$d/$bv.cgm" \
						-m "$d/$v.cgm" "$d/g$k.cgg" -o "$d/$((v + 1)).cgm" ;;
				dc)
					cg-apply $sgd --base-model "$d/$bv.cgm" \
						--delay-comp "$lambda" -m "$d/$v.cgm" \
						"$d/g$k.cgg" -o "$d/$((v + 1)).cgm" ;;
				poly|hinge)
					rule=poly:0.5
					[ "$row" = hinge ] && rule=hinge:0.5,4
					cg-reduce -q --model "$d/$v.cgm" \
						--staleness-weight "$rule" "$d/g$k.cgg" |
						cg-apply $sgd -m "$d/$v.cgm" \
							-o "$d/$((v + 1)).cgm" ;;
				esac
				v=$((v + 1))
				eval "base$k=$v"
				# versions no worker will read again go
				low=$v
				j=0
				while [ "$j" -lt "$n" ]; do
					eval "x=\$base$j"
					[ "$x" -lt "$low" ] && low=$x
					j=$((j + 1))
				done
				for f in "$d"/[0-9]*.cgm; do
					x=${f##*/}
					x=${x%.cgm}
					[ "$x" -lt "$low" ] && rm "$f"
				done
			fi
			k=$((k + 1))
		done
	done
	echo "$(cg-eval --json -m "$d/$v.cgm" -d "$held" | jq -r ".$metric") \
$(echo "$ssum / $steps" | bc -l) $smax"
}

say "$model: $n workers, periods $periods, $steps updates of batch $b," \
	"SGD lr $lr momentum $momentum; mean poly:0.5 weight $(mean_poly)"
for seed in $seeds; do
	for row in $rows; do
		t0=$(date +%s)
		r=$(run "$row" "$seed") || r="diverged 0 0"
		say "seed $seed $row: $r ($(($(date +%s) - t0)) s)"
		echo "$row $seed $r" >>"$tmp/results"
	done
done

echo "# $model: $n workers, periods $periods (staleness: fast workers"
echo "# $((n - 1)) or so, the slow one about $((4 * (n - 1)))); $steps updates of batch $b,"
echo "# SGD lr $lr momentum $momentum;"
echo "# dc: lambda $lambda; held-out $metric at the end"
echo
printf '| row | staleness mean / max |'
for seed in $seeds; do printf ' seed %s |' "$seed"; done
printf ' mean | gap to fresh |\n|---|--:|'
for seed in $seeds; do printf -- '--:|'; done
printf -- '--:|--:|\n'
awk -v rows="$rows" -v seeds="$seeds" '
{
	v[$1, $2] = $3
	if ($3 != "diverged") { sm[$1] = $4; sx[$1] = $5 }
}
END {
	nr = split(rows, R, " "); ns = split(seeds, S, " ")
	for (i = 1; i <= nr; i++) {
		m = 0; ok = 1
		for (j = 1; j <= ns; j++) {
			x = v[R[i], S[j]]
			if (x == "" || x == "null" || x == "diverged") ok = 0
			else m += x
		}
		mean[R[i]] = ok ? m / ns : ""
	}
	for (i = 1; i <= nr; i++) {
		r = R[i]
		if (r in sm) printf "| %s | %.1f / %d |", r, sm[r], sx[r]
		else printf "| %s | - |", r
		for (j = 1; j <= ns; j++) {
			x = v[r, S[j]]
			if (x ~ /^[0-9.]+$/) printf " %.4f |", x
			else printf " %s |", x
		}
		if (mean[r] == "") { printf " | |\n"; continue }
		printf " %.4f |", mean[r]
		if (mean["fresh"] != "")
			printf " %+.2f%% |\n", 100 * (mean[r] / mean["fresh"] - 1)
		else
			printf " |\n"
	}
}' "$tmp/results"
