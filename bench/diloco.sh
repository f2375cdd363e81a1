#!/bin/sh
# diloco.sh - DiLoCo against one worker and against per-step synchronous
# data parallel, at the same number of samples seen: test-set negative
# ELBO of the cvae, and the bytes of every file exchanged between the
# workers and the reducer (updates sent, models fetched).
#
# usage: bench/diloco.sh [OUTER] [INNER] [SYNC_ROUNDS]
#   OUTER rounds of INNER local Adam steps on 4 workers of batch 32;
#   the single worker takes OUTER*INNER steps of batch 128; synchronous
#   data parallel runs SYNC_ROUNDS rounds (default OUTER*INNER) of one step
#   on 4 workers of batch 32.  CG_BIN overrides the programs' directory.
set -eu
outer=${1:-47}
inner=${2:-50}
steps=$((outer * inner))
srounds=${3:-$steps}
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
olr=${OUTER_LR:-0.7}
omu=${OUTER_MOMENTUM:-0.9}
# four workers share this machine: one thread each by default
wt=${WORKER_THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
size() { stat -c %s "$@" | awk '{ s += $1 } END { print s }'; }

"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/fm" "$data"
"$bin/cg-shard" -q -n 1 -o "$tmp/all" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
"$bin/cg-init" -a cvae -d "$tmp/all-0.cgd" --seed 1 -o "$tmp/init.cgm"
ev() { "$bin/cg-eval" --json -m "$1" -d "$tmp/test-0.cgd" | jq -r .nelbo; }

# one worker, batch 128
t0=$(date +%s)
"$bin/cg-train-step" -q -m "$tmp/init.cgm" -d "$tmp/all-0.cgd" --emit model \
	--steps "$steps" --batch 128 --seed 1 -o "$tmp/single.cgm"
single=$(ev "$tmp/single.cgm")
t1=$(date +%s)

# DiLoCo: 4 workers, local Adam, outer Nesterov on the mean delta
cp "$tmp/init.cgm" "$tmp/dl.cgm"
dbytes=0
r=0
while [ "$r" -lt "$outer" ]; do
	pids=
	for w in 0 1 2 3; do
		"$bin/cg-train-step" -q -m "$tmp/dl.cgm" -d "$tmp/fm-$w.cgd" \
			--emit delta --steps "$inner" --batch 32 --seed 1 \
			--state "$tmp/w$w.state" -j "$wt" -o "$tmp/d$w.cgg" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p"; done
	# each worker fetched the model and sent its delta
	dbytes=$((dbytes + 4 * $(size "$tmp/dl.cgm") + $(size "$tmp"/d?.cgg)))
	"$bin/cg-reduce" "$tmp"/d?.cgg | "$bin/cg-apply" -m "$tmp/dl.cgm" \
		--outer nesterov --outer-lr "$olr" --outer-momentum "$omu" \
		-o "$tmp/dl.cgm"
	r=$((r + 1))
done
diloco=$(ev "$tmp/dl.cgm")
t2=$(date +%s)

# synchronous data parallel: one step a round
cp "$tmp/init.cgm" "$tmp/sy.cgm"
sbytes=0
r=0
while [ "$r" -lt "$srounds" ]; do
	pids=
	for w in 0 1 2 3; do
		"$bin/cg-train-step" -q -m "$tmp/sy.cgm" -d "$tmp/fm-$w.cgd" \
			--steps 1 --batch 32 --seed 1 -j "$wt" -o "$tmp/g$w.cgg" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p"; done
	sbytes=$((sbytes + 4 * $(size "$tmp/sy.cgm") + $(size "$tmp"/g?.cgg)))
	"$bin/cg-reduce" "$tmp"/g?.cgg | "$bin/cg-apply" -m "$tmp/sy.cgm" \
		-o "$tmp/sy.cgm"
	r=$((r + 1))
done
sync=$(ev "$tmp/sy.cgm")
t3=$(date +%s)
# scale the synchronous bytes to the full run when fewer rounds ran
sfull=$((sbytes / srounds * steps))

printf '# %d samples seen by each run; DiLoCo %d rounds x %d inner steps, outer lr %s momentum %s\n' \
	$((steps * 128)) "$outer" "$inner" "$olr" "$omu"
printf '%-22s %10s %14s %8s\n' run test_nelbo bytes_moved wall_s
printf '%-22s %10.3f %14s %8d\n' "single (batch 128)" "$single" - $((t1 - t0))
printf '%-22s %10.3f %14d %8d\n' "diloco (4 x 32)" "$diloco" "$dbytes" $((t2 - t1))
if [ "$srounds" -eq "$steps" ]; then
	printf '%-22s %10.3f %14d %8d\n' "sync (4 x 32)" "$sync" "$sfull" $((t3 - t2))
else
	printf '%-22s %10s %14d %8s\n' "sync (4 x 32)" "(partial)" "$sfull" \
		"$((t3 - t2))/$srounds"
fi
printf 'diloco/single nelbo: %.4f   sync/diloco bytes: %.1fx (sync: %d of %d rounds run)\n' \
	"$(echo "$diloco / $single" | bc -l)" "$(echo "$sfull / $dbytes" | bc -l)" \
	"$srounds" "$steps"
