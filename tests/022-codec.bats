#!/usr/bin/env bats
# 022-codec.bats - tensors of every float dtype are read through the codec
# table: a model stored in f16, bf16 or q8_0 is a model.
#
# One fresh cvae model is made once per file and rewritten by mkcg -t
# (tests/unit/mkcg.c) with its views in another dtype, and that copy
# rewritten back to f32: both hold the same values, so every program must
# give the same figures and bytes from either, but for cg-eval and
# cg-sample on f16 and q8_0 weights, which they multiply as stored and
# which give figures close to the f32 copy's.  The decoders' own values
# are checked bit for bit by tests/unit/test_codec.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	local t
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	model cvae train-0.cgd model.cgm --hidden 32 --layers 1 --latent 4
	for t in f16 bf16 q8_0; do
		mkcg -t $t model.cgm m-$t.cgm
		mkcg -t f32 m-$t.cgm m-$t-f32.cgm
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# dtypes FILE: the distinct dtypes of FILE's tensors, one line
dtypes() {
	cg-inspect --json --no-stats "$1" | jq -r '[.tensors[].dtype] | unique | join(" ")'
}

@test "mkcg -t rewrites the views; the f32 copy is f32 again" {
	run -0 dtypes "$D/m-f16.cgm"
	assert_output f16
	run -0 dtypes "$D/m-q8_0.cgm"
	# views whose size is not a whole number of 32-element blocks stay f32
	assert_output 'f32 q8_0'
	run -0 dtypes "$D/m-q8_0-f32.cgm"
	assert_output f32
	# f16 rounds: the values moved, by at most half an f16 ulp, which is
	# below 1e-3 for any |x| < 2 (the fresh model's weights are < 0.3)
	run -0 cg-inspect --diff --tolerance 1e-3 "$D/model.cgm" "$D/m-f16.cgm"
	run -1 cg-inspect --diff "$D/model.cgm" "$D/m-f16.cgm"
}

@test "cg-eval: a bf16 model gives the figures of its f32 copy; f16 and q8_0, run as stored, come close" {
	local t a
	# bf16 views are decoded: the very values of the f32 copy
	run -0 cg-eval --json -m "$D/m-bf16.cgm" -d "$D/test.cgd"
	a=$(jq -c 'del(.model)' <<<"$output")
	run -0 cg-eval --json -m "$D/m-bf16-f32.cgm" -d "$D/test.cgd"
	assert_equal "$(jq -c 'del(.model)' <<<"$output")" "$a"
	# f16 and q8_0 weights are multiplied as stored (lib/nn/qlinear.c): f16
	# as the f32 copy's products summed in another order (1e-5), q8_0
	# with its inputs rounded to 8 bits (0.5%; tests/053-quantized.bats
	# says why)
	for t in f16 q8_0; do
		run -0 cg-eval --json -m "$D/m-$t.cgm" -d "$D/test.cgd"
		a=$output
		run -0 cg-eval --json -m "$D/m-$t-f32.cgm" -d "$D/test.cgd"
		jq -ne --argjson a "$a" --argjson b "$output" \
			--argjson t "$([ $t = f16 ] && echo 1e-5 || echo 5e-3)" \
			'($a.nelbo - $b.nelbo | fabs) <= $t * $b.nelbo and
			 $a.examples == $b.examples'
	done
	# and it is read from a pipe (into memory, not mapped) the same way
	run -0 cg-eval --json -m - -d "$D/test.cgd" <"$D/m-f16.cgm"
	assert_equal "$(jq -c 'del(.model)' <<<"$output")" \
		"$(cg-eval --json -m "$D/m-f16.cgm" -d "$D/test.cgd" |
			jq -c 'del(.model)')"
}

# pixdiff A B: how many pixels of PGM files A and B differ, and by how
# many levels at most.
pixdiff() {
	paste <(od -An -v -tu1 "$1" | tr -s ' ' '\n' | grep .) \
		<(od -An -v -tu1 "$2" | tr -s ' ' '\n' | grep .) |
		awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; if (d) n++ }
		     END { print n + 0, m + 0 }'
}

@test "cg-sample: the same picture from a bf16 model and its f32 copy; from f16 and q8_0, within a level of 255" {
	cg-sample -m "$D/m-bf16.cgm" --seed 3 -n 2 -o a.png
	cg-sample -m "$D/m-bf16-f32.cgm" --seed 3 -n 2 -o b.png
	cmp a.png b.png
	# Run as stored, the probabilities move by a little (f16: the sums'
	# order; q8_0: the inputs' rounding), and a pixel near a rounding
	# boundary changes level: by 1 at most here (0 of 18738 bytes for
	# f16, 567 for q8_0); 2 is allowed.
	for t in f16 q8_0; do
		cg-sample -m "$D/m-$t.cgm" --seed 3 -n 2 --format pgm -o c.pgm
		cg-sample -m "$D/m-$t-f32.cgm" --seed 3 -n 2 --format pgm -o d.pgm
		[ "$(stat -c %s c.pgm)" -eq "$(stat -c %s d.pgm)" ]
		run -0 pixdiff c.pgm d.pgm
		echo "$t: $output"
		[ "${output#* }" -le 2 ]
	done
}

@test "cg-train-step: an f16 model trains as its f32 copy and is written f32" {
	cg-train-step -q -m "$D/m-f16.cgm" -d "$D/train-0.cgd" --emit model \
		--batch 8 -o a.cgm
	cg-train-step -q -m "$D/m-f16-f32.cgm" -d "$D/train-0.cgd" \
		--emit model --batch 8 -o b.cgm
	run -0 dtypes a.cgm
	assert_output f32
	cmp a.cgm b.cgm
	# a gradient names its base by the digest of the decoded values
	cg-train-step -q -m "$D/m-f16.cgm" -d "$D/train-0.cgd" --batch 8 \
		-o a.cgg
	cg-train-step -q -m "$D/m-f16-f32.cgm" -d "$D/train-0.cgd" \
		--batch 8 -o b.cgg
	cmp a.cgg b.cgg
}

@test "cg-inspect --tensor shows a q8_0 tensor's values as its f32 copy" {
	run -0 cg-inspect --tensor enc.0.w "$D/m-q8_0.cgm"
	a=$output
	[ "${#lines[@]}" -gt 32 ]
	run -0 cg-inspect --tensor enc.0.w "$D/m-q8_0-f32.cgm"
	assert_equal "$output" "$a"
	# the stats line up too: the table row after the dtype column
	run -0 bash -c "cg-inspect '$D/m-q8_0.cgm' | awk '\$1 == \"enc.0.w\" { \$2 = \$4 = \"\"; print }'"
	a=$output
	run -0 bash -c "cg-inspect '$D/m-q8_0-f32.cgm' | awk '\$1 == \"enc.0.w\" { \$2 = \$4 = \"\"; print }'"
	assert_equal "$output" "$a"
	[ -n "$a" ]
}

@test "mkcg -t: a value the dtype cannot hold is refused, nothing written" {
	mkcg m.cgm
	# 'odd' holds nan, which no integer dtype takes
	run -1 --separate-stderr mkcg -t u8 m.cgm u.cgm
	assert_equal "$stderr" 'mkcg: tensor odd: element 0 is nan, which u8 cannot hold'
	[ ! -e u.cgm ]
	run -2 --separate-stderr mkcg -t q9 m.cgm u.cgm
	assert_equal "$stderr" "mkcg: unknown dtype 'q9'"
}

@test "cg-reduce and cg-apply: an update in f16 or q8_0 counts as its f32 copy" {
	local t
	cg-train-step -q -m "$D/model.cgm" -d "$D/train-0.cgd" --steps 2 \
		--batch 8 -o g.cgg
	for t in f16 q8_0; do
		mkcg -t $t g.cgg g-$t.cgg
		mkcg -t f32 g-$t.cgg g-$t-f32.cgg
		# one worker's update twice, on purpose
		run -0 cg-reduce --allow-duplicates -o r-$t.cgg g-$t.cgg g.cgg
		run -0 cg-reduce --allow-duplicates -o r-$t-f32.cgg \
			g-$t-f32.cgg g.cgg
		cmp r-$t.cgg r-$t-f32.cgg
		run -0 cg-apply -m "$D/model.cgm" -o a-$t.cgm g-$t.cgg
		run -0 cg-apply -m "$D/model.cgm" -o a-$t-f32.cgm g-$t-f32.cgg
		cmp a-$t.cgm a-$t-f32.cgm
	done
	# and the rounding did move the values: not the same as the f32 run
	run -0 cg-apply -m "$D/model.cgm" -o a.cgm g.cgg
	run ! cmp -s a.cgm a-f16.cgm
}
