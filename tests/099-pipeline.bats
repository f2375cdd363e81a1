#!/usr/bin/env bats
#
# 099-pipeline.bats - a cgpt cut by blocks into pipeline stages
# (cg-convert --stage, --join) and trained through pipes (cg-train-step
# --next, --micro-batches): N = 2, 3 and 4 stages give the very bytes of
# the unsplit run with the same micro-batches, and the joined stages are
# that model; a stage that fails, or meets a broken or hostile stream,
# leaves no output anywhere; the refusals.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1
	# four blocks: up to four stages
	small_cgpt t-0.cgd m.cgm --layers 4
	small_cgpt t-0.cgd tied.cgm --layers 2 --tied
	cg-train-step -q -m m.cgm -d t-0.cgd --emit model -k 3 -b 8 \
		--micro-batches 3 -o u.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# stages N: s1.cgm .. sN.cgm cut from $D/m.cgm
stages() {
	for i in $(seq 1 "$1"); do
		cg-convert -S "$i/$1" "$D/m.cgm" -o "s$i.cgm" || return 1
	done
}

# the command of stages $1..$2 (of sN.cgm), each running the next,
# writing oI.cgm; the first reads no data (it is not stage 1)
chain() {
	local i=$2 cmd="cg-train-step -q -m s$2.cgm -e model -o o$2.cgm"
	while [ "$i" -gt "$1" ]; do
		i=$((i - 1))
		cmd="cg-train-step -q -m s$i.cgm -e model -o o$i.cgm --next $(printf '%q' "$cmd")"
	done
	echo "$cmd"
}

# train N stages: stage 1 with the data, 3 steps of 8 in 3 micro-batches
pipeline() {
	local n=$1
	shift
	cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 3 -b 8 \
		--micro-batches 3 -o o1.cgm "$@" --next "$(chain 2 "$n")"
}

@test "N = 2, 3, 4 stages through pipes make the unsplit run's bytes, joined" {
	# the micro-batches are what the unsplit run accumulates over
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit model \
		-k 3 -b 8 -o whole.cgm
	run ! cmp -s whole.cgm "$D/u.cgm"
	for n in 2 3 4; do
		rm -f s*.cgm o*.cgm j.cgm
		stages "$n"
		run -0 pipeline "$n"
		refute_output
		run -0 cg-convert -J o*.cgm -o j.cgm
		cmp j.cgm "$D/u.cgm" || fail "$n stages: the joined model differs"
	done
	# the joined model is one every program takes
	run -0 cg-eval -m j.cgm -d "$D/t-0.cgd" -b 8 --json
	run -0 cg-inspect --verify j.cgm
}

@test "--pipeline 1f1b: the same bytes, frames larger than a pipe's buffer" {
	# 16 KiB a row: a micro-batch of 8 rows is 128 KiB a frame, and a
	# step's 4 more than a pipe holds (widened to one micro-batch's
	# frames: 256 KiB), both neighbours sending before they read
	small_cgpt "$D/t-0.cgd" w.cgm --layers 4 --width 128
	run -0 cg-train-step -q -m w.cgm -d "$D/t-0.cgd" --emit model \
		-k 2 -b 32 --micro-batches 4 -o u.cgm
	for n in 2 4; do
		rm -f s*.cgm o*.cgm
		for i in $(seq 1 "$n"); do
			cg-convert -S "$i/$n" w.cgm -o "s$i.cgm"
		done
		for p in gpipe 1f1b; do
			run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model \
				-k 2 -b 32 --micro-batches 4 --pipeline "$p" \
				-o o1.cgm --next "$(chain 2 "$n")"
			run -0 cg-convert -J o*.cgm -o j.cgm
			cmp j.cgm u.cgm || fail "$p, $n stages: not the same bytes"
		done
	done
}

@test "--deterministic stages make --deterministic's bytes" {
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit model \
		-k 2 -b 6 --micro-batches 4 --deterministic -o u.cgm
	stages 3
	run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 2 -b 6 \
		--micro-batches 4 --deterministic -o o1.cgm --next \
		"cg-train-step -q --deterministic -m s2.cgm -e model -o o2.cgm --next 'cg-train-step -q --deterministic -m s3.cgm -e model -o o3.cgm'"
	run -0 cg-convert -J o3.cgm o1.cgm o2.cgm -o j.cgm
	cmp j.cgm u.cgm
}

@test "cg-convert --stage then --join gives the model's bytes; a stage's file" {
	stages 3
	run -0 cg-convert -J s2.cgm s3.cgm s1.cgm -o j.cgm
	cmp j.cgm "$D/m.cgm"
	run -0 bash -c "tar xOf s2.cgm cg.json | jq -c .stage"
	assert_output '{"index":1,"count":3,"layers":[2,3]}'
	run -0 bash -c "tar tf s1.cgm | grep -v '^h\.'"
	assert_output "$(printf 'cg.json\nwte\nwpe')"
	run -0 bash -c "tar tf s3.cgm | grep -v '^h\.'"
	assert_output "$(printf 'cg.json\nlnf.w\nlnf.b\nlm_head.w')"
	# with moments: a trained model's are cut too, and joined back
	cg-convert -S 1/2 "$D/u.cgm" -o a.cgm
	cg-convert -S 2/2 "$D/u.cgm" -o b.cgm
	run -0 cg-convert -J a.cgm b.cgm -o k.cgm
	cmp k.cgm "$D/u.cgm"
}

@test "--join refuses stages that are not one model's, or not all of them" {
	stages 2
	cg-convert -S 1/3 "$D/m.cgm" -o t1.cgm
	cg-convert -S 2/2 "$D/u.cgm" -o u2.cgm
	run -1 --separate-stderr cg-convert -J s1.cgm -o j.cgm
	[[ $stderr == *"stage 1 of 2, but 1 stages given"* ]]
	run -1 --separate-stderr cg-convert -J s1.cgm s1.cgm -o j.cgm
	[[ $stderr == *"stage 1 of 2 a second time"* ]]
	run -1 --separate-stderr cg-convert -J s1.cgm t1.cgm -o j.cgm
	[[ $stderr == *"t1.cgm: stage 1 of 3"* ]]
	run -1 --separate-stderr cg-convert -J s1.cgm u2.cgm -o j.cgm
	[[ $stderr == *"manifests differ"* ]]
	run -1 --separate-stderr cg-convert -J s1.cgm "$D/m.cgm" -o j.cgm
	[[ $stderr == *"not a pipeline stage"* ]]
	[ ! -e j.cgm ]
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
}

@test "--stage refuses what cannot be cut; a stage is no whole model" {
	run -2 cg-convert -S 0/2 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -S 3/2 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -S 1-2 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -S 1/2 -J "$D/m.cgm" -o x.cgm
	run -1 --separate-stderr cg-convert -S 1/5 "$D/m.cgm" -o x.cgm
	[[ $stderr == *"5 stages of a model of 4 blocks"* ]]
	run -1 --separate-stderr cg-convert -S 1/2 "$D/tied.cgm" -o x.cgm
	[[ $stderr == *"cannot be split"* ]]
	run -1 --separate-stderr cg-convert -S 1/2 "$D/t-0.cgd" -o x.cgm
	[ ! -e x.cgm ]
	stages 2
	run -1 --separate-stderr cg-eval -m s1.cgm -d "$D/t-0.cgd"
	[[ $stderr == *"a pipeline stage, not a whole model"* ]]
	run -1 --separate-stderr cg-train-step -m s2.cgm -d "$D/t-0.cgd" \
		-e model -o x.cgm --next true
	[[ $stderr == *"only the first stage reads data"* ]]
	[ ! -e x.cgm ]
}

@test "a stage that fails leaves no stage's output written" {
	stages 3
	# the last stage refuses its call: nobody writes
	run -1 --separate-stderr cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" \
		-e model -k 2 -b 4 -o o1.cgm --next \
		"cg-train-step -q -m s2.cgm -e model -o o2.cgm --next 'cg-train-step -q -m s3.cgm -e model -o /nonexistent/o3.cgm'"
	[ ! -e o1.cgm ] && [ ! -e o2.cgm ]
	# a next stage that dies in the middle of the stream
	run -1 --separate-stderr cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" \
		-e model -k 2 -b 4 -o o1.cgm --next \
		"cg-train-step -q -m s2.cgm -e model -o o2.cgm --next 'head -c 3000 >/dev/null'"
	[ ! -e o1.cgm ] && [ ! -e o2.cgm ]
	run -1 --separate-stderr cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" \
		-e model -o o1.cgm --next 'exit 3'
	[[ $stderr == *"cg-train-step: "* ]]
	[ ! -e o1.cgm ]
	# (bats keeps each run's stderr beside them)
	run -0 bash -c "ls -A | grep -v '^separate-stderr-'"
	assert_output "$(printf 's1.cgm\ns2.cgm\ns3.cgm')"
}

@test "a stage reads a hostile stream: one line, exit 1, nothing written" {
	stages 2
	# the first frames of a real stream, cut short
	cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 1 -b 4 \
		-o o1.cgm --next 'head -c 2000 > cut' || true
	[ "$(wc -c < cut)" -eq 2000 ]
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm < cut
	[[ $stderr =~ ^cg-train-step:\ frame\ [a-z]+:\ truncated$ ]]
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm < /dev/null
	[[ $stderr == *"frame head expected: the stream ended"* ]]
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm \
		< "$D/m.cgm"
	[[ $stderr == *"bad magic"* ]]
	# a head of 10 words claiming 2^62 bytes
	printf 'CGF1\004head\007\001\000\000\012\000\000\000\000\000\000\000\000\000\000\000\000\000\000\100' > big
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm < big
	[[ $stderr == *"not what its shape says"* ]]
	# the head of another pipeline: stage 1 of 3, or another step
	printf 'CGF1\004head\007\001\000\000\012\000\000\000\000\000\000\000\120\000\000\000\000\000\000\000' > h
	printf '\001\000\000\000\000\000\000\000\003\000\000\000\000\000\000\000' >> h
	printf '\001\000\000\000\000\000\000\000\004\000\000\000\000\000\000\000' >> h
	printf '\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >> h
	printf '\000\000\000\000\000\000\000\000' >> h
	printf '\000\000\000\000\000\000\000\000' >> h
	printf '\002\000\000\000\000\000\000\000' >> h
	printf '\000\000\000\000\000\000\000\000' >> h
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm < h
	[[ $stderr == *"for stage 2 of 3, not 2 of 2"* ]]
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
	[ ! -e o2.cgm ]
	# q8_0 on the wire, the first block of the first activations'
	# frame ("x", its payload 42 bytes in) given a scale that is no
	# number (f16 0x7e00)
	cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 1 -b 4 \
		--wire q8_0 -o o1.cgm \
		--next 'tee q8 | cg-train-step -q -m s2.cgm -e model -o ok.cgm'
	off=$(grep -obUaP 'CGF1\x01x' q8 | head -n 1 | cut -d: -f1)
	[ -n "$off" ]
	printf '\000\176' | dd of=q8 bs=1 seek=$((off + 42)) conv=notrunc 2>/dev/null
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model -o o2.cgm < q8
	[ "$stderr" = "cg-train-step: x: block 0 has a scale that is not finite" ] ||
		fail "$stderr"
	[ ! -e o2.cgm ]
}

@test "--wire bf16 and q8_0: about half and a quarter of the bytes down the pipe, a model near the f32 one" {
	stages 2
	for w in f32 bf16 q8_0; do
		run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 3 \
			-b 8 --micro-batches 3 --wire "$w" -o "o1-$w.cgm" --next \
			"tee down-$w | cg-train-step -q -m s2.cgm -e model -o o2-$w.cgm"
		run -0 cg-convert -J "o1-$w.cgm" "o2-$w.cgm" -o "j-$w.cgm"
	done
	cmp j-f32.cgm "$D/u.cgm"
	run ! cmp -s j-bf16.cgm "$D/u.cgm"
	run ! cmp -s j-q8_0.cgm "$D/u.cgm"
	run ! cmp -s j-q8_0.cgm j-bf16.cgm
	f=$(wc -c < down-f32) b=$(wc -c < down-bf16) q=$(wc -c < down-q8_0)
	[ $((b * 10)) -lt $((f * 6)) ] || fail "bf16: $b bytes down, f32 $f"
	[ $((q * 10)) -lt $((f * 4)) ] || fail "q8_0: $q bytes down, f32 $f"
	# the same loss to 4 digits: the wire rounds the activations and
	# their gradients only
	for w in bf16 q8_0; do
		run -0 jq -n --argjson a "$(tar xOf j-f32.cgm cg.json | jq .loss)" \
			--argjson b "$(tar xOf "j-$w.cgm" cg.json | jq .loss)" \
			'($a - $b) | fabs < 1e-3 * $a'
		assert_output true
	done
	# and each joined model near the f32 one: every tensor's cosine
	# to it 0.999 or more (both about 0.9995 at the least)
	for w in bf16 q8_0; do
		run -1 cg-inspect --diff j-f32.cgm "j-$w.cgm"
		run -0 awk '$2 == "differs" && $NF < 0.999 { print $1, $NF }' \
			<<<"$output"
		[ -z "$output" ] || fail "$w: far from f32: $output"
	done
	run -2 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --wire bf16 -o x
	# q8_0 blocks of 32 do not cut a sequence of 6 x 8 values
	small_cgpt "$D/t-0.cgd" odd.cgm --context 6 --width 8 --layers 2
	cg-convert -S 1/2 odd.cgm -o odd1.cgm
	cg-convert -S 2/2 odd.cgm -o odd2.cgm
	run -1 --separate-stderr cg-train-step -q -m odd1.cgm -d "$D/t-0.cgd" \
		-e model -b 4 --wire q8_0 -o x \
		--next 'cg-train-step -q -m odd2.cgm -e model -o y'
	[[ $stderr == *"--wire q8_0: a sequence's 6 x 8 activations are not whole blocks of 32" ]] ||
		fail "$stderr"
	[ ! -e x ] && [ ! -e y ]
	run -2 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --pipeline 1f1b \
		-o x
}

@test "the options of a stage: --help, conflicts" {
	run -0 cg-train-step --help
	assert_output --partial "--micro-batches M"
	assert_output --partial "--next CMD"
	stages 3
	run -2 cg-train-step -m s1.cgm -d "$D/t-0.cgd" -e delta -s st -o o.cgm \
		--next true
	run -2 cg-train-step -m s1.cgm -d "$D/t-0.cgd" -e model --clip 1 \
		-o o.cgm --next true
	run -2 cg-train-step -m s2.cgm -e model -s st -o o.cgm
	run -2 cg-train-step -m s1.cgm -e model --micro-batches 0 --next true
	run -1 --separate-stderr cg-train-step -m s1.cgm -d "$D/t-0.cgd" \
		-e model -o o.cgm
	[[ $stderr == *"cg-train-step --next trains it"* ]]
	run -1 --separate-stderr cg-train-step -m s1.cgm -e model -o o.cgm \
		< /dev/null
	[[ $stderr == *"the first stage reads the data: give -d"* ]]
	run -1 --separate-stderr cg-train-step -m s2.cgm -e model --next true
	[[ $stderr == *"standard output is the pipe"* ]]
	run -1 --separate-stderr cg-train-step -m "$D/m.cgm" -e model \
		-o o.cgm < /dev/null
	[[ $stderr == *"not a pipeline stage"* ]]
	[ ! -e o.cgm ]
}
