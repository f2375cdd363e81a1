#!/bin/sh
# cddpm.sh - the cddpm diffusion model on Fashion-MNIST beside the cvae,
# both scored by the judge of cg-eval --judge on the test set: one table
# of conditional accuracy and Fréchet distance, the cddpm drawn with
# guidance 0, 1 and 3.
#
# The judge is bench/judge.sh's (cclf 784-1024-1024-10, 10 epochs of Adam
# at 1e-3, then 5 at 1e-4, batch 128), trained again here unless JUDGE
# names one already trained so.  Both generators are cg-init's defaults
# with seed 1, trained the same budget, STEPS steps of Adam at 1e-3,
# batch 128 (the README's cvae recipe), each in one cg-train-step call.
# cg-eval --judge draws SAMPLES images a condition with seed 1; the cddpm
# with 50 DDIM steps (cg-sample's default) at each guidance of GUIDANCE.
#
# usage: bench/cddpm.sh (from the top of the source tree, after a build
# in build/; CG_BIN overrides where the programs are, DATA the
# Fashion-MNIST directory, THREADS the threads, STEPS the training steps
# (2345, five epochs), SAMPLES the images drawn per condition (1000),
# GUIDANCE the guidance weights ("0 1 3"), JUDGE a trained judge, PNG a
# file for a grid of the cddpm's draws, a row per class, 10 each, seed
# 1, guidance 1).  Prints each model's cg-eval lines, then the table.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-2345}
samples=${SAMPLES:-1000}
guidance=${GUIDANCE:-0 1 3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads, steps: $steps, samples: $samples"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

if [ -n "${JUDGE:-}" ]; then
	cp "$JUDGE" "$tmp/clf.cgm"
	echo "# judge: $JUDGE"
else
	t0=$(date +%s)
	"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 1024 \
		--layers 2 --seed 1 -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 4688 --batch 128 --lr 1e-3 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 2344 --batch 128 --lr 1e-4 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
	t1=$(date +%s)
	echo "# judge trained in $((t1 - t0)) s"
fi
"$bin/cg-eval" -m "$tmp/clf.cgm" -d "$tmp/test-0.cgd"

# train ARCH: cg-init's default ARCH trained $steps steps into ARCH.cgm;
# its training seconds into ARCH.s
train() {
	"$bin/cg-init" -a "$1" -d "$tmp/train-0.cgd" --seed 1 -o "$tmp/$1.cgm"
	t0=$(date +%s)
	"$bin/cg-train-step" -q -m "$tmp/$1.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$steps" --batch 128 --lr 1e-3 --seed 1 \
		--threads "$threads" -o "$tmp/$1.cgm"
	t1=$(date +%s)
	echo $((t1 - t0)) >"$tmp/$1.s"
	"$bin/cg-eval" -q -m "$tmp/$1.cgm" -d "$tmp/test-0.cgd" \
		--threads "$threads"
}

# judge NAME ARCH [OPTION...]: cg-eval --judge's JSON line into NAME.json
judge() {
	name=$1 arch=$2
	shift 2
	t0=$(date +%s)
	"$bin/cg-eval" --json -q -m "$tmp/$arch.cgm" -d "$tmp/test-0.cgd" \
		--judge "$tmp/clf.cgm" --judge-samples "$samples" --seed 1 \
		--threads "$threads" "$@" >"$tmp/$name.json"
	t1=$(date +%s)
	echo "# $name: cg-eval --judge $* in $((t1 - t0)) s"
	jq -c '{cond_acc, frechet, per_condition: [.per_condition[] |
		[.cond, .acc, .frechet]]}' "$tmp/$name.json"
}

train cvae
judge cvae cvae
train cddpm
for g in $guidance; do
	judge "cddpm-g$g" cddpm --guidance "$g"
done

if [ -n "${PNG:-}" ]; then
	"$bin/cg-sample" -m "$tmp/cddpm.cgm" -n 10 --guidance 1 --seed 1 \
		--threads "$threads" -o "$PNG"
fi

echo
echo "| model | training | cond. acc | Fréchet distance |"
echo "|---|---|---:|---:|"
row() {
	printf '| %s | %s steps, %s s | %.4f | %.2f |\n' "$1" "$steps" \
		"$(cat "$tmp/$2.s")" \
		"$(jq .cond_acc "$tmp/$3.json")" "$(jq .frechet "$tmp/$3.json")"
}
row cvae cvae cvae
for g in $guidance; do
	row "cddpm, guidance $g" cddpm "cddpm-g$g"
done
