#!/bin/sh
# distill.sh - a smaller cgpt trained toward a bigger one (cg-train-step
# --teacher) against the same student trained from scratch: the same
# initial model, steps, batches, data order and learning-rate schedule;
# held-out bits per byte (cg-eval) every EVERY steps.
#
# usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]
#   TEACHER  the teacher model (cgpt), e.g. the fortunes example's
#            examples/fortunes-cgpt/out/model.cgm
#   TRAIN    the training shard (the example's out/data/all-0.cgd)
#   HELD     the held-out shard (out/data/held.cgd)
#   METHOD   scratch, distill, or distill:A:T (teacher weight A,
#            temperature T); default: scratch distill (the defaults of
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
set -eu
teacher=${1:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
train=${2:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
held=${3:?usage: bench/distill.sh TEACHER TRAIN HELD [METHOD...]}
shift 3
[ $# -gt 0 ] || set -- scratch distill
bin=${CG_BIN:-build/cmd}
steps=${STEPS:-1500}
every=${EVERY:-500}
batch=${BATCH:-16}
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
[ "$(tar xOf "$teacher" cg.json | jq -r .arch)" = cgpt ] || {
	echo "distill.sh: $teacher: not a cgpt model" >&2
	exit 1
}
width=${WIDTH:-$(($(conf width) / 2))}
"$bin/cg-init" -a cgpt -d "$train" --context "$(conf context)" \
	--layers "$(conf layers)" --heads "$(conf heads)" --width "$width" \
	--seed "$seed" -o "$tmp/init.cgm"
echo "# teacher $(conf width) wide, $(conf layers) layers, context" \
	"$(conf context); student $width wide; $steps steps of batch $batch"
case " $* " in
*" distill"*)
	echo "# teacher held-out bpb" \
		"$("$bin/cg-eval" --json -j "$threads" -m "$teacher" -d "$held" |
			jq -r .bpb)"
	;;
esac

# run METHOD: the student trained by METHOD, a row per checkpoint.
run() {
	m=$1
	name=$(echo "$m" | tr : _)
	case $m in
	scratch) opts= ;;
	distill) opts="--teacher $teacher" ;;
	distill:*:*)
		a=$(echo "$m" | cut -d: -f2)
		t=$(echo "$m" | cut -d: -f3)
		opts="--teacher $teacher --teacher-weight $a --teacher-temp $t"
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
			--opt adamw --lr "${LR:-1e-3}" --wd "${WD:-0.1}" \
			--schedule cosine --warmup "${WARMUP:-150}" \
			--total "$steps" --lr-min "${LR_MIN:-5e-5}" --seed "$seed" \
			--log "$tmp/$name.log" $opts -o "$tmp/$name.cgm"
		t1=$(date +%s.%N)
		secs=$(echo "$secs $t0 $t1" | awk '{ printf "%.1f", $1 + $3 - $2 }')
		done=$((done + k))
		bpb=$("$bin/cg-eval" --json -j "$threads" -m "$tmp/$name.cgm" \
			-d "$held" | jq -r .bpb)
		printf '%-16s %6d %8.4f %8s\n' "$m" "$done" "$bpb" "$secs"
	done
}

printf '%-16s %6s %8s %8s\n' method steps bpb seconds
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
exit "$fail"
