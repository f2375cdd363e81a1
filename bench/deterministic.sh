#!/bin/sh
# deterministic.sh - what --deterministic costs: examples per second of
# cg-train-step grad calls of the cvae and the cgpt of bench/speed.sh,
# default against --deterministic (the built-in matrix kernel instead of
# the BLAS), in the build under test.
#
# The two kinds of call alternate, REPS of each (default 5), each kind
# first in every other pair, after one untimed call of each; a call's
# figure is its examples over its training seconds (--log: reading the
# inputs is not counted).  Prints one line per model: the median
# examples/s of each kind and their ratio.
#
# usage: bench/deterministic.sh
# CG_BIN overrides the programs' directory (build/cmd); FMNIST and
# FORTUNES the datasets; REPS the calls of each kind (5); THREADS the
# calls' -j (0: every core).
set -eu
bin=${CG_BIN:-build/cmd}
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
reps=${REPS:-5}
j=${THREADS:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$fmnist"
"$bin/cg-shard" -q -n 1 -o "$tmp/ft" "$fortunes"
"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" --hidden 512 --layers 2 \
	--latent 32 --seed 1 -o "$tmp/cvae.cgm"
"$bin/cg-init" -a cgpt -d "$tmp/ft-0.cgd" --context 128 --width 256 \
	--layers 4 --heads 4 --seed 1 -o "$tmp/cgpt.cgm"

# call MODEL SHARD STEPS BATCH [--deterministic]: examples/s of one call
call() {
	m=$1 d=$2 k=$3 b=$4
	shift 4
	rm -f "$tmp/log"
	"$bin/cg-train-step" -q -j "$j" -m "$tmp/$m.cgm" -d "$tmp/$d" \
		--steps "$k" --batch "$b" --seed 1 --log "$tmp/log" \
		-o "$tmp/g.cgg" "$@"
	jq '.samples / .seconds' "$tmp/log"
}

echo "model  default_ex/s  deterministic_ex/s  ratio   (median of $reps, -j $j)"
for spec in "cvae fm-0.cgd 20 128" "cgpt ft-0.cgd 4 16"; do
	# shellcheck disable=SC2086 # spec is words
	set -- $spec
	call "$@" >/dev/null
	call "$@" --deterministic >/dev/null
	: >"$tmp/a"
	: >"$tmp/b"
	i=0
	while [ $i -lt "$reps" ]; do
		if [ $((i % 2)) -eq 0 ]; then
			call "$@" >>"$tmp/a"
			call "$@" --deterministic >>"$tmp/b"
		else
			call "$@" --deterministic >>"$tmp/b"
			call "$@" >>"$tmp/a"
		fi
		i=$((i + 1))
	done
	a=$(median <"$tmp/a")
	b=$(median <"$tmp/b")
	printf '%s  %.1f  %.1f  %.3f\n' "$1" "$a" "$b" \
		"$(echo "$b / $a" | bc -l)"
done
