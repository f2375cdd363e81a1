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
# DSTEPS is one step count for every stage or a list, one a stage
# ("1000 6000 6000" for STAGES "29 15 8").  SCHEDULE=cosine decays each
# stage's learning rate along a half cosine from LR to LR_MIN (0) over
# that stage's steps (cg-train-step --schedule cosine, whose step count
# is the model's: the steps before the stage are given as a warm-up
# already behind it); constant (the default) keeps LR.  The judge, when JUDGE names
# none, trains in the background while the stages run.
#
# usage: bench/step-distill.sh (from the top of the source tree, after a
# build in build/; CG_BIN overrides where the programs are, DATA the
# Fashion-MNIST directory, THREADS the threads, STEPS (2345), TEACHER,
# STAGES ("57 29 15 8"), DSTEPS (300), LR (1e-4), SCHEDULE (constant),
# LR_MIN (0), GUIDANCE (1), SAMPLES (200), TIMEN (100), JUDGE, KEEP a
# directory to copy the teacher, the judge and the students into).
# Prints each call's time and a table.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
steps=${STEPS:-2345}
stages=${STAGES:-57 29 15 8}
dsteps=${DSTEPS:-300}
lr=${LR:-1e-4}
schedule=${SCHEDULE:-constant}
lr_min=${LR_MIN:-0}
guidance=${GUIDANCE:-1}
samples=${SAMPLES:-200}
timen=${TIMEN:-100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# threads: $threads, stages: $stages, steps: $dsteps, lr $lr ($schedule to $lr_min), guidance $guidance, samples: $samples"
case $schedule in constant | cosine) ;; *)
	echo "step-distill.sh: SCHEDULE=$schedule: not constant or cosine" >&2
	exit 2 ;;
esac
# shellcheck disable=SC2086 # lists, split on purpose
set -- $dsteps
if [ $# -ne 1 ]; then
	# shellcheck disable=SC2086
	[ $# -eq "$(echo $stages | wc -w)" ] || {
		echo "step-distill.sh: DSTEPS has $# counts for" \
			"$(echo $stages | wc -w) stages" >&2
		exit 2
	}
fi
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
[ -n "${KEEP:-}" ] && cp "$tmp/teacher.cgm" "$KEEP/"

# the judge, in the background while the stages run
judge_pid=
if [ -n "${JUDGE:-}" ]; then
	cp "$JUDGE" "$tmp/clf.cgm"
	echo "# judge: $JUDGE"
else
	(
		"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 1024 \
			--layers 2 --seed 1 -o "$tmp/clf0.cgm"
		"$bin/cg-train-step" -q -m "$tmp/clf0.cgm" \
			-d "$tmp/train-0.cgd" --emit model --steps 4688 \
			--batch 128 --lr 1e-3 --seed 1 --state "$tmp/clf.state" \
			--threads "$threads" -o "$tmp/clf0.cgm"
		"$bin/cg-train-step" -q -m "$tmp/clf0.cgm" \
			-d "$tmp/train-0.cgd" --emit model --steps 2344 \
			--batch 128 --lr 1e-4 --seed 1 --state "$tmp/clf.state" \
			--threads "$threads" -o "$tmp/clf.cgm"
	) &
	judge_pid=$!
fi

# the stages: each student from the last model, toward it
prev=teacher
for n in $stages; do
	d=$1
	[ $# -gt 1 ] && shift
	g=
	[ "$prev" = teacher ] && g="--distill-guidance $guidance"
	if [ "$schedule" = cosine ]; then
		# the schedule counts the optimizer steps the model has taken
		# (opt_t: the teacher's 2345 and the stages before); a warm-up
		# of that many steps, all behind it, starts the half cosine
		# at this stage's first step: lr at step t is LR_MIN + (LR -
		# LR_MIN) (1 + cos(pi (t - t0) / d)) / 2
		t=$(tar xOf "$tmp/$prev.cgm" cg.json | jq '.opt_t // 0')
		g="$g --schedule cosine --warmup $t --total $((t + d))"
		g="$g --lr-min $lr_min"
	fi
	t0=$(date +%s)
	# shellcheck disable=SC2086 # $g is options, split on purpose
	"$bin/cg-train-step" -q -m "$tmp/$prev.cgm" -d "$tmp/train-0.cgd" \
		--teacher "$tmp/$prev.cgm" --distill-steps "$n" $g \
		--emit model --steps "$d" --batch 128 --lr "$lr" \
		--seed "$n" --threads "$threads" --log "$tmp/s$n.log" \
		-o "$tmp/s$n.cgm"
	echo "# stage $n: $d steps in $(($(date +%s) - t0)) s, last loss" \
		"$(jq -c '{loss, data, teacher}' "$tmp/s$n.log")"
	prev=s$n
	[ -n "${KEEP:-}" ] && cp "$tmp/s$n.cgm" "$KEEP/"
done

if [ -n "$judge_pid" ]; then
	wait "$judge_pid"
	echo "# judge trained"
	[ -n "${KEEP:-}" ] && cp "$tmp/clf.cgm" "$KEEP/"
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
