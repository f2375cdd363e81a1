#!/usr/bin/env bats
# 005-layers.bats - lib/ keeps its layers (lib/LAYERS): tests/layers.sh
# passes the tree as built, both its includes and the calls between its
# objects, and fails, naming the file, on each kind of fault planted in a
# copy: an include reaching up a layer, a call reaching up (in objects
# compiled here), one architecture using another, two files using each
# other, a file outside the layers' folders, an include of no file.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup() {
	SRC=${CG_SRCDIR:-$BATS_TEST_DIRNAME/..}
	CHECK=$SRC/tests/layers.sh
	cd "$BATS_TEST_TMPDIR"
}

# A copy of lib/ to plant faults in.
copy_lib() {
	cp -r "$SRC/lib" lib
}

@test "the tree as built keeps its layers: includes and calls" {
	[ -n "${CG_BUILDDIR:-}" ] || skip "needs the build tree (make check)"
	run -0 "$CHECK" "$SRC/lib" "$CG_BUILDDIR/lib"
	assert_output ''
	# every object of the library was looked at
	n=$(find "$CG_BUILDDIR/lib" -name '*.o' | wc -l)
	[ "$n" -ge 40 ]
}

@test "an include that reaches up a layer fails, naming file and layers" {
	copy_lib
	sed -i '0,/^#include "core\/error.h"/s//#include "cli\/cli.h"\n&/' \
		lib/core/atomic.c
	run -1 "$CHECK" lib
	assert_output 'layers: core/atomic.c includes cli/cli.h: core may not use cli, a layer above it'
}

@test "a header that reaches up fails as a source file does" {
	copy_lib
	printf '#include "exchange/update.h"\n' >>lib/nn/optim.h
	run -1 "$CHECK" lib
	assert_output --partial 'layers: nn/optim.h includes exchange/update.h: nn may not use exchange, a layer above it'
}

@test "one architecture using another fails" {
	copy_lib
	printf '#include "arch/cgpt/cgpt.h"\n' >>lib/arch/cvae/cvae.c
	run -1 "$CHECK" lib
	assert_output 'layers: arch/cvae/cvae.c includes arch/cgpt/cgpt.h: arch/cvae may not use arch/cgpt, its sibling'
}

@test "two files that include each other fail, with the loop named" {
	copy_lib
	printf '#include "core/util.h"\n' >>lib/core/error.h
	printf '#include "core/error.h"\n' >>lib/core/util.h
	run -1 "$CHECK" lib
	assert_output 'layers: includes loop: core/error.h core/util.h'
}

@test "a file outside the folders, a folder not in LAYERS, an include of nothing" {
	copy_lib
	touch lib/stray.c
	mkdir lib/extra
	touch lib/extra/x.c
	printf '#include "nope.h"\n' >>lib/core/rng.c
	run -1 "$CHECK" lib
	assert_line 'layers: stray.c: not in a folder of LAYERS'
	assert_line 'layers: extra/x.c: folder extra is not in LAYERS'
	assert_line 'layers: core/rng.c includes "nope.h", not a file of lib/'
}

# A two-layer tree of real objects: the calls come from nm.
make_tree() {
	mkdir -p t/low t/high o/low o/high
	printf 'low\nhigh\n' >t/LAYERS
	printf 'int b(void);\nint a(void) { return %s; }\n' "$1" >t/low/a.c
	printf 'int a(void);\nint b(void) { return %s; }\n' "$2" >t/high/b.c
	printf 'int c(void) { return 1; }\n' >t/low/c.c
	for f in low/a high/b low/c; do
		cc -c -o "o/$f.o" "t/$f.c" || return 1
	done
}

@test "calls: a call down passes, a call up fails, a loop of calls fails" {
	make_tree 1 'a()'
	run -0 "$CHECK" t o
	rm -rf t o
	make_tree 'b()' 1
	run -1 "$CHECK" t o
	assert_output 'layers: low/a.c calls high/b.c: low may not use high, a layer above it'
	# the same loop in one layer
	rm -rf t o
	make_tree 'b()' 'a()'
	sed -i 's/^high$//' t/LAYERS
	mv t/high/b.c t/low/b.c
	mv o/high/b.o o/low/b.o
	run -1 "$CHECK" t o
	assert_output 'layers: calls loop: low/a.c low/b.c'
	# without the objects the includes alone pass
	run -0 "$CHECK" t
}

@test "a missing LAYERS or object folder is a usage error, not a pass" {
	mkdir empty
	run -2 "$CHECK" empty
	assert_output --partial 'LAYERS: no such file'
	run -2 "$CHECK" "$SRC/lib" /nonexistent
	assert_output --partial 'no such directory'
}
