#!/bin/sh
# qrun.sh - the image models (cclf, cddpm, cgan) run on their weights as
# stored in f16, bf16, q8_0, q4_0 and q4_1, against the same model in
# f32: the figure each keeps, and cg-eval's and cg-sample's peak memory
# and wall time.
#
# usage: bench/qrun.sh (from the top of the source tree, after a build in
# build/)
#
# On Fashion-MNIST (DATA), each model is trained STEPS steps of Adam,
# batch 128, seed 1 (a reduced budget: the figures are of quantizing a
# model, not of a good one):
#   judge a cclf 784-JUDGE-JUDGE-10 (JUDGE 256) at lr 1e-3, f32: the
#        generators' judge
#   clf  bench/judge.sh's cclf 784-1024-1024-10 at lr 1e-3
#   dm   cg-init's default cddpm (the MLP)
#   gan  cg-init's default cgan (the MLPs), lr 4e-4, beta1 0.5
# (MODELS: which of clf dm gan) and with CONV=1 also the convolutional
# forms, trained CONV_STEPS
# steps (default STEPS / 4):
#   cnn  cclf --conv 16 --hidden 256 --layers 1
#   unet cddpm --unet 16 --attn
#   cgan cgan --conv 32
# Each is quantized by cg-quantize --strip into every type of TYPES, and
# into f32 (the reference: the same file less the optimizer's moments,
# whose reading would count against f32 alone).  Then, for
# every model and type (f32 first), one run each of:
#   cg-eval --json on the first TEST (1000) test images (a classifier's xent and
#     acc; a generator's loss, with --judge judge.cgm, and
#     --judge-samples SAMPLES: conditional accuracy and Frechet distance,
#     drawn with --steps SSTEPS for the cddpm);
#   cg-sample -n N (N images a condition, a grid; generators only);
# with GNU time's peak RSS (%M, KiB) and wall seconds.  THREADS (1)
# threads a run.  One line a run:
#   MODEL TYPE file_KiB eval_rss_KiB eval_s [sample_rss_KiB sample_s]
#   FIGURES
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-1}
steps=${STEPS:-469}
csteps=${CONV_STEPS:-$((steps / 4))}
samples=${SAMPLES:-100}
ssteps=${SSTEPS:-50}
n=${N:-10}
types=${TYPES:-f16 bf16 q8_0 q4_0 q4_1}
conv=${CONV:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads $threads, $steps steps (conv $csteps), judge samples $samples, sampler steps $ssteps, load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
# the first TEST test images (the rest of the 10000 in other shards)
"$bin/cg-shard" -q -n $((10000 / ${TEST:-1000})) --test -o "$tmp/test" \
	"$data"

# train NAME STEPS ARCH: NAME.cgm, ARCH with cg-init's options $INIT,
# trained STEPS steps with cg-train-step's options $TRAIN
train() {
	name=$1 k=$2 arch=$3
	t0=$(date +%s)
	# shellcheck disable=SC2086 # options split on purpose
	"$bin/cg-init" -a "$arch" -d "$tmp/train-0.cgd" --seed 1 $INIT \
		-o "$tmp/$name.cgm"
	# shellcheck disable=SC2086
	"$bin/cg-train-step" -q -m "$tmp/$name.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps "$k" --batch 128 --seed 1 $TRAIN \
		--threads "$threads" -o "$tmp/$name.cgm"
	echo "# $name: cg-init -a $arch $INIT; $k steps $TRAIN: $(($(date +%s) - t0)) s"
}

models=${MODELS:-clf dm gan}
# the generators' judge: features JUDGE wide (the Frechet distance's
# matrix square root is cubic in it)
INIT="--hidden ${JUDGE:-256} --layers 2" TRAIN="--lr 1e-3" \
	train judge "$steps" cclf
for m in $models; do
	case $m in
	clf) INIT="--hidden 1024 --layers 2" TRAIN="--lr 1e-3" \
		train clf "$steps" cclf ;;
	dm) INIT="" TRAIN="" train dm "$steps" cddpm ;;
	gan) INIT="" TRAIN="--lr 4e-4 --beta1 0.5" train gan "$steps" cgan ;;
	esac
done
if [ "$conv" = 1 ]; then
	INIT="--conv 16 --hidden 256 --layers 1" TRAIN="--lr 1e-3" \
		train cnn "$csteps" cclf
	INIT="--unet 16 --attn" TRAIN="" train unet "$csteps" cddpm
	INIT="--conv 32" TRAIN="--lr 4e-4 --beta1 0.5" \
		train cgan "$csteps" cgan
	models="$models cnn unet cgan"
fi
for m in $models; do
	# without the optimizer's moments, as a model is shipped to run
	for t in f32 $types; do
		"$bin/cg-quantize" -q --strip -o "$tmp/$m-$t.cgm" "$tmp/$m.cgm" \
			"$t"
	done
done

# timed OUT COMMAND...: run it, its stdout into OUT; prints "RSS WALL".
timed() {
	out=$1
	shift
	/usr/bin/time -o "$tmp/time" -f '%M %e' "$@" >"$out"
	cat "$tmp/time"
}

for m in $models; do
	for t in f32 $types; do
		f=$tmp/$m-$t.cgm
		kib=$(($(stat -c %s "$f") / 1024))
		case $m in
		clf | cnn)
			set -- $(timed "$tmp/eval" "$bin/cg-eval" --json \
				--threads "$threads" -m "$f" -d "$tmp/test-0.cgd")
			fig=$(jq -c '{xent, acc}' "$tmp/eval")
			echo "$m $t $kib $1 $2 $fig"
			;;
		*)
			ds=""
			case $m in dm | unet) ds="--steps $ssteps" ;; esac
			# shellcheck disable=SC2086 # $ds is options
			set -- $(timed "$tmp/eval" "$bin/cg-eval" --json \
				--threads "$threads" -m "$f" -d "$tmp/test-0.cgd" \
				--judge "$tmp/judge.cgm" --judge-samples "$samples" \
				--seed 1 $ds)
			er=$1 ew=$2
			# shellcheck disable=SC2086
			set -- $(timed /dev/null "$bin/cg-sample" \
				--threads "$threads" -m "$f" -n "$n" --seed 1 $ds \
				-o "$tmp/grid.png")
			fig=$(jq -c '{loss: (.mse // .d_hinge), cond_acc, frechet}' \
				"$tmp/eval")
			echo "$m $t $kib $er $ew $1 $2 $fig"
			;;
		esac
	done
done
# BIG=1: peak memory of larger untrained models (cg-init seed 2: cclf
# and cddpm of 4 hidden layers of 2048, 14.2M and 15.7M parameters),
# cg-eval on the TEST images, cg-sample -n 1 --steps 5 of the cddpm:
#   big-MODEL TYPE file_KiB eval RSS_KiB S [sample RSS_KiB S]
if [ "${BIG:-0}" = 1 ]; then
	for a in clf dm; do
		arch=$([ $a = clf ] && echo cclf || echo cddpm)
		"$bin/cg-init" -a $arch -d "$tmp/test-0.cgd" --hidden 2048 \
			--layers 4 --seed 2 -o "$tmp/big-$a.cgm"
		for t in f32 $types; do
			f=$tmp/big-$a-$t.cgm
			"$bin/cg-quantize" -q --strip -o "$f" "$tmp/big-$a.cgm" "$t"
			r=$(timed /dev/null "$bin/cg-eval" --threads "$threads" \
				-m "$f" -d "$tmp/test-0.cgd")
			s=""
			[ $a = dm ] && s=$(timed /dev/null "$bin/cg-sample" \
				--threads "$threads" -m "$f" -n 1 --steps 5 \
				--seed 1 -o "$tmp/grid.png")
			echo "big-$a $t $(($(stat -c %s "$f") / 1024)) eval $r" \
				"sample $s"
		done
	done
fi
echo "# done, load: $(cut -d' ' -f1-3 /proc/loadavg)"
