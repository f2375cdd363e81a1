#!/usr/bin/env bats
# 021-inspect-diff.bats - cg-inspect --diff: two cg files, tensor by tensor.
#
# Two kinds of pairs: a real one, a tiny cvae before and after a training
# step (cg-shard, cg-init, cg-train-step), for what people will do with
# it; and mkcg's model (see 020-inspect.bats) against copies edited by
# Debian's Python (edit.py below), where the expected numbers can be
# worked out by hand.  enc.0.w is (i - 8) / 4 for i < 32, so its squared
# norm is (1^2 + ... + 8^2 + 1^2 + ... + 23^2) / 16 = 283.
#
# --diff follows diff(1): exit 0 no tensor differs, 1 some tensor differs
# or is in one file only, 2 trouble (usage, a file that cannot be read).

bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	mkcg m.cgm
	cat >edit.py <<'EOF'
# edit.py IN OUT OP...: a copy of cg file IN with its manifest's digests
# and sizes made right again.  OP is one of
#   drop NAME             remove a tensor
#   set NAME I VALUE      element I of f32 tensor NAME (VALUE may be nan)
#   f16 NAME              f32 tensor NAME as f16
#   shape NAME D,D,...    give NAME another shape of the same size
#   field KEY JSON        set a manifest field
import hashlib, json, struct, sys, tarfile

src, out, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
with tarfile.open(src) as t:
    members = t.getmembers()
    raw = {m.name: t.extractfile(m).read() for m in members}
man = json.loads(raw["cg.json"])
ts = {e["name"]: e for e in man["tensors"]}
while ops:
    op = ops.pop(0)
    if op == "drop":
        n = ops.pop(0)
        man["tensors"] = [e for e in man["tensors"] if e["name"] != n]
    elif op == "set":
        n, i, v = ops.pop(0), int(ops.pop(0)), float(ops.pop(0))
        b = bytearray(raw[n])
        b[4 * i:4 * i + 4] = struct.pack("<f", v)
        raw[n] = bytes(b)
    elif op == "f16":
        n = ops.pop(0)
        k = len(raw[n]) // 4
        raw[n] = struct.pack("<%de" % k, *struct.unpack("<%df" % k, raw[n]))
        ts[n]["dtype"] = "f16"
    elif op == "shape":
        n = ops.pop(0)
        ts[n]["shape"] = [int(d) for d in ops.pop(0).split(",")]
    elif op == "field":
        k = ops.pop(0)
        man[k] = json.loads(ops.pop(0))
    else:
        sys.exit("edit.py: unknown op " + op)
for e in man["tensors"]:
    e["bytes"] = len(raw[e["name"]])
    e["sha256"] = hashlib.sha256(raw[e["name"]]).hexdigest()

def member(tar, name, data):
    import io
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
    tar.addfile(ti, io.BytesIO(data))

with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
    member(tar, "cg.json", json.dumps(man).encode())
    for e in man["tensors"]:
        member(tar, e["name"], raw[e["name"]])
EOF
	# a tiny cvae and two training steps of it; without the class
	# prior, whose tables start at zero (no cosine, no relative change)
	images fm -n 1
	small_cvae fm-0.cgd a.cgm --class-prior=0
	cg-train-step -q -m a.cgm -d fm-0.cgd --emit model --steps 1 -o b.cgm
	cg-train-step -q -m b.cgm -d fm-0.cgd --emit model --steps 1 -o c.cgm
}

setup() {
	cd "$BATS_FILE_TMPDIR" || return 1
	export LC_ALL=C
}

edit() {
	/usr/bin/python3 "$BATS_FILE_TMPDIR/edit.py" "$@"
}

# Whether filter $2 holds for the one JSON line of tensor $1 in $output.
tensor_is() {
	jq -e -s --arg t "$1" \
		"[.[] | select(.tensor == \$t)] | length == 1 and (.[0] | $2)" \
		<<<"$output"
}

# ----------------------------------------------------------- conventions

@test "--help describes --diff and --tolerance" {
	run -0 --separate-stderr cg-inspect --help
	assert_line --partial 'cg-inspect --diff [-jq] [--tolerance X] A B'
	assert_output --partial '--tolerance X'
	assert_output --partial 'diff(1)'
}

@test "bad uses of --diff are usage errors: exit 2, synopsis on stderr" {
	run -2 --separate-stderr cg-inspect --diff m.cgm
	assert_output ''
	assert_equal "${stderr_lines[0]}" 'cg-inspect: --diff compares two files'
	assert_equal "${stderr_lines[1]%% *}" 'usage:'
	run -2 --separate-stderr cg-inspect --diff m.cgm m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" 'cg-inspect: --diff compares two files'
	run -2 --separate-stderr cg-inspect --tolerance 1 m.cgm
	assert_equal "${stderr_lines[0]}" 'cg-inspect: --tolerance needs --diff'
	run -2 --separate-stderr cg-inspect --diff --tolerance -1 m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" \
		"cg-inspect: --tolerance: '-1' is not a number in [0, 1e+30]"
	run -2 --separate-stderr cg-inspect --diff --tolerance x m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" \
		"cg-inspect: --tolerance: 'x' is not a number in [0, 1e+30]"
	run -2 --separate-stderr cg-inspect --diff --verify m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: --diff and --verify cannot be combined'
	run -2 --separate-stderr cg-inspect --diff -t enc.0.w m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: --tensor cannot be combined with --diff'
	run -2 --separate-stderr cg-inspect --diff --no-stats m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: --no-stats cannot be combined with --diff'
	run -2 --separate-stderr cg-inspect --diff - - <m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: standard input named twice'
}

@test "a missing or damaged file is trouble: exit 2, one line each" {
	run -2 --separate-stderr cg-inspect --diff m.cgm nope.cgm
	assert_output ''
	assert_equal "$stderr" \
		'cg-inspect: nope.cgm: No such file or directory'
	run -2 --separate-stderr cg-inspect --diff --json nope.cgm m.cgm
	assert_output ''
	assert_equal "$stderr" \
		'cg-inspect: nope.cgm: No such file or directory'
	run -2 --separate-stderr cg-inspect --diff nope.cgm gone.cgm
	assert_equal "${#stderr_lines[@]}" 2
	assert_equal "${stderr_lines[1]}" \
		'cg-inspect: gone.cgm: No such file or directory'
	head -c 700 m.cgm >short.cgm
	run -2 --separate-stderr cg-inspect --diff -q m.cgm short.cgm
	assert_output ''
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^cg-inspect: short\.cgm: '
}

@test "a write error on stdout is trouble" {
	[ -w /dev/full ] || skip '/dev/full is missing'
	run -2 --separate-stderr bash -c 'cg-inspect --diff m.cgm m.cgm >/dev/full'
	assert_equal "$stderr" 'cg-inspect: standard output: write error'
}

# ------------------------------------------------------------- identical

@test "a file against itself or its copy: exit 0, every tensor identical" {
	cp m.cgm copy.cgm
	run -0 --separate-stderr cg-inspect --diff m.cgm copy.cgm
	assert_equal "$stderr" ''
	assert_line 'A:          m.cgm'
	assert_line 'B:          copy.cgm'
	assert_line 'tensors:    14 in A, 14 in B: 14 identical'
	assert_line --regexp '^NAME +STATUS +DTYPE +SHAPE +MAX\|A-B\| +REL-L2 +NDIFF +COSINE$'
	assert_line --regexp '^enc\.0\.w +identical +f32 +4x8 +0 +0 +0 +1\.0000000$'
	# all zeros: no direction, so no cosine
	assert_line --regexp '^enc\.0\.b +identical +f32 +8 +0 +0 +0 +-$'
	# nan facing nan is no difference
	assert_line --regexp '^odd +identical +f32 +4 +0 +0 +0 +1\.0000000$'
	assert_line --regexp '^empty +identical +f32 +0 +0 +0 +0 +-$'
	refute_output --partial 'differs'
	run -0 cg-inspect --diff a.cgm a.cgm
}

@test "-q prints nothing: the exit status alone tells" {
	run -0 --separate-stderr cg-inspect --diff -q m.cgm m.cgm
	assert_output ''
	assert_equal "$stderr" ''
	run -1 --separate-stderr cg-inspect --diff --quiet a.cgm b.cgm
	assert_output ''
	assert_equal "$stderr" ''
}

@test "a compressed copy is identical: values, not archive bytes" {
	mkcg z.cgm zstd
	run -0 cg-inspect --diff -q m.cgm z.cgm
}

# ------------------------------------------------------ a training step

@test "a model before and after a training step: exit 1, changes listed" {
	run -1 --separate-stderr cg-inspect --diff a.cgm b.cgm
	assert_equal "$stderr" ''
	assert_line 'tensors:    10 in A, 12 in B: 10 differ, 2 only in B'
	# the manifest fields that changed, A's value over B's
	assert_line 'step:       A 0'
	assert_line '            B 1'
	assert_line 'samples:    A (absent)'
	refute_line --partial 'arch:'
	refute_line --partial 'config:'
	for t in enc.0.w enc.0.b enc.mu.w dec.0.w dec.out.w dec.out.b; do
		assert_line --regexp "^${t//./\\.} +differs +f32 "
	done
	# Adam's first step moves every weight by about lr = 1e-3
	assert_line --regexp '^dec\.out\.w +differs +f32 +784x16 +0\.001 '
	assert_line --regexp '^opt\.m +only in B +f32 +26424 +- +- +- +-$'
	assert_line --regexp '^opt\.v +only in B '
	# and back again: only in A
	run -1 cg-inspect --diff b.cgm a.cgm
	assert_line --regexp '^opt\.m +only in A '
}

@test "--tolerance: tensors within it are equal, exit 0" {
	# b and c have the same tensors; one step apart
	run -1 cg-inspect --diff b.cgm c.cgm
	run -0 cg-inspect --diff --tolerance 1e6 b.cgm c.cgm
	assert_line 'tolerance:  1e+06'
	assert_line 'tensors:    12 in A, 12 in B: 12 equal'
	assert_line --regexp '^enc\.0\.w +equal +f32 +16x794 +0\.00'
	# a tolerance below the step's size changes nothing
	run -1 cg-inspect --diff --tolerance 1e-6 b.cgm c.cgm
	assert_line --regexp '^dec\.out\.b +differs '
	# a tensor in one file only is never equal
	run -1 cg-inspect --diff --tolerance 1e6 a.cgm b.cgm
	assert_line 'tensors:    10 in A, 12 in B: 10 equal, 2 only in B'
}

@test "after cg-apply: the diff names what the update touched" {
	cg-train-step -q -m a.cgm -d fm-0.cgd --emit grad -o - |
		cg-apply -m a.cgm -o after.cgm -
	run -1 --separate-stderr cg-inspect --diff --json a.cgm after.cgm
	assert_equal "$stderr" ''
	run -0 jq -e -s '[.[] | select(.status == "differs") | .tensor] |
		index("enc.0.w") != null and index("dec.out.b") != null' \
		<<<"$output"
}

# ------------------------------------------------------- worked numbers

@test "one element changed: max, relative L2, count and cosine" {
	edit m.cgm one.cgm set enc.0.w 0 -1.5
	run -1 --separate-stderr cg-inspect --diff --json m.cgm one.cgm
	assert_equal "$stderr" ''
	tensor_is enc.0.w '.status == "differs" and .count == 32 and
		.max_abs == 0.5 and .ndiff == 1 and .same_dtype and .same_shape'
	# ||a - b|| = 0.5, ||a||^2 = 283; a.b = 283 - 4 + 3, ||b||^2 = 283 - 4 + 2.25
	tensor_is enc.0.w '(.rel_l2 - 0.5 / (283 | sqrt) | fabs) < 1e-15'
	tensor_is enc.0.w '(.cosine - 282 / (283 * 281.25 | sqrt) | fabs) < 1e-15'
	tensor_is q4 '.status == "identical"'
	run -1 cg-inspect --diff m.cgm one.cgm
	assert_line 'tensors:    14 in A, 14 in B: 13 identical, 1 differs'
	assert_line --regexp '^enc\.0\.w +differs +f32 +4x8 +0\.5 +0\.02972 +1 +0\.9995617$'
	# within the tolerance, and on it
	run -0 cg-inspect --diff --tolerance 0.5 m.cgm one.cgm
	assert_line --regexp '^enc\.0\.w +equal +f32 +4x8 +0\.5 +0\.02972 +0 '
	run -1 cg-inspect --diff --tolerance 0.4999 -q m.cgm one.cgm
}

@test "a nan facing a number is an infinite difference" {
	edit m.cgm nan.cgm set odd 3 nan
	run -1 cg-inspect --diff --json m.cgm nan.cgm
	tensor_is odd '.max_abs == null and .ndiff == 1'
	run -1 cg-inspect --diff --tolerance 1e30 m.cgm nan.cgm
	assert_line --regexp '^odd +differs +f32 +4 +inf '
}

@test "a tensor only in one file: only in A, only in B" {
	edit m.cgm less.cgm drop scalar drop q4
	run -1 --separate-stderr cg-inspect --diff m.cgm less.cgm
	assert_line 'tensors:    14 in A, 12 in B: 12 identical, 2 only in A'
	assert_line --regexp '^scalar +only in A +f32 +scalar +- +- +- +-$'
	assert_line --regexp '^q4 +only in A +q4_0 +32 '
	run -1 cg-inspect --diff less.cgm m.cgm
	assert_line --regexp '^scalar +only in B '
	run -1 cg-inspect --diff --tolerance 1e30 -q less.cgm m.cgm
	run -1 cg-inspect --diff --json less.cgm m.cgm
	tensor_is scalar '.status == "only_b" and .a == null and
		.b == {"dtype": "f32", "shape": []} and has("max_abs") == false'
}

@test "a new dtype with the same values: differs, but equal by value" {
	edit m.cgm half.cgm f16 enc.0.w
	run -1 cg-inspect --diff m.cgm half.cgm
	assert_line --regexp '^enc\.0\.w +differs +f32->f16 +4x8 +0 +0 +0 +1\.0000000$'
	# any tolerance, even 0, compares values rather than bytes
	run -0 cg-inspect --diff --tolerance 0 m.cgm half.cgm
	assert_line --regexp '^enc\.0\.w +equal +f32->f16 '
	run -1 cg-inspect --diff --json m.cgm half.cgm
	tensor_is enc.0.w '.a.dtype == "f32" and .b.dtype == "f16" and
		(.same_dtype | not) and .same_shape'
}

@test "a new shape of the same size is compared, never equal" {
	edit m.cgm flat.cgm shape enc.0.w 32
	run -1 cg-inspect --diff --tolerance 1 m.cgm flat.cgm
	assert_line --regexp '^enc\.0\.w +differs +f32 +4x8->32 +0 +0 +0 +1\.0000000$'
	edit m.cgm wide.cgm shape enc.0.w 8,4
	run -1 cg-inspect --diff --json m.cgm wide.cgm
	tensor_is enc.0.w '(.same_shape | not) and .b.shape == [8, 4] and .max_abs == 0'
}

@test "manifest fields: any field that differs, tensors decide the status" {
	edit m.cgm meta.cgm field step 1201 field config \
		'{"in":32,"hidden":16,"latent":4}' field note '"hello"'
	run -0 --separate-stderr cg-inspect --diff meta.cgm m.cgm
	assert_line 'step:       A 1201'
	assert_line '            B 1200'
	assert_line 'config:     A {"in":32,"hidden":16,"latent":4}'
	assert_line '            B {"in":32,"hidden":8,"latent":4}'
	assert_line 'note:       A hello'
	assert_line '            B (absent)'
	assert_line 'tensors:    14 in A, 14 in B: 14 identical'
	run -0 cg-inspect --diff --json meta.cgm m.cgm
	run -0 jq -c -s 'last.fields' <<<"$output"
	# in A's order, then B's fields that A lacks
	assert_output '[{"key":"config","a":{"in":32,"hidden":16,"latent":4},"b":{"in":32,"hidden":8,"latent":4}},{"key":"step","a":1201,"b":1200},{"key":"note","a":"hello"}]'
}

@test "any kinds compare: a model against a data shard" {
	mkcg -k data d.cgd
	run -1 cg-inspect --diff m.cgm d.cgd
	assert_line 'kind:       A model'
	assert_line '            B data'
	assert_line 'tensors:    14 in A, 4 in B: 14 only in A, 4 only in B'
	assert_line --regexp '^payload +only in B +u8 +40 '
}

# ------------------------------------------------------------------ json

@test "--json: a line per tensor, then the summary; jq parses every one" {
	run -1 --separate-stderr cg-inspect --diff --json a.cgm b.cgm
	assert_equal "$stderr" ''
	assert_equal "${#lines[@]}" 13
	json=$output
	run -0 jq -e -s 'length == 13 and
		(.[:12] | all(has("tensor") and has("status"))) and
		(.[:10] | all(.status == "differs" and .count > 0 and
			.max_abs > 0 and .rel_l2 > 0 and .ndiff > 0 and
			.cosine > 0.99 and .cosine <= 1)) and
		(.[12] | has("tensor") | not)' <<<"$json"
	run -0 jq -c -s 'last | del(.fields[].b)' <<<"$json"
	assert_output '{"a":"a.cgm","b":"b.cgm","tolerance":null,"differ":true,"tensors_a":10,"tensors_b":12,"identical":0,"equal":0,"differs":10,"only_a":0,"only_b":2,"fields":[{"key":"step","a":0},{"key":"loss"},{"key":"samples"},{"key":"opt_t"}]}'
	run -0 cg-inspect --diff --json --tolerance 0.5 m.cgm m.cgm
	run -0 jq -e -s 'last | .differ == false and .tolerance == 0.5 and
		.identical == 14' <<<"$output"
}

# ----------------------------------------------------------------- stdin

@test "standard input as either file, plain or compressed" {
	run -1 --separate-stderr cg-inspect --diff - b.cgm <a.cgm
	assert_equal "$stderr" ''
	assert_line 'A:          (stdin)'
	assert_line 'B:          b.cgm'
	assert_line --regexp '^enc\.0\.w +differs '
	run -0 bash -c 'mkcg - gzip | cg-inspect --diff m.cgm -'
	assert_line 'B:          (stdin)'
	run -0 bash -c 'mkcg - | cg-inspect --diff --json - m.cgm |
		jq -r "select(.tensor == null) | .a"'
	assert_output '(stdin)'
}
