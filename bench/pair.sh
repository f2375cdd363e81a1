#!/bin/sh
# pair.sh - one build of cg against another on bench/speed.sh's training
# calls, in turn (A B A B ...), so that a change that should not move the
# speed (a refactor) is shown not to: the ratio of each pair, and their
# median, per model.
#
# usage: bench/pair.sh A_BIN B_BIN (each a folder of cg programs)
#
# Environment (defaults in brackets):
#   THREADS     threads [2]
#   MODELS      some of "cvae cgpt cddpm cgan" [all four]
#   RUNS        pairs per model [7]
#   CVAE_STEPS, CGPT_STEPS, CDDPM_STEPS, CGAN_STEPS   steps of a call
#               [100, 20, 100, 100], as speed.sh
#
# Both builds train the same model files (made by A's cg-init) on the
# same shards, with speed.sh's options; each call's output is compared
# with the other build's, so a pair that differs in bytes is said.
# Prints one line per model: median wall seconds of A and B, the median
# of the pairs' A/B ratios, and their min-max.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: bench/pair.sh A_BIN B_BIN" >&2
	exit 2
fi
a=$1 b=$2
threads=${THREADS:-2}
models=${MODELS:-cvae cgpt cddpm cgan}
runs=${RUNS:-7}
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }

"$a/cg-shard" -q -n 1 -o "$tmp/fm" "$fmnist"
"$a/cg-shard" -q -n 1 -o "$tmp/ft" "$fortunes"

# call BIN MODEL OUT: one speed.sh training call
call() {
	bin=$1 m=$2 out=$3
	case $m in
	cvae) set -- -m "$tmp/cvae.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 1e-3 --steps "${CVAE_STEPS:-100}" ;;
	cgpt) set -- -m "$tmp/cgpt.cgm" -d "$tmp/ft-0.cgd" --batch 16 \
		--opt adamw --lr 3e-4 --wd 0.1 --steps "${CGPT_STEPS:-20}" ;;
	cddpm) set -- -m "$tmp/cddpm.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 1e-3 --steps "${CDDPM_STEPS:-100}" ;;
	cgan) set -- -m "$tmp/cgan.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 4e-4 --beta1 0.5 --beta2 0.999 \
		--steps "${CGAN_STEPS:-100}" ;;
	esac
	"$bin/cg-train-step" -q "$@" --emit model --seed 1 \
		--threads "$threads" -o "$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-6s %10s %10s %8s %17s\n' model "A s" "B s" "A/B" "min-max"
for m in $models; do
	case $m in
	cvae) "$a/cg-init" -a cvae -d "$tmp/fm-0.cgd" --hidden 512 \
		--layers 2 --latent 32 --seed 1 -o "$tmp/cvae.cgm" ;;
	cgpt) "$a/cg-init" -a cgpt -d "$tmp/ft-0.cgd" --context 128 \
		--width 256 --layers 4 --heads 4 --seed 1 -o "$tmp/cgpt.cgm" ;;
	*) "$a/cg-init" -a "$m" -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/$m.cgm" ;;
	esac
	call "$a" "$m" "$tmp/warm.cgm" # one warm-up each, not counted
	call "$b" "$m" "$tmp/warm.cgm"
	: >"$tmp/pairs"
	i=0
	while [ "$i" -lt "$runs" ]; do
		t0=$(now)
		call "$a" "$m" "$tmp/a.cgm"
		t1=$(now)
		call "$b" "$m" "$tmp/b.cgm"
		t2=$(now)
		echo "$t0 $t1 $t2" | awk '{ print $2 - $1, $3 - $2, ($2 - $1) / ($3 - $2) }' >>"$tmp/pairs"
		cmp -s "$tmp/a.cgm" "$tmp/b.cgm" || echo "$m: the two builds' outputs differ" >&2
		i=$((i + 1))
	done
	ma=$(cut -d' ' -f1 "$tmp/pairs" | median)
	mb=$(cut -d' ' -f2 "$tmp/pairs" | median)
	mr=$(cut -d' ' -f3 "$tmp/pairs" | median)
	lo=$(cut -d' ' -f3 "$tmp/pairs" | sort -g | head -n 1)
	hi=$(cut -d' ' -f3 "$tmp/pairs" | sort -g | tail -n 1)
	printf '%-6s %10.3f %10.3f %8.3f %8.3f-%.3f\n' "$m" "$ma" "$mb" "$mr" "$lo" "$hi"
done
