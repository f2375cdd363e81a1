#!/bin/sh
# codec-cost.sh - what the update codecs cost: encoding inside a 50-step
# cg-train-step call (its --log's encode_seconds against its seconds),
# decoding (cg-reduce of 4 coded deltas against the same call: the whole
# cg-reduce call, reading, checking and writing included, and the part
# its --log gives to folding the inputs in, which decodes), and the
# memory of cg-reduce over 8 coded updates of a model of about 10M
# parameters (peak RSS against one dense accumulator plus one input).
#
# Each figure is the least of REPS runs (default 5): on a shared machine
# the least is the one the others disturbed least.  "first" is a
# worker's first call (a fresh state: its residual starts at zero),
# "next" the call after it on the same state (the residual kept), as
# every later round runs.
#
# usage: bench/codec-cost.sh [CODEC...]   (default: the codecs below)
# CG_BIN overrides the programs' directory (build/cmd); DATA the dataset;
# REPS the runs of each figure (5); MEMORY=0 leaves out the memory part.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ $# -gt 0 ] || set -- f16 q8 q4 q2 q2:sr topk:0.01 \
	topk:0.0625,chunk=64,val=q2_0 sign lowrank:4
now() { date +%s.%N; }

"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/w" "$data"
"$bin/cg-init" -a cvae -d "$tmp/w-0.cgd" --seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
printf '# cvae, %s parameters; 50 Adam steps of batch 32, one thread; seconds from --log, the least of %s runs\n' "$P" "${REPS:-5}"
reps=${REPS:-5}
printf '%-32s %7s %7s %6s %7s %6s %7s %6s %7s %6s\n' codec call_s first_s first% next_s next% reduce_s red% fold_s fold%
min() { awk 'NR == 1 || $1 < m { m = $1 } END { print m }'; }
for c in "$@"; do
	: >"$tmp/first"
	: >"$tmp/next"
	: >"$tmp/red"
	: >"$tmp/fold"
	r=0
	while [ $r -lt "$reps" ]; do
		r=$((r + 1))
		rm -f "$tmp"/*.state "$tmp/log"
		for w in 0 1 2 3; do
			"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/w-$w.cgd" \
				--emit delta --steps 50 --batch 32 --seed 1 -j 1 \
				--codec "$c" --state "$tmp/s$w.state" --log "$tmp/log" \
				-o "$tmp/u$w.cgu"
		done
		# worker 0 again, on the state its first call left
		cp "$tmp/s0.state" "$tmp/s0b.state"
		"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/w-0.cgd" \
			--emit delta --steps 50 --batch 32 --seed 1 -j 1 \
			--codec "$c" --state "$tmp/s0b.state" --log "$tmp/log" \
			-o "$tmp/v0.cgu"
		t0=$(now)
		# (programs older than cg-reduce --log: no fold column, 0)
		if "$bin/cg-reduce" --help | grep -q -- --log; then
			"$bin/cg-reduce" -j 1 --log "$tmp/rlog" "$tmp"/u?.cgu \
				-o "$tmp/r.cgg"
		else
			"$bin/cg-reduce" -j 1 "$tmp"/u?.cgu -o "$tmp/r.cgg"
			echo '{"fold_seconds": 0}' >"$tmp/rlog"
		fi
		t1=$(now)
		tail -1 "$tmp/rlog" | jq .fold_seconds >>"$tmp/fold"
		head -1 "$tmp/log" | jq -r '"\(.seconds) \(.encode_seconds)"' >>"$tmp/first"
		tail -1 "$tmp/log" | jq -r '"\(.seconds) \(.encode_seconds)"' >>"$tmp/next"
		echo "$t1 - $t0" | bc -l >>"$tmp/red"
	done
	call=$(cut -d' ' -f1 "$tmp/first" "$tmp/next" | min)
	enc=$(cut -d' ' -f2 "$tmp/first" | min)
	enc2=$(cut -d' ' -f2 "$tmp/next" | min)
	red=$(min <"$tmp/red")
	fold=$(min <"$tmp/fold")
	printf '%-32s %7.3f %7.4f %6.2f %7.4f %6.2f %7.4f %6.2f %7.4f %6.2f\n' \
		"$c" "$call" \
		"$enc" "$(echo "100 * $enc / $call" | bc -l)" \
		"$enc2" "$(echo "100 * $enc2 / $call" | bc -l)" \
		"$red" "$(echo "100 * $red / (4 * $call)" | bc -l)" \
		"$fold" "$(echo "100 * $fold / (4 * $call)" | bc -l)"
done

[ "${MEMORY:-1}" != 0 ] || exit 0
# memory: 8 coded updates of a cvae of about 10M parameters
"$bin/cg-init" -a cvae -d "$tmp/w-0.cgd" --hidden 2048 --layers 2 --seed 1 \
	-o "$tmp/big.cgm"
P=$("$bin/cg-inspect" --json "$tmp/big.cgm" | jq '[.tensors[].count] | add')
printf '\n# cg-reduce of 8 coded deltas of a cvae of %s parameters: peak RSS\n' "$P"
printf '%-32s %12s %12s %12s %8s\n' codec input_bytes acc+input peak_rss ratio
for c in topk:0.01 q2 q8; do
	for i in 0 1 2 3 4 5 6 7; do
		"$bin/cg-train-step" -q -m "$tmp/big.cgm" -d "$tmp/w-$((i % 4)).cgd" \
			--emit delta --steps 1 --batch 8 --seed "$i" --codec "$c" \
			--no-error-feedback -o "$tmp/b$i.cgu"
	done
	in=$(stat -c %s "$tmp/b0.cgu")
	want=$((4 * P + in))
	/usr/bin/time -f %M -o "$tmp/rss" "$bin/cg-reduce" "$tmp"/b?.cgu \
		-o "$tmp/r.cgg"
	rss=$(($(cat "$tmp/rss") * 1024))
	printf '%-32s %12d %12d %12d %8.3f\n' "$c" "$in" "$want" "$rss" \
		"$(echo "$rss / $want" | bc -l)"
done
# the process itself, reading one small file: what any run costs
/usr/bin/time -f %M -o "$tmp/rss" "$bin/cg-reduce" "$tmp/u0.cgu" -o "$tmp/r.cgg"
printf '# (cg-reduce of one small update: peak RSS %d bytes: libraries and runtime)\n' \
	$(($(cat "$tmp/rss") * 1024))
