#!/usr/bin/env bats
# 051-sample-text.bats - cg-sample on text models: options, conditions,
# prompts, the stops (EOT, --max-bytes), seeds, separators, files, pipes.
#
# Made once per file: a cgpt model on the fortunes fixture (three
# conditions) trained for 50 steps; "hi.cgm", a tiny model trained until
# condition a always says "hi" and b "yo" and then EOT, so that greedy
# output is known exactly; "st.cgm", a tiny model of context 8 on texts
# three to five contexts long that all open alike per condition, so that
# only the start mark tells a text's opening from its middle; "pj.cgm", a
# fresh model on JSON Lines with a "(prompt)" condition; and a fresh cvae
# image model, for the options that belong to the other kind.  The
# programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 1 --holdout-fraction 0.05 --holdout held.cgd
	model cgpt fort-0.cgd m.cgm --context 32 --width 32 --layers 1 \
		--heads 2
	cg-train-step -q -m m.cgm -d fort-0.cgd --emit model --steps 50 \
		--batch 8 --lr 3e-3 --opt adamw -o m.cgm
	for i in $(seq 20); do printf 'a\thi\nb\tyo\n'; done >hi.tsv
	cg-shard -q -n 1 -o hi hi.tsv
	model cgpt hi-0.cgd hi.cgm --context 8 --width 16 --layers 1 --heads 2
	cg-train-step -q -m hi.cgm -d hi-0.cgd --emit model --steps 60 \
		--batch 8 --lr 1e-2 --opt adamw -o hi.cgm
	for i in $(seq 20); do
		printf 'a\thello there, this is text %d of many, long\n' "$i"
		printf 'b\tyo, and here is another one, %d\n' "$i"
	done >st.tsv
	cg-shard -q -n 1 -o st st.tsv
	model cgpt st-0.cgd st.cgm --context 8 --width 16 --layers 1 --heads 2
	cg-train-step -q -m st.cgm -d st-0.cgd --emit model --steps 100 \
		--batch 8 --lr 1e-2 --opt adamw -o st.cgm
	printf '%s\n' '{"prompt":"q: ","text":"yes"}' \
		'{"cond":"story","text":"once"}' >p.jsonl
	cg-shard -q -n 1 -o pj p.jsonl
	model cgpt pj-0.cgd pj.cgm --context 16 --width 16 --layers 1 \
		--heads 2
	images img
	small_cvae img-0.cgd img.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

@test "cg-sample --help names the text options" {
	run -0 --separate-stderr cg-sample --help
	for opt in --prompt --prompt-file --top-k --top-p --max-bytes \
		--separator --temperature --cond --count; do
		assert_output --partial -- "$opt"
	done
	[ -z "$stderr" ]
}

@test "cg-sample: bad text options are usage errors" {
	local m=$D/m.cgm
	run -2 cg-sample -m "$m" -c 0 --top-p 1.5
	run -2 cg-sample -m "$m" -c 0 --top-p -0.1
	run -2 cg-sample -m "$m" -c 0 --top-k -1
	run -2 cg-sample -m "$m" -c 0 --top-k x
	run -2 cg-sample -m "$m" -c 0 --max-bytes 0
	run -2 cg-sample -m "$m" -c 0 --temperature -1
	run -2 cg-sample -m "$m" -c 0 -p
	run -2 --separate-stderr cg-sample -m "$m" -c 0 -p x --prompt-file f
	[[ ${stderr_lines[0]} == *'--prompt and --prompt-file exclude each other' ]]
	run -2 --separate-stderr cg-sample -m - -c 0 --prompt-file - <"$m"
	[[ ${stderr_lines[0]} == *'only one input can be standard input' ]]
}

@test "cg-sample: options of the other kind of model are usage errors" {
	run -2 --separate-stderr cg-sample -m "$D/m.cgm" -c 0 -f png
	[[ ${stderr_lines[0]} == 'cg-sample: '*'--format is for image models'* ]]
	[ -z "$output" ]
	run -2 --separate-stderr cg-sample -m "$D/img.cgm" --top-k 3 -o a.png
	[[ ${stderr_lines[0]} == 'cg-sample: '*'--top-k is for text models'* ]]
	run -2 cg-sample -m "$D/img.cgm" -p hello -o a.png
	[ ! -e a.png ]
	# Image models still draw grids.
	run -0 cg-sample -m "$D/img.cgm" -n 2 -o a.png
	[ -s a.png ]
}

@test "cg-sample: an unknown condition is exit 2, naming the valid ones" {
	run -2 --separate-stderr cg-sample -m "$D/m.cgm" -c dogs
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == "cg-sample: unknown condition 'dogs'; valid: \"animals\", \"computers\", \"wisdom\", or an index 0 to 2" ]]
	run -2 cg-sample -m "$D/m.cgm" -c 3
	run -2 cg-sample -m "$D/m.cgm" -c -1
}

@test "cg-sample: several conditions and no -c is exit 2" {
	run -2 --separate-stderr cg-sample -m "$D/m.cgm"
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == *'3 conditions: choose one with -c; valid: "animals", "computers", "wisdom", or an index 0 to 2' ]]
	# A prompt does not choose unless the model has "(prompt)".
	run -2 cg-sample -m "$D/m.cgm" -p hello
}

@test "cg-sample: a prompt picks the (prompt) condition where there is one" {
	run -2 cg-sample -m "$D/pj.cgm" --max-bytes 5
	cg-sample -m "$D/pj.cgm" -p 'q: ' --max-bytes 20 --seed 4 >implicit
	cg-sample -m "$D/pj.cgm" -c '(prompt)' -p 'q: ' --max-bytes 20 \
		--seed 4 >named
	cg-sample -m "$D/pj.cgm" -c 0 -p 'q: ' --max-bytes 20 --seed 4 >index
	[ -s implicit ]
	cmp implicit named
	cmp implicit index
}

@test "cg-sample: greedy stops at EOT; the condition chooses the text" {
	run -0 --separate-stderr cg-sample -m "$D/hi.cgm" -c a --temperature 0
	[ "$output" = hi ] && [ -z "$stderr" ]
	run -0 cg-sample -m "$D/hi.cgm" -c b --temperature 0
	[ "$output" = yo ]
	# Exactly the bytes, no newline added off a terminal.
	cg-sample -m "$D/hi.cgm" -c 1 --temperature 0 >yo.txt
	[ "$(od -An -c yo.txt | tr -d ' ')" = yo ]
}

@test "cg-sample: texts longer than the context start at their start" {
	# Training saw each text's opening after the start mark, its middles
	# without it; generation starts after the mark.
	run -0 cg-sample -m "$D/st.cgm" -c a --temperature 0 --max-bytes 12
	[ "$output" = 'hello there ' ]
	run -0 cg-sample -m "$D/st.cgm" -c b --temperature 0 --max-bytes 8
	[ "$output" = 'yo, and ' ]
}

@test "cg-sample: -n texts per condition, fortune-style separators" {
	cg-sample -m "$D/hi.cgm" -c a -c b -n 2 --temperature 0 >out
	printf 'hi\n%%\nhi\n%%\nyo\n%%\nyo' >want
	cmp out want
	cg-sample -m "$D/hi.cgm" -c a -n 3 --temperature 0 \
		--separator '\t--\\\n' >out
	printf 'hi\t--\\\nhi\t--\\\nhi' >want
	cmp out want
	cg-sample -m "$D/hi.cgm" -c a -n 2 --temperature 0 --separator '' >out
	printf 'hihi' >want
	cmp out want
}

@test "cg-sample: --max-bytes stops each text" {
	run -0 cg-sample -m "$D/hi.cgm" -c a --temperature 0 --max-bytes 1
	[ "$output" = h ]
	cg-sample -m "$D/m.cgm" -c 1 -n 5 --temperature 4 --max-bytes 9 \
		--separator '' --seed 2 >out
	n=$(wc -c <out)
	[ "$n" -le 45 ] && [ "$n" -gt 0 ]
	cg-sample -m "$D/m.cgm" -c 1 --temperature 4 --max-bytes 300 \
		--seed 2 >long
	n=$(wc -c <long)
	[ "$n" -le 300 ]
}

@test "cg-sample: a prompt is context, not output" {
	run -0 cg-sample -m "$D/hi.cgm" -c a -p h --temperature 0
	[ "$output" = i ]
	printf h >prompt
	run -0 cg-sample -m "$D/hi.cgm" -c a --prompt-file prompt \
		--temperature 0
	[ "$output" = i ]
	run -0 cg-sample -m "$D/hi.cgm" -c a --prompt-file - --temperature 0 \
		<prompt
	[ "$output" = i ]
	# A prompt longer than the context keeps its tail.
	run -0 cg-sample -m "$D/hi.cgm" -c a -p 'xxxxxxxxxxxxxxxxxxh' \
		--temperature 0 --max-bytes 1
	[ "$output" = i ]
	run -1 --separate-stderr cg-sample -m "$D/hi.cgm" -c a \
		--prompt-file nope.txt
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: nope.txt: '* ]]
}

@test "cg-sample: same seed, same bytes; another seed, other bytes" {
	local m=$D/m.cgm
	cg-sample -m "$m" -c computers -n 3 --temperature 0.8 --top-p 0.95 \
		--seed 7 >a
	cg-sample -m "$m" -c 1 -n 3 --temperature 0.8 --top-p 0.95 \
		--seed 7 -j 1 >b
	cmp a b
	cg-sample -m "$m" -c computers -n 3 --temperature 0.8 --top-p 0.95 \
		--seed 8 >c
	run ! cmp -s a c
	# Text i of a condition is the same in any run that asks for it.
	cg-sample -m "$m" -c animals -c computers -n 3 --temperature 0.8 \
		--top-p 0.95 --seed 7 --separator '\n@@\n' >both
	run -0 python3 -c '
import sys
both = open(sys.argv[1], "rb").read().split(b"\n@@\n")
one = open(sys.argv[2], "rb").read().split(b"\n%\n")
assert both[3:] == one, (both, one)
print("ok")' both a
	assert_output ok
}

@test "cg-sample: top-k 1 and a tiny top-p are greedy" {
	local m=$D/m.cgm
	cg-sample -m "$m" -c wisdom --temperature 0 --max-bytes 40 >g
	cg-sample -m "$m" -c wisdom --top-k 1 --max-bytes 40 --seed 3 >k
	cg-sample -m "$m" -c wisdom --top-p 0 --max-bytes 40 --seed 5 >p
	cmp g k
	cmp g p
}

@test "cg-sample: -o FILE holds what stdout gets; the model may be stdin" {
	cg-sample -m "$D/m.cgm" -c 2 -n 2 --seed 1 --max-bytes 50 >stdout
	mkdir dir
	run -0 --separate-stderr cg-sample -m - -c 2 -n 2 --seed 1 \
		--max-bytes 50 -o dir/file <"$D/m.cgm"
	[ -z "$output" ] && [ -z "$stderr" ]
	cmp stdout dir/file
	cg-sample -m "$D/m.cgm" -c 2 -n 2 --seed 1 --max-bytes 50 -o - >dash
	cmp stdout dash
	# No temporary is left behind.
	[ "$(ls -A dir)" = file ]
}

@test "cg-sample: a missing model is one line, exit 1" {
	run -1 --separate-stderr cg-sample -m nope.cgm -c 0 -p x
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-sample: nope.cgm: '* ]]
}

@test "cg-sample: a reader that leaves early gets no noise" {
	local m=$D/m.cgm
	run -0 bash -c "cg-sample -m '$m' -c 0 -n 4096 --max-bytes 512 \
		--temperature 3 2>err | head -c 10 | wc -c"
	[ "$output" -eq 10 ]
	[ ! -s err ]
	# With SIGPIPE ignored the write fails instead: still no message.
	run -0 bash -c "trap '' PIPE; cg-sample -m '$m' -c 0 -n 4096 \
		--max-bytes 512 --temperature 3 2>err2 | head -c 10 >/dev/null;
		echo \${PIPESTATUS[0]}"
	[ "$output" = 1 ]
	[ ! -s err2 ]
}

@test "cg-sample: on a terminal, text is allowed and ends its line" {
	command -v script >/dev/null || skip 'no script(1) for a terminal'
	run -0 script -qec "cg-sample -m '$D/hi.cgm' -c a -n 2 \
		--temperature 0" /dev/null
	[ "$output" = "$(printf 'hi\r\n%%\r\nhi\r')" ]
}

@test "cg-sample: control bytes show as '?' on a terminal, raw to a pipe" {
	command -v script >/dev/null || skip 'no script(1) for a terminal'
	local cmd="cg-sample -m '$D/pj.cgm' -c story -n 3 --max-bytes 300 \
		--seed 4"
	eval "$cmd" >pipe.out
	# The untrained model draws bytes near uniformly, controls among them.
	local all kept
	all=$(wc -c <pipe.out)
	kept=$(tr -d '\000-\010\013-\037\177' <pipe.out | wc -c)
	echo "$all bytes, $((all - kept)) of them control bytes"
	[ "$kept" -lt "$all" ]
	script -qec "$cmd" /dev/null </dev/null >tty.raw
	# The terminal makes each newline CR LF; a CR the model drew is '?'.
	tr -d '\r' <tty.raw >tty.out
	tr '\000-\010\013-\037\177' '?' <pipe.out >want
	# and cg-sample ends a terminal's last line
	[ "$(tail -c 1 want | od -An -tx1)" = " 0a" ] || printf '\n' >>want
	cmp tty.out want
}

@test "cg-sample: an interrupted -o FILE leaves nothing" {
	mkdir dir
	cg-sample -m "$D/m.cgm" -c 0 -n 4096 --max-bytes 4096 \
		--temperature 3 -o dir/out &
	local pid=$!
	sleep 0.5
	kill -TERM "$pid"
	# wait here, not under run: run's subshell has no such child, so
	# its wait returned at once and ls raced the signal handler
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" -ne 0 ]
	ls -la dir # shown if the test fails: what was left
	[ -z "$(ls -A dir)" ]
}
