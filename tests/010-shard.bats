#!/usr/bin/env bats
#
# 010-shard.bats - cg-shard: options, errors, split invariants, and that
# the shards together hold exactly the input.
#
# Shards are taken apart with tar and od only, so these tests check the
# file format itself, not just cg-shard's own reader.  The fixture is the
# first 100 (train) and 20 (t10k) examples of Fashion-MNIST, cut by
# fixtures/make-fixtures.sh; tests on the full 60000 examples run where
# /usr/share/datasets/fashion-mnist exists and are skipped elsewhere.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

FULL=/usr/share/datasets/fashion-mnist

setup() {
	MINI="$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	IMAGES="$MINI/train-images-idx3-ubyte.gz"
	LABELS="$MINI/train-labels-idx1-ubyte.gz"
	# bats keeps its own files in BATS_TEST_TMPDIR: work one level down
	T="$BATS_TEST_TMPDIR/w"
	mkdir "$T"
	export LC_ALL=C
}

# records FILE...: one line "index cond pixels-in-hex" per example of the
# shards, sorted by index.
records() {
	local f
	for f in "$@"; do
		paste -d' ' \
			<(tar xOf "$f" index | od -An -v -tu8 -w8 | tr -d ' ') \
			<(tar xOf "$f" cond | od -An -v -tu4 -w4 | tr -d ' ') \
			<(tar xOf "$f" payload | od -An -v -tx1 -w784 | tr -d ' ')
	done | sort -n -k1,1
}

# input_records IMAGES LABELS [N]: the same lines for the first N (default
# all) examples of an IDX pair.
input_records() {
	local n=${3:-$(gzip -dc "$2" | tail -c +9 | wc -c)}
	paste -d' ' <(seq 0 $((n - 1))) \
		<(gzip -dc "$2" | tail -c +9 | head -c "$n" |
			od -An -v -tu1 -w1 | tr -d ' ') \
		<(gzip -dc "$1" | tail -c +17 | head -c $((n * 784)) |
			od -An -v -tx1 -w784 | tr -d ' ')
}

# manifest FILE FILTER: a jq filter over the shard's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

# class_counts FILE: "count cond" per condition present in a shard
class_counts() {
	tar xOf "$1" cond | od -An -v -tu4 -w4 | tr -d ' ' | sort -n | uniq -c
}

# spread FILE...: for each condition, max - min of its count over the
# shards; prints the largest such spread
spread() {
	local f
	for f in "$@"; do
		for c in $(seq 0 9); do
			printf '%s %s\n' "$c" \
				"$(tar xOf "$f" cond | od -An -v -tu4 -w4 |
					tr -d ' ' | grep -cx "$c" || true)"
		done
	done | awk '{ if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2
		      if (!($1 in hi) || $2 > hi[$1]) hi[$1] = $2 }
		    END { m = 0; for (c in lo) if (hi[c] - lo[c] > m)
				m = hi[c] - lo[c]; print m }'
}

# ---------------------------------------------------------------- options

@test "cg-shard --help prints usage to stdout and exits 0" {
	run -0 --separate-stderr cg-shard --help
	assert_line --index 0 --partial 'usage: cg-shard'
	assert_output --partial '--holdout-fraction'
	assert_output --partial 'Exit status'
	[ -z "$stderr" ]
}

@test "cg-shard --version" {
	run -0 cg-shard --version
	assert_output --regexp '^cg-shard \(cg\) [0-9]+\.[0-9]+'
}

@test "cg-shard: a bad option is a usage error (exit 2)" {
	run -2 --separate-stderr cg-shard --bogus -o "$T/s" "$MINI"
	assert_equal "${stderr_lines[0]}" "cg-shard: unknown option '--bogus'"
	[ -z "$output" ]
	run -2 --separate-stderr cg-shard -x -o "$T/s" "$MINI"
	assert_equal "${stderr_lines[0]}" "cg-shard: unknown option '-x'"
	run -2 --separate-stderr cg-shard -o "$T/s" "$MINI" -n
	assert_equal "${stderr_lines[0]}" "cg-shard: option '-n' needs an argument"
}

@test "cg-shard: bad values and conflicting options exit 2" {
	run -2 cg-shard -n 0 -o "$T/s" "$MINI"
	run -2 cg-shard -n 2x -o "$T/s" "$MINI"
	run -2 cg-shard -s sideways -o "$T/s" "$MINI"
	run -2 cg-shard -w 1,x -o "$T/s" "$MINI"
	run -2 cg-shard -w 1,-1 -o "$T/s" "$MINI"
	run -2 --separate-stderr cg-shard -n 3 -w 1,1 -o "$T/s" "$MINI"
	assert_equal "${stderr_lines[0]}" "cg-shard: -w: 2 weights for 3 shards"
	run -2 cg-shard -z lzma -o "$T/s" "$MINI"
	run -2 cg-shard --seed -1 -o "$T/s" "$MINI"
	run -2 cg-shard --limit 0 -o "$T/s" "$MINI"
	run -2 cg-shard --holdout-fraction 1 --holdout "$T/h" -o "$T/s" "$MINI"
	run -2 cg-shard --holdout-count 3 -o "$T/s" "$MINI"
	run -2 cg-shard --holdout "$T/h" --holdout-count 3 \
		--holdout-fraction 0.2 -o "$T/s" "$MINI"
	run -2 cg-shard --test -o "$T/s" "$IMAGES" "$LABELS"
	run -2 cg-shard -n 2 -o - "$MINI"
	run -2 cg-shard "$MINI"
	run -2 cg-shard -o "$T/s"
	run -2 cg-shard -o "$T/s" a b c
	[ -z "$(ls "$T")" ]
}

@test "cg-shard: a missing file is one line on stderr, exit 1" {
	run -1 --separate-stderr cg-shard -n 2 -o "$T/s" "$T/none" "$LABELS"
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "cg-shard: $T/none: No such file or directory"
	[ -z "$output" ]
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/nodir"
	assert_equal "$stderr" "cg-shard: $T/nodir: No such file or directory"
	run -1 --separate-stderr cg-shard --format idx -o "$T/s" "$T"
	assert_equal "$stderr" "cg-shard: $T: no train-images-idx3-ubyte[.gz] here"
	# without IDX files, a directory is text (011-shard-text.bats)
	run -1 --separate-stderr cg-shard -o "$T/s" "$T"
	assert_equal "$stderr" "cg-shard: $T: no fortune files here (regular files whose names have no dot)"
	run -1 --separate-stderr cg-shard -o "$T/s" "$IMAGES"
	assert_output ''
	assert_equal "${#stderr_lines[@]}" 1
	[ -z "$(ls "$T")" ]
}

# ----------------------------------------------------------------- splits

@test "cg-shard: stratified 4-way, per-condition counts differ by at most one" {
	run -0 --separate-stderr cg-shard -n 4 -o "$T/s" "$MINI"
	[ -z "$output" ] && [ -z "$stderr" ]
	run -0 spread "$T"/s-{0,1,2,3}.cgd
	assert_output 1
	# totals 25 each: 100 over 4
	for i in 0 1 2 3; do
		assert_equal "$(manifest "$T/s-$i.cgd" .examples)" 25
		assert_equal "$(manifest "$T/s-$i.cgd" .shard.index)" "$i"
		assert_equal "$(manifest "$T/s-$i.cgd" .shard.strategy)" stratified
	done
	assert_equal "$(manifest "$T/s-0.cgd" '.conditions[0]')" "T-shirt/top"
	assert_equal "$(manifest "$T/s-0.cgd" '.conditions | length')" 10
	assert_equal "$(manifest "$T/s-0.cgd" .image.height)" 28
	assert_equal "$(manifest "$T/s-0.cgd" .payload)" image
}

@test "cg-shard --json: one line per shard with per-condition counts" {
	run -0 --separate-stderr cg-shard -n 3 --json --holdout "$T/h.cgd" \
		-o "$T/s" "$MINI"
	assert_equal "${#lines[@]}" 4
	assert_equal "$(jq -s 'map(.examples) | add' <<<"$output")" 100
	assert_equal "$(jq -r '.path' <<<"${lines[3]}")" "$T/h.cgd"
	assert_equal "$(jq -r '.holdout' <<<"${lines[3]}")" true
	# the counts agree with the files
	for i in 0 1 2; do
		want=$(jq -r '.counts | to_entries | map(.value) | join(" ")' \
			<<<"${lines[$i]}")
		got=$(for c in $(seq 0 9); do
			tar xOf "$T/s-$i.cgd" cond | od -An -v -tu4 -w4 |
				tr -d ' ' | grep -cx "$c" || true
		done | paste -sd' ')
		assert_equal "$got" "$want"
	done
}

@test "cg-shard --weights 2,1,1 gives shares 50/25/25" {
	for s in contiguous round-robin random stratified; do
		run -0 cg-shard -s "$s" -w 2,1,1 -o "$T/$s" "$MINI"
		assert_equal "$(manifest "$T/$s-0.cgd" .examples)" 50
		assert_equal "$(manifest "$T/$s-1.cgd" .examples)" 25
		assert_equal "$(manifest "$T/$s-2.cgd" .examples)" 25
		assert_equal "$(manifest "$T/$s-0.cgd" .shard.weights)" \
			"$(printf '[\n  2,\n  1,\n  1\n]')"
	done
	# 7 shards of uneven weights: every total within one of its share
	run -0 cg-shard -w 5,1,1,1,1,1,3 -o "$T/u" "$MINI"
	for i in 0 1 2 3 4 5 6; do
		n=$(manifest "$T/u-$i.cgd" .examples)
		w=$(manifest "$T/u-$i.cgd" ".shard.weights[$i]")
		awk -v n="$n" -v w="$w" 'BEGIN { d = n - 100 * w / 13
			exit !(d > -1 && d < 1) }'
	done
}

@test "cg-shard: the shards hold exactly the input, for every strategy" {
	input_records "$IMAGES" "$LABELS" | sha256sum >"$T/want"
	for s in contiguous round-robin random stratified hashed; do
		run -0 cg-shard -s "$s" -n 3 --holdout "$T/$s-h.cgd" \
			--seed 7 -o "$T/$s" "$MINI"
		records "$T/$s"-{0,1,2}.cgd "$T/$s-h.cgd" | sha256sum >"$T/got"
		run -0 cmp "$T/want" "$T/got"
	done
}

@test "cg-shard: round-robin deals 0,1,2,0,1,2... and contiguous cuts runs" {
	run -0 cg-shard -s round-robin -n 3 -o "$T/r" "$MINI"
	run -0 bash -c "tar xOf '$T/r-1.cgd' index | od -An -v -tu8 -w8 |
		tr -d ' ' | head -4 | paste -sd' '"
	assert_output '1 4 7 10'
	run -0 cg-shard -s contiguous -n 3 -o "$T/c" "$MINI"
	run -0 bash -c "tar xOf '$T/c-1.cgd' index | od -An -v -tu8 -w8 |
		tr -d ' ' | sed -n '1p;\$p' | paste -sd' '"
	assert_output '34 66'
}

@test "cg-shard --holdout: disjoint from the shards, stratified, 10% by default" {
	run -0 cg-shard -n 2 --holdout "$T/h.cgd" -o "$T/s" "$MINI"
	assert_equal "$(manifest "$T/h.cgd" .examples)" 10
	assert_equal "$(manifest "$T/h.cgd" .shard.holdout)" true
	assert_equal "$(manifest "$T/h.cgd" .shard.index)" -1
	assert_equal "$(manifest "$T/s-0.cgd" .shard.holdout)" false
	tar xOf "$T/h.cgd" index | od -An -v -tu8 -w8 | tr -d ' ' | sort >"$T/hi"
	for f in "$T"/s-*.cgd; do
		tar xOf "$f" index | od -An -v -tu8 -w8 | tr -d ' '
	done | sort >"$T/si"
	run -0 comm -12 "$T/hi" "$T/si"
	assert_output ''
	assert_equal "$(cat "$T/hi" "$T/si" | sort -u | wc -l)" 100
	run -0 cg-shard -n 2 --holdout "$T/h2.cgd" --holdout-count 33 \
		-o "$T/t" "$MINI"
	assert_equal "$(manifest "$T/h2.cgd" .examples)" 33
	run -0 cg-shard -n 2 --holdout "$T/h3.cgd" --holdout-fraction 0.25 \
		-o "$T/u" "$MINI"
	assert_equal "$(manifest "$T/h3.cgd" .examples)" 25
	run -1 --separate-stderr cg-shard --holdout "$T/h4.cgd" \
		--holdout-count 101 -o "$T/v" "$MINI"
	assert_equal "$stderr" \
		"cg-shard: holdout of 101 examples, but there are only 100"
	[ ! -e "$T/h4.cgd" ] && [ ! -e "$T/v-0.cgd" ]
	run -1 cg-shard -n 2 --holdout "$T/same-1.cgd" -o "$T/same" "$MINI"
	[ ! -e "$T/same-0.cgd" ]
}

@test "cg-shard --limit keeps the first N examples" {
	run -0 cg-shard -n 2 --limit 37 -s random -o "$T/s" "$MINI"
	assert_equal "$(manifest "$T/s-0.cgd" .source.examples)" 37
	assert_equal $(($(manifest "$T/s-0.cgd" .examples) +
		$(manifest "$T/s-1.cgd" .examples))) 37
	input_records "$IMAGES" "$LABELS" 37 | sha256sum >"$T/want"
	records "$T"/s-{0,1}.cgd | sha256sum >"$T/got"
	run -0 cmp "$T/want" "$T/got"
}

@test "cg-shard: the same seed gives the same bytes, another seed not" {
	for s in a b; do
		run -0 cg-shard -s random -n 2 --seed 42 --holdout "$T/$s-h.cgd" \
			-o "$T/$s" "$MINI"
	done
	run -0 cg-shard -s random -n 2 --seed 43 -o "$T/c" "$MINI"
	cmp "$T/a-0.cgd" "$T/b-0.cgd"
	cmp "$T/a-1.cgd" "$T/b-1.cgd"
	cmp "$T/a-h.cgd" "$T/b-h.cgd"
	run ! cmp -s "$T/a-0.cgd" "$T/c-0.cgd"
	assert_equal "$(manifest "$T/a-0.cgd" .shard.seed)" 42
	# compressed output is reproducible too
	run -0 cg-shard -z gzip -o "$T/g1" "$MINI"
	run -0 cg-shard -z gzip -o "$T/g2" "$MINI"
	cmp "$T/g1-0.cgd" "$T/g2-0.cgd"
}

@test "cg-shard: tar lists cg.json first, then the tensors in order" {
	run -0 cg-shard -n 2 -o "$T/s" "$MINI"
	run -0 tar tf "$T/s-0.cgd"
	assert_equal "$(paste -sd' ' <<<"$output")" "cg.json cond index offset payload"
	run -0 tar tvf "$T/s-0.cgd"
	assert_line --index 0 --regexp ' cg\.json$'
	assert_equal "$(manifest "$T/s-0.cgd" '.tensors | map(.name) | join(" ")')" \
		"cond index offset payload"
	assert_equal "$(manifest "$T/s-0.cgd" '.tensors[2].shape[0]')" 51
	assert_equal "$(tar xOf "$T/s-0.cgd" payload | wc -c)" $((50 * 784))
	run -0 cg-shard -z gzip -o "$T/z" "$MINI"
	run -0 tar tzf "$T/z-0.cgd"
	assert_line --index 0 cg.json
}

@test "cg-shard: directory input, --test, and plain IDX files" {
	run -0 cg-shard -o "$T/t" --test "$MINI"
	assert_equal "$(manifest "$T/t-0.cgd" .examples)" 20
	mkdir "$T/plain"
	gzip -dc "$IMAGES" >"$T/plain/train-images.idx3-ubyte"
	gzip -dc "$LABELS" >"$T/plain/train-labels.idx1-ubyte"
	run -0 cg-shard -o "$T/p" "$T/plain"
	cmp <(tar xOf "$T/p-0.cgd" payload) <(gzip -dc "$IMAGES" | tail -c +17)
}

@test "cg-shard: condition names: Fashion-MNIST, generic, --conditions FILE" {
	mkdir "$T/digits"
	cp "$IMAGES" "$LABELS" "$T/digits/"
	run -0 cg-shard -o "$T/d" "$T/digits"
	assert_equal "$(manifest "$T/d-0.cgd" '.conditions | join(",")')" \
		"0,1,2,3,4,5,6,7,8,9"
	printf '%s\n' zero one two three four five six seven eight nine >"$T/names"
	run -0 cg-shard --conditions "$T/names" -o "$T/n" "$T/digits"
	assert_equal "$(manifest "$T/n-0.cgd" '.conditions[9]')" nine
	printf 'a\nb\n' >"$T/few"
	run -1 --separate-stderr cg-shard --conditions "$T/few" -o "$T/f" "$MINI"
	assert_equal "$stderr" \
		"cg-shard: $T/few: 2 condition names, but example 0 has condition 9"
	[ -z "$output" ] && [ ! -e "$T/f-0.cgd" ]
	printf 'a\na\nb\nc\nd\ne\nf\ng\nh\ni\n' >"$T/dup"
	run -1 --separate-stderr cg-shard --conditions "$T/dup" -o "$T/f" "$MINI"
	assert_equal "$stderr" "cg-shard: $T/dup: condition name \"a\" given twice"
	# a name of 1024 bytes is one; a line of 1025 is refused, and one of
	# 4 GB without a newline is refused as soon as it is one too long,
	# under a 1 GB cap, never held whole
	{ head -c 1024 /dev/zero | tr '\0' x; printf '\n'; seq 1 9; } >"$T/long"
	run -0 cg-shard --conditions "$T/long" -o "$T/l" "$MINI"
	{ head -c 1025 /dev/zero | tr '\0' x; printf '\r\n'; } >"$T/long"
	run -1 --separate-stderr cg-shard --conditions "$T/long" -o "$T/f" "$MINI"
	assert_equal "$stderr" "cg-shard: $T/long: line 1: name too long"
	local cap=
	[ "${CG_SANITIZED:-0}" = 1 ] || cap='ulimit -v 1000000;'
	run -1 --separate-stderr bash -c "$cap"' exec cg-shard --conditions \
		<(head -c 4000000000 /dev/zero) -o "$1" "$2"' sh "$T/f" "$MINI"
	[[ $stderr =~ ^cg-shard:\ /dev/fd/[0-9]+:\ line\ 1:\ name\ too\ long$ ]] ||
		fail "$stderr"
	[ -z "$output" ] && [ ! -e "$T/f-0.cgd" ]
}

@test "cg-shard: stdin for one input, and -o - to stdout" {
	run -0 cg-shard -o "$T/s" - "$LABELS" <"$IMAGES"
	cmp <(tar xOf "$T/s-0.cgd" payload) <(gzip -dc "$IMAGES" | tail -c +17)
	assert_equal "$(manifest "$T/s-0.cgd" '.conditions[0]')" 0
	cg-shard -o - "$MINI" >"$T/one.cgd"
	cg-shard -o "$T/d" "$MINI"
	cmp "$T/one.cgd" "$T/d-0.cgd"
	run -0 tar tf - <"$T/one.cgd"
	assert_line --index 0 cg.json
}

@test "cg-shard: truncated or garbage IDX exits 1 and leaves no output" {
	gzip -dc "$IMAGES" | head -c 5000 >"$T/cut-images"
	head -c 20000 "$IMAGES" >"$T/cut-images.gz"
	head -c 1000 /dev/urandom >"$T/garbage"
	printf '\0\0\10\3\377\377\377\377\0\0\100\0\0\0\100\0' >"$T/huge"
	gzip -dc "$LABELS" | head -c 60 >"$T/short-labels"
	for bad in cut-images cut-images.gz garbage huge; do
		run -1 --separate-stderr cg-shard -n 2 --holdout "$T/h.cgd" \
			-o "$T/out" "$T/$bad" "$LABELS"
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "^cg-shard: $T/$bad: "
	done
	run -1 --separate-stderr cg-shard -o "$T/out" "$IMAGES" "$T/short-labels"
	assert_regex "$stderr" "^cg-shard: $T/short-labels: "
	run -1 --separate-stderr cg-shard -o "$T/out" "$LABELS" "$LABELS"
	assert_regex "$stderr" "dimensions, expected 3 or 4"
	[ -z "$(ls "$T" | grep -v -e '^cut' -e garbage -e huge -e short)" ]
}

@test "cg-shard: a failed write removes the shards already written" {
	run -1 --separate-stderr cg-shard -n 3 --holdout "$T/nodir/h.cgd" \
		-o "$T/s" "$MINI"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^cg-shard: $T/nodir/h.cgd: "
	[ -z "$(ls -A "$T")" ]
}

@test "cg-shard | cg-inspect: shards are valid cg files" {
	command -v cg-inspect >/dev/null || skip "cg-inspect not built"
	run -0 cg-shard -n 2 -z zstd -o "$T/s" "$MINI"
	run -0 cg-inspect --verify "$T/s-0.cgd" "$T/s-1.cgd"
	run -0 cg-inspect --json "$T/s-1.cgd"
	assert_equal "$(jq -r .kind <<<"$output")" data
	assert_equal "$(jq -r .examples <<<"$output")" 50
}

# ---------------------------------------------------- full Fashion-MNIST

@test "cg-shard on all of Fashion-MNIST: stratified, weighted, exact union" {
	[ -d "$FULL" ] || skip "no $FULL"
	run -0 --separate-stderr cg-shard -n 4 -w 4,2,1,1 --json \
		--holdout "$T/val.cgd" -o "$T/fm" "$FULL"
	assert_equal "$(jq -s 'map(.examples) | join(" ")' <<<"$output")" \
		'"27000 13500 6750 6750 6000"'
	# per class: 5400 * 4/8, 2/8, 1/8, 1/8 and 600 held out
	assert_equal "$(jq -s '[.[].counts | to_entries[].value] | unique |
		join(" ")' <<<"$output")" '"600 675 1350 2700"'
	assert_equal "$(manifest "$T/val.cgd" .source.examples)" 60000
	# the union: compare sorted (index, cond) pairs and payload bytes
	for f in "$T"/fm-{0,1,2,3}.cgd "$T/val.cgd"; do
		paste -d' ' <(tar xOf "$f" index | od -An -v -tu8 -w8) \
			<(tar xOf "$f" cond | od -An -v -tu4 -w4)
	done | awk '{ print $1, $2 }' | sort -n -k1,1 >"$T/got"
	paste -d' ' <(seq 0 59999) <(gzip -dc "$FULL/train-labels-idx1-ubyte.gz" |
		tail -c +9 | od -An -v -tu1 -w1 | tr -d ' ') >"$T/want"
	cmp "$T/want" "$T/got"
	total=0
	for f in "$T"/fm-{0,1,2,3}.cgd "$T/val.cgd"; do
		total=$((total + $(tar xOf "$f" payload | wc -c)))
	done
	assert_equal "$total" $((60000 * 784))
	# contiguous shards, concatenated, are the image file's pixels
	run -0 cg-shard -s contiguous -n 3 -o "$T/c" "$FULL"
	cmp <(for i in 0 1 2; do tar xOf "$T/c-$i.cgd" payload; done) \
		<(gzip -dc "$FULL/train-images-idx3-ubyte.gz" | tail -c +17)
}

@test "cg-shard on all of Fashion-MNIST: interrupted, no temporary is left" {
	[ -d "$FULL" ] || skip "no $FULL"
	mkdir "$T/o"
	run timeout -s TERM 1 cg-shard -n 8 -s random -z gzip -o "$T/o/fm" "$FULL"
	[ "$status" -eq 124 ] || [ "$status" -eq 0 ] # the machine was too fast
	run -0 bash -c "ls -A '$T/o' | grep -v '^fm-[0-7]\.cgd$' || true"
	assert_output ''
	for f in "$T"/o/fm-*.cgd; do
		[ -e "$f" ] || continue
		run -0 tar tzf "$f"
	done
}
