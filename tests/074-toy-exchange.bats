#!/usr/bin/env bats
#
# 074-toy-exchange.bats - a new update codec or reduce operation touches
# only its own file: the test-only codec "toy-neg" (tests/unit/codec_toy.c,
# every element as f32 with its sign flipped) and operation "toy-max"
# (tests/unit/reduce_toy.c, each element's largest value) register
# themselves, and the copies of cg-train-step and cg-reduce built with
# them (tests/toy/, not installed) take them through --codec and --op
# with no line of cmd/ or lib/ naming them: encoded, written, read back,
# decoded and reduced.
#
# Two round-robin shards of the Fashion-MNIST fixture and one small cvae
# model are made once per file.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup_file() {
	local fx="$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	cd "$BATS_FILE_TMPDIR"
	cg-shard -q -n 2 --strategy round-robin -o fm "$fx"
	cg-init -a cvae -d fm-0.cgd --hidden 16 --layers 1 --latent 2 \
		--seed 1 -o model.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	TOY=$CG_BUILDDIR/tests/toy
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# delta PROG W C OUT: a delta of model.cgm on shard W under codec C, by
# cg-train-step PROG, with a fresh state of its own
delta() {
	"$1" -q -m "$D/model.cgm" -d "$D/fm-$2.cgd" --emit delta --steps 2 \
		--batch 8 --codec "$3" --state "$4.state" -o "$4"
}

manifest() { tar xOf "$1" cg.json; }

# floats FILE MEMBER: the member's f32 values, one a line
floats() {
	tar xOf "$1" "$2" | od -An -v -f | tr -s ' ' '\n' | sed '/^$/d'
}

@test "toy-neg, toy-max: no file in cmd/ or lib/ names them" {
	run -1 grep -rlw -e toy-neg -e toy-max \
		"$CG_SRCDIR/cmd" "$CG_SRCDIR/lib"
	[ -z "$output" ]
}

@test "toy-neg, toy-max: the installed programs do not know them" {
	run -2 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec toy-neg \
		--no-error-feedback -o u.cgu
	assert_equal "${stderr_lines[0]}" "cg-train-step: --codec: unknown codec 'toy-neg' (f32, f16, bf16, q8, q4, q2, topk, sign, lowrank, masked)"
	run -2 --separate-stderr cg-reduce --op toy-max "$D/model.cgm"
	assert_equal "${stderr_lines[0]}" "cg-reduce: --op: unknown operation 'toy-max' (mean, sum, median, trimmed-mean, clip-mean, sent-mean)"
	delta "$TOY/cg-train-step" 0 toy-neg n.cgu
	run -1 --separate-stderr cg-reduce n.cgu -o r.cgg
	assert_equal "$stderr" "cg-reduce: n.cgu: manifest: unknown codec 'toy-neg' (f32, f16, bf16, q8, q4, q2, topk, sign, lowrank, masked)"
	[ ! -e u.cgu ] && [ ! -e r.cgg ]
}

@test "toy-neg, toy-max: the toy programs list them after the built-in ones" {
	run -2 --separate-stderr "$TOY/cg-train-step" -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec toy-nog \
		--no-error-feedback -o u.cgu
	assert_equal "${stderr_lines[0]}" "cg-train-step: --codec: unknown codec 'toy-nog' (f32, f16, bf16, q8, q4, q2, topk, sign, lowrank, masked, toy-neg)"
	run -0 "$TOY/cg-reduce" --help
	assert_line --regexp '^  toy-max +each element.s largest value'
	assert_line --regexp '^  clip-mean:TAU '
	run -2 --separate-stderr "$TOY/cg-reduce" --op toy-max:2 "$D/model.cgm"
	assert_equal "${stderr_lines[0]}" "cg-reduce: --op: toy-max: takes no parameter"
}

@test "toy-neg: written as the negated f32 values, with its manifest" {
	delta "$TOY/cg-train-step" 0 toy-neg n.cgu
	delta cg-train-step 0 f32 f.cgu
	run -0 jq -c '.codec | [.spec, .name, .dtype, .negated, .bytes == .dense_bytes]' <(manifest n.cgu)
	assert_output '["toy-neg","toy-neg","f32",true,true]'
	run -0 jq -r '[.layout[].name] == [.tensors[].name | rtrimstr(".neg")]' <(manifest n.cgu)
	assert_output true
	# each stored value is the f32 delta's, negated
	for t in $(manifest f.cgu | jq -r '.tensors[].name'); do
		floats f.cgu "$t" >f.txt
		floats n.cgu "$t.neg" >n.txt
		[ -s f.txt ]
		run -0 paste f.txt n.txt
		run -0 awk '$1 != -$2 { bad++ } END { print NR, bad + 0 }' <<<"$output"
		assert_output --regexp '^[1-9][0-9]* 0$'
	done
}

@test "toy-neg: read back and reduced, it is its f32 copy to the bit" {
	delta "$TOY/cg-train-step" 0 toy-neg n.cgu
	delta cg-train-step 0 f32 f.cgu
	"$TOY/cg-reduce" n.cgu -o rn.cgg
	cg-reduce f.cgu -o rf.cgg
	run -0 cg-inspect --diff rn.cgg rf.cgg
	assert_line --regexp '^tensors: +12 in A, 12 in B: 12 identical'
	# and beside an input of another codec
	delta cg-train-step 1 q8 q.cgu
	"$TOY/cg-reduce" --op sum n.cgu q.cgu -o sn.cgg
	cg-reduce --op sum f.cgu q.cgu -o sf.cgg
	run -0 cg-inspect --diff sn.cgg sf.cgg
	assert_line --regexp '^tensors: +12 in A, 12 in B: 12 identical'
}

@test "toy-neg: a hostile file, a stored value not finite, is refused" {
	delta "$TOY/cg-train-step" 0 toy-neg n.cgu
	mkdir x && (cd x && tar xf ../n.cgu)
	printf '\000\000\300\177' | dd of=x/dec.0.b.neg bs=1 seek=4 conv=notrunc 2>/dev/null
	# the digest is checked first: give the member its new one
	sum=$(sha256sum x/dec.0.b.neg | cut -d' ' -f1)
	jq --arg s "$sum" '(.tensors[] | select(.name == "dec.0.b.neg") | .sha256) = $s' x/cg.json >x/m.json
	mv x/m.json x/cg.json
	(cd x && tar --format=ustar -cf ../bad.cgu cg.json $(jq -r '.tensors[].name' cg.json))
	run -1 --separate-stderr "$TOY/cg-reduce" bad.cgu -o r.cgg
	[[ $stderr == "cg-reduce: bad.cgu: "*"tensor dec.0.b.neg: element 1 is not finite"* ]]
	[ ! -e r.cgg ]
}

@test "toy-max: each element's largest value over the inputs, of any codec" {
	delta cg-train-step 0 f32 a.cgu
	delta cg-train-step 1 f32 b.cgu
	"$TOY/cg-reduce" --op toy-max a.cgu b.cgu -o m.cgg
	run -0 jq -r '.inputs, .kind' <(manifest m.cgg)
	assert_line -n 0 2
	assert_line -n 1 delta
	for t in $(manifest m.cgg | jq -r '.tensors[].name'); do
		floats a.cgu "$t" >a.txt
		floats b.cgu "$t" >b.txt
		floats m.cgg "$t" >m.txt
		run -0 paste a.txt b.txt m.txt
		run -0 awk '$3 != ($1 > $2 ? $1 : $2) { bad++ } END { print NR, bad + 0 }' <<<"$output"
		assert_output --regexp '^[1-9][0-9]* 0$'
	done
	# a toy-neg input is decoded to its f32 values first
	delta "$TOY/cg-train-step" 1 toy-neg n.cgu
	"$TOY/cg-reduce" --op toy-max a.cgu n.cgu -o mn.cgg
	run -0 cg-inspect --diff m.cgg mn.cgg
	assert_line --regexp '^tensors: +12 in A, 12 in B: 12 identical'
}
