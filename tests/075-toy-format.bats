#!/usr/bin/env bats
# 075-toy-format.bats - a new file format touches only its own file: the
# test-only "toy" format (tests/unit/format_toy.c: "TOYF", then names and
# f32 values) registers itself, and the programs built again with it
# (tests/toy/cg-convert and cg-inspect, never installed) read it through
# lib/file/format.c's table, which does not name it.  The installed
# programs do not know it.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup() {
	TOY=$CG_BUILDDIR/tests/toy
	cd "$BATS_TEST_TMPDIR"
	# one tensor "w" of the two f32 values 1 and 2
	printf 'TOYF\001\000\000\000\001w\002\000\000\000' >x.toyf
	printf '\000\000\200\077\000\000\000\100' >>x.toyf
}

@test "toy format: no file in cmd/ or lib/ names it" {
	run -1 grep -rlw -e toy -e cg_format_toy "$CG_SRCDIR/cmd" "$CG_SRCDIR/lib/file"
}

@test "toy format: the installed programs do not know it" {
	run -1 --separate-stderr cg-inspect x.toyf
	[[ $stderr == "cg-inspect: x.toyf: "* ]]
	run -1 --separate-stderr cg-convert x.toyf -o x.cgm
	[ ! -e x.cgm ]
}

@test "toy format: cg-inspect reads it, cg-convert makes a cg file of it" {
	run -0 "$TOY/cg-inspect" x.toyf
	assert_line --regexp '^w +f32 +2 +8 B +1 +2 +1\.5 '
	run -0 "$TOY/cg-convert" x.toyf -o x.cgm
	run -0 cg-inspect --verify x.cgm
	assert_output 'x.cgm: OK'
	run -0 cg-inspect --tensor w x.cgm
	assert_output --partial '1'
	assert_output --partial '2'
	# it has no digests, so nothing to verify, as safetensors
	run -1 --separate-stderr "$TOY/cg-inspect" --verify x.toyf
	[ "$stderr" = "cg-inspect: x.toyf: a toy file: no digests to verify" ]
}

@test "toy format: cg-convert --to toy writes it back, the same bytes" {
	run -0 "$TOY/cg-convert" x.toyf -o x.cgm
	run -0 "$TOY/cg-convert" --to toy x.cgm -o y.toyf
	cmp x.toyf y.toyf
	# the installed cg-convert has no such format: a usage error
	run -2 --separate-stderr cg-convert --to toy x.cgm -o z.toyf
	[ "${stderr_lines[0]}" = "cg-convert: --to: unknown file format 'toy'" ]
	[ ! -e z.toyf ]
	# --to cg rewrites a cg file, here compressed
	run -0 cg-convert --to cg -z gzip x.cgm -o x2.cgm
	run -0 cg-inspect --verify x2.cgm
}

@test "toy format: a toy file whose lengths lie is refused in one line" {
	printf 'TOYF\001\000\000\000\001w\377\377\377\177' >bad.toyf
	run -1 --separate-stderr "$TOY/cg-convert" bad.toyf -o out.cgm
	[ "$stderr" = "cg-convert: bad.toyf: tensor w: past the end" ]
	[ ! -e out.cgm ]
}
