#!/bin/sh
# step-distill.sh - progressive distillation of the cddpm (cg-train-step
# --distill-steps) on Fashion-MNIST: a teacher drawn in 100 DDIM steps
# against its students drawn in fewer, scored by the judge of cg-eval
# --judge on the test set (conditional accuracy, Fréchet distance), with
# the seconds each takes to draw an image.
#
# The teacher is cg-init's default cddpm (784-512x3-784, T 1000), seed 1,
# STEPS steps of Adam at 1e-3, batch 128 (bench/cddpm.sh's), unless
# TEACHER names one trained so.  Each stage of STAGES starts from the
# last stage's student (the first from the teacher) and trains it
# DSTEPS steps of Adam at LR, batch 128, toward its teacher: one DDIM
# step of the student on its N-step grid learns two of the teacher's on
# the grid of 2N - 1 (57 from the teacher's 113, 29 from 57, 15 from 29,
# 8 from 15).  The first stage distils the teacher guided at GUIDANCE;
# the students carry it and are drawn without guidance.  The judge is
# bench/judge.sh's (cclf 784-1024-1024-10, 10 epochs of Adam at 1e-3,
# then 5 at 1e-4, batch 128), trained again here unless JUDGE names one
# trained so.  cg-eval --judge draws SAMPLES images a condition, seed 1.
# The drawing time is cg-sample's wall clock for TIMEN images of
# condition 0, divided by TIMEN.
#
# usage: bench/step-distill.sh (from the top of the source tree, after a
# build in build/; CG_BIN overrides where the programs are, DATA the
# Fashion-MNIST directory, THREADS the threads, STEPS (2345), TEACHER,
# STAGES ("57 29 15 8"), DSTEPS (300), LR (1e-4), GUIDANCE (1), SAMPLES
# (200), TIMEN (100), JUDGE, KEEP a directory to copy the students
# into).  Prints each call's time and a table.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-2345}
stages=${STAGES:-57 29 15 8}
dsteps=${DSTEPS:-300}
lr=${LR:-1e-4}
guidance=${GUIDANCE:-1}
samples=${SAMPLES:-200}
timen=${TIMEN:-100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads: $threads, stages: $stages, $dsteps steps each at $lr, guidance $guidance, samples: $samples"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

if [ -n "${TEACHER:-}" ]; then
	cp "$TEACHER" "$tmp/teacher.cgm"
	echo "# teacher: $TEACHER"
else
	"$bin/cg-init" -a cddpm -d "$tmp/train-0.cgd" --seed 1 \
		-o "$tmp/teacher.cgm"
	t0=$(date +%s)
	"$bin/cg-train-step" -q -m "$tmp/teacher.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$steps" --batch 128 --lr 1e-3 --seed 1 \
		--threads "$threads" -o "$tmp/teacher.cgm"
	echo "# teacher trained in $(($(date +%s) - t0)) s"
fi

# the stages: each student from the last model, toward it
prev=teacher
for n in $stages; do
	g=
	[ "$prev" = teacher ] && g="--distill-guidance $guidance"
	t0=$(date +%s)
	# shellcheck disable=SC2086 # $g is options, split on purpose
	"$bin/cg-train-step" -q -m "$tmp/$prev.cgm" -d "$tmp/train-0.cgd" \
		--teacher "$tmp/$prev.cgm" --distill-steps "$n" $g \
		--emit model --steps "$dsteps" --batch 128 --lr "$lr" \
		--seed "$n" --threads "$threads" --log "$tmp/s$n.log" \
		-o "$tmp/s$n.cgm"
	echo "# stage $n: $(($(date +%s) - t0)) s, last loss $(jq -c \
		'{loss, data, teacher}' "$tmp/s$n.log")"
	prev=s$n
	[ -n "${KEEP:-}" ] && cp "$tmp/s$n.cgm" "$KEEP/"
done

# the judge, once the students are made
if [ -n "${JUDGE:-}" ]; then
	cp "$JUDGE" "$tmp/clf.cgm"
	echo "# judge: $JUDGE"
else
	"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 1024 \
		--layers 2 --seed 1 -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 4688 --batch 128 --lr 1e-3 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
	"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 2344 --batch 128 --lr 1e-4 --seed 1 \
		--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
fi
"$bin/cg-eval" -m "$tmp/clf.cgm" -d "$tmp/test-0.cgd" --threads "$threads"

# judge NAME MODEL [OPTION...]: cg-eval --judge's JSON line into NAME.json,
# and the seconds per image cg-sample takes with the same options into
# NAME.s
judge() {
	name=$1 model=$2
	shift 2
	t0=$(date +%s)
	"$bin/cg-eval" --json -q -m "$tmp/$model.cgm" -d "$tmp/test-0.cgd" \
		--judge "$tmp/clf.cgm" --judge-samples "$samples" --seed 1 \
		--threads "$threads" "$@" >"$tmp/$name.json"
	t1=$(date +%s)
	echo "# $name: cg-eval --judge $* in $((t1 - t0)) s"
	t0=$(date +%s.%N)
	"$bin/cg-sample" -m "$tmp/$model.cgm" -c 0 -n "$timen" --seed 1 \
		--threads "$threads" "$@" -o "$tmp/$name.png"
	t1=$(date +%s.%N)
	echo "$t0 $t1 $timen" | awk '{ printf "%.4f\n", ($2 - $1) / $3 }' \
		>"$tmp/$name.s"
}

judge teacher100 teacher --steps 100 --guidance "$guidance"
judge teacher8 teacher --steps 8 --guidance "$guidance"
for n in $stages; do
	judge "student$n" "s$n"
done

echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | DDIM steps | guidance | cond. acc | Fréchet distance | s / image |"
echo "|---|---:|---:|---:|---:|---:|"
row() {
	printf '| %s | %s | %s | %.4f | %.2f | %s |\n' "$1" "$2" "$3" \
		"$(jq .cond_acc "$tmp/$4.json")" \
		"$(jq .frechet "$tmp/$4.json")" "$(cat "$tmp/$4.s")"
}
row teacher 100 "$guidance" teacher100
row teacher 8 "$guidance" teacher8
for n in $stages; do
	row "student, distilled for $n" "$n" "0 (carries $guidance)" \
		"student$n"
done
