#!/bin/bash
# seal-cost.sh - what sealed files cost: cg-reduce of 4 deltas of the
# README's cvae (cg-init's defaults), the deltas sealed (--encrypt-to)
# and opened (--seal-key), the reduction sealed too, against the same
# deltas and reduction in the clear.  A sealed read opens the whole file
# (AES-256-GCM, a file's chunks in parallel, a pipe's one at a time)
# into anonymous memory before it reads it in place as a plain one; a
# sealed write seals the archive's bytes as they go out.  With PIPE=1
# the first of the four inputs comes through a pipe (cat u0.cgg |
# cg-reduce - u1.cgg ...), in both kinds of run.
#
# Then, for scale, a DiLoCo worker's call on the same model: 50 steps of
# batch 32 on a quarter of the data, --emit delta with --state, its
# model, shard and state sealed and what it writes sealed, against the
# same in the clear (WORKER_REPS of each, default 3).
#
# After one untimed run of each (the inputs then in the page cache), the
# two kinds of run alternate, REPS of each (default 11), each kind first
# in every other pair; the median wall time of each is printed, with
# their ratio, and the median CPU time (user + system) of each.
#
# usage: bench/seal-cost.sh
# CG_BIN overrides the programs' directory (build/cmd); DATA the dataset;
# REPS the runs of each kind (11); THREADS cg-reduce's and
# cg-train-step's -j (0: all cores); WORKER_REPS (3; 0: no worker's
# call); PIPE (0; 1: the first input through a pipe).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
reps=${REPS:-11}
wreps=${WORKER_REPS:-3}
j=${THREADS:-0}
pipe=${PIPE:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$bin/cg-key" --x25519 -o "$tmp/k"
"$bin/cg-shard" -q -n 4 -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
for w in 0 1 2 3; do
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/fm-$w.cgd" \
		--emit delta --steps 1 --batch 32 --seed 1 -o "$tmp/u$w.cgg"
	"$bin/cg-convert" -t cg --encrypt-to "$tmp/k.pub" "$tmp/u$w.cgg" \
		-o "$tmp/s$w.cgg"
done
: >"$tmp/tu"
: >"$tmp/ts"
# time_to LOG CMD...: CMD's wall and CPU (user + system) seconds
# appended to LOG
time_to() {
	local log=$1 TIMEFORMAT='%3R %3U %3S'
	shift
	{ time "$@" 2>/dev/null; } 2>"$tmp/one"
	awk '{ print $1, $2 + $3 }' "$tmp/one" >>"$log"
}
# reduce_to LOG IN0 ARG...: cg-reduce -j J IN0 ARG... timed into LOG;
# IN0 through a pipe (cat IN0 | cg-reduce -j J - ARG...) where PIPE=1
reduce_to() {
	local log=$1 in0=$2
	shift 2
	if [ "$pipe" = 1 ]; then
		time_to "$log" sh -c 'f=$1; shift; cat "$f" | "$@"' sh "$in0" \
			"$bin/cg-reduce" -j "$j" - "$@"
	else
		time_to "$log" "$bin/cg-reduce" -j "$j" "$in0" "$@"
	fi
}
plain() {
	reduce_to "$tmp/tu" "$tmp/u0.cgg" "$tmp"/u[123].cgg -o "$tmp/ru.cgg"
}
sealed() {
	reduce_to "$tmp/ts" "$tmp/s0.cgg" --seal-key "$tmp/k" \
		--encrypt-to "$tmp/k.pub" "$tmp"/s[123].cgg -o "$tmp/rs.cgg"
}
# one of each first, not timed: the inputs in the page cache
plain
sealed
: >"$tmp/tu"
: >"$tmp/ts"
# the sealed reduction opens to the plain one's bytes
"$bin/cg-convert" -t cg --seal-key "$tmp/k" "$tmp/rs.cgg" -o "$tmp/ro.cgg"
cmp "$tmp/ro.cgg" "$tmp/ru.cgg"
r=0
while [ $r -lt "$reps" ]; do
	r=$((r + 1))
	if [ $((r % 2)) = 1 ]; then
		plain
		sealed
	else
		sealed
		plain
	fi
done
mu=$(cut -d' ' -f1 "$tmp/tu" | median)
ms=$(cut -d' ' -f1 "$tmp/ts" | median)
cu=$(cut -d' ' -f2 "$tmp/tu" | median)
cs=$(cut -d' ' -f2 "$tmp/ts" | median)
printf '# cg-reduce -j %s of 4 deltas of a cvae of %s parameters (%s bytes each, %s sealed; PIPE=%s), median of %s runs each, alternating\n' \
	"$j" "$P" "$(stat -c %s "$tmp/u0.cgg")" "$(stat -c %s "$tmp/s0.cgg")" "$pipe" "$reps"
printf '%-24s %8s %8s\n' run wall_s cpu_s
printf '%-24s %8.3f %8.3f\n' plain "$mu" "$cu"
printf '%-24s %8.3f %8.3f\n' "sealed, opened" "$ms" "$cs"
printf '%-24s %8.3f %8.3f\n' ratio "$(echo "$ms / $mu" | bc -l)" \
	"$(echo "$cs / $cu" | bc -l)"

[ "$wreps" -gt 0 ] || exit 0
"$bin/cg-convert" -t cg --encrypt-to "$tmp/k.pub" "$tmp/m.cgm" -o "$tmp/sm.cgm"
"$bin/cg-convert" -t cg --encrypt-to "$tmp/k.pub" "$tmp/fm-1.cgd" \
	-o "$tmp/sfm-1.cgd"
: >"$tmp/wu"
: >"$tmp/ws"
wplain() {
	time_to "$tmp/wu" "$bin/cg-train-step" -q -j "$j" -m "$tmp/m.cgm" \
		-d "$tmp/fm-1.cgd" --emit delta --steps 50 --batch 32 \
		--state "$tmp/wu.state" -o "$tmp/wu.cgg"
}
wsealed() {
	time_to "$tmp/ws" "$bin/cg-train-step" -q -j "$j" --seal-key "$tmp/k" \
		--encrypt-to "$tmp/k.pub" -m "$tmp/sm.cgm" -d "$tmp/sfm-1.cgd" \
		--emit delta --steps 50 --batch 32 --state "$tmp/ws.state" \
		-o "$tmp/ws.cgg"
}
r=0
while [ $r -lt "$wreps" ]; do
	r=$((r + 1))
	if [ $((r % 2)) = 1 ]; then
		wplain
		wsealed
	else
		wsealed
		wplain
	fi
done
mu=$(cut -d' ' -f1 "$tmp/wu" | median)
ms=$(cut -d' ' -f1 "$tmp/ws" | median)
cu=$(cut -d' ' -f2 "$tmp/wu" | median)
cs=$(cut -d' ' -f2 "$tmp/ws" | median)
printf '# cg-train-step -j %s --emit delta --steps 50 --batch 32 --state, shard of %s bytes, median of %s runs each, alternating\n' \
	"$j" "$(stat -c %s "$tmp/fm-1.cgd")" "$wreps"
printf '%-24s %8s %8s\n' run wall_s cpu_s
printf '%-24s %8.3f %8.3f\n' plain "$mu" "$cu"
printf '%-24s %8.3f %8.3f\n' "sealed, opened" "$ms" "$cs"
printf '%-24s %8.3f %8.3f\n' ratio "$(echo "$ms / $mu" | bc -l)" \
	"$(echo "$cs / $cu" | bc -l)"
