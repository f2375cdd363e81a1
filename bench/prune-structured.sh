#!/bin/sh
# prune-structured.sh - cg-prune --structured against the dense model:
# the held-out figure after fine-tuning toward the dense model
# (--teacher), and training and sampling time and peak memory, each
# smaller model timed in turn with the dense one (farm-bench --vs).
#
# usage: bench/prune-structured.sh DENSE TRAIN HELD [OUT]
#   DENSE a trained cgpt or cvae, TRAIN its training shard (the
#   fine-tuning data), HELD the held-out shard.  OUT (default
#   prune-structured.txt) gets every figure as it is measured.
#
# For each CUT of CUTS (LIST:X, cg-prune --structured LIST --remove X):
# the smaller model, its share of DENSE's parameters, its held-out
# figure as cut, and after FT_STEPS steps of cg-train-step --emit model
# toward DENSE (--teacher, the default weight and temperature; AdamW at
# FT_LR, batch FT_BATCH, seed 2).  DENSE trained the same FT_STEPS on
# the data alone is the control (CONTROL=0: not run): what the extra
# steps give by themselves.  The figure is cg-eval's bpb (cgpt) or nelbo (cvae).
# Then, paired with DENSE (RUNS runs each, one warm-up), the wall time
# and peak memory of TIME_STEPS training steps (batch FT_BATCH, no
# teacher) and of drawing: cgpt SAMPLE_TEXTS texts of at most
# SAMPLE_BYTES bytes from condition 0,
# cvae SAMPLE_N images of each condition (as PGM: a PNG's compression
# would cost more than the drawing).  A text ends at the end mark, so
# the two models' texts differ in length: each call's bytes (the same
# every run: one seed) are counted, and the ratio of bytes a second is
# printed beside the ratio of times.
#
# Environment: CG_BIN (the programs, default build/cmd; copy them
# elsewhere first if a rebuild could happen during the run), CUTS
# (cgpt "heads,rows:0.35 heads,rows:0.55", cvae "units:0.23
# units:0.41": about 30% and 50% of the parameters at cg-init's
# default sizes), FT_STEPS (100), FT_LR (1e-3), FT_BATCH (cgpt 16, cvae
# 128), TIME_STEPS (cgpt 5, cvae 100), RUNS (5), SAMPLE_TEXTS (50),
# SAMPLE_BYTES (400),
# SAMPLE_N (1000), THREADS (2), CONTROL (1), FIGURES (1; 0: the
# timings alone), TIMINGS ("train sample": which to time), TMPDIR.  Needs jq and farm-bench.
set -eu
dense=${1:?usage: bench/prune-structured.sh DENSE TRAIN HELD [OUT]}
train=${2:?usage: bench/prune-structured.sh DENSE TRAIN HELD [OUT]}
held=${3:?usage: bench/prune-structured.sh DENSE TRAIN HELD [OUT]}
out=${4:-prune-structured.txt}
bin=${CG_BIN:-build/cmd}
arch=$(tar xOf "$dense" cg.json | jq -r .arch)
case $arch in
cgpt)
	cuts=${CUTS:-heads,rows:0.35 heads,rows:0.55}
	fig=bpb batch=${FT_BATCH:-16} tsteps=${TIME_STEPS:-5}
	;;
cvae)
	cuts=${CUTS:-units:0.23 units:0.41}
	fig=nelbo batch=${FT_BATCH:-128} tsteps=${TIME_STEPS:-100}
	;;
*)
	echo "prune-structured.sh: $dense: a $arch, not a cgpt or cvae" >&2
	exit 1
	;;
esac
steps=${FT_STEPS:-100}
lr=${FT_LR:-1e-3}
runs=${RUNS:-5}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

figure() { "$bin/cg-eval" --json -m "$1" -d "$held" | jq -r ".$fig"; }
nparams() {
	"$bin/cg-quantize" -q --strip "$1" f32 -o "$tmp/strip.cgm"
	"$bin/cg-inspect" --json --no-stats "$tmp/strip.cgm" |
		jq '[.tensors[] | .shape | reduce .[] as $x (1; . * $x)] | add'
}
# fine-tune $1 into $2, toward DENSE unless $3 is "plain"
finetune() {
	# shellcheck disable=SC2046
	"$bin/cg-train-step" -q -m "$1" -d "$train" --emit model \
		--steps "$steps" --batch "$batch" --opt adamw --lr "$lr" \
		--seed 2 --threads "$threads" \
		$([ "${3:-}" = plain ] || echo "--teacher $dense") -o "$2"
}
train_cmd() {
	echo "$bin/cg-train-step -q -m $1 -d $train --emit model --steps $tsteps --batch $batch --opt adamw --seed 3 --threads $threads -o $tmp/t.cgm"
}
sample_cmd() {
	if [ "$arch" = cgpt ]; then
		echo "$bin/cg-sample -m $1 -c 0 -n ${SAMPLE_TEXTS:-50} --max-bytes ${SAMPLE_BYTES:-400} --temperature 1 --seed 1 --threads $threads -o $tmp/s.txt"
	else
		echo "$bin/cg-sample -m $1 -n ${SAMPLE_N:-1000} --seed 1 --threads $threads -f pgm -o $tmp/s.pgm"
	fi
}
# farm-bench's median of row $2 ("A wall s", "A/B wall", ...) in $1
median() { awk -v r="$2" 'index($0, r) == 1 { print $(NF - 1) }' "$1"; }
paired() { # model $1, what $2 (train|sample), its name $3
	# shellcheck disable=SC2046
	farm-bench -n "$runs" --timeout 3000 --vs "$("$2"_cmd "$dense")" -- \
		$("$2"_cmd "$1") >"$tmp/fb.txt" 2>&1
	cat "$tmp/fb.txt" >>"$out"
	if [ "$2" = sample ] && [ "$arch" = cgpt ]; then
		# shellcheck disable=SC2046,SC2091
		$("$2"_cmd "$1") && na=$(wc -c <"$tmp/s.txt")
		# shellcheck disable=SC2046,SC2091
		$("$2"_cmd "$dense") && nb=$(wc -c <"$tmp/s.txt")
		echo "$3 sample: $na bytes against $nb; bytes a second, A/B:" \
			"$(echo "$na $nb $(median "$tmp/fb.txt" 'A wall s')" \
				"$(median "$tmp/fb.txt" 'B wall s')" |
				awk '{ printf "%.3f", ($1 / $3) / ($2 / $4) }')" |
			tee -a "$out"
	fi
	printf '%s %s: %s s against %s s (A/B %s, cpu %s), peak %s MiB against %s MiB\n' \
		"$3" "$2" "$(median "$tmp/fb.txt" 'A wall s')" \
		"$(median "$tmp/fb.txt" 'B wall s')" \
		"$(median "$tmp/fb.txt" 'A/B wall')" \
		"$(median "$tmp/fb.txt" 'A/B cpu')" \
		"$(median "$tmp/fb.txt" 'A peak MiB')" \
		"$(median "$tmp/fb.txt" 'B peak MiB')" | tee -a "$out"
}

n0=$(nparams "$dense")
echo "dense: $n0 parameters, $fig $(figure "$dense")" | tee -a "$out"
if [ "${CONTROL:-1}" != 0 ] && [ "${FIGURES:-1}" != 0 ]; then
	finetune "$dense" "$tmp/dense-ft.cgm" plain
	echo "dense + $steps plain steps: $fig $(figure "$tmp/dense-ft.cgm")" |
		tee -a "$out"
fi
for cut in $cuts; do
	list=${cut%:*} x=${cut#*:}
	m=$tmp/$list-$x.cgm
	"$bin/cg-prune" --structured "$list" --remove "$x" "$dense" -o "$m"
	n=$(nparams "$m")
	echo "$list $x: $n parameters ($(echo "$n $n0" |
		awk '{ printf "%.1f", 100 * (1 - $1 / $2) }')% removed)," \
		"config $(tar xOf "$m" cg.json | jq -c .config)" | tee -a "$out"
	if [ "${FIGURES:-1}" != 0 ]; then
		echo "$list $x as cut: $fig $(figure "$m")" | tee -a "$out"
		finetune "$m" "$tmp/ft.cgm"
		echo "$list $x + $steps steps toward the dense model: $fig" \
			"$(figure "$tmp/ft.cgm")" | tee -a "$out"
	fi
	for what in ${TIMINGS:-train sample}; do
		paired "$m" "$what" "$list $x"
	done
done
