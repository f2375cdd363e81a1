#!/usr/bin/env bats
#
# 094-cross.bats - the portable build on other CPUs, under qemu's user
# mode: arm64 (little-endian, NEON) and s390x (big-endian: every file's
# words turned around as it is read and written).  For each, scripts/cross
# check -q builds it with Debian's cross compiler in
# $CG_BUILDDIR/cross-ARCH (once; later runs rebuild what changed), runs
# the unit tests of the files, codecs, data, kernels and optimizers,
# tests/golden.sh --deterministic, whose digests must be those of the
# portable x86-64 build, and trains a model one step on ARCH and on this
# host from the other's file, to the same bytes and loss.  Each is skipped
# where its cross compiler, qemu-user or its libraries (scripts/cross
# sysroot ARCH, which install-deps runs) are missing, and in every build
# but the portable one (the cross build is its own, the same in every
# pass: it runs once, beside the x86-64 build whose bytes it must match).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup() {
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build (configure --without-blas --disable-native)"
}

# cross ARCH TRIPLE QEMU: scripts/cross check -q for ARCH, or a skip where
# its tools are missing.
cross() {
	command -v "$2-gcc" >/dev/null || skip "no $2-gcc (gcc-$2)"
	command -v "$3" >/dev/null || skip "no $3 (qemu-user)"
	[ -d "${CG_CROSS_ROOT:-/opt/cg-cross}/$1" ] ||
		skip "no $1 libraries (scripts/cross sysroot $1)"
	run "$CG_SRCDIR/scripts/cross" check -q -b "$CG_BUILDDIR" "$1"
	# the whole of it where it failed, for the log
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	refute_output --partial FAILED
	assert_output --partial "$1: golden.sh, --deterministic: ok"
	assert_output --partial "$1: a model trained across hosts: ok"
}

@test "arm64 under qemu: unit tests, golden.sh --deterministic's x86-64 digests, a model trained across hosts" {
	cross arm64 aarch64-linux-gnu qemu-aarch64
}

@test "s390x (big-endian) under qemu: unit tests, golden.sh --deterministic's x86-64 digests, a model trained across hosts" {
	cross s390x s390x-linux-gnu qemu-s390x
}
