#!/usr/bin/env bats
#
# 090-golden.bats - the bytes every program writes, guarded.
#
# tests/golden.sh runs shard, init, train (grad, delta, model), reduce,
# apply, eval and sample on the fixtures with fixed seeds and one thread;
# tests/golden.sha256 holds the digests it printed in the portable build
# (--without-blas --disable-native), whose arithmetic is the same on every
# x86-64: SSE2 vectors, the built-in matrix kernel with its fixed order of
# sums, and libm's results (checked with its FMA and AVX variants switched
# off through GLIBC_TUNABLES).  In other builds the BLAS and the vector
# width pick the order of sums, so the bytes there are only the same from
# run to run on one machine (060 and 061 test that), and this test skips.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

@test "golden: every output's SHA-256 is the recorded one (portable build)" {
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build (configure --without-blas --disable-native)"
	run -0 "$CG_SRCDIR/tests/golden.sh" "$BATS_TEST_TMPDIR/run"
	diff -u "$CG_SRCDIR/tests/golden.sha256" <(echo "$output")
}

@test "golden: the same digests with libm's FMA and AVX variants off" {
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build (configure --without-blas --disable-native)"
	GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA,-AVX \
		run -0 "$CG_SRCDIR/tests/golden.sh" "$BATS_TEST_TMPDIR/run"
	diff -u "$CG_SRCDIR/tests/golden.sha256" <(echo "$output")
}
