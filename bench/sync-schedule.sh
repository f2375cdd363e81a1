#!/bin/bash
# sync-schedule.sh - when to synchronise: cg-cluster with a fixed number
# of local steps a round (H) against a schedule of H (short rounds
# early, long ones later, and the reverse) and against synchronous
# rounds first, then DiLoCo (--sync-rounds), at the same number of
# examples: every row runs STEPS steps of batch BATCH on each of 4
# workers.
#
#   bench/sync-schedule.sh        (after a build; 5 to 15 minutes)
#
# The workers are this machine (a stand-in for ssh runs each one's
# command here, in a directory of its own), so the seconds are those of
# the programs and the exchanges through files, without a network; the
# bytes are what cg-cluster's --log counts going down and up the
# pipes.  Every row trains the cvae of bench/cluster.sh (HIDDEN x LAYERS,
# LATENT) on Fashion-MNIST, each worker a quarter of the training set,
# inner Adam at LR (DiLoCo rounds), the coordinator's Adam at LR
# (synchronous rounds), outer Nesterov 0.7/0.9; the score is the
# test-set negative ELBO (cg-eval, seed 1).
#
# Prints a Markdown table on stdout, progress on stderr.  Knobs
# (environment): CG_BIN (build/cmd), STEPS (600), BATCH (32), LR (1e-3),
# HIDDEN (64), LAYERS (1), LATENT (16), SEED (1), ROWS (all), FMNIST.
set -u
cd "$(dirname "$0")/.."
CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd) || exit 1
STEPS=${STEPS:-600}
BATCH=${BATCH:-32}
LR=${LR:-1e-3}
HIDDEN=${HIDDEN:-64}
LAYERS=${LAYERS:-1}
LATENT=${LATENT:-16}
SEED=${SEED:-1}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
ROWS=${ROWS:-h25 h50 h100 grow shrink sync50-h50 sync100-h50}
N=4
export LC_ALL=C OMP_NUM_THREADS=1 PATH=$CG_BIN:$PATH

work=$(mktemp -d "${TMPDIR:-/tmp}/cg-sync-schedule.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
cg-shard -q -n 1 --test -o test "$FMNIST" || exit 1
cg-init -a cvae -d test-0.cgd --hidden "$HIDDEN" --layers "$LAYERS" \
	--latent "$LATENT" --seed "$SEED" -o init.cgm || exit 1
for ((i = 0; i < N; i++)); do echo "w$i"; done >hosts
printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >here
chmod +x here

# row NAME SCHEDULE [CLUSTER-OPTS]: rounds until STEPS steps are done
row() {
	local name=$1 sched=$2 r=0 done=0 k t0 t1
	shift 2
	# the rounds that make STEPS steps (a schedule that overshoots is
	# refused: the rows would not be at equal examples)
	while [ "$done" -lt "$STEPS" ]; do
		r=$((r + 1))
		k=$(echo "$sched" | awk -F, -v r=$r '{
			for (i = 1; i <= NF; i++) {
				n = split($i, p, "x"); k = p[1]
				c = (n == 2 ? p[2] : 1)
				if (r <= c) { print k; exit }
				r -= c
			}
			print k }')
		done=$((done + k))
	done
	[ "$done" -eq "$STEPS" ] || {
		echo "sync-schedule.sh: $name: $sched makes $done steps, not $STEPS" >&2
		return 1
	}
	rm -rf "$name" && mkdir -p "$name"/h
	t0=$(date +%s.%N)
	cg-cluster -q -f hosts -m init.cgm -o "$name/run" --ssh "$work/here" \
		--remote-dir "$work/$name/h/%i" -k "$sched" -b "$BATCH" \
		--seed "$SEED" -r "$r" -T "--threads 1 --lr $LR" \
		--log "$name/log" "$@" "$FMNIST" || return 1
	t1=$(date +%s.%N)
	nelbo=$(cg-eval -q -m "$name/run/model.cgm" -d test-0.cgd --seed 1 \
		--json | jq .nelbo)
	jq -sc --arg n "$name" --arg k "$sched" --argjson l "$nelbo" \
		--argjson s "$(echo "$t1 - $t0" | bc)" \
		'{row: $n, schedule: $k, rounds: length,
		  sync: (map(select(.mode == "sync")) | length),
		  steps: (map(.steps) | add), examples: (map(.samples) | add),
		  nelbo: $l, bytes: (map(.bytes_down + .bytes_up) | add),
		  seconds: $s}' "$name/log" | tee -a rows.jsonl >&2
}

: >rows.jsonl
for r in $ROWS; do
	case $r in
	h25) row h25 25 ;;
	h50) row h50 50 ;;
	h100) row h100 100 ;;
	# short rounds early, long later; and the reverse
	grow) row grow 25x4,50x4,100 ;;
	shrink) row shrink 100x3,50x4,25 ;;
	# R synchronous rounds of one step, then DiLoCo at H = 50
	sync50-h50)
		row sync50-h50 1x50,50 --sync-rounds 50 --sync-apply-opts "--lr $LR" ;;
	sync100-h50)
		row sync100-h50 1x100,50 --sync-rounds 100 \
			--sync-apply-opts "--lr $LR" ;;
	*) echo "sync-schedule.sh: unknown row '$r'" >&2; exit 2 ;;
	esac || echo "sync-schedule.sh: $r failed" >&2
done

echo "cvae ${HIDDEN}x${LAYERS}, latent $LATENT, $N workers on this machine," \
	"batch $BATCH a worker, $STEPS steps on each"
echo
jq -rs '
  "| row | schedule of H | rounds (sync) | steps | examples | test nelbo | MB moved | seconds |",
  "|---|---|---:|---:|---:|---:|---:|---:|",
  (.[] | "| \(.row) | \(.schedule) | \(.rounds) (\(.sync)) | \(.steps) | \(.examples) | \(.nelbo * 100 | round / 100) | \(.bytes / 1e4 | round / 100) | \(.seconds * 10 | round / 10) |")
' rows.jsonl
