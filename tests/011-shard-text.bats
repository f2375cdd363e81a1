#!/usr/bin/env bats
#
# 011-shard-text.bats - cg-shard on text: fortune directories, JSON Lines
# and TSV; that the shards together hold every entry byte for byte, that
# every strategy and the hold-out work as for images, and that hostile
# text fails cleanly.
#
# Shards are taken apart with tar, od and awk only, and the expected
# entries are cut from the inputs by awk, jq and printf, so these tests do
# not trust cg-shard's own readers.  The fixtures in fixtures/text are
# written by hand: fortunes/ has three categories (12 entries: UTF-8, a
# blank line inside an entry, a "%%" double, a file opening with "%", a
# last entry without newline) and decoys that must not be read (*.dat, a
# *.u8 link, a hidden file, a dotted name, a subdirectory); cond.jsonl and
# prompt.jsonl the two kinds of records; escapes.tsv every escape.  Tests
# on Debian's fortunes run where /usr/share/games/fortunes exists.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

CORPUS=/usr/share/games/fortunes

setup() {
	X="$BATS_TEST_DIRNAME/fixtures/text"
	T="$BATS_TEST_TMPDIR/w"
	mkdir "$T"
	export LC_ALL=C
}

# manifest FILE FILTER: a jq filter over the shard's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

# slice KEYS OFFSETS BYTES: "key hex" per example, from a line of key per
# example, N+1 offsets and the payload as one hex byte per line.
slice() {
	awk 'BEGIN { k = p = n = 0 }
	function flush() {
		while (k < n && off[k + 1] == p) {
			print key[k], cur
			cur = ""
			k++
		}
	}
	FILENAME == ARGV[1] { key[FNR - 1] = $0; next }
	FILENAME == ARGV[2] { off[FNR - 1] = $1; n = FNR - 1; next }
	{ flush(); cur = cur $1; p++ }
	END { flush() }' "$@"
}

# examples FILE...: "index cond-name hex-of-payload" per example of the
# shards, sorted by index.
examples() {
	local f
	for f in "$@"; do
		slice <(paste -d' ' \
				<(tar xOf "$f" index | od -An -v -tu8 -w8 | tr -d ' ') \
				<(tar xOf "$f" cond | od -An -v -tu4 -w4 |
					awk 'NR == FNR { name[NR - 1] = $0; next }
					     { print name[$1] }' \
						<(manifest "$f" '.conditions[]') -)) \
			<(tar xOf "$f" offset | od -An -v -tu8 -w8) \
			<(tar xOf "$f" payload | od -An -v -tx1 -w1)
	done | sort -n -k1,1
}

# expected NAMES PAYLOAD: the same lines for the inputs' entries in order,
# from a file of "cond-name length" lines and the entries' bytes.
expected() {
	slice <(awk '{ n = $NF; sub(/ [0-9]+$/, ""); print NR - 1, $0 }' "$1") \
		<(awk 'BEGIN { print 0 } { s += $NF; print s }' "$1") \
		<(od -An -v -tx1 -w1 "$2")
}

# fortune_entries DIR NAMES PAYLOAD: the entries of DIR's fortune files,
# cut by awk: files whose names have no dot, by name; entries between
# lines "%", less the newline before each "%" (or the end), empty ones
# dropped.
fortune_entries() {
	local f files=()
	for f in $(ls "$1" | grep -v '\.' | sort); do
		[ -f "$1/$f" ] && files+=("$1/$f")
	done
	awk -v names="$2" -v payload="$3" '
	function flush() {
		if (n > 0 && e != "") {
			printf "%s", e >payload
			print cond, length(e) >names
		}
		n = 0
		e = ""
	}
	FNR == 1 { flush(); cond = FILENAME; sub(/.*\//, "", cond) }
	$0 == "%" { flush(); next }
	{ e = (n ? e "\n" : "") $0; n++ }
	END { flush() }' "${files[@]}"
	touch "$2" "$3"
}

# jsonl_entries FILE NAMES PAYLOAD: prompt and text bytes of each record.
jsonl_entries() {
	jq -j '(.prompt // "") + .text' "$1" >"$3"
	jq -r '"\(.cond // "(prompt)") \((.prompt // "") + .text |
		utf8bytelength)"' "$1" >"$2"
}

# tsv_entries FILE NAMES PAYLOAD: printf %b decodes the escapes.
tsv_entries() {
	local line c t
	: >"$2"
	: >"$3"
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		c=$(printf '%b' "$(cut -f1 <<<"$line")")
		t=$(cut -f2 <<<"$line")
		printf '%b' "$t" >>"$3"
		printf '%s %s\n' "$c" "$(printf '%b' "$t" | wc -c)" >>"$2"
	done <"$1"
}

# same_entries WANT-NAMES WANT-PAYLOAD SHARD...: the shards hold exactly
# the expected entries.
same_entries() {
	local names=$1 payload=$2
	shift 2
	expected "$names" "$payload" >"$T/want.ex"
	examples "$@" >"$T/got.ex"
	cmp "$T/want.ex" "$T/got.ex"
}

# spread FILE...: for each condition, max - min of its count over the
# shards; prints the largest such spread
spread() {
	local f k=$(manifest "$1" '.conditions | length')
	for f in "$@"; do
		tar xOf "$f" cond | od -An -v -tu4 -w4 |
			awk -v k="$k" '{ c[$1]++ }
				END { for (i = 0; i < k; i++) print i, c[i] + 0 }'
	done | awk '{ if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2
		      if (!($1 in hi) || $2 > hi[$1]) hi[$1] = $2 }
		    END { m = 0; for (c in lo) if (hi[c] - lo[c] > m)
				m = hi[c] - lo[c]; print m }'
}

# ---------------------------------------------------------------- options

@test "cg-shard --help describes the text formats" {
	run -0 --separate-stderr cg-shard --help
	assert_line --index 2 --partial 'FILE.jsonl|FILE.tsv'
	assert_output --partial '--format NAME'
	assert_output --partial '--max-entry SIZE'
	assert_output --partial 'fortune files'
	[ -z "$stderr" ]
}

@test "cg-shard: bad text options and conflicts are usage errors (exit 2)" {
	run -2 --separate-stderr cg-shard --format xml -o "$T/s" "$X/cond.jsonl"
	assert_equal "${stderr_lines[0]}" \
		"cg-shard: --format: unknown format 'xml' (idx, fortunes, jsonl or tsv)"
	run -2 --separate-stderr cg-shard --max-entry 0 -o "$T/s" "$X/cond.jsonl"
	assert_regex "${stderr_lines[0]}" '^cg-shard: --max-entry: '
	run -2 cg-shard --max-entry 2G -o "$T/s" "$X/cond.jsonl"
	run -2 cg-shard --max-entry 1x -o "$T/s" "$X/cond.jsonl"
	run -2 --separate-stderr cg-shard -o "$T/s" -
	assert_equal "${stderr_lines[0]}" \
		"cg-shard: standard input needs --format jsonl or tsv"
	run -2 --separate-stderr cg-shard --format jsonl -o "$T/s" a b
	assert_equal "${stderr_lines[0]}" \
		"cg-shard: --format jsonl reads one input, not IMAGES LABELS"
	run -2 cg-shard --test --format tsv -o "$T/s" "$X/escapes.tsv"
	run -2 --separate-stderr cg-shard --conditions /dev/null -o "$T/s" \
		"$X/fortunes"
	assert_regex "${stderr_lines[0]}" '^cg-shard: --conditions names IDX'
	run -2 --separate-stderr cg-shard --max-entry 10 -o "$T/s" \
		"$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	assert_equal "${stderr_lines[0]}" \
		"cg-shard: --max-entry applies to text input only"
	[ -z "$(ls "$T")" ]
}

@test "cg-shard: a file of unknown kind, or a missing one, fails (exit 1)" {
	run -1 --separate-stderr cg-shard -o "$T/s" "$X/fortunes/animals"
	assert_equal "$stderr" "cg-shard: $X/fortunes/animals: not a directory, and not named .jsonl, .json or .tsv (give IMAGES LABELS, or --format)"
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/none.jsonl"
	assert_equal "$stderr" "cg-shard: $T/none.jsonl: No such file or directory"
	run -1 --separate-stderr cg-shard --format tsv -o "$T/s" "$T/none"
	assert_equal "$stderr" "cg-shard: $T/none: No such file or directory"
	[ -z "$(ls "$T")" ]
}

# --------------------------------------------------------------- fortunes

@test "cg-shard fortunes: one condition per file, decoys skipped, bytes exact" {
	run -0 --separate-stderr cg-shard -s contiguous -o "$T/f" "$X/fortunes"
	[ -z "$output" ] && [ -z "$stderr" ]
	assert_equal "$(manifest "$T/f-0.cgd" '.conditions | join(",")')" \
		"animals,computers,wisdom"
	assert_equal "$(manifest "$T/f-0.cgd" .examples)" 12
	assert_equal "$(manifest "$T/f-0.cgd" .payload)" text
	assert_equal "$(manifest "$T/f-0.cgd" 'has("image")')" false
	assert_equal "$(tar tf "$T/f-0.cgd" | paste -sd' ')" \
		"cg.json cond index offset payload"
	assert_equal "$(tar xOf "$T/f-0.cgd" cond | od -An -v -tu4 -w4 |
		tr -d ' ' | paste -sd' ')" "0 0 0 0 1 1 1 2 2 2 2 2"
	fortune_entries "$X/fortunes" "$T/names" "$T/payload"
	run -0 same_entries "$T/names" "$T/payload" "$T/f-0.cgd"
	# contiguous, one shard: the payload is the entries back to back
	cmp "$T/payload" <(tar xOf "$T/f-0.cgd" payload)
	# spot checks that do not depend on awk
	tar xOf "$T/f-0.cgd" payload >"$T/p"
	grep -q 'barked' "$T/p"
	run -1 grep -c 'not read' "$T/p"
	assert_output 0
	printf 'The dog barked\nat the moon.\n\nThen it slept.\n\t-- an entry with a blank line inside' >"$T/e1"
	off=$(tar xOf "$T/f-0.cgd" offset | od -An -v -tu8 -w8 | tr -d ' ' |
		sed -n '2,3p' | paste -sd' ')
	set -- $off
	cmp "$T/e1" <(tail -c +$(($1 + 1)) "$T/p" | head -c $(($2 - $1)))
	# the last entry of wisdom has no newline at the end of the file
	assert_equal "$(tail -c 22 "$T/p")" "No newline at the end."
}

@test "cg-shard fortunes: stratified 4-way, hold-out, every strategy, exact union" {
	fortune_entries "$X/fortunes" "$T/names" "$T/payload"
	for s in contiguous round-robin random stratified hashed; do
		run -0 cg-shard -s "$s" -n 3 --holdout "$T/$s-h.cgd" \
			--holdout-fraction 0.25 --seed 5 -o "$T/$s" "$X/fortunes"
		assert_equal "$(manifest "$T/$s-h.cgd" .examples)" 3
		run -0 same_entries "$T/names" "$T/payload" \
			"$T/$s"-{0,1,2}.cgd "$T/$s-h.cgd"
	done
	run -0 cg-shard -n 4 -o "$T/q" "$X/fortunes"
	run -0 spread "$T"/q-{0,1,2,3}.cgd
	assert_output 1
	run -0 cg-shard -w 2,1,1 -s round-robin -o "$T/w" "$X/fortunes"
	assert_equal "$(for i in 0 1 2; do manifest "$T/w-$i.cgd" .examples; done |
		paste -sd' ')" "6 3 3"
	run -0 same_entries "$T/names" "$T/payload" "$T"/w-{0,1,2}.cgd
}

@test "cg-shard fortunes: one file with --format, --limit, and the same bytes twice" {
	run -0 cg-shard --format fortunes -o "$T/one" "$X/fortunes/computers"
	assert_equal "$(manifest "$T/one-0.cgd" '.conditions | join(",")')" computers
	assert_equal "$(manifest "$T/one-0.cgd" .examples)" 3
	run -0 cg-shard --limit 5 -o "$T/l" "$X/fortunes"
	assert_equal "$(manifest "$T/l-0.cgd" .examples)" 5
	# the vocabulary is every file, even those --limit never reached
	assert_equal "$(manifest "$T/l-0.cgd" '.conditions | length')" 3
	run -0 cg-shard -s random --seed 3 -n 2 -o "$T/a" "$X/fortunes"
	run -0 cg-shard -s random --seed 3 -n 2 -o "$T/b" "$X/fortunes"
	cmp "$T/a-0.cgd" "$T/b-0.cgd"
	cmp "$T/a-1.cgd" "$T/b-1.cgd"
	# --format idx insists on IDX files
	run -1 --separate-stderr cg-shard --format idx -o "$T/i" "$X/fortunes"
	assert_regex "$stderr" "no train-images-idx3-ubyte"
}

@test "cg-shard fortunes: NUL bytes and invalid UTF-8 are kept" {
	mkdir "$T/d"
	printf 'a\0b\n%%\n\377\376 not UTF-8\n%%\n' >"$T/d/bytes"
	run -0 cg-shard -o "$T/s" "$T/d"
	cmp <(tar xOf "$T/s-0.cgd" payload) <(printf 'a\0b\377\376 not UTF-8')
	assert_equal "$(tar xOf "$T/s-0.cgd" offset | od -An -v -tu8 -w8 |
		tr -d ' ' | paste -sd' ')" "0 3 15"
}

@test "cg-shard fortunes: empty, unreadable and badly named inputs fail" {
	mkdir "$T/empty" "$T/blank" "$T/ctl" "$T/o"
	run -1 --separate-stderr cg-shard -o "$T/o/s" "$T/empty"
	assert_equal "$stderr" "cg-shard: $T/empty: no fortune files here (regular files whose names have no dot)"
	printf '%%\n%%\n\n%%\n' >"$T/blank/a"
	: >"$T/blank/b"
	run -1 --separate-stderr cg-shard -o "$T/o/s" "$T/blank"
	assert_equal "$stderr" "cg-shard: $T/blank: no entries in 2 fortune files"
	printf 'x\n' >"$T/ctl/a$(printf '\001')b"
	run -1 --separate-stderr cg-shard -o "$T/o/s" "$T/ctl"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "file name is no condition name: control character"
	[ -z "$(ls "$T/o")" ]
}

@test "cg-shard fortunes: an entry over --max-entry fails, and the cap moves" {
	mkdir "$T/big" "$T/o"
	{
		printf 'short\n%%\n'
		head -c 3000000 /dev/zero | tr '\0' 'x'
		printf '\n%%\n'
	} >"$T/big/huge"
	run -1 --separate-stderr cg-shard -n 2 --holdout "$T/o/h.cgd" \
		-o "$T/o/s" "$T/big"
	assert_equal "$stderr" "cg-shard: $T/big/huge: line 3: longer than 1048576 bytes (see --max-entry)"
	[ -z "$(ls "$T/o")" ]
	run -0 cg-shard --max-entry 3M -o "$T/o/s" "$T/big"
	assert_equal "$(manifest "$T/o/s-0.cgd" .examples)" 2
	# many short lines make a long entry too
	mkdir "$T/lines"
	seq 1 200000 >"$T/lines/a"
	run -1 --separate-stderr cg-shard -o "$T/o/t" "$T/lines"
	assert_regex "$stderr" "^cg-shard: $T/lines/a: line [0-9]+: entry longer than 1048576 bytes"
	# exactly at the cap is fine
	mkdir "$T/exact"
	head -c 100 /dev/zero | tr '\0' 'y' >"$T/exact/a"
	run -0 cg-shard --max-entry 100 -o "$T/o/u" "$T/exact"
	run -1 cg-shard --max-entry 99 -o "$T/o/v" "$T/exact"
}

# ------------------------------------------------------------ JSON Lines

@test "cg-shard jsonl with cond: conditions by name, bytes exact, every strategy" {
	jsonl_entries "$X/cond.jsonl" "$T/names" "$T/payload"
	assert_equal "$(wc -l <"$T/names")" 9
	for s in contiguous round-robin random stratified hashed; do
		run -0 cg-shard -s "$s" -n 3 -w 1,2,1 --holdout "$T/$s-h.cgd" \
			--holdout-count 2 -o "$T/$s" "$X/cond.jsonl"
		assert_equal "$(manifest "$T/$s-h.cgd" .examples)" 2
		run -0 same_entries "$T/names" "$T/payload" \
			"$T/$s"-{0,1,2}.cgd "$T/$s-h.cgd"
	done
	assert_equal "$(manifest "$T/stratified-0.cgd" '.conditions | join(",")')" \
		"de,en,fr,ja"
	assert_equal "$(tar tf "$T/stratified-0.cgd" | paste -sd' ')" \
		"cg.json cond index offset payload"
	assert_equal "$(manifest "$T/stratified-0.cgd" .payload)" text
	# \u0000 is a NUL byte in the payload, not the end of the text
	run -0 cg-shard -s contiguous -o "$T/c" "$X/cond.jsonl"
	run -0 bash -c "tar xOf '$T/c-0.cgd' payload | grep -c -a 'NUL .* inside'"
	cmp <(tar xOf "$T/c-0.cgd" payload) "$T/payload"
}

@test "cg-shard jsonl with prompt: prompt then text, and a prompt_len tensor" {
	jsonl_entries "$X/prompt.jsonl" "$T/names" "$T/payload"
	jq -r '.prompt // "" | utf8bytelength' "$X/prompt.jsonl" |
		awk '{ print NR - 1, $1 }' >"$T/want.pl"
	for s in round-robin stratified hashed; do
		run -0 cg-shard -s "$s" -n 2 --holdout "$T/$s-h.cgd" \
			--holdout-count 1 -o "$T/$s" "$X/prompt.jsonl"
		run -0 same_entries "$T/names" "$T/payload" \
			"$T/$s"-{0,1}.cgd "$T/$s-h.cgd"
		for f in "$T/$s"-{0,1}.cgd "$T/$s-h.cgd"; do
			assert_equal "$(tar tf "$f" | paste -sd' ')" \
				"cg.json cond index offset payload prompt_len"
			paste -d' ' <(tar xOf "$f" index | od -An -v -tu8 -w8 | tr -d ' ') \
				<(tar xOf "$f" prompt_len | od -An -v -tu4 -w4 | tr -d ' ')
		done | sort -n >"$T/got.pl"
		cmp "$T/want.pl" "$T/got.pl"
	done
	assert_equal "$(manifest "$T/stratified-0.cgd" '.conditions | join(",")')" \
		"(prompt),story,translate"
	assert_equal "$(manifest "$T/stratified-0.cgd" \
		'.tensors[4] | "\(.name) \(.dtype) \(.shape[0])"')" \
		"prompt_len u32 $(manifest "$T/stratified-0.cgd" .examples)"
	run -0 cg-inspect --verify "$T/stratified-0.cgd"
}

@test "cg-shard jsonl: a bad line is one error naming it, and nothing is written" {
	good='{"cond":"a","text":"x"}'
	n=0
	for bad in '{"cond":"a","text":"x"' '{"cond":"a"}' '{"text":"x"}' \
		'{"cond":"a","text":7}' '{"cond":1,"text":"x"}' \
		'{"cond":"","text":"x"}' '{"cond":"a\nb","text":"x"}' \
		'{"cond":"a\u0000b","text":"x"}' '{"cond":"a","text":"x","text":"y"}' \
		'["a","x"]' '{"cond":"a","text":"x"} junk' \
		'{"cond":"a","text":"\ud800"}' '{"cond":"a","text":"x\qy"}' \
		"$(printf '{"cond":"a","text":"x\001y"}')"; do
		n=$((n + 1))
		printf '%s\n%s\n%s\n' "$good" "$good" "$bad" >"$T/bad$n.jsonl"
		run -1 --separate-stderr cg-shard -n 2 --holdout "$T/h.cgd" \
			-o "$T/s" "$T/bad$n.jsonl"
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "^cg-shard: $T/bad$n.jsonl: line 3: "
		[ -z "$output" ]
	done
	assert_equal "$(ls "$T" | grep -c cgd || true)" 0
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad1.jsonl"
	assert_regex "$stderr" "line 3: not valid JSON"
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad2.jsonl"
	assert_equal "$stderr" "cg-shard: $T/bad2.jsonl: line 3: no \"text\""
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad3.jsonl"
	assert_equal "$stderr" "cg-shard: $T/bad3.jsonl: line 3: no \"cond\" or \"prompt\""
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad9.jsonl"
	assert_equal "$stderr" "cg-shard: $T/bad9.jsonl: line 3: \"text\" given twice"
	: >"$T/empty.jsonl"
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/empty.jsonl"
	assert_equal "$stderr" "cg-shard: $T/empty.jsonl: no examples"
}

@test "cg-shard jsonl: stdin, gzip, a byte order mark, .json and --max-entry" {
	run -0 cg-shard -s contiguous -o "$T/ref" "$X/cond.jsonl"
	run -0 cg-shard -s contiguous --format jsonl -o "$T/in" - <"$X/cond.jsonl"
	cmp "$T/ref-0.cgd" "$T/in-0.cgd"
	gzip -c "$X/cond.jsonl" >"$T/c.jsonl.gz"
	run -0 cg-shard -s contiguous -o "$T/gz" "$T/c.jsonl.gz"
	cmp "$T/ref-0.cgd" "$T/gz-0.cgd"
	head -c $(($(wc -c <"$T/c.jsonl.gz") / 2)) "$T/c.jsonl.gz" \
		>"$T/cut.jsonl.gz"
	run -1 --separate-stderr cg-shard -o "$T/cut" "$T/cut.jsonl.gz"
	assert_regex "$stderr" "^cg-shard: $T/cut.jsonl.gz: "
	{ printf '\357\273\277'; cat "$X/cond.jsonl"; } >"$T/bom.json"
	run -0 cg-shard -s contiguous -o "$T/bom" "$T/bom.json"
	cmp <(tar xOf "$T/ref-0.cgd" payload) <(tar xOf "$T/bom-0.cgd" payload)
	cp "$X/cond.jsonl" "$T/data.txt"
	run -0 cg-shard -s contiguous --format jsonl -o "$T/txt" "$T/data.txt"
	cmp "$T/ref-0.cgd" "$T/txt-0.cgd"
	# "Bonjour, le monde. Ça va ?" is 27 bytes
	run -1 --separate-stderr cg-shard --max-entry 26 -o "$T/m" "$X/cond.jsonl"
	assert_equal "$stderr" "cg-shard: $X/cond.jsonl: line 2: 27 bytes of prompt and text, more than 26 (see --max-entry)"
	run -0 cg-shard --max-entry 38 -o "$T/m" "$X/cond.jsonl"
	run -1 cg-shard --max-entry 37 -o "$T/m" "$X/cond.jsonl"
	run -0 cg-shard --limit 4 -o "$T/l" "$X/cond.jsonl"
	assert_equal "$(manifest "$T/l-0.cgd" .examples)" 4
	assert_equal "$(manifest "$T/l-0.cgd" '.conditions | join(",")')" "de,en,fr"
}

# -------------------------------------------------------------------- TSV

@test "cg-shard tsv: escapes decoded, bytes exact, hold-out and strategies" {
	tsv_entries "$X/escapes.tsv" "$T/names" "$T/payload"
	assert_equal "$(wc -l <"$T/names")" 6
	for s in contiguous round-robin random stratified hashed; do
		run -0 cg-shard -s "$s" -n 2 --holdout "$T/$s-h.cgd" \
			--holdout-count 1 -o "$T/$s" "$X/escapes.tsv"
		run -0 same_entries "$T/names" "$T/payload" \
			"$T/$s"-{0,1}.cgd "$T/$s-h.cgd"
	done
	run -0 cg-shard -s contiguous -o "$T/c" "$X/escapes.tsv"
	assert_equal "$(manifest "$T/c-0.cgd" '.conditions | join(",")')" \
		"code,note,poem"
	cmp <(tar xOf "$T/c-0.cgd" payload | head -c 32) \
		<(printf 'Roses are red,\nviolets are blue.')
	run -0 bash -c "tar xOf '$T/c-0.cgd' payload | grep -c -a -F 'return \"a\\\\b\";'"
	# stdin with --format, and the same bytes as from the file
	run -0 cg-shard -s contiguous --format tsv -o "$T/in" - <"$X/escapes.tsv"
	cmp "$T/c-0.cgd" "$T/in-0.cgd"
}

@test "cg-shard tsv: bad lines name themselves and write nothing" {
	n=0
	for bad in 'no tab here' 'a	b	c' 'a	bad \q escape' 'a	ends in \' \
		'	empty condition' 'a\tb	tab in condition'; do
		n=$((n + 1))
		printf 'ok\tfine\n%s\n' "$bad" >"$T/bad$n.tsv"
		run -1 --separate-stderr cg-shard -n 2 -o "$T/s" "$T/bad$n.tsv"
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "^cg-shard: $T/bad$n.tsv: line 2: "
	done
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad2.tsv"
	assert_equal "$stderr" "cg-shard: $T/bad2.tsv: line 2: more than two fields (write a tab in the text as \\t)"
	run -1 --separate-stderr cg-shard -o "$T/s" "$T/bad3.tsv"
	assert_equal "$stderr" "cg-shard: $T/bad3.tsv: line 2: unknown escape \\q (only \\n, \\t, \\r and \\\\)"
	assert_equal "$(ls "$T" | grep -c cgd || true)" 0
	# raw NUL bytes and invalid UTF-8 in the text are data
	printf 'x\ta\0b\377\n' >"$T/raw.tsv"
	run -0 cg-shard -o "$T/raw" "$T/raw.tsv"
	cmp <(tar xOf "$T/raw-0.cgd" payload) <(printf 'a\0b\377')
}

# ------------------------------------------------------------ cg-inspect

@test "cg-shard | cg-inspect: text shards are valid cg files" {
	command -v cg-inspect >/dev/null || skip "cg-inspect not built"
	run -0 cg-shard -n 2 -z zstd -o "$T/s" "$X/prompt.jsonl"
	run -0 cg-inspect --verify "$T/s-0.cgd" "$T/s-1.cgd"
	run -0 cg-inspect --json "$T/s-1.cgd"
	assert_equal "$(jq -r .kind <<<"$output")" data
	assert_equal "$(jq -r .payload <<<"$output")" text
	assert_equal "$(jq -r .examples <<<"$output")" 3
}

# ---------------------------------------------------- Debian's fortunes

@test "cg-shard on Debian's fortunes: every entry, stratified, 5% held out" {
	[ -d "$CORPUS" ] || skip "no $CORPUS"
	run -0 --separate-stderr cg-shard -n 4 --holdout-fraction 0.05 \
		--holdout "$T/held.cgd" --json -o "$T/fort" "$CORPUS"
	assert_equal "${#lines[@]}" 5
	fortune_entries "$CORPUS" "$T/names" "$T/payload"
	n=$(wc -l <"$T/names")
	# grep's count of "%" lines, plus a last entry without one, less
	# the empty entries ("%" doubled, or opening a file) awk dropped
	g=0
	for f in $(ls "$CORPUS" | grep -v '\.'); do
		[ -f "$CORPUS/$f" ] || continue
		g=$((g + $(grep -c '^%$' "$CORPUS/$f")))
		[ "$(tail -c 2 "$CORPUS/$f" | od -An -c | tr -d ' ')" = '%\n' ] ||
			g=$((g + 1))
	done
	# a segment is empty if it has no line, or one empty line
	empty=$(for f in $(ls "$CORPUS" | grep -v '\.'); do
		[ -f "$CORPUS/$f" ] || continue
		awk '$0 == "%" { c += n == 0 || (n == 1 && e); n = 0; next }
			{ e = n == 0 && $0 == ""; n++ }
			END { c += n == 1 && e; print c + 0 }' "$CORPUS/$f"
	done | paste -sd+ | bc)
	assert_equal "$n" $((g - empty))
	assert_equal "$(jq -s 'map(.examples) | add' <<<"$output")" "$n"
	assert_equal "$(manifest "$T/held.cgd" .examples)" \
		"$(awk -v n="$n" 'BEGIN { printf "%d", n * 0.05 + 0.5 }')"
	assert_equal "$(manifest "$T/fort-0.cgd" '.conditions | length')" \
		"$(ls "$CORPUS" | grep -vc '\.')"
	run -0 spread "$T"/fort-{0,1,2,3}.cgd
	assert_output 1
	run -0 same_entries "$T/names" "$T/payload" "$T"/fort-{0,1,2,3}.cgd \
		"$T/held.cgd"
}
