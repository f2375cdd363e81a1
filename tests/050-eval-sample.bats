#!/usr/bin/env bats
# 050-eval-sample.bats - cg-eval and cg-sample: options, failures, figures
# of a fresh model, and the bytes of the pictures.
#
# One shard pair and one fresh cvae model are made once per file from the
# Fashion-MNIST fixture (90 training examples, 10 held out); the programs
# under test come from PATH.  PNG headers are read with python3.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	model cvae train-0.cgd model.cgm --hidden 64 --layers 1 --latent 8
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# png_size FILE: "WIDTH HEIGHT DEPTH COLOUR" from the IHDR chunk, after
# checking the signature.
png_size() {
	python3 - "$1" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n', 'no PNG signature'
assert d[12:16] == b'IHDR', 'IHDR is not first'
w, h, depth, colour = struct.unpack('>IIBB', d[16:26])
print(w, h, depth, colour)
EOF
}

# ----------------------------------------------------------- cg-eval

@test "cg-eval --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-eval --help
	assert_output --partial 'usage: cg-eval -m MODEL -d SHARD'
	assert_output --partial '--json'
	[ -z "$stderr" ]
}

@test "cg-eval --version" {
	run -0 cg-eval --version
	assert_output 'cg-eval (cg) 0.1.0'
}

@test "cg-eval: bad options and numbers are usage errors" {
	run -2 --separate-stderr cg-eval --bogus -m "$D/model.cgm" -d "$D/test.cgd"
	[ -z "$output" ]
	[[ $stderr == "cg-eval: unknown option '--bogus'"* ]]
	[[ $stderr == *usage:* ]]
	run -2 cg-eval -m "$D/model.cgm" -d "$D/test.cgd" --batch 0
	run -2 cg-eval -m "$D/model.cgm" -d "$D/test.cgd" --batch 12abc
	run -2 cg-eval -m "$D/model.cgm" -d "$D/test.cgd" --seed -1
	run -2 cg-eval -m "$D/model.cgm" -d "$D/test.cgd" --threads x
	run -2 cg-eval -m "$D/model.cgm" -d "$D/test.cgd" -b
}

@test "cg-eval: no model or no shard is a usage error" {
	run -2 --separate-stderr cg-eval -d "$D/test.cgd"
	[[ ${stderr_lines[0]} == 'cg-eval: no model given (-m MODEL)' ]]
	run -2 --separate-stderr cg-eval -m "$D/model.cgm"
	[[ ${stderr_lines[0]} == 'cg-eval: no data given (-d SHARD)' ]]
	run -2 --separate-stderr cg-eval -m - -d -
	[[ ${stderr_lines[0]} == *'only one input can be standard input'* ]]
}

@test "cg-eval: a missing model is one line, exit 1" {
	run -1 --separate-stderr cg-eval -m nope.cgm -d "$D/test.cgd"
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-eval: nope.cgm: '* ]]
}

@test "cg-eval: a missing shard fails alone; the others are scored" {
	run -1 --separate-stderr cg-eval --json -m "$D/model.cgm" \
		-d nope.cgd -d "$D/test.cgd"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-eval: nope.cgd: '* ]]
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .data <<<"$output")" = "$D/test.cgd" ]
}

@test "cg-eval: a model file is not a shard" {
	run -1 --separate-stderr cg-eval -m "$D/model.cgm" -d "$D/model.cgm"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-eval: $D/model.cgm: "* ]]
}

@test "cg-eval: a shard with other condition names is refused" {
	printf '%s\n' a b c d e f g h i j >names
	cg-shard -q --conditions names -o other \
		"$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	run -1 --separate-stderr cg-eval -m "$D/model.cgm" -d other-0.cgd
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == *'condition 0 is "a" in the data but "T-shirt/top" in the model'* ]]
}

@test "cg-eval --json: one object per shard, figures of a fresh model" {
	run -0 --separate-stderr cg-eval --json -m "$D/model.cgm" \
		-d "$D/train-0.cgd" "$D/test.cgd"
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 2 ]
	# Every line is one JSON object with the documented keys.
	run -0 jq -r '[.model, .data, .arch, .step, .examples] | @tsv' \
		<<<"$output"
	assert_line --index 0 "$D/model.cgm	$D/train-0.cgd	cvae	0	90"
	assert_line --index 1 "$D/model.cgm	$D/test.cgd	cvae	0	10"
	# A fresh model's logits are near 0: each pixel costs about ln 2,
	# 784 of them about 543 nats, and bits/dim is nelbo / (784 ln 2).
	run -0 cg-eval --json -m "$D/model.cgm" -d "$D/test.cgd"
	run -0 jq -e '.nelbo > 400 and .nelbo < 700 and .kl >= 0 and
		.rec > 0 and ((.rec + .kl - .nelbo) | fabs) < 1e-6 and
		((.nelbo / (784 * (2 | log)) - .bits_per_dim) | fabs) < 1e-9' \
		<<<"$output"
}

@test "cg-eval: the table names its columns and each shard" {
	run -0 --separate-stderr cg-eval -m "$D/model.cgm" -d "$D/test.cgd"
	assert_line --index 0 "model $D/model.cgm (cvae, step 0)"
	assert_line --index 1 --regexp '^ *examples +nelbo +rec +kl +bits/dim +data$'
	assert_line --index 2 --regexp "^ +10 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+  $D/test.cgd\$"
}

@test "cg-eval: same seed, same figures; batch size changes nothing" {
	run -0 cg-eval --json -m "$D/model.cgm" -d "$D/train-0.cgd"
	a=$output
	run -0 cg-eval --json -m "$D/model.cgm" -d "$D/train-0.cgd"
	[ "$a" = "$output" ]
	run -0 cg-eval --json --batch 7 -j 1 -m "$D/model.cgm" \
		-d "$D/train-0.cgd"
	jq -e --argjson a "$a" \
		'((.nelbo - $a.nelbo) | fabs) < 1e-4 * $a.nelbo' <<<"$output"
}

@test "cg-eval: model or shard from standard input" {
	run -0 cg-eval --json -m "$D/model.cgm" -d "$D/test.cgd"
	a=$(jq -c 'del(.model, .data)' <<<"$output")
	run -0 cg-eval --json -m - -d "$D/test.cgd" <"$D/model.cgm"
	[ "$(jq -c 'del(.model, .data)' <<<"$output")" = "$a" ]
	[ "$(jq -r .model <<<"$output")" = - ]
	run -0 cg-eval --json -m "$D/model.cgm" -d - <"$D/test.cgd"
	[ "$(jq -c 'del(.model, .data)' <<<"$output")" = "$a" ]
}

@test "cg-eval: a write error on standard output is exit 1" {
	[ -w /dev/full ] || skip "no /dev/full"
	run -1 --separate-stderr \
		sh -c 'cg-eval -m "$1" -d "$2" >/dev/full' sh \
		"$D/model.cgm" "$D/test.cgd"
	[[ $stderr == *'cg-eval: standard output: write error'* ]]
}

# --------------------------------------------------------- cg-sample

@test "cg-sample --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-sample --help
	assert_output --partial 'usage: cg-sample -m MODEL'
	assert_output --partial '--temperature'
	[ -z "$stderr" ]
}

@test "cg-sample --version" {
	run -0 cg-sample --version
	assert_output 'cg-sample (cg) 0.1.0'
}

@test "cg-sample: bad options and numbers are usage errors" {
	run -2 --separate-stderr cg-sample -x -m "$D/model.cgm" -o a.png
	[[ $stderr == "cg-sample: unknown option '-x'"* ]]
	run -2 cg-sample -m "$D/model.cgm" -n 0 -o a.png
	run -2 cg-sample -m "$D/model.cgm" -n 4097 -o a.png
	run -2 cg-sample -m "$D/model.cgm" --temperature nan -o a.png
	run -2 cg-sample -m "$D/model.cgm" --temperature -1 -o a.png
	run -2 --separate-stderr cg-sample -m "$D/model.cgm" -f jpg -o a.png
	[[ ${stderr_lines[0]} == *"unknown image format 'jpg'"* ]]
	run -2 cg-sample -m "$D/model.cgm" -o a.png stray
	run -2 cg-sample -o a.png
	[ ! -e a.png ]
}

@test "cg-sample: an unknown condition is a usage error naming the valid ones" {
	run -2 --separate-stderr cg-sample -m "$D/model.cgm" -c Hat -o a.png
	[[ ${stderr_lines[0]} == "cg-sample: unknown condition 'Hat'; valid: \"T-shirt/top\", \"Trouser\","*'"Ankle boot", or an index 0 to 9' ]]
	run -2 cg-sample -m "$D/model.cgm" -c 10 -o a.png
	run -2 cg-sample -m "$D/model.cgm" -c -1 -o a.png
	[ ! -e a.png ]
}

@test "cg-sample: a missing model is one line, exit 1, no file" {
	run -1 --separate-stderr cg-sample -m nope.cgm -o a.png
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: nope.cgm: '* ]]
	[ ! -e a.png ]
}

@test "cg-sample: writes a PNG grid of one row per condition" {
	run -0 --separate-stderr cg-sample -m "$D/model.cgm" -o all.png
	[ -z "$output" ] && [ -z "$stderr" ]
	# 10 conditions x 10 images of 28 x 28, 2 pixels around each cell.
	run -0 png_size all.png
	assert_output '302 302 8 0'
	run -0 cg-sample -m "$D/model.cgm" -n 3 -c Dress -c 0 -o two.png
	run -0 png_size two.png
	assert_output '92 62 8 0'
	run -0 file two.png
	assert_output --partial 'PNG image data, 92 x 62, 8-bit grayscale'
}

@test "cg-sample: same seed, same bytes; another seed, other bytes" {
	cg-sample -m "$D/model.cgm" --seed 7 -o a.png
	cg-sample -m "$D/model.cgm" --seed 7 -j 1 -o b.png
	cmp a.png b.png
	cg-sample -m "$D/model.cgm" --seed 8 -o c.png
	run ! cmp -s a.png c.png
	# No time chunk: the bytes cannot depend on when they were made.
	run ! grep -c tIME a.png
}

@test "cg-sample: a row depends only on the seed and its condition" {
	cg-sample -m "$D/model.cgm" --seed 3 -f pgm -o all.pgm
	cg-sample -m "$D/model.cgm" --seed 3 -c Dress -o dress.pgm
	cg-sample -m "$D/model.cgm" --seed 3 -c 3 -o three.pgm
	cmp dress.pgm three.pgm
	run -0 python3 - all.pgm dress.pgm <<'EOF'
import sys
def pgm(p):
    magic, size, maxval, px = open(p, 'rb').read().split(b'\n', 3)
    w, h = map(int, size.split())
    assert magic == b'P5' and maxval == b'255' and len(px) == w * h
    return w, h, px
w, h, a = pgm(sys.argv[1])
w1, h1, d = pgm(sys.argv[2])
assert (w, h, w1, h1) == (302, 302, 302, 32), (w, h, w1, h1)
# Dress is condition 3: rows 2 + 3 * 30 .. + 28 of the full grid.
top = 2 + 3 * 30
assert a[top * w:(top + 28) * w] == d[2 * w:30 * w], 'rows differ'
print('ok')
EOF
	assert_output ok
}

@test "cg-sample: PNG and PGM hold the same pixels" {
	cg-sample -m "$D/model.cgm" -n 4 -o a.png
	cg-sample -m "$D/model.cgm" -n 4 -o a.pgm
	run -0 head -c 15 a.pgm
	assert_output "$(printf 'P5\n122 302\n255')"
	run -0 python3 - a.png a.pgm <<'EOF'
import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
i, idat = 8, b''
while i < len(d):
    n, = struct.unpack('>I', d[i:i + 4])
    t = d[i + 4:i + 8]
    if t == b'IHDR':
        w, h = struct.unpack('>II', d[i + 8:i + 16])
    if t == b'IDAT':
        idat += d[i + 8:i + 8 + n]
    i += 12 + n
raw, prev, out = zlib.decompress(idat), bytearray(w), bytearray()
for y in range(h):
    f, line = raw[y * (w + 1)], bytearray(raw[y * (w + 1) + 1:(y + 1) * (w + 1)])
    for x in range(w):
        a = line[x - 1] if x else 0
        b, c = prev[x], (prev[x - 1] if x else 0)
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    out += line
    prev = line
pgm = open(sys.argv[2], 'rb').read().split(b'\n', 3)[3]
print('same' if bytes(out) == pgm else 'differ')
EOF
	assert_output same
}

@test "cg-sample: standard output, but never a terminal" {
	cg-sample -m "$D/model.cgm" -n 2 -o a.png
	run -0 sh -c 'cg-sample -m "$1" -n 2 | cmp - a.png' sh "$D/model.cgm"
	run -0 sh -c 'cg-sample -m - -n 2 -o - <"$1" | cmp - a.png' sh \
		"$D/model.cgm"
	command -v script >/dev/null || skip "no script(1) to make a terminal"
	run -1 script -qec "cg-sample -m '$D/model.cgm' -n 2" /dev/null
	assert_output --partial 'cg-sample: refusing to write an image to a terminal'
	refute_output --partial PNG
}

@test "cg-sample: a picture too large is refused before sampling" {
	run -1 --separate-stderr cg-sample -m "$D/model.cgm" -n 4000 -o a.png
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == *'a picture of 120002x302 pixels (at most 65535 a side)'* ]]
	[ ! -e a.png ]
}

@test "cg-sample: an interrupted write leaves no file" {
	# The file size limit cuts the write short; with SIGXFSZ ignored the
	# write fails (EFBIG) and the temporary must be removed.
	mkdir out
	run -1 --separate-stderr bash -c \
		'trap "" XFSZ; ulimit -f 1; cg-sample -m "$1" -n 40 -o out/a.png' \
		sh "$D/model.cgm"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: out/a.png: write failed: File too large' ]]
	run -0 ls -A out
	assert_output ''
	[ -w /dev/full ] || skip "no /dev/full"
	run -1 --separate-stderr sh -c 'cg-sample -m "$1" >/dev/full' sh \
		"$D/model.cgm"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: standard output: write failed: '* ]]
}

@test "cg-sample: a manifest whose image shape lies is refused" {
	mkdir m
	tar -xf "$D/model.cgm" -C m
	jq -c '.image.channels = 3' m/cg.json >cg.json.new
	mv cg.json.new m/cg.json
	tar --format=ustar -cf bad.cgm -C m $(tar -tf "$D/model.cgm")
	run -1 --separate-stderr cg-sample -m bad.cgm -o a.png
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: bad.cgm: manifest: images of 28x28x3, but the model makes 784 values per image' ]]
	[ ! -e a.png ]
}

# ----------------------------------------------------------- pipeline

@test "pipeline: init | train | eval shows learning; sample the result" {
	cg-init -a cvae -d "$D/train-0.cgd" --hidden 64 --layers 1 --latent 8 \
		--seed 2 -o - |
		cg-train-step -q -m - -d "$D/train-0.cgd" -e model -k 30 \
			--batch 30 --lr 3e-3 -o trained.cgm
	run -0 cg-eval --json -m trained.cgm -d "$D/test.cgd"
	after=$output
	run -0 cg-eval --json -m "$D/model.cgm" -d "$D/test.cgd"
	jq -e --argjson b "$output" '.step == 30 and .nelbo < $b.nelbo - 50' \
		<<<"$after"
	cg-sample -m trained.cgm -n 5 --temperature 0.5 -o grid.png
	run -0 png_size grid.png
	assert_output '152 302 8 0'
}
