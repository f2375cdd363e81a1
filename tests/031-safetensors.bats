#!/usr/bin/env bats
# 031-safetensors.bats - cg-convert, and cg-inspect on safetensors files.
#
# Models go to safetensors and back and must come back the same (bytes,
# and cg-inspect --diff); a file written by the safetensors package
# itself (tests/safetensors-vectors, made by its gen.py) must read to the
# values it lists; hostile headers, built here with printf, must fail as
# a bad cg file does: one line naming the file, exit 1, nothing written.
# Where the safetensors package is importable (scripts/install-deps puts
# it in /opt/cg-test-venv), it must read what cg-convert writes to the
# same bytes, and write the same file again from them.

bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	images fm -n 1
	small_cvae fm-0.cgd cvae.cgm
	texts fort -n 1
	model cgpt fort-0.cgd cgpt.cgm --context 16 --width 16 --layers 1 \
		--heads 2
	mkcg all.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	V=$BATS_TEST_DIRNAME/safetensors-vectors
	cd "$BATS_TEST_TMPDIR" || return 1
	export LC_ALL=C
}

# le64 N: N as 8 little-endian bytes.
le64() {
	local i
	for i in 0 1 2 3 4 5 6 7; do
		# shellcheck disable=SC2059
		printf "\\$(printf %03o $((($1 >> (8 * i)) & 255)))"
	done
}

# mkst FILE HEADER [NBYTES]: a safetensors file of HEADER and NBYTES of
# zeros after it.
mkst() {
	{
		le64 "${#2}"
		printf '%s' "$2"
		head -c "${3:-0}" /dev/zero
	} >"$1"
}

# refused FILE MESSAGE: cg-convert and cg-inspect, on the file and on a
# pipe, fail with exactly "PROG: NAME: MESSAGE" and write nothing.
refused() {
	run -1 --separate-stderr cg-convert "$1" out.cgm
	assert_output ''
	assert_equal "$stderr" "cg-convert: $1: $2"
	[ ! -e out.cgm ]
	for mode in --no-stats --json '--tensor w'; do
		# shellcheck disable=SC2086
		run -1 --separate-stderr cg-inspect $mode "$1"
		assert_output ''
		assert_equal "$stderr" "cg-inspect: $1: $2"
	done
	run -1 --separate-stderr sh -c 'cat "$1" | cg-convert - out.cgm' sh "$1"
	assert_equal "$stderr" "cg-convert: (stdin): $2"
	[ ! -e out.cgm ]
	run -0 ls -A
	refute_output --partial '.out.cgm.'
}

# ----------------------------------------------------------- conventions

@test "cg-convert --help, --version, bad options and operands" {
	run -0 --separate-stderr cg-convert --help
	assert_line --index 0 'usage: cg-convert [-M] [-t FORMAT] [-z ALG] [-o OUT] [IN [OUT]]'
	assert_output --partial 'safetensors'
	assert_equal "$stderr" ''
	run -0 cg-convert --version
	assert_output 'cg-convert (cg) 0.1.0'
	run -2 --separate-stderr cg-convert --bogus a b
	assert_equal "${stderr_lines[0]}" "cg-convert: unknown option '--bogus'"
	assert_equal "${stderr_lines[1]%% *}" 'usage:'
	run -2 --separate-stderr cg-convert a b c
	assert_equal "${stderr_lines[0]}" 'cg-convert: too many operands'
	run -2 --separate-stderr cg-convert -o x a b
	assert_equal "${stderr_lines[0]}" \
		'cg-convert: the output given twice (-o and OUT)'
	run -2 --separate-stderr cg-convert -z lzma a b
	assert_equal "${stderr_lines[0]%%:*}" 'cg-convert'
}

@test "a missing input is one line, exit 1, and nothing written" {
	run -1 --separate-stderr cg-convert nope.cgm out.safetensors
	assert_equal "$stderr" 'cg-convert: nope.cgm: No such file or directory'
	[ ! -e out.safetensors ]
}

@test "standard input from a terminal is refused, not waited for" {
	script -qec true /dev/null >/dev/null 2>&1 ||
		skip 'script(1) cannot make a pseudo-terminal here'
	run -0 script -qec 'cg-convert; echo "status $?"' /dev/null
	assert_output --partial 'cg-convert: standard input is a terminal'
	assert_output --partial 'status 2'
}

# ------------------------------------------------------------ round trips

@test "a model goes to safetensors and back to the same bytes" {
	for m in cvae cgpt; do
		cg-convert "$D/$m.cgm" "$m.safetensors"
		cg-convert "$m.safetensors" -o "$m.back.cgm"
		cmp "$D/$m.cgm" "$m.back.cgm"
		cg-inspect --diff -q "$D/$m.cgm" "$m.safetensors"
		cg-inspect --diff -q "$D/$m.cgm" "$m.back.cgm"
	done
	# the manifest rides along as JSON text in __metadata__
	run -0 sh -c "head -c 39 cgpt.safetensors | tail -c +9"
	assert_output '{"__metadata__":{"cg.json":"{\"'
}

@test "f16 and bf16 models go across as they are" {
	for t in f16 bf16; do
		mkcg -t "$t" "$D/cvae.cgm" "$t.cgm"
		cg-convert "$t.cgm" "$t.st"
		cg-convert "$t.st" "$t.back.cgm"
		cmp "$t.cgm" "$t.back.cgm"
	done
	run -0 cg-inspect --no-stats bf16.st
	assert_output --regexp 'enc[^ ]* +bf16 '
}

@test "every dtype: integers as they are, q8_0 and q4_0 as f32" {
	cg-convert "$D/all.cgm" all.st
	cg-convert all.st all.back.cgm
	run -0 cg-inspect --json --no-stats all.back.cgm
	run -0 jq -r '.tensors[] | "\(.name) \(.dtype)"' <<<"$output"
	assert_output "enc.0.w f32
enc.0.b f32
dec.w f16
dec.b bf16
q8 f32
q4 f32
mask u8
i8 i8
u16 u16
idx u32
u64 u64
odd f32
scalar f32
empty f32"
	# the same values: q8 and q4 decoded exactly
	run -0 cg-inspect --diff --tolerance 0 "$D/all.cgm" all.back.cgm
	run -0 cg-inspect --tensor u64 all.st
	assert_output "0
18446744073709551615"
}

@test "standard input and output, and a pipeline there and back" {
	cg-convert <"$D/cvae.cgm" >a.st
	cg-convert - - <a.st >a.cgm
	cmp "$D/cvae.cgm" a.cgm
	cat "$D/cvae.cgm" | cg-convert | cg-convert | cmp - "$D/cvae.cgm"
	# a compressed cg file, from a pipe too
	cg-convert -z gzip a.st a.cgm.gz
	gzip -t <a.cgm.gz
	cat a.cgm.gz | cg-convert - b.st
	cmp a.st b.st
	cg-convert -z zstd a.st - | cg-convert | cmp - a.st
}

@test "a safetensors file is not compressed, and never written to a terminal" {
	run -1 --separate-stderr cg-convert -z gzip "$D/cvae.cgm" a.st
	assert_equal "$stderr" \
		'cg-convert: --compress: a safetensors file is written uncompressed'
	[ ! -e a.st ]
	script -qec true /dev/null >/dev/null 2>&1 ||
		skip 'script(1) cannot make a pseudo-terminal here'
	run -0 script -qec "cg-convert '$D/cvae.cgm'; echo \"status \$?\"" \
		/dev/null
	assert_output --partial 'terminal'
	assert_output --partial 'status 1'
}

@test "an interrupted write leaves no file" {
	mkdir out
	run -1 --separate-stderr bash -c \
		'trap "" XFSZ; ulimit -f 4; cg-convert "$1" out/a.st' sh \
		"$D/cgpt.cgm"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-convert: out/a.st: write failed: File too large' ]]
	run -0 ls -A out
	assert_output ''
	[ -w /dev/full ] || skip "no /dev/full"
	run -1 --separate-stderr sh -c 'cg-convert "$1" >/dev/full' sh \
		"$D/cgpt.cgm"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-convert: standard output: '* ]]
}

# ------------------------------------------------------------ cg-inspect

@test "cg-inspect shows, dumps and compares safetensors files" {
	cg-convert "$D/cvae.cgm" m.st
	run -0 cg-inspect --no-stats m.st
	assert_line --index 0 'file:       m.st'
	assert_line 'arch:       cvae'
	run -0 cg-inspect --json --no-stats "$D/cvae.cgm"
	want=$(jq -c '.tensors' <<<"$output")
	run -0 cg-inspect --json --no-stats m.st
	assert_equal "$(jq -c '.tensors' <<<"$output")" "$want"
	run -0 sh -c 'cat m.st | cg-inspect --json --no-stats -'
	assert_equal "$(jq -c '.tensors' <<<"$output")" "$want"
	run -0 cg-inspect --tensor enc.0.b m.st
	assert_equal "$output" "$(cg-inspect --tensor enc.0.b "$D/cvae.cgm")"
	run -0 cg-inspect --diff -q m.st "$D/cvae.cgm"
	# nothing in a safetensors file can prove it unaltered
	run -1 --separate-stderr cg-inspect --verify m.st
	assert_equal "$stderr" \
		'cg-inspect: m.st: a safetensors file: no digests to verify'
}

@test "the other programs read cg files only, and say what to do" {
	cg-convert "$D/cvae.cgm" m.st
	run -1 --separate-stderr cg-reduce m.st
	assert_output ''
	assert_equal "$stderr" \
		'cg-reduce: m.st: a safetensors file, not a cg file (cg-convert makes one of it)'
	run -1 --separate-stderr cg-eval -m m.st -d "$D/fm-0.cgd"
	assert_equal "$stderr" \
		'cg-eval: m.st: a safetensors file, not a cg file (cg-convert makes one of it)'
}

# -------------------------------------------- the reference implementation

@test "a file the safetensors package wrote reads to the values it lists" {
	cg-convert "$V/vectors.safetensors" v.cgm
	cg-inspect --verify -q v.cgm
	run -0 cg-inspect --json --no-stats v.cgm
	assert_equal "$(jq -r '.kind, .safetensors_metadata.format' \
		<<<"$output")" "model
pt"
	n=0
	while read -r name dtype shape && read -r values; do
		run -0 cg-inspect --no-stats v.cgm
		assert_output --regexp "
$name +$dtype +$shape +"
		run -0 cg-inspect --tensor "$name" v.cgm
		assert_equal "$(printf '%s\n' "$output" | tr '\n' ' ')" \
			"$values "
		n=$((n + 1))
	done <"$V/expected.txt"
	[ "$n" -eq 7 ]
	# the tensors in the order of their bytes, as the package put them
	run -0 cg-inspect --json --no-stats v.cgm
	assert_equal "$(jq -r '[.tensors[].name] | join(" ")' <<<"$output")" \
		'layer.0.weight temperature index layer.1.bf layer.0.half small mask'
	# and written out again, its metadata pair beside cg's manifest
	cg-convert v.cgm v2.st
	run -0 grep -ac '}]}","format":"pt"},"layer.0.weight":{"dtype":"F32","shape":\[2,4\],"data_offsets":\[0,32\]}' v2.st
	cg-convert v2.st v2.cgm
	cmp v.cgm v2.cgm
}

# The python that has the safetensors package and numpy, or nothing.
st_python() {
	local p
	for p in /opt/cg-test-venv/bin/python python3 /usr/bin/python3; do
		if command -v "$p" >/dev/null &&
			"$p" -c 'import numpy, safetensors' 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

@test "the safetensors package reads what cg-convert writes" {
	py=$(st_python) || skip 'no python with the safetensors package'
	cg-convert "$D/all.cgm" all.st
	cg-convert "$D/cgpt.cgm" cgpt.st
	cat >check.py <<'EOF'
# check.py FILE: the package reads FILE; each tensor's bytes are those
# whose digest cg.json lists; f32 and f16 tensors load through numpy;
# where the package can serialize raw buffers, it writes FILE's bytes.
import hashlib, json, sys
import numpy as np
import safetensors
from safetensors import deserialize, safe_open
path = sys.argv[1]
raw = open(path, "rb").read()
with safe_open(path, "np") as f:
    meta = f.metadata()
    man = json.loads(meta["cg.json"])
    listed = {t["name"]: t for t in man["tensors"]}
    for name in f.keys():
        t = listed.pop(name)
        if t["dtype"] in ("f32", "f16", "u8", "i8", "u16", "u32", "u64"):
            a = f.get_tensor(name)
            assert list(a.shape) == t["shape"], name
            assert a.dtype.name == {"f32": "float32", "f16": "float16",
                                    "u8": "uint8", "i8": "int8",
                                    "u16": "uint16", "u32": "uint32",
                                    "u64": "uint64"}[t["dtype"]], name
assert not listed, listed
tensors = deserialize(raw)
for name, t in tensors:
    d = {x["name"]: x for x in man["tensors"]}[name]
    assert hashlib.sha256(bytes(t["data"])).hexdigest() == d["sha256"], name
    assert t["shape"] == d["shape"], name
n = 0
if hasattr(safetensors, "TensorSpec"):
    names = {"F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "U8": "uint8", "I8": "int8", "U16": "uint16", "U32": "uint32",
             "U64": "uint64"}
    keep, specs = [], {}
    for name, t in tensors:
        b = np.frombuffer(bytes(t["data"]) or b"\0", dtype=np.uint8).copy()
        keep.append(b)
        specs[name] = safetensors.TensorSpec(
            dtype=names[t["dtype"]], shape=tuple(t["shape"]),
            data_ptr=b.ctypes.data, data_len=len(t["data"]))
    again = bytes(safetensors.serialize(specs, metadata=meta))
    assert again == raw, "the package writes other bytes"
    n = 1
print("ok", len(tensors), "tensors", "rewritten" if n else "read")
EOF
	run -0 "$py" check.py all.st
	assert_output --partial 'ok 14 tensors'
	run -0 "$py" check.py cgpt.st
	assert_output --partial 'ok '
	# the package refuses what cg refuses
	mkst bad.st '{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"v":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}' 6
	run ! "$py" -c 'import sys; from safetensors import safe_open; safe_open(sys.argv[1], "np")' bad.st
}

# ---------------------------------------------------------------- hostile

@test "hostile safetensors files: one line naming the file, exit 1" {
	W='"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}'
	cg-convert "$D/cvae.cgm" good.st
	# too short to tell: read as a cg file, and refused as one
	head -c 5 good.st >short.st
	run -1 --separate-stderr cg-convert short.st out.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-convert: short.st: '* ]]
	[ ! -e out.cgm ]
	head -c 200 good.st >cut.st
	refused cut.st "header length $(($(od -An -tu8 -N8 good.st))) past the end of the file (200 bytes)"
	{ le64 100000001; printf '{}'; } >big.st
	refused big.st 'header of 100000001 bytes (at most 100000000)'
	{ le64 2; printf '{x'; } >nojson.st
	refused nojson.st 'header: not a JSON object'
	mkst after.st '{}, {}'
	refused after.st 'header: bytes after the JSON object'
	mkst overlap.st "{$W,\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}" 6
	refused overlap.st 'tensor v: data_offsets [2, 6] overlap tensor w'
	mkst gap.st "{$W,\"v\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}" 8
	refused gap.st 'tensor v: a gap of 2 bytes before its data'
	mkst past.st "{$W}" 3
	refused past.st 'tensor w: data_offsets [0, 4] past the end of the file (3 bytes of data)'
	mkst extra.st "{$W}" 5
	refused extra.st "bytes after the last tensor's data (1)"
	mkst len.st '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}' 4
	refused len.st 'tensor w: 4 bytes, but dtype and shape make 8'
	mkst dtype.st '{"w":{"dtype":"Q9","shape":[4],"data_offsets":[0,4]}}' 4
	refused dtype.st "tensor w: unknown dtype 'Q9'"
	mkst f64.st '{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}' 8
	refused f64.st 'tensor w: dtype F64 has no cg equivalent (cg reads F32, F16, BF16, I8, U8, U16, U32, U64)'
	mkst twice.st "{$W,\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}" 8
	refused twice.st 'tensor w: defined twice'
	mkst huge.st '{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}' 4
	refused huge.st 'tensor w: shape overflows'
	mkst slash.st '{"../w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1
	refused slash.st "bad tensor name '../w'"
	# cg's manifest inside, and the data altered after
	cp good.st altered.st
	printf '\001' | dd of=altered.st bs=1 seek=$(($(stat -c %s good.st) - 1)) conv=notrunc 2>/dev/null
	cmp -s good.st altered.st && return 1
	run -1 --separate-stderr cg-convert altered.st out.cgm
	[[ $stderr == 'cg-convert: altered.st: tensor '*': digest mismatch with cg.json (altered since it was written)' ]]
	[ ! -e out.cgm ]
}

@test "a cg.json of a kind the format does not define, or of an update no reader takes" {
	local w='{"dtype":"U8","shape":[4],"data_offsets":[0,4]}'
	# header: cg.json $1 as the metadata, and tensor w
	hdr() { jq -cn --arg cg "$1" --argjson w "$w" \
		'{"__metadata__": {"cg.json": $cg}, "w": $w}'; }
	mkst rocket.st "$(hdr '{"format":"cg/1","kind":"rocket"}')" 4
	refused rocket.st "cg.json: unknown kind 'rocket' (not model, grad, delta, data or state)"
	run -1 --separate-stderr cg-inspect --verify rocket.st
	assert_equal "$stderr" "cg-inspect: rocket.st: cg.json: unknown kind 'rocket' (not model, grad, delta, data or state)"
	# a grad of a codec that does not exist: shown as it is, but not
	# made a cg file, which its readers would refuse
	mkst grad.st "$(hdr "{\"format\":\"cg/1\",\"kind\":\"grad\",\"base\":{\"sha256\":\"$(printf '%064d' 0)\"},\"codec\":{\"spec\":\"rocket\"}}")" 4
	run -0 cg-inspect --no-stats grad.st
	assert_line 'kind:       grad'
	run -1 --separate-stderr cg-convert grad.st out.cgm
	assert_equal "$stderr" "cg-convert: grad.st: manifest: unknown codec 'rocket' (f32, f16, bf16, q8, q4, q2, topk, sign, lowrank, masked)"
	[ ! -e out.cgm ]
}

@test "a pipe that claims a terabyte is refused before any allocation" {
	hdr='{"w":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}'
	mkst tb.st "$hdr" 16
	# memory capped (but not under ASan, whose shadow needs more)
	cap=
	[ "${CG_SANITIZED:-0}" = 1 ] || cap='ulimit -v 1000000;'
	run -1 --separate-stderr sh -c "$cap"' cat "$1" | cg-inspect -' sh tb.st
	assert_equal "$stderr" 'cg-inspect: (stdin): tensor w: data_offsets [0, 1099511627776] past the end of the file (16 bytes of data)'
	{ le64 99999999; printf '{'; } >long.st
	run -1 --separate-stderr sh -c "$cap"' cat "$1" | cg-convert - out.cgm' sh long.st
	assert_equal "$stderr" 'cg-convert: (stdin): header length 99999999 past the end of the file (9 bytes)'
}
