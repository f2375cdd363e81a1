#!/bin/sh
# prune.sh - pruning a trained cgpt: held-out bits per byte after
# cg-prune at 50%, 70% and 2:4, by magnitude and by Wanda, without and
# with fine-tuning, each next to the dense model.
#
# usage: bench/prune.sh MODEL TRAIN HELD [OUT]
#   MODEL a trained cgpt, TRAIN the shard it was trained on (Wanda's
#   calibration and the fine-tuning data), HELD the held-out shard.  OUT
#   (default prune.tsv) gets one line per row as it is measured, so a run
#   cut short keeps the rows it has; the table goes to standard output at
#   the end.
#
# Rows: the dense model; then for each pruning (SPARSITIES x IMPORTANCES,
# every ranking within each tensor, or as GROUP says) the pruned model as
# it is, and the fine-tuned rows of ROWS_FT.  Fine-tuning is FT_STEPS
# steps of cg-train-step --emit model on TRAIN, the mask kept: AdamW
# from fresh moments (cg-quantize --strip; FT_STRIP=0 keeps the model's),
# FT_WARMUP steps of warm-up, then a cosine from FT_LR to FT_LR_MIN
# (FT_SCHED=constant: FT_LR throughout), batch FT_BATCH, seed 2.  A row
# of kind "kd" fine-tunes toward the dense model as its teacher
# (--teacher MODEL, the default weight and temperature), "plain" on the
# data alone; the dense model fine-tuned plainly the same way says how
# much of a fine-tuned row's figure is the extra training alone.  bpb is
# cg-eval's bits per byte on HELD; "change" is (bpb - dense bpb) / dense
# bpb.
#
# Environment: CG_BIN (the programs, default build/cmd; copy them
# elsewhere first if a rebuild could happen during the run), SPARSITIES
# ("0.5 0.7 2:4"), IMPORTANCES ("magnitude wanda"), GROUP (tensor; row;
# empty: cg-prune's default), CALIB (Wanda's calibration examples, 128),
# FT_STEPS (500), FT_LR (1e-4), FT_LR_MIN (1e-6), FT_WARMUP (25),
# FT_SCHED (cosine), FT_STRIP (1), FT_BATCH (16), ROWS_FT (the
# fine-tuned rows to run, as SPARSITY/IMPORTANCE/KIND, in order; default
# 50% by both importances distilled and plain, the dense control, then
# 2:4 and 70% distilled), THREADS (cg-train-step's --threads, default
# all), TMPDIR.
set -eu
model=${1:?usage: bench/prune.sh MODEL TRAIN HELD [OUT]}
train=${2:?usage: bench/prune.sh MODEL TRAIN HELD [OUT]}
held=${3:?usage: bench/prune.sh MODEL TRAIN HELD [OUT]}
out=${4:-prune.tsv}
bin=${CG_BIN:-build/cmd}
sps=${SPARSITIES:-0.5 0.7 2:4}
imps=${IMPORTANCES:-magnitude wanda}
group=${GROUP-tensor}
calib=${CALIB:-128}
steps=${FT_STEPS:-500}
lr=${FT_LR:-1e-4}
lr_min=${FT_LR_MIN:-1e-6}
warmup=${FT_WARMUP:-25}
sched=${FT_SCHED:-cosine}
strip=${FT_STRIP:-1}
batch=${FT_BATCH:-16}
rows_ft=${ROWS_FT:-0.5/wanda/kd 0.5/magnitude/kd 0.5/wanda/plain 0.5/magnitude/plain dense/-/plain 2:4/wanda/kd 2:4/magnitude/kd 0.7/wanda/kd 0.7/magnitude/kd}
threads=${THREADS:+--threads $THREADS}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bpb() { "$bin/cg-eval" --json -m "$1" -d "$held" | jq -r .bpb; }
now() { date +%s; }

# the pruned model of sparsity $1 and importance $2 into $3
prune() {
	case $1 in
	*:*) p_how="--nm $1" ;;
	*) p_how="-s $1" ;;
	esac
	case $2 in
	wanda) p_imp="-i wanda -d $train --calib $calib" ;;
	*) p_imp="-i $2" ;;
	esac
	case $1 in
	*:*) ;;
	*) [ -z "$group" ] || p_imp="$p_imp --group $group" ;;
	esac
	# shellcheck disable=SC2086
	"$bin/cg-prune" $p_how $p_imp "$model" -o "$3"
}

# model $1 fine-tuned into $2; kind $3: kd (toward MODEL) or plain
finetune() {
	f_in=$1
	if [ "$strip" = 1 ]; then
		"$bin/cg-quantize" -q --strip "$1" f32 -o "$tmp/strip.cgm"
		f_in=$tmp/strip.cgm
	fi
	case $sched in
	cosine) f_sched="--schedule cosine --total $steps --lr-min $lr_min" ;;
	*) f_sched="--schedule constant" ;;
	esac
	case $3 in
	kd) f_teach="--teacher $model" ;;
	*) f_teach= ;;
	esac
	# shellcheck disable=SC2086
	"$bin/cg-train-step" -q -m "$f_in" -d "$train" --emit model \
		--steps "$steps" --batch "$batch" --opt adamw --lr "$lr" \
		--warmup "$warmup" $f_sched $f_teach $threads --seed 2 -o "$2"
}

row() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out"; }

: >"$out"
echo "# $(uname -m), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
echo "# model $model: $("$bin/cg-inspect" --no-stats "$model" | awk '/^config:/ { print $2 }')" >>"$out"
echo "# fine-tuning: $steps steps of AdamW (fresh moments: $strip), lr $lr $sched to $lr_min after $warmup warm-up, batch $batch, on $train; kd: --teacher $model; pruning per ${group:-cg-prune default}; Wanda: $calib examples of TRAIN" >>"$out"
printf 'sparsity\timportance\tfine-tune\tbpb\tseconds\n' >>"$out"
t=$(now)
dense=$(bpb "$model")
row dense - 0 "$dense" $(($(now) - t))
for sp in $sps; do
	for imp in $imps; do
		t=$(now)
		prune "$sp" "$imp" "$tmp/p-$sp-$imp.cgm"
		row "$sp" "$imp" 0 "$(bpb "$tmp/p-$sp-$imp.cgm")" $(($(now) - t))
	done
done
for r in $rows_ft; do
	sp=${r%%/*}
	kind=${r##*/}
	imp=${r#*/}
	imp=${imp%/*}
	t=$(now)
	if [ "$sp" = dense ]; then
		finetune "$model" "$tmp/ft.cgm" "$kind"
	else
		[ -f "$tmp/p-$sp-$imp.cgm" ] || prune "$sp" "$imp" "$tmp/p-$sp-$imp.cgm"
		finetune "$tmp/p-$sp-$imp.cgm" "$tmp/ft.cgm" "$kind"
		# the mask held: the fine-tuned model prunes as many
		[ "$("$bin/cg-inspect" --json --no-stats "$tmp/ft.cgm" |
			jq '[.tensors[] | select(.pruned) | .pruned] | add')" = \
			"$("$bin/cg-inspect" --json --no-stats "$tmp/p-$sp-$imp.cgm" |
			jq '[.tensors[] | select(.pruned) | .pruned] | add')" ]
	fi
	row "$sp" "$imp" "$steps $kind" "$(bpb "$tmp/ft.cgm")" $(($(now) - t))
done

# the table, each bpb beside its change from the dense model's
awk -F'\t' -v d="$dense" '
	/^#/ { print; next }
	$1 == "sparsity" { printf "| %-8s | %-10s | %9s | %7s | %8s | %7s |\n", "sparsity", "importance", "fine-tune", "bpb", "change", "seconds"
		print "|----------|------------|-----------|---------|----------|---------|"; next }
	{ printf "| %-8s | %-10s | %9s | %7.4f | %+7.2f%% | %7d |\n", $1, $2, $3, $4, 100 * ($4 - d) / d, $5 }' "$out"
