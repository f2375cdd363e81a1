#!/usr/bin/env bats
#
# 116-dp-cnn.bats - what a DP-SGD step of cg-train-step adds and what its
# optimizer sees, for the classifier as MLP and as CNN, where Opacus
# does the same (bench/dp-sgd-cnn.sh compares the two): the noise is
# N(0, (sigma C)^2) on every coordinate of the clipped sum, divided by
# the expected batch q N, not by the size of the sample drawn (the same
# --dp-seed draws the same sample whatever the noise, so two calls that
# differ in the noise alone differ by it); and --emit model steps Adam
# on that noised mean, moments and all: the model after two steps is
# the one cg-apply makes of the two steps' gradients.  The programs come
# from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 1
	model cclf fm-0.cgd clf.cgm --hidden 16 --layers 1
	model cclf fm-0.cgd cnn.cgm --conv 2 --hidden 16 --layers 1
	cg-inspect --json fm-0.cgd | jq -r .examples >n.txt
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	N=$(cat "$D/n.txt")
}

# Every value of every tensor of $1, in the file's order, one a line.
values() {
	local t
	for t in $(cg-inspect --json "$1" | jq -r '.tensors[].name'); do
		cg-inspect -t "$t" "$1" || return 1
	done
}

# One DP-SGD gradient of model $1 at batch $2 (rate $2/N), noise $3,
# --dp-seed $4, into $5.
grad() {
	cg-train-step -q -m "$D/$1.cgm" -d "$D/fm-0.cgd" --batch "$2" \
		--steps 1 --example-clip 1 --example-noise "$3" --dp-seed "$4" \
		-o "$5"
}

# "count mean sd" of ($2's values - $1's) times $3.
spread() {
	paste <(values "$1") <(values "$2") |
		awk -v k="$3" '{ d = ($2 - $1) * k; s += d; ss += d * d; n++ }
		END { m = s / n; printf "%d %.6f %.6f\n", n, m, sqrt(ss / n - m * m) }'
}

@test "the noise is sigma C / (q N) a coordinate, whatever the sample" {
	[ "$N" -eq 100 ]
	for m in clf cnn; do
		# rate 1: all 100 examples; rate 0.1: a Poisson sample of
		# another size than its expected 10 (seed 3 draws 9), which
		# dividing by the size drawn would show as 10/9 of the sd
		for bs in "$N 5" "10 3"; do
			set -- $bs
			grad "$m" "$1" 0 "$2" a.cgg
			grad "$m" "$1" 2 "$2" b.cgg
			taken=$(tar xOf b.cgg cg.json | jq -r .samples)
			[ "$1" = "$N" ] || [ "$taken" -ne "$1" ]
			# (b - a) q N / (sigma C): N(0, 1) on each coordinate
			read -r n mean sd < <(spread a.cgg b.cgg "$(awk -v b="$1" \
				'BEGIN { print b / 2 }')")
			echo "$m batch $1: $n coordinates, mean $mean, sd $sd (sample $taken)"
			[ "$n" -gt 5000 ]
			awk -v m="$mean" -v s="$sd" -v n="$n" 'BEGIN {
				exit !(s > 0.95 && s < 1.05 && m * m < 25 / n) }'
		done
	done
}

@test "no noise: the clipped sum alone, the same for any noise seed" {
	for m in clf cnn; do
		grad "$m" "$N" 0 5 a.cgg
		grad "$m" "$N" 0 6 b.cgg
		run -0 cg-inspect --diff -q a.cgg b.cgg
		grad "$m" "$N" 1 6 c.cgg
		run -1 cg-inspect --diff -q a.cgg c.cgg
	done
}

@test "--emit model steps Adam on the noised mean: cg-apply of the gradients" {
	for m in clf cnn; do
		cg-train-step -q -m "$D/$m.cgm" -d "$D/fm-0.cgd" --emit model \
			--batch 10 --steps 2 --lr 1e-3 --example-clip 1 \
			--example-noise 1 --dp-seed 7 -o model.cgm
		cp "$D/$m.cgm" step0.cgm
		for k in 1 2; do
			cg-train-step -q -m step$((k - 1)).cgm -d "$D/fm-0.cgd" \
				--batch 10 --steps 1 --example-clip 1 \
				--example-noise 1 --dp-seed 7 -o g$k.cgg
			cg-apply -m step$((k - 1)).cgm --lr 1e-3 \
				-o step$k.cgm g$k.cgg
		done
		run -0 cg-inspect --diff -q --tolerance 1e-6 model.cgm step2.cgm
		# a step on another noise draw is another model
		cg-train-step -q -m "$D/$m.cgm" -d "$D/fm-0.cgd" --emit model \
			--batch 10 --steps 2 --lr 1e-3 --example-clip 1 \
			--example-noise 1 --dp-seed 8 -o other.cgm
		run -1 cg-inspect --diff -q --tolerance 1e-6 model.cgm other.cgm
	done
}
