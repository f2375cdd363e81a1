#!/usr/bin/env bats
#
# 077-duplicates.bats - every update counts once.  cg-reduce refuses a
# second input with the content of one before it (a copy under another
# name, a file given twice, a replayed signed update), or from the same
# worker and base model (a retried call, a second delta signed by the
# same key), in one line naming both, exit 1, nothing written; a
# reduction lists its contributors, so that a reduction of reductions
# refuses two that overlap; --allow-duplicates takes them.  cg-inbox
# sets such an update aside and publishes from the others; cg-cluster
# refuses the round naming the hosts (its hosts here are this machine,
# reached by a stand-in for ssh that runs the command here).  The
# programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	images fm -n 3 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
	# three workers' deltas, and worker 0 called again on the same
	# model with more steps (a retry)
	local w
	for w in 0 1 2; do
		cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta \
			--steps 2 --batch 8 -o d$w.cgg
	done
	cg-train-step -q -m model.cgm -d fm-0.cgd --emit delta --steps 3 \
		--batch 8 -o retry.cgg
	# the same three signed, each with its worker's key
	for w in 0 1 2; do
		cg-key -C worker$w -o w$w.key >/dev/null
		cg-train-step -q --sign w$w.key -m model.cgm -d fm-$w.cgd \
			--emit delta --steps 2 --batch 8 -o s$w.cgg
	done
	cat w0.key.pub w1.key.pub w2.key.pub >trusted
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
}

manifest() { tar xOf "$1" cg.json; }

# rewrite IN OUT JQ: IN with its manifest passed through the jq filter
# JQ, the tensors as they were (their digests still right)
rewrite() {
	python3 - "$1" "$2" "$(manifest "$1" | jq -c "$3")" <<'EOF'
import io, sys, tarfile
src, dst, man = sys.argv[1:4]
with tarfile.open(src) as t, \
        tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as o:
    for m in t.getmembers():
        b = man.encode() if m.name == "cg.json" else t.extractfile(m).read()
        ti = tarfile.TarInfo(m.name)
        ti.size, ti.mode = len(b), 0o644
        o.addfile(ti, io.BytesIO(b))
EOF
}

@test "cg-train-step: an update names its worker, the shard's identity and the seed" {
	run -0 jq -c '.worker | [(.shard | length), .seed]' <(manifest "$D/d0.cgg")
	assert_output '[64,"0"]'
	[ "$(manifest "$D/d0.cgg" | jq .worker)" = "$(manifest "$D/retry.cgg" | jq .worker)" ]
	[ "$(manifest "$D/d0.cgg" | jq .worker)" != "$(manifest "$D/d1.cgg" | jq .worker)" ]
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --batch 8 \
		--seed 18446744073709551615 -o g.cgg
	run -0 jq -r .worker.seed <(manifest g.cgg)
	assert_output 18446744073709551615
	# a model is no update: no worker
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --batch 8 \
		--emit model -o m.cgm
	run -0 jq 'has("worker")' <(manifest m.cgm)
	assert_output false
}

@test "cg-reduce u u u: refused, a line for each copy naming the first, nothing written" {
	run -1 --separate-stderr cg-reduce "$D/d0.cgg" "$D/d0.cgg" "$D/d0.cgg" -o r.cgg
	[ -z "$output" ]
	assert_equal "${#stderr_lines[@]}" 2
	[[ ${stderr_lines[0]} == "cg-reduce: $D/d0.cgg: the same update as $D/d0.cgg (tensors sha256 "*"...)" ]]
	[ "${stderr_lines[1]}" = "${stderr_lines[0]}" ]
	[ ! -e r.cgg ]
	# a copy under another name, and one through a pipe
	cp "$D/d1.cgg" copy.cgg
	run -1 --separate-stderr cg-reduce "$D/d0.cgg" "$D/d1.cgg" copy.cgg -o r.cgg
	[[ $stderr == "cg-reduce: copy.cgg: the same update as $D/d1.cgg (tensors sha256 "*"...)" ]]
	run -1 --separate-stderr cg-reduce "$D/d1.cgg" - -o r.cgg <copy.cgg
	[[ $stderr == "cg-reduce: (stdin): the same update as $D/d1.cgg "* ]]
	# the same tensors under another manifest (its weight doubled)
	rewrite "$D/d1.cgg" heavy.cgg '.weight *= 2 | del(.worker)'
	run -1 --separate-stderr cg-reduce "$D/d1.cgg" heavy.cgg -o r.cgg
	[[ $stderr == "cg-reduce: heavy.cgg: the same update as $D/d1.cgg "* ]]
	[ ! -e r.cgg ]
	# three different updates reduce as before: one vote each
	cg-reduce "$D"/d[012].cgg -o r.cgg
	run -0 jq -c '[.inputs, .samples]' <(manifest r.cgg)
	assert_output '[3,48]'
}

@test "cg-reduce: the same worker and base refused (a retried call, a changed value); another base taken" {
	run -1 --separate-stderr cg-reduce "$D/d0.cgg" "$D/d1.cgg" "$D/retry.cgg" -o r.cgg
	assert_equal "${#stderr_lines[@]}" 1
	local shard
	shard=$(manifest "$D/d0.cgg" | jq -r .worker.shard | cut -c1-12)
	assert_equal "$stderr" "cg-reduce: $D/retry.cgg: the same worker (shard $shard..., seed 0) and base (step 0) as $D/d0.cgg"
	[ ! -e r.cgg ]
	# one weight changed by an ulp: new content, the same worker
	mkcg -x nudge "$D/d1.cgg" nudged.cgg
	run -1 --separate-stderr cg-reduce "$D/d1.cgg" nudged.cgg -o r.cgg
	[[ $stderr == "cg-reduce: nudged.cgg: the same worker (shard "*") and base (step 0) as $D/d1.cgg" ]]
	# the worker's next call, from the next model, is another update
	cg-reduce "$D"/d[012].cgg | cg-apply -m "$D/model.cgm" --outer nesterov -o m1.cgm
	cg-train-step -q -m m1.cgm -d "$D/fm-0.cgd" --emit delta --steps 2 \
		--batch 8 -o next.cgg
	cg-reduce --model m1.cgm "$D/d0.cgg" next.cgg -o r.cgg
	run -0 jq -c '[.contributors[] | .step] | sort' <(manifest r.cgg)
	assert_output '[0,1]'
}

@test "a replayed signed update under --op median: refused; one key is one worker whatever its manifest says" {
	local T=$D/trusted fp
	cp "$D/s0.cgg" replay.cgg
	run -1 --separate-stderr cg-reduce --trust "$T" --op median \
		"$D/s0.cgg" "$D/s1.cgg" "$D/s2.cgg" replay.cgg -o r.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "cg-reduce: replay.cgg: the same update as $D/s0.cgg (tensors sha256 "*"...)" ]]
	[ ! -e r.cgg ]
	# worker 0's key on a delta of another seed, which its manifest
	# says is another worker: the same signer, the same worker
	cg-train-step -q --sign "$D/w0.key" -m "$D/model.cgm" -d "$D/fm-0.cgd" \
		--emit delta --steps 2 --batch 8 --seed 7 -o again.cgg
	fp=$(cg-key -l "$D/w0.key.pub" | cut -c1-12)
	run -1 --separate-stderr cg-reduce --trust "$T" --op median \
		"$D/s0.cgg" "$D/s1.cgg" again.cgg -o r.cgg
	assert_equal "$stderr" "cg-reduce: again.cgg: the same worker (key $fp...) and base (step 0) as $D/s0.cgg"
	# what the replay would do: two votes of three, the median is it
	cg-reduce --allow-duplicates --op median "$D/s0.cgg" "$D/s1.cgg" \
		replay.cgg -o med.cgg
	run -0 cg-inspect --diff "$D/s0.cgg" med.cgg
	assert_line --regexp '^tensors: +[0-9]+ in A, [0-9]+ in B: [0-9]+ identical$'
	# one vote each: the signers are the workers
	cg-reduce --trust "$T" --op median "$D"/s[012].cgg -o r.cgg
	run -0 jq -r '.contributors[].worker' <(manifest r.cgg)
	assert_output "$(for w in 0 1 2; do
		echo "key:$(cg-key -l "$D/w$w.key.pub" | cut -d' ' -f1)"; done | sort)"
}

@test "a reduction lists its contributors: reductions that overlap are refused, others reduce as one" {
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" -o r01.cgg
	cg-reduce "$D/d1.cgg" "$D/d2.cgg" -o r12.cgg
	run -0 jq -c '[.contributors[] | (.worker | startswith("shard:")), .step]' \
		<(manifest r01.cgg)
	assert_output '[true,0,true,0]'
	# the worker is the reduction's contributors, not its first input
	run -0 jq 'has("worker")' <(manifest r01.cgg)
	assert_output false
	run -1 --separate-stderr cg-reduce r01.cgg r12.cgg -o r.cgg
	[[ $stderr == "cg-reduce: r12.cgg: the same worker (shard "*") and base (step 0) as r01.cgg" ]]
	run -1 --separate-stderr cg-reduce r01.cgg "$D/d0.cgg" -o r.cgg
	[[ $stderr == "cg-reduce: $D/d0.cgg: the same worker (shard "*") and base (step 0) as r01.cgg" ]]
	# a tree of reductions is the flat one, its contributors too
	cg-reduce r01.cgg "$D/d2.cgg" -o tree.cgg
	cg-reduce "$D"/d[012].cgg -o flat.cgg
	[ "$(manifest tree.cgg | jq -c .contributors)" = "$(manifest flat.cgg | jq -c .contributors)" ]
	run -0 jq '.contributors | length' <(manifest flat.cgg)
	assert_output 3
	# --codec keeps them
	cg-reduce --codec q8 "$D"/d[012].cgg -o q.cgu
	[ "$(manifest q.cgu | jq -c .contributors)" = "$(manifest flat.cgg | jq -c .contributors)" ]
}

@test "an update without a worker (by hand, an older cg) is known by its content; a malformed one is refused" {
	rewrite "$D/d0.cgg" a.cgg 'del(.worker)'
	rewrite "$D/retry.cgg" b.cgg 'del(.worker)'
	cg-reduce a.cgg b.cgg -o r.cgg
	run -0 jq 'has("contributors")' <(manifest r.cgg)
	assert_output false
	run -1 --separate-stderr cg-reduce a.cgg b.cgg a.cgg -o r.cgg
	[[ $stderr == "cg-reduce: a.cgg: the same update as a.cgg "* ]]
	local bad
	for bad in '.worker.shard = "xyz"' '.worker.seed = 7' '.worker.seed = "007"' \
		'.worker = "me"'; do
		rewrite "$D/d0.cgg" w.cgg "$bad"
		run -1 --separate-stderr cg-reduce "$D/d1.cgg" w.cgg -o r.cgg
		assert_equal "$stderr" 'cg-reduce: w.cgg: manifest: "worker" is not {"shard": SHA-256, "seed": "N"}'
	done
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" -o r.cgg
	for bad in '.contributors = 1' '.contributors[0].base = "x"' \
		'.contributors[0].worker = "shard:1"' '.contributors[0].step = -1'; do
		rewrite r.cgg c.cgg "$bad"
		run -1 --separate-stderr cg-reduce "$D/d2.cgg" c.cgg -o x.cgg
		assert_equal "$stderr" 'cg-reduce: c.cgg: manifest: "contributors" is not a list of {"worker", "base", "step"}'
		[ ! -e x.cgg ]
	done
}

@test "cg-reduce --allow-duplicates: the repetition taken, for weighing a worker on purpose" {
	run -0 cg-reduce --help
	assert_line --regexp '^ +--allow-duplicates +take an update that counts already'
	cg-reduce --allow-duplicates "$D/d0.cgg" "$D/d0.cgg" "$D/d1.cgg" -o r.cgg
	run -0 jq -c '[.inputs, .samples, (.contributors | length)]' <(manifest r.cgg)
	assert_output '[3,48,2]'
	# the mean of d0 weighed twice and d1
	rewrite "$D/d0.cgg" heavy.cgg '.weight *= 2 | .samples *= 2 | .inputs = 2'
	cg-reduce heavy.cgg "$D/d1.cgg" -o h.cgg
	run -0 cg-inspect --diff --tolerance 1e-6 r.cgg h.cgg
	assert_line --regexp '^tensors: +[0-9]+ in A, [0-9]+ in B: ([0-9]+ identical|.*equal)'
}

@test "cg-inbox: three copies of one delta publish with one vote, the copies set aside with their reason" {
	mkdir -p run/inbox
	cp "$D/model.cgm" run/model.cgm
	cp "$D/d0.cgg" run/inbox/a.cgg
	cp "$D/d0.cgg" run/inbox/b.cgg
	cp "$D/d0.cgg" run/inbox/c.cgg
	cp "$D/d1.cgg" run/inbox/d.cgg
	cp "$D/retry.cgg" run/inbox/e.cgg
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"b.cgg: set aside: cg-reduce: the same update as inbox/a.cgg"* ]]
	[[ $stderr == *"step 1 published from 2 updates, loss "*": a.cgg d.cgg"* ]]
	[ "$(ls run/used/1 | paste -sd' ')" = "a.cgg d.cgg" ]
	[ "$(ls run/rejected | paste -sd' ')" = "b.cgg b.cgg.why c.cgg c.cgg.why e.cgg e.cgg.why" ]
	[[ $(cat run/rejected/c.cgg.why) == "cg-reduce: the same update as inbox/a.cgg (tensors sha256 "*"...)" ]]
	[[ $(cat run/rejected/e.cgg.why) == "cg-reduce: the same worker (shard "*", seed 0) and base (step 0) as inbox/a.cgg" ]]
	# what cg-reduce and cg-apply give of the two by hand
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" |
		cg-apply -m "$D/model.cgm" --outer nesterov -o want.cgm
	cmp want.cgm run/model.cgm
	# --allow-duplicates: all five taken
	rm -rf run2 && mkdir -p run2/inbox
	cp "$D/model.cgm" run2/model.cgm
	cp run/used/1/* run/rejected/*.cgg run2/inbox/
	run -0 --separate-stderr cg-inbox --allow-duplicates run2
	[[ $stderr == *"step 1 published from 5 updates"* ]]
}

# A host file of two hosts that are this machine: fakessh runs the
# command here, each host in a directory of its own under h/.
hosts() {
	printf 'one\ntwo\n' >hosts
	cat >fakessh <<-'EOF'
		#!/bin/sh
		# fakessh HOST COMMAND: COMMAND here, as ssh would run it there
		shift
		exec sh -c "$*"
	EOF
	chmod +x fakessh
	mkdir -p h/0 h/1
}

# cluster ARGS...: a round of cg-cluster on the hosts, each worker
# signing with the key w.key of its directory
cluster() {
	cg-cluster -f hosts -m "$D/model.cgm" -o run --ssh "$PWD/fakessh" \
		--remote-dir "$PWD/h/%i" -k 2 -b 8 --seed 1 -T '--sign w.key' \
		"$@" "$FX"
}

@test "cg-cluster: hosts that sign with one key are one worker: the round refused, naming them; --allow-duplicates takes it" {
	hosts
	cg-key -C one -o h/0/w.key >/dev/null
	cg-key -C two -o h/1/w.key >/dev/null
	run -0 --separate-stderr cluster
	[[ $stderr == *"round 1/1: step 1 published"* ]]
	# one key on both hosts
	rm -rf run h/1/*
	cp h/0/w.key h/0/w.key.pub h/1/
	run -1 --separate-stderr cluster
	local fp
	fp=$(cg-key -l h/0/w.key.pub | cut -c1-12)
	[[ $stderr == *"
cg-reduce: two: the same worker (key $fp...) and base (step 0) as one
cg-cluster: round 1: cg-reduce failed: nothing published" ]]
	cmp run/model.cgm "$D/model.cgm"
	run -0 --separate-stderr cluster --allow-duplicates
	[[ $stderr == *"round 1/1: step 1 published"* ]]
}
