#!/usr/bin/env bats
#
# 092-deterministic.bats - --deterministic: the same bytes in every build,
# at any thread count, on any x86-64.
#
# cg-train-step, cg-eval and cg-sample --deterministic take the built-in
# matrix kernel whatever the build (its sums over K in one order however
# the threads share the product out), and every other kernel sums in
# fixed lanes (lib/core/par.h), compiled without FMA contraction: so the
# default build (OpenBLAS, -march=native: AVX-512 here) gives what the
# portable build (--without-blas --disable-native: SSE2) gives, and the
# portable build is the same on every x86-64 (090-golden.bats).  A
# build for AVX2 and FMA (--disable-native CFLAGS="-O2 -march=haswell",
# with OpenBLAS) passes this file too.  The
# recorded digests were printed by the portable build:
# tests/golden-det.sha256 by DET=1 tests/golden.sh SCRATCH-DIR, and
# tests/deterministic.sha256 by this file's pipeline (PRINT=1 below).
# cg-reduce and cg-apply are element-wise, with no order of sums to
# choose: they take no flag, and their outputs in golden-det.sha256
# (cvae-g.cgg, cvae-sync.cgm, ...) are the portable build's too.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

. "$CG_SRCDIR/tests/deterministic.sh"

@test "--deterministic: golden.sh's digests are the portable build's, in this build" {
	DET=1 run -0 "$CG_SRCDIR/tests/golden.sh" "$BATS_TEST_TMPDIR/run"
	diff -u "$CG_SRCDIR/tests/golden-det.sha256" <(echo "$output")
}

@test "--deterministic: products shared among threads, the portable build's digests at 1, 2, 3 and 4 threads" {
	local T=$BATS_TEST_TMPDIR
	for t in 1 2 3 4; do
		(THREADS=$t OMP_NUM_THREADS=$t pipeline "$T/p$t") >"$T/p$t.sha"
		diff -u "$CG_SRCDIR/tests/deterministic.sha256" "$T/p$t.sha"
	done
	# every output is there: 7 cvae, 8 cgpt files and the two shards
	run -0 grep -c . "$T/p1.sha"
	assert_output 17
}

@test "--deterministic: OpenBLAS told it runs on a Haswell changes nothing" {
	(THREADS=4 OMP_NUM_THREADS=4 OPENBLAS_CORETYPE=Haswell \
		pipeline "$BATS_TEST_TMPDIR/h") >"$BATS_TEST_TMPDIR/h.sha"
	diff -u "$CG_SRCDIR/tests/deterministic.sha256" "$BATS_TEST_TMPDIR/h.sha"
}

@test "--deterministic: a q8_0 model's figures on every kernel path of this CPU are the portable path's" {
	cd "$BATS_TEST_TMPDIR"
	(THREADS=2 pipeline p) >/dev/null
	cd p
	# a path this CPU lacks is refused, and skipped here
	for k in portable avx2 avx512vnni neon; do
		CG_QKERNEL=$k cg-eval -j 1 -m cgpt-q8.cgm -d fort-0.cgd \
			--json >/dev/null 2>&1 || continue
		CG_QKERNEL=$k cg-eval --deterministic -j 1 -m cgpt-q8.cgm \
			-d fort-0.cgd --json >$k.json
		cmp cgpt-q8-eval.json $k.json
	done
}

@test "--deterministic: the portable build's tensors are those it makes without the flag" {
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build (configure --without-blas --disable-native)"
	cd "$BATS_TEST_TMPDIR"
	"$CG_SRCDIR/tests/golden.sh" plain >/dev/null
	DET=1 "$CG_SRCDIR/tests/golden.sh" det >/dev/null
	for f in plain/*.cgg plain/*.cgm; do
		run -0 cg-inspect --diff "$f" "det/${f#plain/}"
		refute_output --regexp '[1-9][0-9]* differ'
	done
	# what only the flag's record changes: the grads, deltas, states
	# (they name the output's digest) and the metrics line
	cmp plain/cvae-sync.cgm det/cvae-sync.cgm
	cmp plain/cgpt-diloco.cgm det/cgpt-diloco.cgm
	cmp plain/cgpt-sample.txt det/cgpt-sample.txt
}

@test "--deterministic: a grad or delta records its call; a model does not" {
	cd "$BATS_TEST_TMPDIR"
	local fix=$CG_SRCDIR/tests/fixtures
	cg-shard -q -n 1 -o fm "$fix/fashion-mnist-mini"
	cg-init -a cvae -d fm-0.cgd --hidden 16 --seed 3 -o m.cgm
	cg-train-step --deterministic -q -m m.cgm -d fm-0.cgd --emit delta \
		--steps 2 --batch 8 --seed 18446744073709551615 --opt sgd \
		--lr 0.5 --clip 2 -o d.cgg
	run -0 jq -c '.call | [.deterministic, .emit, .steps, .batch, .seed,
		.order, .clip, .optim.name, .optim.lr, .chunk, .checkpoint,
		has("state"), (.data.sha256 | length)]' \
		<(tar xOf d.cgg cg.json)
	assert_output '[true,"delta",2,8,"18446744073709551615","shuffle",2,"sgd",0.5,0,false,false,64]'
	cg-train-step -q -m m.cgm -d fm-0.cgd --steps 1 --batch 8 -o g.cgg
	run -0 jq 'has("call")' <(tar xOf g.cgg cg.json)
	assert_output false
	cg-train-step --deterministic -q -m m.cgm -d fm-0.cgd --emit model \
		--steps 1 --batch 8 -o t.cgm
	run -0 jq 'has("call")' <(tar xOf t.cgm cg.json)
	assert_output false
}

@test "--deterministic: not with --time-limit (usage, exit 2)" {
	cd "$BATS_TEST_TMPDIR"
	run -2 --separate-stderr cg-train-step --deterministic \
		--time-limit 5 -m m.cgm -d s.cgd -o g.cgg
	assert_equal "${stderr_lines[0]}" "cg-train-step: --deterministic and --time-limit conflict: a deadline's steps depend on the machine"
	[ ! -e g.cgg ]
}
