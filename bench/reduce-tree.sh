#!/bin/bash
# reduce-tree.sh - the cost of a round as the workers grow: W = 4, 16,
# 64, 256 workers' deltas of a tiny cvae, reduced three ways on this
# one machine:
#
#   flat    one cg-reduce of the W deltas;
#   tree    reductions of FANIN (16) inputs at most, level after level,
#           until one is left (the depth is the levels);
#   sliced  SLICES (4) coordinators, each cg-reduce --slice I/4 of the
#           W deltas, then cg-reduce --join of their slices.
#
# Every worker's delta is trained for real (one step of 8 examples from
# one shard, each worker its own --seed, so each has its own identity
# and content): none is a copy.  The reductions run one after another,
# each timed alone by /usr/bin/time (wall seconds, peak RSS); a level's
# time is its slowest reduction (the ones of a level run on different
# hosts in a deployment), the tree's round the sum of its levels.
# Bytes are what the reductions of a level read: the files it takes in,
# for a level the largest of one reduction and the sum over the level.
# The sliced coordinators here read the whole deltas (a worker that
# sends each coordinator only its slice is not part of cg-train-step):
# the bytes a coordinator needs are given as W x its slice's bytes.
# It checks that the join is the flat reduction's bytes and prints how
# far the tree's values lie from the flat ones (cg-inspect --diff).
#
# usage: bench/reduce-tree.sh
# CG_BIN the programs' directory (build/cmd); DATA the dataset; WS the
# worker counts ("4 16 64 256"); FANIN (16); SLICES (4); HIDDEN the
# cvae's width (64); THREADS cg-reduce's -j (1).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
ws=${WS:-"4 16 64 256"}
F=${FANIN:-16}
N=${SLICES:-4}
hidden=${HIDDEN:-64}
j=${THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$j

max=0
for w in $ws; do [ "$w" -gt "$max" ] && max=$w; done
"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae --hidden "$hidden" --layers 1 -d "$tmp/fm-0.cgd" \
	--seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
t0=$(date +%s.%N)
for ((w = 0; w < max; w++)); do
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/fm-0.cgd" \
		--emit delta --steps 1 --batch 8 --seed $w \
		-o "$(printf '%s/d%04d.cgg' "$tmp" $w)"
done
t1=$(date +%s.%N)
S=$(stat -c %s "$tmp/d0000.cgg")

# run OUT [OPTION...] -- INPUT...: cg-reduce timed alone; prints
# "wall rss_kib bytes_in"
run() {
	local out=$1
	shift
	local opts=()
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	local bytes
	bytes=$(cat "$@" | wc -c)
	/usr/bin/time -f '%e %M' -o "$tmp/one" "$bin/cg-reduce" -q -j "$j" \
		"${opts[@]}" -o "$out" "$@"
	echo "$(cat "$tmp/one") $bytes"
}
# level LINES: "wall rss bytes" per reduction -> "n maxwall maxrss maxbytes sumbytes"
level() {
	awk '{ n++; if ($1 > w) w = $1; if ($2 > r) r = $2; if ($3 > b) b = $3; s += $3 }
		END { printf "%d %.3f %d %d %d\n", n, w, r, b, s }'
}

printf '# %d workers trained in %.1f s (cg-train-step --steps 1 --batch 8, one call each)\n' \
	"$max" "$(echo "$t1 - $t0" | bc)"
printf '# cvae --hidden %s --layers 1: %s parameters, a delta %s bytes; cg-reduce -j %s\n' \
	"$hidden" "$P" "$S" "$j"
printf '| W | how | level | reductions | slowest s | peak RSS MiB | bytes in (largest reduction) | bytes in (level) |\n'
printf '|---:|---|---:|---:|---:|---:|---:|---:|\n'
for W in $ws; do
	ins=()
	for ((w = 0; w < W; w++)); do ins+=("$(printf '%s/d%04d.cgg' "$tmp" $w)"); done
	# flat
	read -r n wall rss b s < <(run "$tmp/flat.cgg" -- "${ins[@]}" | level)
	printf '| %d | flat | 1 | %d | %s | %.1f | %d | %d |\n' "$W" "$n" "$wall" \
		"$(echo "$rss / 1024" | bc -l)" "$b" "$s"
	flat_round=$wall
	# tree of fan-in F
	cur=("${ins[@]}")
	lv=0
	tree_round=0
	while [ "${#cur[@]}" -gt 1 ] || [ "$lv" -eq 0 ]; do
		lv=$((lv + 1))
		next=()
		: >"$tmp/lv"
		for ((g = 0; g < ${#cur[@]}; g += F)); do
			o="$tmp/t$lv-$g.cgg"
			run "$o" -- "${cur[@]:g:F}" >>"$tmp/lv"
			next+=("$o")
		done
		read -r n wall rss b s < <(level <"$tmp/lv")
		printf '| %d | tree %d | %d | %d | %s | %.1f | %d | %d |\n' "$W" "$F" \
			"$lv" "$n" "$wall" "$(echo "$rss / 1024" | bc -l)" "$b" "$s"
		tree_round=$(echo "$tree_round + $wall" | bc)
		cur=("${next[@]}")
	done
	depth=$lv
	cp "${cur[0]}" "$tmp/tree.cgg"
	rm -f "$tmp"/t[0-9]*-*.cgg
	# sliced among N coordinators, then the join
	: >"$tmp/lv"
	slice_bytes=0
	for ((i = 1; i <= N; i++)); do
		run "$tmp/s$i.cgg" --slice $i/$N -- "${ins[@]}" >>"$tmp/lv"
		sb=$(tar xOf "$tmp/s$i.cgg" cg.json | jq '[.tensors[].bytes] | add')
		[ "$sb" -gt "$slice_bytes" ] && slice_bytes=$sb
	done
	read -r n wall rss b s < <(level <"$tmp/lv")
	printf '| %d | sliced %d | 1 | %d | %s | %.1f | %d (needs %d) | %d (needs %d) |\n' \
		"$W" "$N" "$n" "$wall" "$(echo "$rss / 1024" | bc -l)" "$b" \
		$((W * slice_bytes)) "$s" $((W * S))
	sl=("$tmp"/s[0-9]*.cgg)
	jb=$(cat "${sl[@]}" | wc -c)
	/usr/bin/time -f '%e %M' -o "$tmp/one" "$bin/cg-reduce" -q --join \
		"${sl[@]}" -o "$tmp/joined.cgg"
	read -r jw jr <"$tmp/one"
	printf '| %d | join | 2 | 1 | %s | %.1f | %d | %d |\n' "$W" "$jw" \
		"$(echo "$jr / 1024" | bc -l)" "$jb" "$jb"
	cmp -s "$tmp/joined.cgg" "$tmp/flat.cgg" && same=yes || same=NO
	rm -f "$tmp"/s[0-9]*.cgg
	d=$("$bin/cg-inspect" --diff --json "$tmp/flat.cgg" "$tmp/tree.cgg" |
		jq -s '[.[].max_abs] | max')
	m=$("$bin/cg-inspect" --json "$tmp/flat.cgg" |
		jq '[.tensors[] | ([.min, .max] | map(if . < 0 then -. else . end) | max)] | max')
	echo "$W $depth $flat_round $tree_round $same $d $m" >>"$tmp/summary"
done
printf '\n| W | depth (fan-in %d) | flat round s | tree round s (sum of slowest per level) | join == flat bytes | max abs(tree - flat) | max abs(flat) |\n' "$F"
printf '|---:|---:|---:|---:|---|---:|---:|\n'
awk '{ printf "| %d | %d | %s | %s | %s | %.3g | %.3g |\n", $1, $2, $3, $4, $5, $6, $7 }' \
	"$tmp/summary"
