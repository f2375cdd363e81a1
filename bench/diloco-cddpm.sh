#!/bin/sh
# diloco-cddpm.sh - the cddpm trained by DiLoCo on four workers against
# one worker, at the same number of examples seen, both scored by the
# judge of cg-eval --judge on the Fashion-MNIST test set.
#
# usage: bench/diloco-cddpm.sh (from the top of the source tree; JUDGE a
# judge trained as bench/judge.sh trains it, required; CG_BIN the
# programs' directory, DATA the Fashion-MNIST directory, OUTER rounds
# (47) of INNER local Adam steps (50) on 4 workers of batch 32, the
# single worker OUTER*INNER steps of batch 128; SAMPLES images a
# condition (1000), GUIDANCE the guidance weight drawn with (1),
# INIT_OPTS cg-init's options after -a cddpm (none: the MLP; the U-Net
# of bench/conv-table.sh is "--unet 16 --hidden 128 --embed 64"),
# SINGLE a one-worker model already trained so (cg-init's seed 1,
# OUTER*INNER steps of batch 128 at seed 1, as bench/conv-table.sh's
# rows are), scored instead of training it again, WORKER_THREADS each
# worker's threads (1), THREADS the single worker's and cg-eval's (all
# cores)).
# The workers and the outer step are bench/diloco.sh's: stratified
# shards, local Adam at 1e-3 with its state file, Nesterov on the mean
# delta at 0.7, momentum 0.9.  Prints each model's figures and the
# ratio of their Fréchet distances.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
judge=${JUDGE:?JUDGE: a trained judge (bench/judge.sh)}
outer=${OUTER:-47}
inner=${INNER:-50}
samples=${SAMPLES:-1000}
guidance=${GUIDANCE:-1}
steps=$((outer * inner))
wt=${WORKER_THREADS:-1}
threads=${THREADS:-$(nproc)}
init_opts=${INIT_OPTS:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $outer rounds of $inner steps, 4 workers of batch 32; one worker $steps steps of batch 128"
echo "# cg-init -a cddpm $init_opts; load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/fm" "$data"
"$bin/cg-shard" -q -n 1 -o "$tmp/all" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"
# shellcheck disable=SC2086
"$bin/cg-init" -a cddpm $init_opts -d "$tmp/all-0.cgd" --seed 1 \
	-o "$tmp/init.cgm"

# judge MODEL: the judge's figures, one JSON line
judge() {
	"$bin/cg-eval" --json -q -m "$1" -d "$tmp/test-0.cgd" --judge "$judge" \
		--judge-samples "$samples" --seed 1 --guidance "$guidance" \
		--threads "$threads" |
		jq -c '{mse, cond_acc, frechet}'
}

if [ -n "${SINGLE:-}" ]; then
	cp "$SINGLE" "$tmp/single.cgm"
	echo "# single: $SINGLE, step $("$bin/cg-inspect" --json "$SINGLE" | jq .step)"
else
	t0=$(date +%s)
	"$bin/cg-train-step" -q -m "$tmp/init.cgm" -d "$tmp/all-0.cgd" \
		--emit model --steps "$steps" --batch 128 --seed 1 \
		--threads "$threads" -o "$tmp/single.cgm"
	t1=$(date +%s)
	echo "# single: trained in $((t1 - t0)) s"
fi
judge "$tmp/single.cgm" | tee "$tmp/single.json"

cp "$tmp/init.cgm" "$tmp/dl.cgm"
t0=$(date +%s)
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
	"$bin/cg-reduce" "$tmp"/d?.cgg | "$bin/cg-apply" -m "$tmp/dl.cgm" \
		--outer nesterov --outer-lr 0.7 --outer-momentum 0.9 \
		-o "$tmp/dl.cgm"
	r=$((r + 1))
done
t1=$(date +%s)
echo "# diloco: trained in $((t1 - t0)) s"
judge "$tmp/dl.cgm" | tee "$tmp/dl.json"
jq -n --slurpfile s "$tmp/single.json" --slurpfile d "$tmp/dl.json" \
	'"Fréchet distance, DiLoCo over one worker: \($d[0].frechet / $s[0].frechet)"'
