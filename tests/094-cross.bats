#!/usr/bin/env bats
#
# 094-cross.bats - the portable build on an arm64 CPU (little-endian,
# NEON), under qemu's user mode: scripts/cross check -q builds it with
# Debian's cross compiler in $CG_BUILDDIR/cross-arm64 (once; later runs
# rebuild what changed), runs the unit tests of the files, codecs, data,
# kernels and optimizers, tests/golden.sh --deterministic, whose digests
# must be those of the portable x86-64 build, and trains a model one step
# on arm64 and on this host from the other's file, to the same bytes and
# loss.  Skipped where the cross compiler, qemu-user or the arm64
# libraries (scripts/cross sysroot arm64, which install-deps runs) are
# missing, and in every build but the portable one (the cross build is
# its own, the same in every pass: it runs once, beside the x86-64 build
# whose bytes it must match).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup() {
	command -v aarch64-linux-gnu-gcc >/dev/null ||
		skip "no aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)"
	command -v qemu-aarch64 >/dev/null || skip "no qemu-aarch64 (qemu-user)"
	[ -d "${CG_CROSS_ROOT:-/opt/cg-cross}/arm64" ] ||
		skip "no arm64 libraries (scripts/cross sysroot arm64)"
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build (configure --without-blas --disable-native)"
}

@test "arm64 under qemu: unit tests, golden.sh --deterministic's x86-64 digests, a model trained across hosts" {
	run "$CG_SRCDIR/scripts/cross" check -q -b "$CG_BUILDDIR" arm64
	# the whole of it where it failed, for the log
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	refute_output --partial FAILED
	assert_output --partial "arm64: golden.sh, --deterministic: ok"
	assert_output --partial "arm64: a model trained across hosts: ok"
}
