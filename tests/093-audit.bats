#!/usr/bin/env bats
#
# 093-audit.bats - cg-audit: a worker's update made again and compared.
#
# Honest workers' updates, made --deterministic at other thread counts
# (and OpenBLAS told it runs on a Haswell), pass; an update with one
# weight changed by one ulp (tests/unit/mkcg -x nudge: its digest made
# again, so the file verifies) is caught, and so is a changed sample
# count; a wrong base, shard or state is refused, each with one line
# naming it; an update not made in deterministic mode is refused; hostile
# inputs are one line and exit 1 with nothing on stdout; a round's
# fraction is drawn from the seed.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

# Shards, models, and workers' updates, made once for the file.
setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2
	model cvae fm-0.cgd cvae.cgm --hidden 64 --latent 8 --seed 3
	texts fort -n 1
	model cgpt fort-0.cgd cgpt.cgm --width 32 --heads 2 --layers 1 \
		--context 32 --seed 3
	# worker 0: two DiLoCo calls through its state at 3 threads; the
	# coordinator keeps the state from before the second
	local w="cg-train-step --deterministic -q --emit delta --steps 3"
	$w -j 3 -m cvae.cgm -d fm-0.cgd --batch 20 --seed 5 \
		--state w0.state -o d1.cgg
	cp w0.state w0.before
	OPENBLAS_CORETYPE=Haswell $w -j 3 -m cvae.cgm -d fm-0.cgd \
		--batch 20 --seed 5 --state w0.state -o d2.cgg
	# grads of a round, at 2 and 4 threads
	for k in 0 1; do
		cg-train-step --deterministic -q -j $((2 + 2 * k)) -m cvae.cgm \
			-d fm-$k.cgd --steps 2 --batch 10 --seed $k -o g$k.cgg
	done
	cg-train-step --deterministic -q -j 3 -m cgpt.cgm -d fort-0.cgd \
		--steps 2 --batch 4 --seed 5 -o t.cgg
	# the same without the flag
	cg-train-step -q -m cvae.cgm -d fm-0.cgd --steps 2 --batch 10 -o nd.cgg
}

setup() {
	cd "$BATS_FILE_TMPDIR"
}

# edit_manifest IN OUT JQ: IN with its cg.json rewritten by jq's JQ
# (tensors and their digests as they were).
edit_manifest() {
	tar xOf "$1" cg.json | jq -c "$3" >"$BATS_TEST_TMPDIR/m.json"
	python3 - "$1" "$2" "$BATS_TEST_TMPDIR/m.json" <<'PY'
import io, sys, tarfile
src, dst, man = sys.argv[1:]
with tarfile.open(src) as t, tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as o:
    for m in t.getmembers():
        b = open(man, "rb").read() if m.name == "cg.json" else t.extractfile(m).read()
        ti = tarfile.TarInfo(m.name); ti.size = len(b)
        o.addfile(ti, io.BytesIO(b))
PY
}

@test "cg-audit --help, a bad option, a missing operand" {
	run -0 cg-audit --help
	assert_line --partial "--fraction P"
	run -2 --separate-stderr cg-audit --frob
	run -2 --separate-stderr cg-audit -m cvae.cgm d1.cgg
	assert_equal "${stderr_lines[0]}" "cg-audit: no data shard (-d)"
	run -2 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd \
		--fraction 0.5 d1.cgg
	assert_equal "${stderr_lines[0]}" "cg-audit: --fraction draws from a round (-r)"
	run -2 --separate-stderr cg-audit -m cvae.cgm -r list -d fm-0.cgd
	run -2 --separate-stderr cg-audit -m cvae.cgm -r list --fraction 0
}

@test "an honest worker's delta, made at 3 threads from its state, matches at 1 thread" {
	run -0 --separate-stderr cg-audit -j 1 -m cvae.cgm -d fm-0.cgd \
		-s w0.before d2.cgg
	assert_output "d2.cgg: match (18 tensors)"
	assert_equal "$stderr" ""
	# and its first call, made without a state before it
	OMP_NUM_THREADS=2 run -0 cg-audit -m cvae.cgm -d fm-0.cgd d1.cgg
	assert_output "d1.cgg: match (18 tensors)"
}

@test "a worker that writes each call's delta under one name: its state before the call still audits it" {
	local w="cg-train-step --deterministic -q --emit delta --steps 2"
	local m=$BATS_FILE_TMPDIR/cvae.cgm d=$BATS_FILE_TMPDIR/fm-1.cgd
	cd "$BATS_TEST_TMPDIR"
	for k in 1 2; do
		[ $k = 2 ] && cp w.state w.before
		$w -j $((k + 1)) -m "$m" -d "$d" --batch 10 --state w.state \
			-o u.cgg
	done
	run -0 cg-audit -m "$m" -d "$d" -s w.before u.cgg
	assert_output "u.cgg: match (18 tensors)"
}

@test "a call cut into chunks by --max-memory: its plan recorded and made again, at another thread count" {
	cd "$BATS_TEST_TMPDIR"
	local m=$BATS_FILE_TMPDIR/cgpt.cgm d=$BATS_FILE_TMPDIR/fort-0.cgd mb
	# the least budget that plans chunks (the process's own size moves
	# with the build: sanitizers)
	for mb in 24 26 28 32 40 48 64 96 128 192 256; do
		rm -f log
		cg-train-step --deterministic -q -j 2 -m "$m" -d "$d" \
			--steps 2 --batch 64 --max-memory ${mb}M --log log \
			-o c.cgg 2>/dev/null || continue
		[ "$(jq .chunk log)" -gt 0 ] && break
	done
	[ "$(jq .chunk log)" -gt 0 ] || skip "no budget planned chunks"
	run -0 jq '.call.chunk' <(tar xOf c.cgg cg.json)
	assert_output "$(jq .chunk log)"
	run -0 cg-audit -j 1 -m "$m" -d "$d" c.cgg
	assert_output --regexp "^c\.cgg: match \([0-9]+ tensors\)\$"
}

@test "honest grads of cvae and cgpt match; an update read from standard input" {
	run -0 cg-audit -j 1 -m cvae.cgm -d fm-1.cgd g1.cgg
	assert_output "g1.cgg: match (18 tensors)"
	run -0 cg-audit -j 2 -m cgpt.cgm -d fort-0.cgd - <t.cgg
	assert_output --regexp '^-: match \([0-9]+ tensors\)$'
}

@test "every grad and delta of golden.sh's deterministic run matches (a loss cJSON printed in 15 digits too)" {
	DET=1 "$CG_SRCDIR/tests/golden.sh" "$BATS_TEST_TMPDIR/g" >/dev/null
	cd "$BATS_TEST_TMPDIR/g"
	for k in 0 1; do
		for u in g d; do
			run -0 cg-audit -m cvae.cgm -d fm-$k.cgd cvae-$u$k.cgg
			run -0 cg-audit -m cgpt.cgm -d fort-$k.cgd cgpt-$u$k.cgg
		done
	done
}

@test "one weight changed by one ulp, its digest made again: caught" {
	mkcg -x nudge d2.cgg "$BATS_TEST_TMPDIR/bad.cgg"
	# a valid file: every digest verifies
	run -0 cg-inspect --verify "$BATS_TEST_TMPDIR/bad.cgg"
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd \
		-s w0.before "$BATS_TEST_TMPDIR/bad.cgg"
	assert_line --index 0 "$BATS_TEST_TMPDIR/bad.cgg: mismatch: 1 of 18 tensors differ"
	assert_line --index 1 --regexp '^  [a-z0-9.]+: 1 of [0-9]+ differ, largest difference [0-9.e-]+$'
	assert_equal "${#lines[@]}" 2
	run -1 cg-audit --json -m cvae.cgm -d fm-0.cgd -s w0.before \
		"$BATS_TEST_TMPDIR/bad.cgg"
	run -0 jq -c '[.result, .tensors, (.differ | length), .differ[0].differ,
		(.differ[0].max_diff > 0)]' <<<"$output"
	assert_output '["mismatch",18,1,1,true]'
}

@test "a sample count inflated (a larger weight in the mean): caught" {
	edit_manifest g0.cgg "$BATS_TEST_TMPDIR/big.cgg" '.samples *= 10 | .weight *= 10'
	run -1 cg-audit -m cvae.cgm -d fm-0.cgd "$BATS_TEST_TMPDIR/big.cgg"
	assert_line --index 0 "$BATS_TEST_TMPDIR/big.cgg: mismatch: 0 of 18 tensors differ, and its figures"
	assert_line "  samples: sent 200, recomputed 20"
}

@test "a wrong base, shard or state: refused, one line naming it" {
	cg-train-step -q -m cvae.cgm -d fm-0.cgd --emit model --steps 1 \
		--batch 10 -o "$BATS_TEST_TMPDIR/other.cgm"
	run -1 --separate-stderr cg-audit -m "$BATS_TEST_TMPDIR/other.cgm" \
		-d fm-0.cgd -s w0.before d2.cgg
	assert_output ""
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "cg-audit: d2.cgg: computed from another model "* ]]
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-1.cgd -s w0.before d2.cgg
	assert_equal "$stderr" "cg-audit: fm-1.cgd: not the shard d2.cgg was made from"
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd -s w0.state d2.cgg
	assert_equal "$stderr" "cg-audit: w0.state: not the state d2.cgg started from"
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd d2.cgg
	assert_equal "$stderr" "cg-audit: d2.cgg: made from a state: the worker's state before the call is needed"
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd -s w0.before d1.cgg
	assert_equal "$stderr" "cg-audit: w0.before: d1.cgg was made without a state"
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd -s nosuch d1.cgg
	assert_equal "$stderr" "cg-audit: nosuch: no such state"
}

@test "an update not made in deterministic mode: refused, one line" {
	run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd nd.cgg
	assert_output ""
	assert_equal "$stderr" "cg-audit: nd.cgg: not made in deterministic mode (cg-train-step --deterministic): it cannot be recomputed"
}

@test "hostile inputs: one line, exit 1, nothing on stdout" {
	local T=$BATS_TEST_TMPDIR
	head -c 3000 d2.cgg >"$T/short.cgg"
	echo garbage >"$T/garbage.cgg"
	edit_manifest g0.cgg "$T/seed.cgg" '.call.seed = "-1"'
	edit_manifest g0.cgg "$T/steps.cgg" '.call.steps = 1e15'
	edit_manifest g0.cgg "$T/chunk.cgg" '.call.chunk = 11'
	edit_manifest g0.cgg "$T/emit.cgg" '.call.emit = "delta"'
	edit_manifest g0.cgg "$T/optim.cgg" '.call.optim = 3'
	edit_manifest g0.cgg "$T/teacher.cgg" '.call.distilled = true'
	for f in short garbage seed steps chunk emit optim teacher nosuch; do
		run -1 --separate-stderr cg-audit -m cvae.cgm -d fm-0.cgd \
			"$T/$f.cgg"
		echo "$f: $stderr"
		assert_output ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == "cg-audit: $T/$f.cgg: "* ]]
	done
	run -1 --separate-stderr cg-audit -m cvae.cgm -d "$T/garbage.cgg" g0.cgg
	assert_equal "${#stderr_lines[@]}" 1
	run -1 --separate-stderr cg-audit -m "$T/short.cgg" -d fm-0.cgd g0.cgg
	assert_equal "${#stderr_lines[@]}" 1
	printf 'g0.cgg\n' >"$T/list"
	run -1 --separate-stderr cg-audit -m cvae.cgm -r "$T/list"
	assert_equal "$stderr" "cg-audit: $T/list: line 1: not UPDATE SHARD [STATE]"
}

@test "a round: every update audited, the changed one caught, the others match" {
	local T=$BATS_TEST_TMPDIR
	mkcg -x nudge g1.cgg "$T/g1-bad.cgg"
	cat >"$T/round" <<-LIST
		# update shard [state]
		g0.cgg fm-0.cgd
		$T/g1-bad.cgg fm-1.cgd

		d1.cgg fm-0.cgd
		d2.cgg fm-0.cgd w0.before
	LIST
	run -1 cg-audit -m cvae.cgm -r "$T/round"
	assert_line "g0.cgg: match (18 tensors)"
	assert_line "$T/g1-bad.cgg: mismatch: 1 of 18 tensors differ"
	assert_line "d1.cgg: match (18 tensors)"
	assert_line "d2.cgg: match (18 tensors)"
}

@test "a round's fraction: ceil(P N) drawn from the seed, the rest skipped" {
	local T=$BATS_TEST_TMPDIR
	printf '%s\n' "g0.cgg fm-0.cgd" "g1.cgg fm-1.cgd" "d1.cgg fm-0.cgd" \
		"d2.cgg fm-0.cgd w0.before" >"$T/round"
	run -0 cg-audit --json -m cvae.cgm -r "$T/round" --fraction 0.5 --seed 11
	run -0 jq -s -c 'map(.result) | group_by(.) | map([.[0], length])' <<<"$output"
	assert_output '[["match",2],["skipped",2]]'
	a=$(cg-audit -m cvae.cgm -r "$T/round" --fraction 0.25 --seed 11)
	b=$(cg-audit -m cvae.cgm -r "$T/round" --fraction 0.25 --seed 11)
	assert_equal "$a" "$b"
	run -0 grep -c skipped <<<"$a"
	assert_output 3
}
