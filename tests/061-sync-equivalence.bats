#!/usr/bin/env bats
#
# 061-sync-equivalence.bats - synchronous data parallel training with four
# workers of batch b is one worker with batch 4b, step for step.
#
# Why it must hold: a round-robin split puts example 4j+w of the input in
# shard w at position j; read in sequential order, worker w's micro-batch
# s is positions b*s .. b*s+b-1 of its shard, so the four workers together
# see examples 4b*s .. 4b*s+4b-1, the one worker's micro-batch s.  The
# model's noise is seeded by (seed, model step, micro-batch) and each
# example's index in the input, not by its place in a batch; the weighted
# mean of four gradients of batch b is the gradient of their union.  So
# every round's reduced gradient equals the single worker's up to float
# rounding, and so do the models after each optimizer step.
#
# The main test runs 20 rounds on the first 2048 examples of Fashion-MNIST
# where /usr/share/datasets/fashion-mnist exists; a smaller one runs on the
# fixture everywhere and wraps around the shards several times.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

FULL=/usr/share/datasets/fashion-mnist

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# manifest FILE FILTER: jq -r FILTER over FILE's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

# values FILE TENSOR: the tensor's values, one per line
values() {
	if command -v cg-inspect >/dev/null; then
		cg-inspect --tensor "$2" "$1"
	else
		tar xOf "$1" "$2" | od -An -v -tf4 -w4
	fi
}

# grad_diff A B: the largest over tensors of max|A-B| / max|B|
grad_diff() {
	local t
	for t in $(manifest "$2" '.tensors[].name'); do
		paste <(values "$1" "$t") <(values "$2" "$t") | awk '
			NF != 2 { print "inf"; exit }
			{ d = $1 - $2; if (d < 0) d = -d
			  m = $2 < 0 ? -$2 : $2
			  if (d > dd) dd = d; if (m > mm) mm = m }
			END { printf "%.3g\n", dd / (mm > 0 ? mm : 1) }'
	done | sort -g | tail -n 1
}

# make_shards SOURCE LIMIT: fm-0..3.cgd (round-robin) and single-0.cgd
# from the first LIMIT examples, and one model M.cgm made from the
# single shard, the same as one made from a worker's.
make_shards() {
	cg-shard -q -n 4 --strategy round-robin --limit "$2" -o fm "$1"
	cg-shard -q -n 1 --strategy round-robin --limit "$2" -o single "$1"
	local w
	for w in 0 1 2 3; do
		[ "$(manifest fm-$w.cgd .examples)" -eq $(($2 / 4)) ]
		diff <(manifest fm-$w.cgd .conditions) \
			<(manifest single-0.cgd .conditions)
	done
	[ "$(manifest single-0.cgd .examples)" -eq "$2" ]
	cg-init -a cvae -d single-0.cgd --hidden 32 --layers 1 --latent 4 \
		--seed 1 -o M.cgm
	cg-init -a cvae -d fm-0.cgd --hidden 32 --layers 1 --latent 4 \
		--seed 1 -o M0.cgm
	cmp M.cgm M0.cgm
}

# rounds N B: N rounds of 4 workers with batch B on M.cgm against one
# worker with batch 4B on S.cgm; appends "round reduced single rel" to
# rounds.txt and fails on the first round whose loss differs by more
# than 1e-5 relative.  After round 1 the two gradients are also compared
# tensor by tensor.
rounds() {
	local n=$1 b=$2 r w sr ss br bs lr ls rel
	cp M.cgm S.cgm
	: >rounds.txt
	for r in $(seq 1 "$n"); do
		for w in 0 1 2 3; do
			cg-train-step -q -m M.cgm -d fm-$w.cgd --steps 1 \
				--batch "$b" --order sequential --seed 7 \
				-o g_$w.cgg
		done
		cg-reduce g_*.cgg -o red.cgg
		cg-apply -m M.cgm red.cgg -o M.cgm
		cg-train-step -q -m S.cgm -d single-0.cgd --steps 1 \
			--batch $((4 * b)) --order sequential --seed 7 -o g.cgg
		cg-apply -m S.cgm g.cgg -o S.cgm

		# samples, base step and loss of each, in one read apiece
		read -r sr br lr < <(manifest red.cgg '[.samples, .base.step, .loss] | @tsv')
		read -r ss bs ls < <(manifest g.cgg '[.samples, .base.step, .loss] | @tsv')
		[ "$sr" = $((4 * b)) ] && [ "$ss" = $((4 * b)) ]
		[ "$br" = $((r - 1)) ] && [ "$bs" = $((r - 1)) ]
		if [ "$r" = 1 ]; then
			# the very same model: the same digest
			[ "$(manifest red.cgg .base.sha256)" = \
				"$(manifest g.cgg .base.sha256)" ]
			rel=$(grad_diff red.cgg g.cgg)
			echo "round 1 gradients: largest relative difference $rel"
			awk -v d="$rel" 'BEGIN { exit !(d <= 1e-5) }'
		fi
		rel=$(awk -v a="$lr" -v b="$ls" 'BEGIN { d = a - b
			if (d < 0) d = -d; m = b < 0 ? -b : b
			printf "%.3g", d / m }')
		echo "$r $lr $ls $rel" >>rounds.txt
		awk -v d="$rel" 'BEGIN { exit !(d <= 1e-5) }' || {
			echo "round $r: loss $lr (4 workers) vs $ls (1 worker)," \
				"relative difference $rel > 1e-5"
			cat rounds.txt
			return 1
		}
	done
	echo "largest relative difference of the loss over $n rounds:" \
		"$(sort -k4,4g rounds.txt | tail -n 1 | cut -d' ' -f4)"
}

@test "4 workers of batch 32 match 1 worker of batch 128 for 20 rounds" {
	[ -e "$FULL/train-labels-idx1-ubyte.gz" ] ||
		[ -e "$FULL/train-labels-idx1-ubyte" ] ||
		skip "no Fashion-MNIST in $FULL"
	make_shards "$FULL" 2048
	run -0 rounds 20 32
	printf '# %s\n' "${lines[@]}" >&3
	[ "$(wc -l <rounds.txt)" -eq 20 ]
	[ "$(manifest M.cgm .step)" = 20 ]
	[ "$(manifest S.cgm .step)" = 20 ]
	[ "$(manifest M.cgm .samples)" = 2560 ]
	[ "$(manifest S.cgm .samples)" = 2560 ]
}

@test "4 workers of batch 6 match 1 worker of batch 24, across passes" {
	# 96 fixture examples: a pass over the shards every 4 rounds, so
	# rounds 5 and 6 start the second pass
	make_shards "$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini" 96
	run -0 rounds 6 6
	printf '# %s\n' "${lines[@]}" >&3
	[ "$(manifest M.cgm .step)" = 6 ]
	[ "$(manifest M.cgm .samples)" = 144 ]
}
