#!/usr/bin/env bats
#
# 079-deb.bats - the Debian packages.  A copy of the source tree (its
# builds and configured files left out) is built with
# DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b into cg, libcg0
# and libcg-dev; each is unpacked with dpkg -x into one directory, where
# the files each should hold are, the programs run (cg-train-step
# --deterministic makes the very bytes the build under test makes), and
# examples/libcg builds against libcg-dev's headers and cg.pc and runs
# with libcg0's library.  scripts/deb-check installs the same packages
# with apt in a fresh Debian 12 root.  The build takes about 3 minutes on
# 2 loaded cores; skipped where dpkg-buildpackage, debhelper or a build
# dependency is missing (scripts/install-deps installs them), and in a
# build under the sanitizers: the packages are built from the source
# with Debian's flags, the same packages whatever the build under test,
# so the plain build's pass runs it and the sanitized one would only
# build them again.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

why_not() {
	if [ "${CG_SANITIZED:-0}" = 1 ]; then
		echo 'the packages do not change with the build under test: run in the plain build'
	elif ! command -v dpkg-buildpackage >/dev/null ||
		! command -v dh >/dev/null; then
		echo 'dpkg-buildpackage or debhelper is missing (scripts/install-deps)'
	elif ! (cd "$CG_SRCDIR" && dpkg-checkbuilddeps >/dev/null 2>&1); then
		echo 'a build dependency is missing (scripts/install-deps)'
	fi
}

setup_file() {
	# nothing to build: setup skips each test (a skip in setup_file
	# itself is a failure to this bats)
	[ -z "$(why_not)" ] || return 0
	cd "$BATS_FILE_TMPDIR" || return 1
	mkdir src
	tar -C "$CG_SRCDIR" --exclude=./.git --exclude='./build*' \
		--exclude=./debian/build --exclude=./debian/.debhelper \
		--exclude=./autom4te.cache -cf - . | tar -C src -xf -
	# a tree configured in place would refuse the package's build
	# directory: made clean as a fresh clone is
	if [ -f src/config.status ]; then
		env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
			make -s -C src distclean >/dev/null 2>&1
	fi
	# on every CPU (nproc without OMP_NUM_THREADS, which it would print)
	local jobs
	jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
	(cd src && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		DEB_BUILD_OPTIONS="nocheck parallel=$jobs" \
		dpkg-buildpackage -us -uc -b) \
		>build.log 2>&1 || {
		tail -n 30 build.log
		return 1
	}
	for p in cg libcg0 libcg-dev; do
		dpkg -x "$(echo ${p}_*.deb)" root
	done
}

setup() {
	local why
	why=$(why_not)
	[ -z "$why" ] || skip "$why"
	cd "$BATS_FILE_TMPDIR" || return 1
	R=$PWD/root
	MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
}

@test "three packages, each with its files and dependencies" {
	v=$(cg-init --version | awk '{ print $NF; exit }')
	for p in cg libcg0 libcg-dev; do
		[ -f "${p}_${v}_$(dpkg-architecture -qDEB_HOST_ARCH).deb" ]
	done
	for f in usr/bin/cg-train-step usr/bin/cg-cluster \
		usr/share/man/man1/cg-train-step.1.gz usr/share/man/man7/cg.7.gz \
		usr/share/doc/cg/examples/libcg/cgfit.c \
		"usr/lib/$MA/libcg.so.0.0.0" usr/include/cg/cg.h \
		"usr/lib/$MA/pkgconfig/cg.pc" usr/share/man/man3/libcg.3.gz; do
		[ -e "$R/$f" ] || fail "$f: missing"
	done
	assert [ "$(readlink "$R/usr/lib/$MA/libcg.so")" = libcg.so.0 ]
	run -0 dpkg-deb -f libcg-dev_*.deb Depends
	assert_output --partial "libcg0 (= $v)"
	run -0 dpkg-deb -f cg_*.deb Depends
	assert_output --partial 'libarchive13'
	refute_output --partial 'libcg0'
	# the symbols file travels with the library
	run -0 sh -c 'dpkg-deb --ctrl-tarfile libcg0_*.deb | tar -xOf - ./symbols'
	assert_line --index 0 'libcg.so.0 libcg0 #MINVER#'
	assert_line ' cg_model_train@CG_0 0.1.0'
}

@test "the packaged programs train to the bytes of the build under test" {
	images fm -n 2
	small_cvae fm-0.cgd m.cgm
	run -0 "$R/usr/bin/cg-train-step" --version
	"$R/usr/bin/cg-train-step" -q --deterministic -m m.cgm -d fm-0.cgd \
		--steps 3 --seed 1 --emit model -o deb.cgm
	cg-train-step -q --deterministic -m m.cgm -d fm-0.cgd --steps 3 \
		--seed 1 --emit model -o tree.cgm
	cmp deb.cgm tree.cgm
}

@test "examples/libcg builds against libcg-dev and runs with libcg0" {
	images fm2 -n 2
	small_cvae fm2-0.cgd m2.cgm
	cp -r "$R/usr/share/doc/cg/examples/libcg" ex
	PKG_CONFIG_PATH=$R/usr/lib/$MA/pkgconfig PKG_CONFIG_SYSROOT_DIR=$R \
		env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C ex
	LD_LIBRARY_PATH=$R/usr/lib/$MA run -0 ex/cgls m2.cgm
	assert_line --index 0 'm2.cgm: model, 12 tensors'
	LD_LIBRARY_PATH=$R/usr/lib/$MA run -0 ex/cgfit m2.cgm fm2-0.cgd 2 f.cgm
	assert_line --index 1 --regexp '^step 2: loss [0-9.]+$'
	# the library it ran with is the package's
	LD_LIBRARY_PATH=$R/usr/lib/$MA run -0 ldd ex/cgfit
	assert_line --regexp "libcg\.so\.0 => $R/usr/lib/$MA/libcg\.so\.0 "
}
