#!/usr/bin/env bats
#
# 062-cgpt-distributed.bats - the text model goes through the same
# distributed pipelines as the image model, unchanged: synchronous rounds
# (grad, cg-reduce, cg-apply) and DiLoCo rounds (delta with a state file,
# cg-reduce, cg-apply --outer nesterov), on the fortunes fixture.  Each
# must leave a valid model that has learnt: its held-out loss drops below
# the initial model's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 2 --strategy stratified --seed 1
	texts all -n 1
	small_cgpt all-0.cgd init.cgm
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp "$BATS_FILE_TMPDIR"/*.cgd "$BATS_FILE_TMPDIR/init.cgm" .
}

# bpb MODEL: held-out (here: whole fixture) bits per byte
bpb() {
	cg-eval --json -m "$1" -d all-0.cgd | jq -r .bpb
}

# examples SHARD: how many examples it holds
examples() {
	tar xOf "$1" cg.json | jq '.tensors[] | select(.name == "cond") | .shape[0]'
}

@test "cgpt: two workers' reduced gradient is one worker's over their union" {
	# Each worker's whole shard in one batch, the one worker's whole
	# set: the same examples, the same windows (seeded per example).
	# A text gradient is a mean per scored token, so the mean of the
	# two must weigh them by tokens, not by examples: their tokens per
	# example differ here, and an example-weighted mean would not match.
	local n0 n1 na w0 w1
	n0=$(examples fort-0.cgd)
	n1=$(examples fort-1.cgd)
	na=$(examples all-0.cgd)
	[ $((n0 + n1)) -eq "$na" ]
	cg-train-step -q -m init.cgm -d fort-0.cgd --order sequential \
		--batch "$n0" --seed 3 -o g0.cgg
	cg-train-step -q -m init.cgm -d fort-1.cgd --order sequential \
		--batch "$n1" --seed 3 -o g1.cgg
	cg-train-step -q -m init.cgm -d all-0.cgd --order sequential \
		--batch "$na" --seed 3 -o ga.cgg
	cg-reduce g0.cgg g1.cgg -o r.cgg
	w0=$(tar xOf g0.cgg cg.json | jq .weight)
	w1=$(tar xOf g1.cgg cg.json | jq .weight)
	echo "tokens: $w0 for $n0 examples, $w1 for $n1"
	[ $((w0 * n1)) -ne $((w1 * n0)) ]
	[ "$(tar xOf r.cgg cg.json | jq .weight)" = "$(tar xOf ga.cgg cg.json | jq .weight)" ]
	[ "$(tar xOf r.cgg cg.json | jq .samples)" = "$na" ]
	run -0 cg-inspect --diff -q --tolerance 1e-6 r.cgg ga.cgg
	run -1 cg-inspect --diff -q --tolerance 1e-6 g0.cgg ga.cgg
}

@test "cgpt: synchronous rounds of grad, reduce and apply" {
	cp init.cgm m.cgm
	for r in 1 2 3 4 5 6 7 8; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fort-$w.cgd --steps 1 \
				--batch 4 --seed 3 -o g$w.cgg
		done
		run -0 --separate-stderr sh -c \
			'cg-reduce g0.cgg g1.cgg | cg-apply -m m.cgm --opt adamw --lr 3e-3 -o m.cgm'
	done
	run -0 cg-inspect --verify -q m.cgm
	[ "$(tar xOf m.cgm cg.json | jq -r .step)" = 8 ]
	before=$(bpb init.cgm)
	after=$(bpb m.cgm)
	echo "bits per byte: $before -> $after"
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < b - 0.05) }'
}

@test "cgpt: DiLoCo rounds with state files and the outer Nesterov step" {
	cp init.cgm m.cgm
	for r in 1 2 3; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fort-$w.cgd --emit delta \
				--steps 4 --batch 4 --opt adamw --lr 3e-3 --seed 3 \
				--state w$w.cgs -o d$w.cgg
		done
		run -0 --separate-stderr sh -c \
			'cg-reduce d0.cgg d1.cgg | cg-apply -m m.cgm --outer nesterov -o m.cgm'
	done
	[ "$(tar xOf m.cgm cg.json | jq -r .step)" = 3 ]
	tar tf m.cgm | grep -qx outer.mom
	[ "$(tar xOf w0.cgs cg.json | jq -r .kind)" = state ]
	before=$(bpb init.cgm)
	after=$(bpb m.cgm)
	echo "bits per byte: $before -> $after"
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < b - 0.05) }'
}
