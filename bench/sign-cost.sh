#!/bin/sh
# sign-cost.sh - what verifying signed files costs: cg-reduce of 4
# deltas of a cvae of about 10M parameters (--hidden 2048 --layers 2),
# the deltas signed, each by its worker's key, and checked against a
# trust list of the four (--trust), against the same deltas unsigned and
# no trust list.  Every read checks every
# tensor's SHA-256 either way; the signature adds one Ed25519 check of
# the manifest a file, and the trust list one lookup.
#
# After one untimed run of each (the inputs then in the page cache), the
# two kinds of run alternate, REPS of each (default 5), each kind first
# in every other pair; the median wall time of each is printed, with
# their ratio.
#
# usage: bench/sign-cost.sh
# CG_BIN overrides the programs' directory (build/cmd); DATA the dataset;
# REPS the runs of each kind (5); THREADS cg-reduce's -j (1).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
reps=${REPS:-5}
j=${THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$bin/cg-key" -o "$tmp/k"
"$bin/cg-shard" -q -n 1 --sign "$tmp/k" -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae --hidden 2048 --layers 2 -d "$tmp/fm-0.cgd" \
	--seed 1 --sign "$tmp/k" -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
# a key a worker: cg-reduce counts one update a key and model
: >"$tmp/trusted"
for w in 0 1 2 3; do
	"$bin/cg-key" -o "$tmp/k$w"
	cat "$tmp/k$w.pub" >>"$tmp/trusted"
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/fm-0.cgd" \
		--emit delta --steps 1 --batch 32 --seed $w -o "$tmp/u$w.cgg"
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/fm-0.cgd" \
		--emit delta --steps 1 --batch 32 --seed $w \
		--sign "$tmp/k$w" -o "$tmp/s$w.cgg"
done
: >"$tmp/tu"
: >"$tmp/ts"
r=0
unsigned() {
	t0=$(now)
	"$bin/cg-reduce" -j "$j" "$tmp"/u?.cgg -o "$tmp/ru.cgg"
	echo "$(now) - $t0" | bc -l >>"$tmp/tu"
}
signed() {
	t0=$(now)
	"$bin/cg-reduce" -j "$j" --trust "$tmp/trusted" "$tmp"/s?.cgg \
		-o "$tmp/rs.cgg"
	echo "$(now) - $t0" | bc -l >>"$tmp/ts"
}
# one of each first, not timed: the inputs in the page cache
"$bin/cg-reduce" "$tmp"/u?.cgg -o "$tmp/ru.cgg"
"$bin/cg-reduce" --trust "$tmp/trusted" "$tmp"/s?.cgg -o "$tmp/rs.cgg"
# then the two alternate, each first in every other pair
while [ $r -lt "$reps" ]; do
	r=$((r + 1))
	if [ $((r % 2)) = 1 ]; then
		unsigned
		signed
	else
		signed
		unsigned
	fi
done
mu=$(median <"$tmp/tu")
ms=$(median <"$tmp/ts")
printf '# cg-reduce -j %s of 4 deltas of a cvae of %s parameters (%s bytes each), median of %s runs each, alternating\n' \
	"$j" "$P" "$(stat -c %s "$tmp/u0.cgg")" "$reps"
printf '%-30s %8s\n' run seconds
printf '%-30s %8.3f\n' unsigned "$mu"
printf '%-30s %8.3f\n' "signed, --trust" "$ms"
printf '%-30s %8.3f\n' "ratio" "$(echo "$ms / $mu" | bc -l)"
