#!/bin/sh
# reduce-ops.sh - what each cg-reduce operation costs: 4 deltas of a
# cvae of about 12M parameters (--hidden 2048 --layers 2, 47 MB each),
# reduced by each operation of the table; wall time and peak RSS.
#
# The streaming operations (mean, sum) fold each input into one
# accumulator; the others keep every input mapped and walk them a slice
# at a time (clip-mean twice).  Every operation first checks every value
# of every input finite.  Peak RSS counts the pages of the mapped inputs
# that were touched, so it is about the inputs plus the output whichever
# path runs; what the sliced path adds of its own is a slice per input.
#
# After one untimed run of each (the inputs in the page cache), REPS
# rounds (default 5) of every operation in turn; the median wall time
# and the largest peak RSS of each are printed.
#
# With BASE (a cg-reduce of before the finite check, commit 65d2a6a),
# REPS pairs of the mean by BASE and by CG_BIN's cg-reduce follow, each
# first in every other pair: the cost of the check, as a ratio of median
# wall times.
#
# usage: bench/reduce-ops.sh
# CG_BIN overrides the programs' directory (build/cmd); DATA the dataset;
# REPS the rounds (5); THREADS cg-reduce's -j (1); OPS the operations
# ("mean sum median trimmed-mean:0.25 clip-mean:5"); BASE (none).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
reps=${REPS:-5}
j=${THREADS:-1}
ops=${OPS:-"mean sum median trimmed-mean:0.25 clip-mean:5"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae --hidden 2048 --layers 2 -d "$tmp/fm-0.cgd" \
	--seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
for w in 0 1 2 3; do
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/fm-0.cgd" \
		--emit delta --steps 1 --batch 32 --seed $w -o "$tmp/d$w.cgg"
done
bytes=$(stat -c %s "$tmp/d0.cgg")
for op in $ops; do
	"$bin/cg-reduce" -j "$j" --op "$op" "$tmp"/d?.cgg -o "$tmp/r.cgg"
	: >"$tmp/t.$op"
done
r=0
while [ "$r" -lt "$reps" ]; do
	for op in $ops; do
		/usr/bin/time -f '%e %M' -a -o "$tmp/t.$op" "$bin/cg-reduce" \
			-j "$j" --op "$op" "$tmp"/d?.cgg -o "$tmp/r.cgg"
	done
	r=$((r + 1))
done
printf '# cg-reduce -j %s of 4 deltas of a cvae of %s parameters (%s bytes each), median of %s runs\n' \
	"$j" "$P" "$bytes" "$reps"
printf '| op | wall s | peak RSS MiB |\n|---|---:|---:|\n'
for op in $ops; do
	printf '| %s | %s | %s |\n' "$op" \
		"$(cut -d' ' -f1 "$tmp/t.$op" | median)" \
		"$(cut -d' ' -f2 "$tmp/t.$op" | sort -g | tail -1 |
			awk '{ printf "%.0f", $1 / 1024 }')"
done
[ -n "${BASE:-}" ] || exit 0
"$BASE" -j "$j" "$tmp"/d?.cgg -o "$tmp/r.cgg"
: >"$tmp/t.base"
: >"$tmp/t.this"
r=0
while [ "$r" -lt "$reps" ]; do
	order="base this"
	[ $((r % 2)) = 0 ] || order="this base"
	for k in $order; do
		p=$bin/cg-reduce
		[ "$k" = this ] || p=$BASE
		t0=$(now)
		"$p" -j "$j" "$tmp"/d?.cgg -o "$tmp/r.cgg"
		t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$tmp/t.$k"
	done
	r=$((r + 1))
done
b=$(median <"$tmp/t.base")
t=$(median <"$tmp/t.this")
printf '# the mean, %s pairs alternating: without the finite check %.3f s, with it %.3f s, ratio %.3f\n' \
	"$reps" "$b" "$t" "$(echo "$t / $b" | bc -l)"
