#!/usr/bin/env bats
#
# 057-precision.bats - --precision bf16 and the matrix engines.
#
# On the same weights and batch, a step of every architecture with bf16
# products gives a loss near the f32 one but not the same (the operands
# really are rounded); cg-eval and cg-sample take the flag as well.  A
# deterministic bf16 update has the same bytes at any thread count and
# under any engine CG_GEMM_ENGINE forces, differs from the f32 one, and
# cg-audit makes it again from its record.  Where the products are
# emulated, one line says so (not with -q), and why (no bf16 hardware,
# or avx512_bf16's dot product where auto measured it slower than f32's
# FMA, gemm.c; CG_BF16_DOT=fast or slow stands for that measurement); a
# CG_GEMM_ENGINE that is not an engine, or not built in, or a
# CG_BF16_DOT that is neither, is one line and exit 1.  Every engine built
# in trains the same step to within float's rounding.  The products
# themselves are test_nn's; the gradients against float64 and PyTorch's
# autocast are torch-autocast.sh's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 1
	texts fort -n 1
	default_models fm-0.cgd fort-0.cgd
}

setup() {
	cd "$BATS_FILE_TMPDIR"
}


# loss ARCH PRECISION [ENV...]: the loss of one step of 32 examples
loss() {
	local a=$1 p=$2
	shift 2
	rm -f "$BATS_TEST_TMPDIR/l.json"
	env "$@" cg-train-step -q -m "$a.cgm" -d "$(arch_shard "$a")" --batch 32 \
		--precision "$p" --log "$BATS_TEST_TMPDIR/l.json" \
		-o /dev/null || return 1
	jq -r .loss "$BATS_TEST_TMPDIR/l.json"
}

@test "every architecture: a bf16 step's loss is within 1% of f32's, and not the same" {
	# auto, and oneDNN where built: its bf16 on the CPU's dot product
	# or AMX where it has them (auto takes the dot product only where
	# it measures it faster than f32), emulated if not
	local engines=auto
	! CG_GEMM_ENGINE=dnnl cg-train-step -q -m cvae.cgm -d fm-0.cgd \
		--batch 8 -o /dev/null 2>/dev/null || engines="auto dnnl"
	for e in $engines; do
		for a in $(archs); do
			f=$(loss "$a" f32) &&
				b=$(loss "$a" bf16 CG_GEMM_ENGINE=$e) ||
				fail "$a: no loss"
			echo "$a ($e): f32 $f bf16 $b"
			within_pct "$f" "$b" && [ "$f" != "$b" ] ||
				fail "$a ($e): f32 $f, bf16 $b"
		done
	done
}

@test "cg-eval and cg-sample take --precision bf16" {
	run -0 cg-eval -q --json -m cvae.cgm --precision bf16 fm-0.cgd
	b=$(jq -r .nelbo <<<"$output")
	run -0 cg-eval -q --json -m cvae.cgm fm-0.cgd
	f=$(jq -r .nelbo <<<"$output")
	within_pct "$f" "$b" || fail "f32 $f bf16 $b"
	run -0 cg-sample -m cgpt.cgm -c 0 -n 2 --seed 3 --precision bf16 \
		--max-bytes 40
	[ -n "$output" ]
	run -0 cg-sample -m cvae.cgm -n 2 --precision bf16 -o s.png
	[ -s s.png ]
	run -2 --separate-stderr cg-train-step -m cvae.cgm -d fm-0.cgd \
		--precision f8 -o /dev/null
	assert_output ''
	[[ ${stderr_lines[0]} == *precision* ]]
}

@test "deterministic bf16: the same bytes at 1 and 3 threads and on every engine; not f32's; cg-audit makes it again" {
	local w="cg-train-step --deterministic -q -m cvae.cgm -d fm-0.cgd --steps 2 --batch 16"
	$w -j 1 --precision bf16 -o b1.cgg
	$w -j 3 --precision bf16 -o b3.cgg
	cmp b1.cgg b3.cgg
	for e in auto builtin blas dnnl; do
		if CG_GEMM_ENGINE=$e cg-train-step -q -m cvae.cgm -d fm-0.cgd \
			-o /dev/null 2>/dev/null; then
			CG_GEMM_ENGINE=$e $w -j 2 --precision bf16 -o be.cgg
			cmp b1.cgg be.cgg
		fi
	done
	$w -j 1 -o f1.cgg
	! cmp -s b1.cgg f1.cgg
	[ "$(tar xOf b1.cgg cg.json | jq -r .call.precision)" = bf16 ]
	[ "$(tar xOf f1.cgg cg.json | jq -r .call.precision)" = null ]
	run -0 cg-audit -m cvae.cgm -d fm-0.cgd b1.cgg
	assert_output --partial match
	run -0 cg-audit -m cvae.cgm -d fm-0.cgd f1.cgg
	assert_output --partial match
}

@test "emulated bf16 says so in one line, not with -q; a bad CG_GEMM_ENGINE is one line and exit 1" {
	run -0 --separate-stderr env CG_GEMM_ENGINE=builtin cg-train-step \
		-m cvae.cgm -d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: bf16 products emulated in f32 (CG_GEMM_ENGINE): the same numbers, no faster"
	run -0 --separate-stderr env CG_GEMM_ENGINE=builtin cg-train-step \
		-q -m cvae.cgm -d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
	assert_equal "$stderr" ''
	run -0 --separate-stderr cg-train-step -m cvae.cgm -d fm-0.cgd \
		--batch 8 -o /dev/null
	assert_equal "$stderr" ''
	# oneDNN held below avx512_bf16, or to it where the CPU has it (its
	# dot product, which auto takes where it measures it fast)
	if CG_GEMM_ENGINE=dnnl cg-train-step -q -m cvae.cgm -d fm-0.cgd \
		--batch 8 -o /dev/null 2>/dev/null; then
		run -0 --separate-stderr env DNNL_MAX_CPU_ISA=AVX2 cg-train-step \
			-m cvae.cgm -d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
		assert_equal "$stderr" \
			"cg-train-step: bf16 products emulated in f32 (no avx512_bf16 or amx_bf16 on this CPU): the same numbers, no faster"
		if grep -qw avx512_bf16 /proc/cpuinfo; then
			# auto measures the dot product against f32's FMA
			# (gemm.c); CG_BF16_DOT stands for the measurement
			run -0 --separate-stderr env DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 \
				CG_BF16_DOT=slow cg-train-step -m cvae.cgm \
				-d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
			assert_equal "$stderr" \
				"cg-train-step: bf16 products emulated in f32 (avx512_bf16 without AMX, CG_BF16_DOT=slow; CG_GEMM_ENGINE=dnnl runs it): the same numbers, no faster"
			run -0 --separate-stderr env DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 \
				CG_BF16_DOT=fast cg-train-step -m cvae.cgm \
				-d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
			assert_equal "$stderr" ''
			run -0 --separate-stderr env DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 \
				cg-train-step -m cvae.cgm -d fm-0.cgd --batch 8 \
				--precision bf16 -o /dev/null
			[ "$stderr" = '' ] || assert_equal "$stderr" \
				"cg-train-step: bf16 products emulated in f32 (avx512_bf16 without AMX, measured slower than f32; CG_GEMM_ENGINE=dnnl runs it): the same numbers, no faster"
			run -0 --separate-stderr env DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 \
				CG_GEMM_ENGINE=dnnl cg-train-step -m cvae.cgm \
				-d fm-0.cgd --batch 8 --precision bf16 -o /dev/null
			assert_equal "$stderr" ''
		fi
	fi
	run -1 --separate-stderr env CG_BF16_DOT=quick cg-train-step \
		-m cvae.cgm -d fm-0.cgd --precision bf16 -o /dev/null
	assert_equal "$stderr" \
		"cg-train-step: CG_BF16_DOT=quick: not fast or slow"
	run -1 --separate-stderr env CG_GEMM_ENGINE=cuda cg-train-step \
		-m cvae.cgm -d fm-0.cgd -o /dev/null
	assert_equal "$stderr" \
		"cg-train-step: CG_GEMM_ENGINE=cuda: not an engine (auto, blas, builtin or dnnl)"
	run -1 --separate-stderr env CG_GEMM_ENGINE=cuda cg-eval -m cvae.cgm \
		fm-0.cgd
	assert_equal "${#stderr_lines[@]}" 1
	run -1 --separate-stderr env CG_GEMM_ENGINE=cuda cg-sample \
		-m cvae.cgm -o s.png
	assert_equal "${#stderr_lines[@]}" 1
	for e in blas dnnl; do
		run --separate-stderr env CG_GEMM_ENGINE=$e cg-train-step \
			-m cvae.cgm -d fm-0.cgd --batch 8 -o /dev/null
		if [ "$status" -ne 0 ]; then
			assert_equal "$status" 1
			assert_equal "$stderr" \
				"cg-train-step: CG_GEMM_ENGINE=$e: not built into this cg (configure --with-$e)"
		fi
	done
}

@test "every engine built in trains the same f32 step to within float's rounding" {
	for a in cvae cgpt; do
		ref=$(loss "$a" f32 CG_GEMM_ENGINE=builtin)
		for e in blas dnnl; do
			l=$(loss "$a" f32 CG_GEMM_ENGINE=$e 2>/dev/null) || continue
			echo "$a: builtin $ref $e $l"
			awk -v f="$ref" -v b="$l" 'BEGIN { d = f - b
				if (d < 0) d = -d
				exit !(d <= 1e-5 * (f < 0 ? -f : f)) }' ||
				fail "$a: builtin $ref, $e $l"
		done
	done
}
