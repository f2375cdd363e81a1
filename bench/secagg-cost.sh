#!/bin/sh
# secagg-cost.sh - what masking costs: a worker's delta of a cvae of
# about 10M parameters (--hidden 2048 --layers 2), written masked among 3
# peers (--mask) against written dense f32 through the same codec path
# (--codec f32), and cg-reduce of the 3 masked deltas against the 3
# plain ones; and the bytes of each file.
#
# The encoding time is cg-train-step's own figure (--log's
# encode_seconds: the update's file made from the trained delta, the
# masks' ChaCha20 streams included for --mask); the reduction is timed
# whole.  After one untimed run of each kind, REPS runs of each (default
# 5) alternate, each kind first in every other pair; medians are
# printed, with their ratio.
#
# usage: bench/secagg-cost.sh
# CG_BIN overrides the programs' directory (build/cmd); DATA the dataset;
# REPS the runs of each kind (5); THREADS the programs' -j (1).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
reps=${REPS:-5}
j=${THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for w in 0 1 2; do "$bin/cg-key" --x25519 -o "$tmp/k$w"; done
cat "$tmp"/k?.pub >"$tmp/peers"
"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae --hidden 2048 --layers 2 -d "$tmp/fm-0.cgd" \
	--seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
step() { # step KIND W: one worker's delta, its encode_seconds logged
	if [ "$1" = masked ]; then
		set -- "$1" "$2" --mask "$tmp/k$2" --peers "$tmp/peers"
	else
		set -- "$1" "$2" --codec f32
	fi
	kind=$1 w=$2
	shift 2
	"$bin/cg-train-step" -q -j "$j" -m "$tmp/m.cgm" -d "$tmp/fm-0.cgd" \
		--emit delta --steps 1 --batch 32 --seed "$w" "$@" \
		--log "$tmp/log-$kind" -o "$tmp/$kind$w.cgg"
}
reduce() { # reduce KIND: the 3 deltas of KIND, timed
	t0=$(now)
	"$bin/cg-reduce" -j "$j" "$tmp/$1"?.cgg -o "$tmp/r-$1.cgg"
	echo "$(now) - $t0" | bc -l >>"$tmp/t-$1"
}
for w in 0 1 2; do
	step plain $w
	step masked $w
done
: >"$tmp/log-plain"
: >"$tmp/log-masked"
reduce plain
reduce masked
: >"$tmp/t-plain"
: >"$tmp/t-masked"
r=0
while [ $r -lt "$reps" ]; do
	r=$((r + 1))
	if [ $((r % 2)) = 1 ]; then set -- plain masked; else set -- masked plain; fi
	for k in "$@"; do
		step "$k" $((r % 3))
		reduce "$k"
	done
done
ep=$(jq .encode_seconds "$tmp/log-plain" | median)
em=$(jq .encode_seconds "$tmp/log-masked" | median)
rp=$(median <"$tmp/t-plain")
rm_=$(median <"$tmp/t-masked")
printf '# a cvae of %s parameters, 3 peers, -j %s, median of %s runs each, alternating\n' \
	"$P" "$j" "$reps"
printf '%-34s %12s %12s %8s\n' what plain masked ratio
printf '%-34s %12.3f %12.3f %8.2f\n' "encode one delta, s" "$ep" "$em" \
	"$(echo "$em / $ep" | bc -l)"
printf '%-34s %12.3f %12.3f %8.2f\n' "cg-reduce of 3 deltas, s" "$rp" "$rm_" \
	"$(echo "$rm_ / $rp" | bc -l)"
bp=$(stat -c %s "$tmp/plain0.cgg")
bm=$(stat -c %s "$tmp/masked0.cgg")
printf '%-34s %12s %12s %8.2f\n' "bytes of one delta" "$bp" "$bm" \
	"$(echo "$bm / $bp" | bc -l)"
