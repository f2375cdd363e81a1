#!/usr/bin/env bats
#
# 078-libcg.bats - the installed library.  "make install DESTDIR=..."
# stages libcg.so.0 (its soname and links), the headers of include/cg/,
# cg.pc and the section-3 pages; examples/libcg/, copied out of the
# tree, builds against the staged library through pkg-config and runs
# on files made by the programs: cgls lists a model as cg-inspect does,
# cgfit trains a model to the very bytes cg-train-step writes and
# draws from it, and a damaged file is one line and status 1.  The
# library exports the functions of include/cg/ and nothing else, each
# at symbol version CG_0, as lib/libcg.map, the headers, the pages and
# debian/libcg0.symbols list them.  Skipped in a build without the
# shared library (--disable-shared, sanitizers).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	# nothing to install where there is no shared library: setup skips
	# each test
	[ -n "${CG_BUILDDIR:-}" ] &&
		[ -f "$CG_BUILDDIR/lib/libcg.so.0.0.0" ] || return 0
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	# make check's own make leaves its jobserver in the environment
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		make -s -C "$CG_BUILDDIR" install DESTDIR="$PWD/dest" \
		>install.log 2>&1 || {
		cat install.log
		return 1
	}
	images fm -n 2
	small_cvae fm-0.cgd cvae.cgm
	texts ft -n 2
	small_cgpt ft-0.cgd cgpt.cgm
}

setup() {
	[ -n "${CG_BUILDDIR:-}" ] || skip 'needs the build tree (make check)'
	[ -f "$CG_BUILDDIR/lib/libcg.so.0.0.0" ] ||
		skip 'this build has no shared library (--disable-shared or sanitizers)'
	cd "$BATS_FILE_TMPDIR"
	D=$PWD/dest
	PC=$(find "$D" -name cg.pc)
	LIBDIR=$(dirname "$(dirname "$PC")")
	export PKG_CONFIG_PATH=${PC%/cg.pc} PKG_CONFIG_SYSROOT_DIR=$D
	export LD_LIBRARY_PATH=$LIBDIR
}

# The OpenBLAS kernels cg's programs choose for themselves
# (lib/cli/runtime.c): SkylakeX on an AVX-512 CPU unless set; a program
# of one's own gets OpenBLAS's own choice (libcg(3) says to set it).
blas_as_programs() {
	if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo &&
		grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
		echo OPENBLAS_CORETYPE=SkylakeX
	fi
}

# The example, built once from a copy outside the tree.
example() {
	if [ ! -x ex/cgfit ]; then
		rm -rf ex && cp -r "$CG_SRCDIR/examples/libcg" ex &&
			env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
				make -s -C ex >ex.log 2>&1 || {
			cat ex.log
			return 1
		}
	fi
}

@test "make install stages libcg.so.0, its headers, cg.pc and its pages" {
	[ -n "$PC" ]
	assert [ "$(readlink "$LIBDIR/libcg.so")" = libcg.so.0 ]
	assert [ "$(readlink "$LIBDIR/libcg.so.0")" = libcg.so.0.0.0 ]
	run -0 readelf -d "$LIBDIR/libcg.so.0.0.0"
	assert_output --partial 'Library soname: [libcg.so.0]'
	for h in cg.h file.h model.h; do
		[ -f "$(dirname "$LIBDIR")/include/cg/$h" ]
	done
	for p in libcg.3 cg_file_read.3 cg_model_read.3; do
		[ -f "$(find "$D" -name "$p")" ]
	done
	run -0 pkg-config --modversion cg
	assert_output "$(cg-init --version | awk '{ print $NF; exit }')"
	run -0 pkg-config --cflags --libs cg
	assert_equal "$(echo $output)" "-I$(dirname "$LIBDIR")/include -L$LIBDIR -lcg"
}

@test "only the documented API is exported, each at CG_0" {
	run -0 nm -D --defined-only "$LIBDIR/libcg.so.0"
	exported=$(awk '$3 != "CG_0" { sub(/@@CG_0$/, "", $3); print $3 }' \
		<<<"$output" | sort)
	# every exported symbol is a function at CG_0, and CG_0 is there
	run -0 awk '$3 == "CG_0" { n++ } $3 != "CG_0" &&
		($2 != "T" || $3 !~ /^cg_[a-z0-9_]+@@CG_0$/) { print; bad = 1 }
		END { exit bad || n != 1 }' <<<"$output"
	mapped=$(sed -n 's/^[[:space:]]*\(cg_[a-z0-9_]*\);$/\1/p' \
		"$CG_SRCDIR/lib/libcg.map" | sort)
	# the functions the headers declare, comments left out
	declared=$(cpp -P -I"$CG_SRCDIR/include" "$CG_SRCDIR/include/cg/cg.h" |
		grep -o 'cg_[a-z0-9_]*(' | tr -d '(' | sort -u)
	paged=$(cat "$CG_SRCDIR"/man/*.3 | sed -n 's/^\.Fn \(cg_[a-z0-9_]*\) .*/\1/p' |
		sort -u)
	debian=$(sed -n 's/^ \(cg_[a-z0-9_]*\)@CG_0 .*/\1/p' \
		"$CG_SRCDIR/debian/libcg0.symbols" | sort)
	[ "$(wc -l <<<"$exported")" -ge 30 ]
	assert_equal "$mapped" "$exported"
	assert_equal "$declared" "$exported"
	assert_equal "$paged" "$exported"
	assert_equal "$debian" "$exported"
}

@test "the pages of the library are clean for mandoc" {
	command -v mandoc >/dev/null || skip 'mandoc is missing (scripts/install-deps)'
	run -0 mandoc -T lint -W warning "$CG_SRCDIR"/man/*.3
	assert_output ''
}

@test "examples/libcg builds with pkg-config and lists a model as cg-inspect does" {
	example
	run -0 ex/cgls cvae.cgm fm-0.cgd
	assert_line --index 0 'cvae.cgm: model, 12 tensors'
	# name, dtype and shape of every tensor, as cg-inspect says them
	want=$(cg-inspect --json --no-stats cvae.cgm fm-0.cgd |
		jq -r '.tensors[] | "\(.name) \(.dtype) \(.shape | map(tostring) | join("x"))"')
	got=$(grep -v ': ' <<<"$output" | cut -d' ' -f1-3)
	assert_equal "$got" "$want"
	# the mean of a tensor set to zero at init, and of a data tensor
	assert_line 'prior.mu f32 10x4 0'
	assert_line --regexp '^cond u32 50 [0-9.]+$'
}

@test "cgfit trains a model to the bytes cg-train-step writes, and draws" {
	example
	# shellcheck disable=SC2046 # a word or none
	run -0 --separate-stderr env $(blas_as_programs) ex/cgfit cvae.cgm \
		fm-0.cgd 3 fit.cgm
	assert_line --index 0 --regexp "^libcg $(pkg-config --modversion cg): cvae model, [0-9]+ parameters, step 0; 50 examples\$"
	assert_line --index 1 --regexp '^step 3: loss [0-9.]+$'
	assert_line --index 2 --regexp '^4 images 28x28x1 of T-shirt/top: mean pixel 0\.[0-9]+$'
	assert_equal "$stderr" ''
	cg-train-step -q -m cvae.cgm -d fm-0.cgd --steps 3 --batch 32 \
		--seed 1 --emit model -o ref.cgm
	cmp fit.cgm ref.cgm
	# and on from there, through a pipe
	# shellcheck disable=SC2046
	run -0 env $(blas_as_programs) ex/cgfit - fm-1.cgd 2 fit2.cgm <fit.cgm
	assert_line --index 1 --regexp '^step 5: loss '
	cg-train-step -q -m ref.cgm -d fm-1.cgd --steps 2 --batch 32 \
		--seed 1 --emit model -o ref2.cgm
	cmp fit2.cgm ref2.cgm
}

@test "cgfit trains a text model and draws a text" {
	example
	run -0 ex/cgfit cgpt.cgm ft-0.cgd 2 fitt.cgm
	assert_line --index 1 --regexp '^step 2: loss [0-9.]+$'
	assert_line --index 2 --regexp '^text of [^:]+: [ -~]{0,60}$'
	run -0 cg-inspect --json --no-stats fitt.cgm
	assert_equal "$(jq -r .step <<<"$output")" 2
}

@test "a damaged file or a bad argument: one line, status 1, nothing written" {
	example
	head -c 3000 cvae.cgm >cut.cgm
	run -1 --separate-stderr ex/cgls cut.cgm
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^cgls: cut\.cgm: '
	# a shard that does not fit the model
	run -1 --separate-stderr ex/cgfit cvae.cgm ft-0.cgd 2 no.cgm
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^cgfit: '
	[ ! -e no.cgm ]
	run -1 --separate-stderr ex/cgfit cut.cgm fm-0.cgd 2 no.cgm
	assert_regex "$stderr" '^cgfit: cut\.cgm: '
	[ ! -e no.cgm ]
}
