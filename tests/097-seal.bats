#!/usr/bin/env bats
#
# 097-seal.bats - sealed files through the programs (cg(7), "Sealed
# files"): every kind of cg file each writer makes (shards, models,
# gradients, deltas, worker state, reductions, applied, pruned,
# quantized and converted models, compressed or not, through a pipe
# too) written with --encrypt-to shows none of its names and opens, with
# the key, to the very bytes of the same file written plain; a 2-round
# DiLoCo run with every file sealed (CG_ENCRYPT_TO, CG_SEAL_KEY) ends
# with the model of the same run in the clear; every reading program
# refuses a sealed file without a key, with another key, or damaged (a
# byte altered in the header, a chunk or a tag, cut short, extended,
# chunks swapped) with one line and exit status 1, and writes nothing.
# The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	unset CG_ENCRYPT_TO CG_SEAL_KEY
	cg-key --x25519 -C seal -o k
	cg-key --x25519 -C other -o other
	cg-key -C signing -o ed
	texts tx -n 2
	texts stx -n 2 --encrypt-to k.pub
	small_cgpt tx-0.cgd m.cgm
	small_cgpt tx-0.cgd sm.cgm --encrypt-to k.pub
	cg-train-step -q -m m.cgm -d tx-0.cgd --emit delta --steps 1 \
		--batch 4 -o d.cgg
	# a model of more than three chunks (1 MiB each), for the chunk
	# cases, and a delta of it
	images fm -n 1
	small_cvae fm-0.cgd big.cgm --hidden 512
	cg-convert -t cg --encrypt-to k.pub big.cgm -o sbig.cgm
	cg-train-step -q -m big.cgm -d fm-0.cgd --emit delta --steps 1 \
		--batch 4 -o bd.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CG_ENCRYPT_TO CG_SEAL_KEY CG_TRUST
	export LC_ALL=C
}

# same PLAIN SEALED [CG-CONVERT OPTION...]: SEALED opens with the key to
# exactly PLAIN's bytes (written again by cg-convert with the OPTIONs:
# -z zstd for a compressed one), and shows none of PLAIN's member names
same() {
	local plain=$1 sealed=$2 name
	shift 2
	head -c 8 "$sealed" | grep -q '^CGSEAL' ||
		fail "$sealed: does not start as a sealed file"
	for name in cg.json '"kind"' '"tensors"'; do
		if grep -aqF "$name" "$sealed"; then
			fail "$sealed: $name shows"
		fi
	done
	cg-convert -t cg "$@" --seal-key "$D/k" "$sealed" -o open.tmp ||
		fail "$sealed: does not open"
	cmp open.tmp "$plain" || fail "$sealed: opens to other bytes than $plain"
	rm -f open.tmp
}

# same_state PLAIN SEALED: same, but for what the state says of the
# call's output file: its path and the digest of its bytes (sealed ones
# in SEALED)
same_state() {
	head -c 8 "$2" | grep -q '^CGSEAL' || fail "$2: not sealed"
	cg-convert -t cg --seal-key "$D/k" "$2" -o open.tmp ||
		fail "$2: does not open"
	python3 - "$1" open.tmp <<'EOF' || fail "$2: opens to another state than $1"
import json, sys, tarfile
def load(p):
    with tarfile.open(p) as t:
        d = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    m = json.loads(d.pop("cg.json"))
    m["output"].pop("sha256", None)
    m["output"].pop("path", None)
    return m, d
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
EOF
	rm -f open.tmp
}

@test "seal: each kind of file, sealed, opens to the bytes written plain" {
	local K=$D/k.pub k=$D/k
	same "$D/tx-0.cgd" "$D/stx-0.cgd"
	same "$D/tx-1.cgd" "$D/stx-1.cgd"
	same "$D/m.cgm" "$D/sm.cgm"
	same "$D/big.cgm" "$D/sbig.cgm"
	# a gradient, a delta and the worker's state; inputs sealed too
	cg-train-step -q -m "$D/m.cgm" -d "$D/tx-0.cgd" --steps 1 --batch 4 \
		--seed 3 -o g.cgg
	cg-train-step -q --seal-key "$k" --encrypt-to "$K" -m "$D/sm.cgm" \
		-d "$D/stx-0.cgd" --steps 1 --batch 4 --seed 3 -o sg.cgg
	same g.cgg sg.cgg
	cg-train-step -q -m "$D/m.cgm" -d "$D/tx-0.cgd" --emit delta \
		--steps 2 --batch 4 --seed 3 --state w.state -o d.cgg
	cg-train-step -q --seal-key "$k" --encrypt-to "$K" -m "$D/sm.cgm" \
		-d "$D/stx-0.cgd" --emit delta --steps 2 --batch 4 --seed 3 \
		--state sw.state -o sd.cgg
	same d.cgg sd.cgg
	same_state w.state sw.state
	# the state read back sealed: the next call the same again
	cg-train-step -q -m "$D/m.cgm" -d "$D/tx-0.cgd" --emit delta \
		--steps 2 --batch 4 --state w.state -o d2.cgg
	cg-train-step -q --seal-key "$k" --encrypt-to "$K" -m "$D/sm.cgm" \
		-d "$D/stx-0.cgd" --emit delta --steps 2 --batch 4 \
		--state sw.state -o sd2.cgg
	same d2.cgg sd2.cgg
	same_state w.state sw.state
	# a reduction, an applied model and its change, compressed
	cg-reduce d.cgg d2.cgg -z zstd -o r.cgg
	cg-reduce --seal-key "$k" --encrypt-to "$K" sd.cgg sd2.cgg -z zstd \
		-o sr.cgg
	same r.cgg sr.cgg -z zstd
	cg-apply -m "$D/m.cgm" --outer nesterov r.cgg --change ch.cgg \
		-o a.cgm
	cg-apply --seal-key "$k" --encrypt-to "$K" -m "$D/sm.cgm" \
		--outer nesterov sr.cgg --change sch.cgg -o sa.cgm
	same a.cgm sa.cgm
	same ch.cgg sch.cgg
	# pruned, quantized; through pipes both ways
	cg-prune -s 0.5 -o p.cgm a.cgm
	cat sa.cgm | cg-prune --seal-key "$k" --encrypt-to "$K" -s 0.5 \
		-o - - >sp.cgm
	same p.cgm sp.cgm
	cg-quantize -o q.cgm a.cgm q8_0
	cg-quantize --seal-key "$k" --encrypt-to "$K" -o sq.cgm sa.cgm q8_0
	same q.cgm sq.cgm
	# the programs that only read: the same answers
	run -0 cg-eval -q -m a.cgm -d "$D/tx-1.cgd" --json
	local want=${output#*\"arch\"}
	run -0 cg-eval -q --seal-key "$k" -m sa.cgm -d "$D/stx-1.cgd" --json
	assert_equal "${output#*\"arch\"}" "$want"
	run -0 cg-inspect --verify a.cgm
	run -0 cg-inspect --verify --seal-key "$k" sa.cgm
}

@test "seal: a 2-round DiLoCo run with every file sealed ends with the same model" {
	local w r
	cp "$D/m.cgm" plain.cgm
	for r in 1 2; do
		for w in 0 1; do
			cg-train-step -q -m plain.cgm -d "$D/tx-$w.cgd" \
				--emit delta --steps 3 --batch 4 --state p$w.state \
				-o pd$w.cgg
		done
		cg-reduce pd0.cgg pd1.cgg |
			cg-apply -m plain.cgm --outer nesterov -o plain.cgm
	done
	(
		export CG_ENCRYPT_TO=$D/k.pub CG_SEAL_KEY=$D/k
		cp "$D/sm.cgm" sealed.cgm
		for r in 1 2; do
			for w in 0 1; do
				cg-train-step -q -m sealed.cgm -d "$D/stx-$w.cgd" \
					--emit delta --steps 3 --batch 4 \
					--state s$w.state -o sd$w.cgg
			done
			cg-reduce sd0.cgg sd1.cgg |
				cg-apply -m sealed.cgm --outer nesterov -o sealed.cgm
		done
	)
	for f in sealed.cgm s0.state s1.state sd0.cgg sd1.cgg; do
		head -c 8 "$f" | grep -q '^CGSEAL' || fail "$f: not sealed"
	done
	same plain.cgm sealed.cgm
	same_state p1.state s1.state
}

# refused CMD...: CMD failed with one line on stderr, nothing on stdout;
# the line matches $WANT where it is set
refused() {
	run -1 --separate-stderr "$@"
	assert_output ''
	assert_equal "${#stderr_lines[@]}" 1
	if [ -n "${WANT:-}" ] && ! [[ $stderr =~ $WANT ]]; then
		fail "$1: stderr does not match '$WANT': $stderr"
	fi
}

# each_reader FILE ROLE [OPTION...]: every program that reads a ROLE
# (model or shard) refuses FILE (the OPTIONs after its name, the other
# inputs $S, $M and $U, plain), and no out.* is written
each_reader() {
	local f=$1 role=$2
	shift 2
	case $role in
	model)
		refused cg-inspect "$@" "$f"
		refused cg-eval -q "$@" -m "$f" -d "$S"
		refused cg-sample "$@" -m "$f" -n 1 -o out.txt
		refused cg-train-step -q "$@" -m "$f" -d "$S" --steps 1 -o out.cgg
		refused cg-apply "$@" -m "$f" "$U" -o out.cgm
		refused cg-prune "$@" -s 0.5 -o out.cgm "$f"
		refused cg-quantize "$@" -o out.cgm "$f" q8_0
		refused cg-convert -t cg "$@" "$f" -o out.cgm
		refused cg-probe "$@" -m "$f" -d "$S"
		;;
	shard)
		refused cg-train-step -q "$@" -m "$M" -d "$f" --steps 1 -o out.cgg
		refused cg-inspect "$@" "$f"
		;;
	esac
	run ls out.txt out.cgg out.cgm
	assert_failure
}

@test "seal: no key is said in one line by every reader" {
	local fp S=$D/tx-0.cgd M=$D/m.cgm U=$D/d.cgg
	fp=$(cg-key -l "$D/k.pub" | cut -c1-16)
	WANT="sm\.cgm: sealed \(to key $fp\.\.\.\): no key to open it \(--seal-key KEY or CG_SEAL_KEY\)$" \
		each_reader "$D/sm.cgm" model
	WANT='stx-0\.cgd: sealed \(to key .*no key to open it' \
		each_reader "$D/stx-0.cgd" shard
	WANT='no key to open it' refused cg-reduce "$D/d.cgg" "$D/sm.cgm" -o out.cgg
	run ! ls out.cgg
	WANT='^cg-inspect: \(stdin\): sealed \(to key' refused cg-inspect - <"$D/sm.cgm"
}

@test "seal: another key, or a key of the wrong kind, is refused" {
	local S=$D/tx-0.cgd M=$D/m.cgm U=$D/d.cgg
	WANT='sealed to key [0-9a-f]{16}\.\.\., not to the key given' \
		each_reader "$D/sm.cgm" model --seal-key "$D/other"
	CG_SEAL_KEY=$D/other WANT='not to the key given' \
		refused cg-inspect "$D/sm.cgm"
	WANT='^cg-inspect: --seal-key: .*not an X25519 key' \
		refused cg-inspect --seal-key "$D/ed" "$D/sm.cgm"
	WANT='^cg-init: --encrypt-to: ' refused cg-init -a cgpt \
		-d "$D/tx-0.cgd" --encrypt-to "$D/ed.pub" -o out.cgm
	CG_ENCRYPT_TO=$D/ed.pub WANT='CG_ENCRYPT_TO' refused cg-init \
		-a cgpt -d "$D/tx-0.cgd" -o out.cgm
	WANT='nowhere\.pub' refused cg-init -a cgpt -d "$D/tx-0.cgd" \
		--encrypt-to nowhere.pub -o out.cgm
	run ! ls out.cgm
	# what other tools read is never written in the clear instead
	WANT='cannot be sealed' refused cg-convert --encrypt-to "$D/k.pub" \
		"$D/m.cgm" -o out.st
	run ! ls out.st
}

# damage HOW IN OUT: IN with one thing done to it
damage() {
	python3 - "$@" <<'EOF'
import sys
how, src, out = sys.argv[1:4]
b = bytearray(open(src, "rb").read())
H, C = 80, (1 << 20) + 16  # the header; a whole chunk and its tag
if how.startswith("flip:"):
    at = int(how[5:])
    b[at if at >= 0 else len(b) + at] ^= 0x10
elif how.startswith("cut:"):
    b = b[:int(how[4:])]
elif how == "append":
    b += b"\0"
elif how == "append-chunk":
    b += b[H:H + C]
elif how == "swap":
    b[H:H + 2 * C] = b[H + C:H + 2 * C] + b[H:H + C]
elif how == "drop":
    del b[H + C:H + 2 * C]
else:
    sys.exit("damage: unknown " + how)
open(out, "wb").write(b)
EOF
}

@test "seal: a byte altered anywhere, cut short, extended, chunks swapped: one line, nothing written" {
	local n how S=$D/fm-0.cgd M=$D/big.cgm U=$D/bd.cgg
	n=$(stat -c %s "$D/sbig.cgm")
	[ "$n" -gt $((3 * 1048592 + 80)) ] || fail "sbig.cgm: under 4 chunks"
	for how in flip:0 flip:9 flip:13 flip:20 flip:60 flip:80 flip:100 \
		flip:$((1048576 + 90)) flip:$((1048576 + 100)) flip:-1 flip:-17 \
		cut:79 cut:$((80 + 1048592)) cut:$((80 + 2 * 1048592)) \
		cut:$((n - 1)) append append-chunk swap drop; do
		damage $how "$D/sbig.cgm" bad.cgm
		case $how in
		flip:0) WANT='^cg-[a-z-]+: bad\.cgm: ' ;;
		flip:6[0-9]) WANT='bad\.cgm: sealed to key .*not to the key given' ;;
		flip:9 | flip:13) WANT='bad\.cgm: sealed: (bad chunk size|unknown suite)' ;;
		cut:79) WANT='bad\.cgm: sealed: header cut short' ;;
		*) WANT='bad\.cgm: sealed: chunk [0-9]+ fails authentication \(the file was altered, cut short, extended or reordered\)$' ;;
		esac
		# every reader for a few; cg-inspect and cg-reduce for all
		case $how in
		flip:$((1048576 + 100)) | cut:$((80 + 1048592)) | append | swap)
			each_reader bad.cgm model --seal-key "$D/k" ;;
		*) refused cg-inspect --seal-key "$D/k" bad.cgm ;;
		esac
		refused cg-reduce --seal-key "$D/k" "$U" bad.cgm -o out.cgg
		run ! ls out.cgg
		WANT='^cg-inspect: \(stdin\): ' \
			refused cg-inspect --seal-key "$D/k" - <bad.cgm
	done
	# the small sealed files too: a flip in their one chunk, a cut
	S=$D/tx-0.cgd M=$D/m.cgm U=$D/d.cgg
	damage flip:200 "$D/sm.cgm" bad.cgm
	WANT='chunk 0 fails authentication' each_reader bad.cgm model \
		--seal-key "$D/k"
	damage cut:100 "$D/stx-0.cgd" bad.cgd
	WANT='bad\.cgd: sealed: chunk 0 fails authentication' \
		each_reader bad.cgd shard --seal-key "$D/k"
}

@test "seal: --help and the man pages name the options" {
	local p
	for p in cg-apply cg-convert cg-init cg-prune cg-quantize cg-reduce \
		cg-shard cg-train-step; do
		run -0 $p --help
		assert_output --partial '--encrypt-to PUB'
		grep -q '^\.It Fl -encrypt-to Ar pub' "$CG_SRCDIR/man/$p.1" ||
			fail "$p.1: no --encrypt-to"
	done
	for p in cg-apply cg-audit cg-convert cg-eval cg-init cg-inspect \
		cg-probe cg-prune cg-quantize cg-reduce cg-sample cg-train-step; do
		run -0 $p --help
		assert_output --partial '--seal-key KEY'
		grep -q '^\.It Fl -seal-key Ar key' "$CG_SRCDIR/man/$p.1" ||
			fail "$p.1: no --seal-key"
	done
}
