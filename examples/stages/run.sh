#!/bin/sh
# run.sh - data parallelism over pipeline stages: 2 replicas of a cgpt
# cut into 2 stages, DiLoCo rounds reduced and applied stage by stage,
# checked against the same rounds of 2 unsplit workers.
#
# Each replica is a pipeline of its own (cg-train-step --next), on a
# shard of its own, and emits a delta per stage; each stage's 2 deltas
# are reduced and applied to that stage's file with DiLoCo's outer step.
# After every round the stages are joined and compared with the model
# of the unsplit round: the same bytes.  The model and the rounds are
# small, so it runs anywhere in seconds; ROUNDS and STEPS in the
# environment make them longer.  The programs are taken from PATH, or
# from a build in the source tree (cmd/ or build/cmd/).  Output goes to
# a fresh directory, printed at the end; pass one as $1 to choose it.
# Needs jq.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
rounds=${ROUNDS:-2}
steps=${STEPS:-4}
mkdir -p "$out"
cd "$out"

cg-shard -q -n 2 --seed 1 -o fort "$top/tests/fixtures/text/fortunes"
cg-init -a cgpt -d fort-0.cgd --context 32 --width 32 --layers 2 \
	--heads 2 --seed 1 -o whole.cgm
for s in 1 2; do
	cg-convert -S $s/2 whole.cgm -o s$s.cgm
done

# the inner steps, the same at every stage and every worker
inner="--emit delta --steps $steps --batch 8 --micro-batches 2 --opt adamw --lr 3e-3"
outer="--outer nesterov --outer-lr 0.7 --outer-momentum 0.9"

r=1
while [ $r -le "$rounds" ]; do
	for w in 0 1; do
		# a replica: stage 1 reads the shard, stage 2 runs behind it
		cg-train-step -q -m s1.cgm -d fort-$w.cgd $inner -o d$w-1.cgg \
			--next "cg-train-step -q -m s2.cgm $inner -o d$w-2.cgg" &
		# the same worker unsplit, for the check
		cg-train-step -q -m whole.cgm -d fort-$w.cgd $inner -o u$w.cgg &
	done
	wait
	for s in 1 2; do
		cg-reduce -q d0-$s.cgg d1-$s.cgg |
			cg-apply -m s$s.cgm $outer -o s$s.cgm
	done
	cg-reduce -q u0.cgg u1.cgg | cg-apply -m whole.cgm $outer -o whole.cgm
	cg-convert -J s1.cgm s2.cgm -o joined.cgm
	loss=$(tar xOf joined.cgm cg.json | jq -r '.loss * 1000 | round / 1000')
	if cmp -s joined.cgm whole.cgm; then
		echo "round $r: loss $loss, the joined stages are the unsplit model"
	else
		echo "round $r: the joined stages differ from the unsplit model" >&2
		exit 1
	fi
	r=$((r + 1))
done
echo "files in $out"
