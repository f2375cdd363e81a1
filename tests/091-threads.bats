#!/usr/bin/env bats
#
# 091-threads.bats - which byte identity holds across thread counts.
#
# The promise (README, "Identical bytes"): every build gives the same
# bytes from run to run for the same inputs, seed and thread count, and
# cg-reduce and cg-apply (element-wise: no matrix products) at any thread
# count; the portable build (--without-blas --disable-native) gives the
# same bytes whatever the thread count, and on any x86-64
# (090-golden.bats).  The
# built-in matrix kernel sums every element of a product in one order
# whatever share of the product a thread gets, and every other kernel
# writes each output from one thread's work; a BLAS need not: OpenBLAS's
# Haswell kernels (those of every AVX2 CPU) sum the edge of a block in
# another order than its inside, so where the threads cut a product
# changes the last bits, and the programs' outputs with them.
#
# Each check runs tests/golden.sh (its sizes, its fixed seeds) and
# pipeline below, whose products are big enough to be shared among
# threads, at 1, 2 and 3 threads (more threads than this machine's cores
# too), through --threads and OMP_NUM_THREADS alike.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

# pipeline DIR: shard, init, train (grad, delta with state, model),
# reduce (an update with itself: --allow-duplicates), apply, eval and
# sample, cvae and cgpt, at sizes whose matrix
# products go to several threads; prints every file's SHA-256.
pipeline() {
	local fix=$CG_SRCDIR/tests/fixtures j="--threads $THREADS"
	mkdir -p "$1"
	cd "$1"
	cg-shard -q -n 1 -o fm "$fix/fashion-mnist-mini"
	cg-init -a cvae -d fm-0.cgd --hidden 200 --latent 8 --seed 3 -o cvae.cgm
	cg-train-step $j -q -m cvae.cgm -d fm-0.cgd --steps 2 --batch 50 \
		--seed 5 -o cvae-g.cgg
	cg-train-step $j -q -m cvae.cgm -d fm-0.cgd --emit delta --steps 2 \
		--batch 50 --seed 5 --state cvae.state -o cvae-d.cgg
	cg-train-step $j -q -m cvae.cgm -d fm-0.cgd --emit model --steps 3 \
		--batch 50 --seed 5 -o cvae-t.cgm
	cg-reduce $j -q --allow-duplicates -o cvae-r.cgg cvae-g.cgg cvae-g.cgg
	cg-apply $j -m cvae.cgm -o cvae-a.cgm cvae-r.cgg
	cg-eval $j -m cvae-t.cgm -d fm-0.cgd --json >cvae-eval.json
	cg-sample $j -m cvae-t.cgm --seed 7 -n 3 --format pgm -o cvae.pgm
	cg-shard -q -n 1 -o fort "$fix/text/fortunes"
	cg-init -a cgpt -d fort-0.cgd --width 64 --heads 4 --layers 2 \
		--context 64 --seed 3 -o cgpt.cgm
	cg-train-step $j -q -m cgpt.cgm -d fort-0.cgd --steps 2 --batch 8 \
		--seed 5 -o cgpt-g.cgg
	cg-train-step $j -q -m cgpt.cgm -d fort-0.cgd --emit delta --steps 2 \
		--batch 8 --seed 5 --state cgpt.state -o cgpt-d.cgg
	cg-train-step $j -q -m cgpt.cgm -d fort-0.cgd --emit model --steps 2 \
		--batch 8 --seed 5 -o cgpt-t.cgm
	cg-reduce $j -q --allow-duplicates -o cgpt-r.cgg cgpt-d.cgg cgpt-d.cgg
	cg-apply $j -m cgpt.cgm --outer nesterov -o cgpt-a.cgm cgpt-r.cgg
	cg-eval $j -m cgpt-t.cgm -d fort-0.cgd --json --generate \
		--max-bytes 8 --limit 4 >cgpt-eval.json
	cg-sample $j -m cgpt-t.cgm -c computers -n 2 --seed 7 \
		--max-bytes 30 >cgpt-sample.txt
	sha256sum -- * | LC_ALL=C sort -k 2
}

# digests WHAT THREADS: WHAT's digests at THREADS threads, in $T/WHAT-N.
digests() {
	local out=$BATS_TEST_TMPDIR/$1-$2
	if [ "$1" = golden ]; then
		THREADS=$2 "$CG_SRCDIR/tests/golden.sh" "$out.d" >"$out"
	else
		(THREADS=$2 OMP_NUM_THREADS=$2 pipeline "$out.d") >"$out"
	fi
	[ -s "$out" ]
}

# Every digest file among $@ equal to the first; a diff otherwise.
all_same() {
	local first=$1 f
	shift
	for f in "$@"; do
		diff -u "$first" "$f" || return 1
	done
}

portable_only() {
	[ "${CG_PORTABLE:-0}" = 1 ] ||
		skip "not the portable build: the BLAS picks the order of sums per block"
}

@test "portable build: golden.sh's digests at 1, 2 and 3 threads are the same" {
	portable_only
	for t in 1 2 3; do digests golden $t; done
	T=$BATS_TEST_TMPDIR
	all_same "$T/golden-1" "$T/golden-2" "$T/golden-3"
	# the one-thread run is the recorded one (090 says so too)
	diff -u "$CG_SRCDIR/tests/golden.sha256" "$T/golden-1"
}

@test "portable build: products shared among threads, the same digests at 1, 2 and 3" {
	portable_only
	for t in 1 2 3; do digests pipeline $t; done
	T=$BATS_TEST_TMPDIR
	all_same "$T/pipeline-1" "$T/pipeline-2" "$T/pipeline-3"
	# every program's output is there: 7 cvae, 7 cgpt files and the inputs
	run -0 grep -c . "$T/pipeline-1"
	assert_output 20
}

@test "every build: the same thread count gives the same bytes, run after run" {
	for k in a b; do
		(THREADS=3 OMP_NUM_THREADS=3 pipeline "$BATS_TEST_TMPDIR/$k") \
			>"$BATS_TEST_TMPDIR/$k.sha256"
		THREADS=2 "$CG_SRCDIR/tests/golden.sh" "$BATS_TEST_TMPDIR/g$k" \
			>>"$BATS_TEST_TMPDIR/$k.sha256"
	done
	[ -s "$BATS_TEST_TMPDIR/a.sha256" ]
	all_same "$BATS_TEST_TMPDIR/a.sha256" "$BATS_TEST_TMPDIR/b.sha256"
}

@test "every build: cg-reduce and cg-apply (element-wise) give the same bytes at 1, 2 and 3 threads" {
	(THREADS=1 OMP_NUM_THREADS=1 pipeline "$BATS_TEST_TMPDIR/in") >/dev/null
	cd "$BATS_TEST_TMPDIR/in"
	for t in 1 2 3; do
		cg-reduce -j $t -q --allow-duplicates -o r$t.cgg cvae-g.cgg \
			cvae-r.cgg cvae-g.cgg
		cg-reduce -j $t -q --allow-duplicates --op sum -o s$t.cgg \
			cgpt-g.cgg cgpt-g.cgg
		cg-apply -j $t -m cvae.cgm --opt adam -o a$t.cgm r$t.cgg
		cg-apply -j $t -m cgpt.cgm --outer nesterov -o n$t.cgm cgpt-r.cgg
	done
	for f in r s a n; do
		cmp ${f}1.* ${f}2.*
		cmp ${f}1.* ${f}3.*
	done
}

@test "OMP_NUM_THREADS is the programs' default thread count" {
	# cg-train-step's memory plan reserves 2 MiB per thread (lib/train/train.c)
	# beside what the process holds (which moves by some KiB from run to
	# run): the default at OMP_NUM_THREADS=3 plans as --threads 3 does,
	# 4 MiB above --threads 1
	local fix=$CG_SRCDIR/tests/fixtures
	cd "$BATS_TEST_TMPDIR"
	cg-shard -q -n 1 -o fm "$fix/fashion-mnist-mini"
	cg-init -a cvae -d fm-0.cgd --hidden 32 --seed 3 -o m.cgm
	plan() {
		rm -f log.json
		cg-train-step -q -m m.cgm -d fm-0.cgd --steps 1 --batch 8 \
			--max-memory 512M --log log.json -o g.cgg "$@"
		jq .memory_plan log.json
	}
	one=$(OMP_NUM_THREADS=1 plan --threads 1)
	three=$(OMP_NUM_THREADS=1 plan --threads 3)
	env=$(OMP_NUM_THREADS=3 plan)
	echo "plans: --threads 1 $one, --threads 3 $three, OMP_NUM_THREADS=3 $env"
	d=$((env - three))
	[ "${d#-}" -lt 1048576 ]
	[ $((env - one)) -gt 3145728 ]
}
