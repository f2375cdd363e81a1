#!/usr/bin/env bats
#
# 100-sparseloco.bats - SparseLoCo as a configuration of cg, end to end:
# four workers send chunk-wise top-k deltas with 2-bit values into a
# table (--codec topk:k=K,chunk=C,val=lut2) from an error-feedback
# accumulator that decays (--feedback-decay), cg-reduce --op sent-mean
# averages each element over the workers that sent it, and cg-apply adds
# the result at outer lr 1 without momentum; every worker, reducing the
# same four files, holds the coordinator's model bit for bit; with
# idx=gap the indices go as gaps and the models are the same bits.
# Hostile lut2 files are refused with one line.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

SPEC=topk:k=2,val=lut2,chunk=64

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 4 --strategy stratified --seed 1
	small_cvae fm-0.cgd model.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

manifest() { tar xOf "$1" cg.json; }
digest() { cg-inspect "$1" | awk '/^params:/ { print $3 }'; }

# worker W's delta of model M under $SPEC into OUT, its state s$W.state
delta() {
	cg-train-step -q -m "$2" -d "$D/fm-$1.cgd" --emit delta --steps 2 \
		--batch 8 --seed 1 --codec "$SPEC" --feedback-decay 0.95 \
		--state "s$1.state" -o "$3"
}

# the outer step: the reduced delta added at lr 1, no momentum
outer() {
	cg-apply -m "$1" --outer nesterov --outer-lr 1 --outer-momentum 0 \
		"$2" -o "$1"
}

@test "SparseLoCo: two rounds of four workers, each rebuilds the coordinator's model" {
	local r w
	for m in coord m0 m1 m2 m3; do cp "$D/model.cgm" "$m.cgm"; done
	for r in 1 2; do
		for w in 0 1 2 3; do delta "$w" "m$w.cgm" "u$w.cgu"; done
		cg-reduce --op sent-mean u?.cgu -o mean.cgu
		for m in coord m0 m1 m2 m3; do outer "$m.cgm" mean.cgu; done
	done
	local want
	want=$(digest coord.cgm)
	[ "$want" != "$(digest "$D/model.cgm")" ]
	for w in 0 1 2 3; do [ "$(digest "m$w.cgm")" = "$want" ]; done
	# each view: 2 of every run of 64 as u8 indices; in u8 values, a
	# table of four f32 (16 bytes) and four 2-bit codes a byte
	run -0 jq -r '.codec.spec' <(manifest u0.cgu)
	[ "$output" = "$SPEC" ]
	run -0 jq -r '.tensors[] | select(.name | startswith("dec.out.w.")) |
		"\(.name) \(.dtype) \(.shape[0])"' <(manifest u0.cgu)
	local n
	n=$(cg-inspect --json "$D/model.cgm" |
		jq '.tensors[] | select(.name == "dec.out.w") | .count')
	local k=$((n / 64 * 2 + (n % 64 < 2 ? n % 64 : 2)))
	assert_output "dec.out.w.idx u8 $k
dec.out.w.val u8 $((16 + (k + 3) / 4))"
	run -0 jq -r '.codec | .dense_bytes / .bytes | floor' <(manifest u0.cgu)
	[ "$output" -ge 15 ]
	# the accumulator keeps what was not sent
	run -0 jq -r '.tensors[] | select(.name == "ef.residual") | .zero_frac' \
		<(cg-inspect --json s0.state)
	[ "$(echo "$output < 0.5" | bc)" = 1 ]
}

@test "idx=gap: the same rounds, the same models bit for bit, smaller files under zstd" {
	local r w c
	# wdelta CODEC W MODEL OUT STATE: worker W's delta under CODEC
	wdelta() {
		cg-train-step -q -m "$3" -d "$D/fm-$2.cgd" --emit delta \
			--steps 2 --batch 8 --seed 1 --codec "$1" \
			--feedback-decay 0.95 --state "$5" -o "$4"
	}
	for m in a0 a1 g0 g1; do cp "$D/model.cgm" "$m.cgm"; done
	for r in 1 2; do
		for w in 0 1; do
			c=topk:k=4,val=lut2,chunk=256
			wdelta "$c" "$w" "a$w.cgm" "a$w.cgu" "sa$w.state"
			wdelta "$c,idx=gap" "$w" "g$w.cgm" "g$w.cgu" "sg$w.state"
		done
		cg-reduce --op sent-mean a?.cgu -o amean.cgu
		cg-reduce --op sent-mean g?.cgu -o gmean.cgu
		for w in 0 1; do
			outer "a$w.cgm" amean.cgu
			outer "g$w.cgm" gmean.cgu
		done
	done
	[ "$(digest a0.cgm)" = "$(digest g0.cgm)" ]
	[ "$(digest a1.cgm)" = "$(digest g1.cgm)" ]
	[ "$(digest a0.cgm)" != "$(digest "$D/model.cgm")" ]
	run -0 jq -r '.codec | [.spec, .idx] | join(" ")' <(manifest g0.cgu)
	assert_output "topk:k=4,val=lut2,chunk=256,idx=gap gap"
	local za zg
	za=$(zstd -q -19 -c a0.cgu | wc -c)
	zg=$(zstd -q -19 -c g0.cgu | wc -c)
	echo "zstd: plain $za, gaps $zg"
	[ "$zg" -lt "$za" ]
}

@test "sent-mean: the plain mean's support, each element the mean of those that sent it" {
	local w
	for w in 0 1 2 3; do delta "$w" "$D/model.cgm" "u$w.cgu"; done
	cg-reduce --op sent-mean u?.cgu -o sent.cgu
	cg-reduce u?.cgu -o mean.cgu
	# the same elements are zero; where one worker alone sent an
	# element the plain mean has a quarter of it, so the largest
	# magnitude grows
	local a b
	a=$(cg-inspect --json sent.cgu | jq '[.tensors[].zero_frac] | add')
	b=$(cg-inspect --json mean.cgu | jq '[.tensors[].zero_frac] | add')
	[ "$a" = "$b" ]
	a=$(cg-inspect --json sent.cgu | jq '[.tensors[] | ([.max, -.min] | max)] | add')
	b=$(cg-inspect --json mean.cgu | jq '[.tensors[] | ([.max, -.min] | max)] | add')
	[ "$(echo "$a > 1.5 * $b" | bc -l)" = 1 ]
	# one input: what it sent, as it is
	cg-reduce --op sent-mean u0.cgu -o one.cgu
	cg-reduce u0.cgu -o plain.cgu
	run -0 cg-inspect --diff one.cgu plain.cgu
	refute_output --regexp '[1-9][0-9]*[.]?[0-9]* differ'
	# a staleness rule has nothing to weigh
	run -2 --separate-stderr cg-reduce --op sent-mean \
		--model "$D/model.cgm" --staleness-weight poly:0.5 u?.cgu -o x.cgu
	[ "${#stderr_lines[@]}" -ge 1 ]
	[[ ${stderr_lines[0]} == "cg-reduce: "*"sent-mean weighs no input"* ]]
	[ ! -e x.cgu ]
}

@test "lut2: a spec that is not one, and hostile tables, refused with one line" {
	run -2 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec topk:0.01,val=lut3 \
		--state s.state -o u.cgu
	[[ $stderr == "cg-train-step: "*"topk:0.01,val=lut3"* ]]
	[ ! -e u.cgu ]
	delta 0 "$D/model.cgm" t.cgu
	mkcg -x lut-nan t.cgu bad.cgu
	run -1 --separate-stderr cg-reduce --op sent-mean t.cgu bad.cgu -o r.cgu
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = "cg-reduce: bad.cgu: tensor enc.0.w.val: table entry 0 is not finite" ]
	[ ! -e r.cgu ]
	mkcg -x drop:enc.0.w.val t.cgu bad.cgu
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" bad.cgu -o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "${stderr_lines[0]}" = "cg-apply: bad.cgu: tensor enc.0.w.val: missing" ]
	[ ! -e m.cgm ]
}
