#!/usr/bin/env bats
#
# 117-seal-stream.bats - how sealed files are read (cg(7), "Sealed
# files"): a sealed update, model or reduction read by cg-reduce,
# cg-apply and cg-inspect, from a file or from a pipe, compressed inside
# or not, gives the bytes and the answers of the same file read plain;
# and a sealed file damaged in each of its regions (the header's every
# field, a chunk's body, a chunk's tag, the last chunk's tag, which is
# known bad only at the very end of its stream), cut short inside a
# chunk, with a tag or a chunk size that lies, or opening to more than
# CG_MAX_BYTES, is refused with one line and exit status 1, from a file
# and from a pipe, with no output file left and nothing on standard
# output.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	unset CG_ENCRYPT_TO CG_SEAL_KEY CG_TRUST
	cg-key --x25519 -C seal -o k
	images fm -n 2
	# a model of more than three chunks (1 MiB each), its deltas of two
	# workers, and each sealed as a file and compressed inside
	small_cvae fm-0.cgd m.cgm --hidden 512
	cg-convert -t cg --encrypt-to k.pub m.cgm -o sm.cgm
	for w in 0 1; do
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps 1 \
			--batch 4 --seed $w -o d$w.cgg
		cg-convert -t cg --encrypt-to k.pub d$w.cgg -o sd$w.cgg
		cg-convert -t cg -z zstd --encrypt-to k.pub d$w.cgg \
			-o zd$w.cgg
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CG_ENCRYPT_TO CG_SEAL_KEY CG_TRUST CG_MAX_BYTES
	export LC_ALL=C
}

@test "seal-stream: sealed inputs, from files and pipes, give the plain inputs' bytes" {
	local k=$D/k n
	n=$(stat -c %s "$D/sd0.cgg")
	[ "$n" -gt $((3 * 1048592 + 80)) ] || fail "sd0.cgg: under 4 chunks"
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" -o r.cgg
	# from files, from a pipe, both from pipes, compressed inside
	cg-reduce --seal-key "$k" "$D/sd0.cgg" "$D/sd1.cgg" -o r1.cgg
	cmp r.cgg r1.cgg
	cg-reduce --seal-key "$k" "$D/sd0.cgg" - <"$D/sd1.cgg" -o r2.cgg
	cmp r.cgg r2.cgg
	cat "$D/sd0.cgg" | cg-reduce --seal-key "$k" - "$D/zd1.cgg" -o r3.cgg
	cmp r.cgg r3.cgg
	cat "$D/zd0.cgg" | cg-reduce --seal-key "$k" - "$D/d1.cgg" >r4.cgg
	cmp r.cgg r4.cgg
	# cg-apply: the model and the update sealed, the update from a pipe
	cg-apply -m "$D/m.cgm" --outer nesterov r.cgg -o a.cgm
	cg-apply --seal-key "$k" -m "$D/sm.cgm" --outer nesterov \
		"$D/sd0.cgg" -o a0.cgm
	cg-apply -m "$D/m.cgm" --outer nesterov "$D/d0.cgg" -o p0.cgm
	cmp a0.cgm p0.cgm
	cg-reduce --seal-key "$k" --encrypt-to "$D/k.pub" "$D/sd0.cgg" \
		"$D/sd1.cgg" -o - |
		cg-apply --seal-key "$k" -m "$D/sm.cgm" --outer nesterov - \
			-o a1.cgm
	cmp a.cgm a1.cgm
	# cg-inspect: the same answers (every statistic of every tensor),
	# file or pipe; --verify: every digest checked
	run -0 cg-inspect --json "$D/d0.cgg"
	local want=${output//$D\/d0.cgg/X}
	run -0 cg-inspect --json --seal-key "$k" "$D/sd0.cgg"
	assert_equal "${output//$D\/sd0.cgg/X}" "$want"
	run -0 cg-inspect --json --seal-key "$k" "$D/zd0.cgg"
	assert_equal "${output//$D\/zd0.cgg/X}" "$want"
	run -0 cg-inspect --json --seal-key "$k" - <"$D/sd0.cgg"
	assert_equal "${output//(stdin)/X}" "$want"
	run -0 cg-inspect --json "$D/m.cgm"
	want=${output//$D\/m.cgm/X}
	run -0 cg-inspect --json --seal-key "$k" "$D/sm.cgm"
	assert_equal "${output//$D\/sm.cgm/X}" "$want"
	run -0 cg-inspect --verify --seal-key "$k" "$D/sd0.cgg" "$D/zd0.cgg" \
		"$D/sm.cgm" - <"$D/sd1.cgg"
	assert_equal "${#lines[@]}" 4
	refute_output --partial FAIL
}

# damage HOW IN OUT: IN with one thing done to it; its chunks are
# 1 MiB and a 16-byte tag, after an 80-byte header
damage() {
	python3 - "$@" <<'EOF'
import re, struct, sys
how, src, out = sys.argv[1:4]
b = bytearray(open(src, "rb").read())
H, C, T = 80, (1 << 20) + 16, 16
n = (len(b) - H + C - 1) // C  # chunks
last = H + (n - 1) * C         # where the last chunk starts
if how.startswith("flip:"):
    # flip:POS, flip:last+K (into the last chunk), flip:end-K
    m = re.fullmatch(r"(\d+)|last\+(\d+)|end-(\d+)", how[5:])
    pos = (int(m[1]) if m[1] else last + int(m[2]) if m[2]
           else len(b) - int(m[3]))
    b[pos] ^= 0x10
elif how.startswith("cut:"):
    b = b[:int(how[4:])]
elif how == "tag-of-another":  # chunk 1's tag in chunk 0's place
    b[H + C - T:H + C] = b[H + 2 * C - T:H + 2 * C]
elif how == "last-tag-of-another":  # chunk 0's tag as the last one's
    b[len(b) - T:] = b[H + C - T:H + C]
elif how.startswith("chunk-size:"):
    b[8:12] = struct.pack("<I", int(how[11:]))
else:
    sys.exit("damage: unknown " + how)
open(out, "wb").write(b)
EOF
}

# refused_all WANT FILE: cg-reduce (FILE second, from a file and from a
# pipe, to a file and to standard output), cg-apply (FILE the update,
# from a pipe) and cg-inspect refuse FILE with one line matching WANT,
# exit status 1, no output file and nothing on standard output
refused_all() {
	local want=$1 f=$2
	refused "$want" cg-reduce --seal-key "$D/k" "$D/d0.cgg" "$f" \
		-o out.cgg
	refused "$want" cg-reduce --seal-key "$D/k" "$D/d0.cgg" - \
		-o out.cgg <"$f"
	refused "$want" cg-reduce --seal-key "$D/k" "$D/d0.cgg" - -o - <"$f"
	refused "$want" sh -c 'cat "$1" 2>/dev/null | cg-reduce --seal-key "$2" - -o -' \
		sh "$f" "$D/k"
	refused "$want" cg-apply --seal-key "$D/k" -m "$D/m.cgm" - \
		-o out.cgm <"$f"
	refused "$want" cg-inspect --seal-key "$D/k" --verify "$f"
	refused "$want" cg-inspect --seal-key "$D/k" - <"$f"
	# nothing else written here (bats keeps its separate-stderr-* files)
	run sh -c 'ls -A | grep -v "^separate-stderr-"'
	assert_output "$f"
}

# refused WANT CMD...: CMD exits 1 with one line on stderr that matches
# WANT, nothing on standard output
refused() {
	local want=$1
	shift
	run -1 --separate-stderr "$@"
	assert_output ''
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr =~ $want ]] || fail "$*: stderr does not match '$want': $stderr"
}

@test "seal-stream: a sealed file damaged in each region, from a file or a pipe: one line, nothing written" {
	local how want n
	n=$(stat -c %s "$D/sd0.cgg")
	for how in flip:7 flip:8 flip:14 flip:30 flip:70 flip:80 \
		flip:$((80 + 1048576 - 1)) flip:$((80 + 1048576)) \
		flip:$((80 + 1048592 + 5000)) flip:$((80 + 2 * 1048592 - 1)) \
		flip:last+3 flip:end-17 flip:end-1 \
		cut:$((80 + 1048592 + 777)) cut:$((80 + 2 * 1048592 + 8)) \
		cut:$((n - 1)) cut:$((n - 16)) tag-of-another \
		last-tag-of-another chunk-size:524288 chunk-size:2097152 \
		chunk-size:4095 chunk-size:0; do
		damage "$how" "$D/sd0.cgg" bad.cgg
		case $how in
		flip:7) want='bad\.cgg: |\(stdin\): ' ;;
		flip:8 | chunk-size:4095 | chunk-size:0) want='sealed: bad chunk size' ;;
		flip:14) want='sealed: unknown suite' ;;
		flip:70) want='sealed to key [0-9a-f]{16}\.\.\., not to the key given' ;;
		*) want='sealed: (chunk [0-9]+ fails authentication \(the file was altered, cut short, extended or reordered\)|cut short \(chunk [0-9]+ has [0-9]+ bytes, less than its tag\))$' ;;
		esac
		refused_all "$want" bad.cgg
		rm bad.cgg
	done
}

@test "seal-stream: a file that opens to more than CG_MAX_BYTES, from a file or a pipe" {
	CG_MAX_BYTES=2000000 refused \
		'sd0\.cgg: sealed: more than 2000000 bytes inside' \
		cg-reduce --seal-key "$D/k" "$D/sd0.cgg" -o out.cgg
	CG_MAX_BYTES=2000000 refused \
		'\(stdin\): sealed: more than 2000000 bytes inside' \
		cg-reduce --seal-key "$D/k" - -o out.cgg <"$D/sd0.cgg"
	run ! ls out.cgg
}
