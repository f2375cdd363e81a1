#!/bin/sh
# distill.sh - a smaller cgpt, cclf or cgan trained toward a bigger one
# (cg-train-step --teacher) against the same student trained from
# scratch: the same initial model, steps, batches, data order and
# learning-rate schedule; held-out bits per byte (cg-eval) every EVERY
# steps, or for images the figures below.
#
# usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]
#   TEACHER  the teacher model (cgpt, cclf or cgan), e.g. the fortunes
#            example's examples/fortunes-cgpt/out/model.cgm
#   TRAIN    the training shard (the example's out/data/all-0.cgd)
#   HELD     the held-out shard (out/data/held.cgd)
#   METHOD   scratch, distill, or distill:A[:T] (teacher weight A,
#            temperature T, default 1); default: scratch distill (the defaults of
#            cg-train-step, weight 0.9 and temperature 1)
#
# The student has the teacher's context, layers and heads and width
# WIDTH (default half the teacher's), made by cg-init with SEED.  Each
# method trains it for STEPS AdamW steps of batch BATCH, LR decayed along
# a cosine to LR_MIN after WARMUP steps (examples/fortunes-cgpt's
# schedule), in calls of EVERY steps; a call resumes where the last
# stopped (the data cursor and the schedule follow the model's step), so
# the calls make one run.  The methods run side by side, THREADS threads
# each.  Prints one row per method and checkpoint: method, steps,
# held-out bpb, seconds of training so far.
#
# Environment: CG_BIN (programs, default build/cmd), STEPS (1500), EVERY
# (500), BATCH (16), WIDTH, LR (1e-3), LR_MIN (5e-5), WARMUP (150), WD
# (0.1), SEED (1), THREADS (1), KEEP (a directory to keep the models in).
#
# A cclf or cgan teacher (HELD then the test shard): the student has the
# teacher's layers (and noise width) and hidden WIDTH (default half the
# teacher's; with --conv, CONV channels, default half the teacher's), and
# trains with Adam at a constant LR (cclf 1e-3; cgan 4e-4 with beta1 0.5,
# bench/cgan.sh's), batch BATCH (default 128 for both), no schedule.  Each
# checkpoint's figures: the cclf's test cross-entropy and accuracy
# (cg-eval); the cgan's conditional accuracy and Fréchet distance by the
# classifier JUDGE (cg-eval --judge JUDGE --judge-samples JSAMPLES, default
# 200 a class, --seed 1).  Then each student's and the teacher's
# parameters and the seconds cg-sample takes to draw SAMPLES (default 1000)
# images, the least of 3 runs.
set -eu
teacher=${1:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
train=${2:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
held=${3:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
shift 3
[ $# -gt 0 ] || set -- scratch distill
bin=${CG_BIN:-build/cmd}
steps=${STEPS:-1500}
every=${EVERY:-500}
seed=${SEED:-1}
threads=${THREADS:-1}
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP"
	tmp=$KEEP
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
fi

# The teacher's shape, from its manifest.
conf() { tar xOf "$teacher" cg.json | jq -r ".config.$1"; }
arch=$(tar xOf "$teacher" cg.json | jq -r .arch)
case $arch in
cgpt)
	batch=${BATCH:-16}
	width=${WIDTH:-$(($(conf width) / 2))}
	"$bin/cg-init" -a cgpt -d "$train" --context "$(conf context)" \
		--layers "$(conf layers)" --heads "$(conf heads)" \
		--width "$width" --seed "$seed" -o "$tmp/init.cgm"
	echo "# teacher $(conf width) wide, $(conf layers) layers, context" \
		"$(conf context); student $width wide; $steps steps of batch" \
		"$batch"
	train_opts="--opt adamw --lr ${LR:-1e-3} --wd ${WD:-0.1}
		--schedule cosine --warmup ${WARMUP:-150} --total $steps
		--lr-min ${LR_MIN:-5e-5}"
	;;
cclf | cgan)
	batch=${BATCH:-128}
	width=${WIDTH:-$(($(conf hidden) / 2))}
	conv=$(conf conv)
	[ "$conv" = null ] && conv=0
	conv=${CONV:-$((conv / 2))}
	extra=
	[ "$arch" = cgan ] && extra="--latent $(conf latent)"
	[ "$arch" = cgan ] && [ -z "${JUDGE:-}" ] && {
		echo "distill.sh: a cgan teacher needs JUDGE (a cclf)" >&2
		exit 1
	}
	# shellcheck disable=SC2086
	"$bin/cg-init" -a "$arch" -d "$train" --layers "$(conf layers)" \
		--hidden "$width" --conv "$conv" $extra --seed "$seed" \
		-o "$tmp/init.cgm"
	echo "# $arch teacher $(conf hidden) wide (conv $(conf conv))," \
		"$(conf layers) layers; student $width wide (conv $conv);" \
		"$steps steps of batch $batch"
	if [ "$arch" = cgan ]; then
		train_opts="--opt adam --lr ${LR:-4e-4} --beta1 0.5"
	else
		train_opts="--opt adam --lr ${LR:-1e-3}"
	fi
	;;
*)
	echo "distill.sh: $teacher: a $arch model, not cgpt, cclf or cgan" >&2
	exit 1
	;;
esac

# figures MODEL: the checkpoint's figures of MODEL, tab-separated
figures() {
	case $arch in
	cgpt)
		"$bin/cg-eval" --json -j "$threads" -m "$1" -d "$held" |
			jq -r .bpb
		;;
	cclf)
		"$bin/cg-eval" --json -j "$threads" -m "$1" -d "$held" |
			jq -r '"\(.xent)\t\(.acc)"'
		;;
	cgan)
		"$bin/cg-eval" --json -j "$threads" -m "$1" -d "$held" \
			--judge "$JUDGE" --judge-samples "${JSAMPLES:-200}" \
			--seed 1 | jq -r '"\(.cond_acc)\t\(.frechet)"'
		;;
	esac
}
case " $* " in
*" distill"*)
	echo "# teacher's figures: $(figures "$teacher" | tr '\t' ' ')"
	;;
esac

# run METHOD: the student trained by METHOD, a row per checkpoint.
run() {
	m=$1
	name=$(echo "$m" | tr : _)
	case $m in
	scratch) opts= ;;
	distill) opts="--teacher $teacher" ;;
	distill:*)
		a=$(echo "$m" | cut -d: -f2)
		t=$(echo "$m:1" | cut -d: -f3)
		opts="--teacher $teacher --teacher-weight $a"
		[ "$t" = 1 ] || opts="$opts --teacher-temp $t"
		;;
	*)
		echo "distill.sh: $m: not scratch, distill or distill:A:T" >&2
		return 1
		;;
	esac
	cp "$tmp/init.cgm" "$tmp/$name.cgm"
	done=0
	secs=0
	while [ "$done" -lt "$steps" ]; do
		k=$((steps - done < every ? steps - done : every))
		t0=$(date +%s.%N)
		# shellcheck disable=SC2086
		"$bin/cg-train-step" -q -j "$threads" -m "$tmp/$name.cgm" \
			-d "$train" --emit model --steps "$k" --batch "$batch" \
			$train_opts --seed "$seed" \
			--log "$tmp/$name.log" $opts -o "$tmp/$name.cgm"
		t1=$(date +%s.%N)
		secs=$(echo "$secs $t0 $t1" | awk '{ printf "%.1f", $1 + $3 - $2 }')
		done=$((done + k))
		printf '%-16s %6d %s %8s\n' "$m" "$done" \
			"$(figures "$tmp/$name.cgm" | awk -F'\t' '{
				for (i = 1; i <= NF; i++) printf("%8.4f ", $i) }')" \
			"$secs"
	done
}

case $arch in
cgpt) head='     bpb' ;;
cclf) head='    xent      acc' ;;
cgan) head='cond_acc  frechet' ;;
esac
printf '%-16s %6s %s  %8s\n' method steps "$head" seconds
pids=
for m in "$@"; do
	run "$m" >"$tmp/rows.$(echo "$m" | tr : _)" &
	pids="$pids $!"
done
fail=0
for p in $pids; do
	wait "$p" || fail=1
done
for m in "$@"; do
	cat "$tmp/rows.$(echo "$m" | tr : _)"
done
[ "$fail" -eq 0 ] || exit "$fail"

# params MODEL: the parameters of its views (not its optimizer's state)
params() {
	tar xOf "$1" cg.json | jq '[.tensors[] |
		select(.name | test("^(opt|outer)[.]") | not) |
		reduce .shape[] as $d (1; . * $d)] | add'
}
# sampling MODEL: the least of 3 runs' seconds to draw SAMPLES images
sampling() {
	best=
	for _ in 1 2 3; do
		t0=$(date +%s.%N)
		"$bin/cg-sample" -j "$threads" -m "$1" -n "$((${SAMPLES:-1000} / 10))" \
			--seed 1 -o "$tmp/grid.png"
		t1=$(date +%s.%N)
		best=$(echo "$t0 $t1 ${best:-1e9}" |
			awk '{ d = $2 - $1; printf "%.3f", d < $3 ? d : $3 }')
	done
	echo "$best"
}
if [ "$arch" = cgan ]; then
	echo "# model, parameters, seconds to draw ${SAMPLES:-1000} images (least of 3)"
	for f in "$teacher" $(for m in "$@"; do
		echo "$tmp/$(echo "$m" | tr : _).cgm"; done); do
		echo "$(basename "$f") $(params "$f") $(sampling "$f")"
	done
elif [ "$arch" = cclf ]; then
	echo "# model, parameters"
	for f in "$teacher" "$tmp/init.cgm"; do
		echo "$(basename "$f") $(params "$f")"
	done
fi
