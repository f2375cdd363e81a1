#!/usr/bin/env bats
#
# 107-sample-stages.bats - text drawn across a cgpt's pipeline stages
# (cg-sample --next, --stage): N = 2 and 3 stages give the very bytes of
# the unsplit cg-sample with the same seed and options, through window
# slides and several texts; a stage that meets a hostile stream, or is
# given as the wrong stage, says one line and exits 1.  The programs
# come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1
	# three blocks: up to three stages; a short window, so that texts
	# of 80 bytes slide it
	small_cgpt t-0.cgd m.cgm --layers 3 --context 16
	cg-train-step -q -m m.cgm -d t-0.cgd --emit model -k 20 -b 8 -o u.cgm
	stages u.cgm 2 3
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# the --next command of stages $1..$2 of N = $2
chain() {
	local i=$2 n=$2 cmd="cg-sample --stage -m $D/s$2-$2.cgm"
	while [ "$i" -gt "$1" ]; do
		i=$((i - 1))
		cmd="cg-sample --stage -m $D/s$i-$n.cgm --next $(printf '%q' "$cmd")"
	done
	echo "$cmd"
}

@test "N = 2 and 3 stages draw the unsplit cg-sample's bytes" {
	for opts in "--seed 7" "--seed 3 --temperature 0.8 --top-k 20" \
		"--seed 5 --top-p 0.9 -p hello" "--temperature 0"; do
		# shellcheck disable=SC2086
		run -0 cg-sample -m "$D/u.cgm" -c 0 -c 2 -n 2 --max-bytes 80 $opts -o whole
		[ "$(wc -c < whole)" -gt 40 ] || fail "$opts: $(wc -c < whole) bytes"
		for n in 2 3; do
			# shellcheck disable=SC2086
			run -0 cg-sample -m "$D/s1-$n.cgm" -c 0 -c 2 -n 2 --max-bytes 80 \
				$opts -o "staged-$n" --next "$(chain 2 "$n")"
			cmp whole "staged-$n" || fail "N = $n, $opts"
		done
	done
	# standard output, through a pipe of the first stage's own
	cg-sample -m "$D/u.cgm" -c 1 --seed 9 --max-bytes 30 > a
	cg-sample -m "$D/s1-2.cgm" -c 1 --seed 9 --max-bytes 30 \
		--next "$(chain 2 2)" | cat > b
	cmp a b
}

@test "the wrong stage, or a stage's options where they do not belong: one line, exit 1 or 2" {
	run -0 cg-sample --help
	assert_output --partial "--next CMD"
	assert_output --partial "--stage"
	run -1 --separate-stderr cg-sample -m "$D/s2-3.cgm" --next "$(chain 3 3)"
	assert_equal "$stderr" "cg-sample: $D/s2-3.cgm: stage 2 of 3: its rows come from the previous stage: give --stage"
	run -1 --separate-stderr cg-sample -m "$D/s1-3.cgm" --stage < /dev/null
	assert_equal "$stderr" "cg-sample: $D/s1-3.cgm: stage 1 of 3: the first stage draws the text: no --stage"
	run -1 --separate-stderr cg-sample -m "$D/s1-3.cgm"
	[[ $stderr == *"a pipeline stage, not a whole model"* ]]
	run -1 --separate-stderr cg-sample -m "$D/s1-3.cgm" -c 0 --next true
	[[ $stderr == *"frame logits expected: the stream ended"* ]] ||
		[[ $stderr == *"Broken pipe"* ]]
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
	run -1 --separate-stderr cg-sample -m "$D/s3-3.cgm" --stage --next cat < /dev/null
	assert_equal "$stderr" "cg-sample: stage 3 of 3: the last stage runs no other: no --next"
	run -1 --separate-stderr cg-sample -m "$D/s2-3.cgm" --stage < /dev/null
	assert_equal "$stderr" "cg-sample: stage 2 of 3: give --next CMD, the next stage"
	run -1 --separate-stderr cg-sample -m "$D/u.cgm" --next cat
	[[ $stderr == *"not a pipeline stage"* ]] || fail "$stderr"
	# stage 3 of 3 fed by the first of a 2-stage pipeline
	run -1 --separate-stderr cg-sample -m "$D/s1-2.cgm" -c 0 --next \
		"cg-sample --stage -m $D/s3-3.cgm"
	[[ $stderr == *"sends to stage 2 of 2, this is stage 3 of 3"* ]]
	run -2 cg-sample --stage -m - < /dev/null
	run -2 cg-sample --stage -m "$D/s2-2.cgm" -c 0
	run -2 cg-sample --stage -m "$D/s2-2.cgm" --max-bytes 3
	run -2 cg-sample --stage -m "$D/s2-2.cgm" -o x
	[ ! -e x ]
}

# stage 2 of 2, its answers dropped
stage2() {
	cg-sample --stage -m "$D/s2-2.cgm" > /dev/null
}

# frame "at" u64 [2] {$1, $2}
at() {
	printf 'CGF1\002at\007\001\000\000\002\000\000\000\000\000\000\000'
	printf '\020\000\000\000\000\000\000\000'
	printf "\\$(printf %o "$1")\000\000\000\000\000\000\000"
	printf "\\$(printf %o "$2")\000\000\000\000\000\000\000"
}

@test "a stage reads a hostile stream: one line, exit 1" {
	cg-sample -m "$D/s1-2.cgm" -c 1 --seed 1 --max-bytes 40 -o /dev/null \
		--next "tee down | cg-sample --stage -m $D/s2-2.cgm"
	# the stream again: the same answer
	cg-sample -m "$D/s1-2.cgm" -c 1 --seed 1 --max-bytes 40 -o /dev/null \
		--next "cg-sample --stage -m $D/s2-2.cgm | tee up"
	cg-sample --stage -m "$D/s2-2.cgm" < down > up2
	cmp up up2
	head -c 300 down > cut
	run -1 --separate-stderr stage2 < cut
	[[ $stderr =~ ^cg-sample:\ the\ previous\ stage:\ frame\ [a-z]+ ]] ||
		fail "$stderr"
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
	# the whole stream but its "end"
	head -c $(($(wc -c < down) - 36)) down > noend
	run -1 --separate-stderr stage2 < noend
	assert_equal "$stderr" 'cg-sample: the previous stage: the stream ends without "end"'
	run -1 --separate-stderr stage2 < /dev/null
	[[ $stderr == *"frame head expected: the stream ended"* ]]
	run -1 --separate-stderr stage2 < "$D/u.cgm"
	[[ $stderr == *"bad magic"* ]]
	# the head, then rows out of the window (of 16), or out of place
	head -c 77 down > h
	{ cat h; at 10 7; } > far
	run -1 --separate-stderr stage2 < far
	assert_equal "$stderr" "cg-sample: the previous stage: 7 rows at position 10: not within the window of 16"
	{ cat h; at 0 0; } > none
	run -1 --separate-stderr stage2 < none
	[[ $stderr == *"0 rows at position 0"* ]]
	# one row at position 3 of a stage that holds none
	{
		cat h
		at 3 1
		# "x" f32 [1, 16] of zeros
		printf 'CGF1\001x\000\002\000\000\001\000\000\000\000\000\000\000'
		printf '\020\000\000\000\000\000\000\000\100\000\000\000\000\000\000\000'
		head -c 64 /dev/zero
	} > gap
	run -1 --separate-stderr stage2 < gap
	[[ $stderr == *"1 rows at position 3: the stage holds 0"* ]] ||
		fail "$stderr"
	# a frame the protocol has no place for
	cat h h > twice
	run -1 --separate-stderr stage2 < twice
	assert_equal "$stderr" 'cg-sample: the previous stage: frame head: 48 bytes, more than 16'
	{
		cat h
		printf 'CGF1\006commit\007\001\000\000\001\000\000\000\000\000\000\000'
		printf '\010\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000'
	} > other
	run -1 --separate-stderr stage2 < other
	assert_equal "$stderr" 'cg-sample: the previous stage: frame "commit": not "at" u64 [2] or "end"'
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
}
