#!/usr/bin/env bats
#
# 035-verify.bats - cg-inspect --verify says OK only to what every reader
# of the file's kind takes.  Each hostile file is a good one broken by
# mkcg -x, its digests made again, so that only its structure lies: coded
# updates (an index past its view, index and value counts that differ,
# an unknown codec, no layout, a layout of other names, a member
# missing), models (a view missing, a mask too short), a shard (a tensor
# missing) and a state (no record).  For each, --verify exits 1 with one
# line, and the readers refuse the same file with the same line under
# their own name; cg-convert passes on neither.  The programs come from
# PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
	cg-train-step -q -m model.cgm -d fm-0.cgd --emit delta --steps 2 \
		--batch 8 --codec topk:0.1 --no-error-feedback -o t.cgu
	cg-train-step -q -m model.cgm -d fm-0.cgd --emit model --steps 1 \
		--batch 8 -o trained.cgm
	cg-prune -s 0.5 model.cgm -o pruned.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# refused FILE LINE: cg-inspect --verify exits 1 with nothing on stdout
# and the one line "cg-inspect: FILE: LINE" on stderr.
refused() {
	run -1 --separate-stderr cg-inspect --verify "$1"
	[ -z "$output" ] && [ "${#stderr_lines[@]}" -eq 1 ] &&
		[ "$stderr" = "cg-inspect: $1: $2" ] || {
		echo "--verify $1: $stderr (want $2)"
		return 1
	}
}

# same PROG LINE ARGS...: PROG ARGS exits 1 with "PROG: LINE", alone.
same() {
	local prog=$1 line=$2
	shift 2
	run -1 --separate-stderr "$prog" "$@"
	[ "${#stderr_lines[@]}" -eq 1 ] && [ "$stderr" = "$prog: $line" ] || {
		echo "$prog $*: $stderr (want $prog: $line)"
		return 1
	}
}

@test "hostile coded updates: --verify says what cg-reduce and cg-apply say" {
	local how want
	while IFS='|' read -r how want; do
		mkcg -x "$how" "$D/t.cgu" bad.cgu
		refused bad.cgu "$want"
		same cg-reduce "bad.cgu: $want" bad.cgu -o r.cgg
		same cg-apply "bad.cgu: $want" -m "$D/model.cgm" bad.cgu -o m.cgm
		same cg-convert "bad.cgu: $want" bad.cgu x.st
		[ ! -e r.cgg ] && [ ! -e m.cgm ] && [ ! -e x.st ]
	done <<EOF
idx-range|tensor enc.0.w.idx: index 4294967295 outside its 12704 elements
idx-far|tensor enc.0.w.idx: index 10012704 outside its 12704 elements
idx-count|tensor enc.0.w.idx: its shape is not the layout's
codec|manifest: unknown codec 'rocket' (f32, f16, bf16, q8, q4, q2, topk, sign, lowrank, masked)
no-layout|manifest: no layout of 1 to 65536 views
layout-name|tensor rocket.w.idx: missing
drop:enc.0.w.val|tensor enc.0.w.val: missing
blocks|tensor enc.0.w.idx: its shape is not the layout's
EOF
	# the update they were made from verifies, and is taken
	run -0 cg-inspect --verify "$D/t.cgu"
	assert_output "$D/t.cgu: OK"
	cg-reduce "$D/t.cgu" -o r.cgg
}

@test "hostile models: --verify says what the model readers say" {
	local want
	# a view missing, from a model whose other tensors hold enough
	# numbers (its moments), and from one whose do not
	mkcg -x drop:dec.out.b "$D/trained.cgm" bad.cgm
	want='bad.cgm: tensor dec.out.b: missing'
	refused bad.cgm "${want#bad.cgm: }"
	same cg-eval "$want" -m bad.cgm -d "$D/fm-1.cgd"
	same cg-train-step "$want" -m bad.cgm -d "$D/fm-0.cgd" --batch 8 \
		-o x.cgg
	mkcg -x drop:dec.out.b "$D/model.cgm" bad.cgm
	want="bad.cgm: config: 26364 parameters, more than the file's tensors hold (25580)"
	refused bad.cgm "${want#bad.cgm: }"
	same cg-apply "$want" -m bad.cgm "$D/t.cgu" -o x.cgm
	# a mask a bit short of its view
	mkcg -x mask-short "$D/pruned.cgm" bad.cgm
	want='bad.cgm: tensor mask.enc.0.w: u8 of 1587 elements, expected u8 [1588] (a bit for each of the 12704 weights of enc.0.w)'
	refused bad.cgm "${want#bad.cgm: }"
	same cg-sample "$want" -m bad.cgm -n 1 -o x.png
	same cg-convert "$want" bad.cgm x.st
	[ ! -e x.cgg ] && [ ! -e x.cgm ] && [ ! -e x.png ] && [ ! -e x.st ]
	# the models they were made from verify
	cg-inspect --verify -q "$D/model.cgm" "$D/trained.cgm" "$D/pruned.cgm"
}

@test "a hostile shard and state: --verify says what cg-train-step says" {
	mkcg -x drop:offset "$D/fm-0.cgd" bad.cgd
	refused bad.cgd 'tensor offset: missing'
	same cg-train-step 'bad.cgd: tensor offset: missing' \
		-m "$D/model.cgm" -d bad.cgd --batch 8 -o x.cgg
	same cg-eval 'bad.cgd: tensor offset: missing' -m "$D/model.cgm" \
		-d bad.cgd
	# a state that records no call
	mkcg -x kind:state "$D/t.cgu" bad.state
	local want="no whole record of the call that wrote it (an older cg's state?): remove it to start this worker afresh"
	refused bad.state "$want"
	cp bad.state was.state
	same cg-train-step "bad.state: $want" -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --batch 8 --emit delta --state bad.state -o x.cgg
	cmp bad.state was.state
	[ ! -e x.cgg ]
	cg-inspect --verify -q "$D/fm-0.cgd" "$D/fm-1.cgd"
}
