#!/usr/bin/env bats
#
# 111-pipe-plan.bats - cg-probe --plan, the split of a model into
# pipeline stages over hosts of given speed, memory and links, and
# cg-convert --layers, which cuts the stages it prints: equal hosts get
# equal ranges, a slower host fewer blocks, a host short of memory
# fewer, a model that fits no split is refused; the bytes it predicts a
# step are the bytes the pipes carry; an uneven split trains to the very
# bytes of the unsplit run; hostile hosts files are refused with one
# line.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1
	# four blocks; T = 32, C = 16
	small_cgpt t-0.cgd m.cgm --layers 4
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# the layers of each stage of cg-probe --plan "$@" -m $D/m.cgm, as a:b ...
ranges() {
	cg-probe --plan "$@" -m "$D/m.cgm" --json |
		jq -r '[.stages[].layers | "\(.[0]):\(.[1])"] | join(" ")'
}

@test "--help, a bad option, a missing hosts file, -d with --plan" {
	run -0 cg-probe --help
	assert_output --partial "--plan HOSTS"
	assert_output --partial "--probed FILE"
	run -2 --separate-stderr cg-probe --plan h -m "$D/m.cgm" --bogus
	run -2 --separate-stderr cg-probe --plan h -m "$D/m.cgm" -d "$D/t-0.cgd"
	[[ $stderr == *"no -d"* ]] || fail "$stderr"
	run -2 --separate-stderr cg-probe -m "$D/m.cgm" -d "$D/t-0.cgd" --wire bf16
	[[ $stderr == *"--plan's"* ]] || fail "$stderr"
	run -1 --separate-stderr cg-probe --plan nothere -m "$D/m.cgm"
	[ "$stderr" = "cg-probe: nothere: No such file or directory" ] || fail "$stderr"
	refute_output
}

@test "equal hosts get equal ranges; a slower host gets fewer blocks" {
	printf 'a 100 1G 100M\nb 100 1G -\n' > eq
	# the first stage's forward passes run again: 4 passes' work a
	# block against the last's 3 and the head
	run -0 ranges eq -b 8 --checkpoint-activations
	assert_output "0:2 2:4"
	# its activations kept, 3 passes a block: it takes one more
	run -0 ranges eq -b 8
	assert_output "0:3 3:4"
	# four stages of four blocks: one each
	printf 'a 100 1G 1G\nb 100 1G 1G\nc 100 1G 1G\nd 100 1G -\n' > four
	run -0 ranges four -b 8
	assert_output "0:1 1:2 2:3 3:4"
	# ten times slower: the other takes three blocks, whichever is first
	printf '# the second is slow\na 100 1G 100M\nb 10 1G -\n' > slow2
	run -0 ranges slow2 -b 8
	assert_output "0:3 3:4"
	printf 'a 10 1G 100M  # slow\nb 100 1G -\n' > slow1
	run -0 ranges slow1 -b 8
	assert_output "0:1 1:4"
	# the table names the hosts and prints the cut
	run -0 cg-probe --plan slow1 -m "$D/m.cgm" -b 8
	assert_line --regexp '^1 +a +0:1 '
	assert_line "cut:        cg-convert -S 2/2 -L 1:4 -o stage-2.cgm $D/m.cgm"
	# the rates may come from another model of the arch: a model twice
	# as costly probed at half the rate is the same host
	small_cgpt "$D/t-0.cgd" w.cgm --layers 4 --width 32
	run -0 ranges slow1 -b 8 --probed w.cgm
	assert_output "0:1 1:4"
}

@test "a host short of memory takes fewer blocks; a model that fits no split is refused" {
	printf 'a 100 1G 100M\nb 10 1G -\n' > h
	run -0 ranges h -b 8
	assert_output "0:3 3:4"
	# the fast host's memory just below what three blocks take with
	# their activations kept: it keeps them no more
	run -0 cg-probe --plan h -m "$D/m.cgm" -b 8 --micro-batches 2 --json
	[ "$(jq '[.stages[].kept_activations] | tostring' <<<"$output")" = '"[true,false]"' ] ||
		fail "$output"
	kept=$(jq '.stages[0].peak_bytes' <<<"$output")
	printf 'a 100 %d 100M\nb 10 1G -\n' $((kept - 1)) > less
	run -0 cg-probe --plan less -m "$D/m.cgm" -b 8 --micro-batches 2 --json
	jq -e '.stages[0].kept_activations == false and
		.stages[0].layers == [0, 3] and .stages[0].peak_bytes < '"$kept" \
		<<<"$output" || fail "$output"
	# ... nor with --checkpoint-activations, which takes that least
	run -0 cg-probe --plan h -m "$D/m.cgm" -b 8 --micro-batches 2 --json \
		--checkpoint-activations
	jq -e '[.stages[].kept_activations] == [false, false]' \
		<<<"$output" || fail "$output"
	peak=$(jq '.stages[0].peak_bytes' <<<"$output")
	[ "$peak" -lt "$kept" ] || fail "$peak recomputing, $kept kept"
	# below what three blocks take even recomputing: two
	printf 'a 100 %d 100M\nb 10 1G -\n' $((peak - 1)) > short
	run -0 ranges short -b 8 --micro-batches 2
	assert_output "0:2 2:4"
	# one host, one micro-batch: the whole model's peak, and one byte
	# less is refused
	printf 'a 100 1G -\n' > one
	whole=$(cg-probe --plan one -m "$D/m.cgm" -b 8 --micro-batches 1 \
		--json | jq '.stages[0].peak_bytes')
	printf 'a 100 %d -\n' $((whole - 1)) > tight
	run -1 --separate-stderr cg-probe --plan tight -m "$D/m.cgm" -b 8 \
		--micro-batches 1
	[ "$stderr" = "cg-probe: $D/m.cgm: no split of the model's 4 layers over 1 host fits the memory given" ] || fail "$stderr"
	refute_output
	# ... which two such hosts hold between them
	printf 'a 100 %d 1G\nb 100 %d -\n' $((whole - 1)) $((whole - 1)) > two
	run -0 ranges two -b 8 --micro-batches 1
	# more hosts than blocks
	printf 'a 1 1G 1G\nb 1 1G 1G\nc 1 1G 1G\nd 1 1G 1G\ne 1 1G -\n' > five
	run -1 --separate-stderr cg-probe --plan five -m "$D/m.cgm"
	[[ $stderr == *"5 stages of a model of 4 blocks"* ]] || fail "$stderr"
}

@test "the bytes a step it predicts are the bytes the pipes carry" {
	printf 'a 100 1G 100M\nb 100 1G -\n' > h
	cg-convert -S 1/2 "$D/m.cgm" -o s1.cgm
	cg-convert -S 2/2 "$D/m.cgm" -o s2.cgm
	for wire in f32 bf16 q8_0; do
		run -0 cg-probe --plan h -m "$D/m.cgm" -b 8 --micro-batches 2 \
			--wire "$wire" --json
		down=$(jq .bytes_down <<<"$output")
		up=$(jq .bytes_up <<<"$output")
		# by hand, 2 micro-batches of 4 rows of T 32, C 16: "x" 42 +
		# 8192 (f32), "targets" 40 + 512, "weight" 39 + 512; up "dx"
		# 43 + 8192, "loss" 37; bf16 half the activations' bytes,
		# q8_0 34 bytes a block of 32 (2176 for 2048 values)
		case $wire in
		f32) [ "$down" = 18674 ] && [ "$up" = 16544 ] ;;
		bf16) [ "$down" = 10482 ] && [ "$up" = 8352 ] ;;
		q8_0) [ "$down" = 6642 ] && [ "$up" = 4512 ] ;;
		esac || fail "$wire: $down down, $up up"
		run -0 cg-train-step -q -m s1.cgm -d "$D/t-0.cgd" -e model -k 3 \
			-b 8 --micro-batches 2 --wire "$wire" -o o1.cgm \
			--next "tee d.bin | cg-train-step -q -m s2.cgm -e model -o o2.cgm | tee u.bin"
		# 3 steps, and the call's frames: "head" 109, "end" 44,
		# "commit" 39 down, "ready" 38 up
		[ "$(stat -c %s d.bin)" = $((3 * down + 192)) ] ||
			fail "$wire: $(stat -c %s d.bin) bytes down, not 3 x $down + 192"
		[ "$(stat -c %s u.bin)" = $((3 * up + 38)) ] ||
			fail "$wire: $(stat -c %s u.bin) bytes up, not 3 x $up + 38"
	done
}

@test "the printed cut trains to the unsplit run's bytes; cg-convert --layers" {
	cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit model -k 3 -b 8 \
		--micro-batches 3 -o u.cgm
	printf 'a 10 1G 100M\nb 100 1G -\n' > h
	run -0 cg-probe --plan h -m "$D/m.cgm" -b 8
	sed -n 's/^cut: *//p' <<<"$output" > cut.sh
	[ "$(wc -l < cut.sh)" = 2 ] || fail "$(cat cut.sh)"
	grep -q -- '-S 1/2 -L 0:1 ' cut.sh || fail "$(cat cut.sh)"
	run -0 sh cut.sh
	run -0 cg-train-step -q -m stage-1.cgm -d "$D/t-0.cgd" -e model -k 3 \
		-b 8 --micro-batches 3 -o o1.cgm \
		--next "cg-train-step -q -m stage-2.cgm -e model -o o2.cgm"
	run -0 cg-convert -J o2.cgm o1.cgm -o j.cgm
	cmp j.cgm u.cgm || fail "the uneven split's join differs"
	# stages of different cuts do not train or sample together
	cg-convert -S 2/2 "$D/m.cgm" -o even2.cgm
	run -1 --separate-stderr cg-train-step -q -m stage-1.cgm \
		-d "$D/t-0.cgd" -e model -k 1 -b 8 -o o1.cgm \
		--next "cg-train-step -q -m even2.cgm -e model -o o2.cgm"
	[[ $stderr == *"the previous stage ends at layer 1, this one starts at 2: stages of different cuts"* ]] ||
		fail "$stderr"
	run -1 --separate-stderr cg-sample -m stage-1.cgm -c 0 --seed 1 \
		--next "cg-sample --stage -m even2.cgm"
	[[ $stderr == *"the previous stage ends at layer 1, this one starts at 2"* ]] ||
		fail "$stderr"
	# stages that do not meet, a range that is no stage's
	cg-convert -S 2/2 -L 2:4 "$D/m.cgm" -o gap.cgm
	run -1 --separate-stderr cg-convert -J stage-1.cgm gap.cgm -o x.cgm
	[ "$stderr" = "cg-convert: gap.cgm: stage 2 of 2 starts at layer 2, stage 1 ends at 1" ] || fail "$stderr"
	run -1 --separate-stderr cg-convert -S 2/2 -L 0:3 "$D/m.cgm" -o x.cgm
	[[ $stderr == *"stage 2 of 2: layers [0, 3) of 4: not a stage's"* ]] || fail "$stderr"
	run -1 cg-convert -S 1/2 -L 0:4 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -L 0:1 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -S 1/2 -L 1 "$D/m.cgm" -o x.cgm
	run -2 cg-convert -S 1/2 -L 2:1 "$D/m.cgm" -o x.cgm
	[ ! -e x.cgm ] || fail "x.cgm written"
}

@test "hostile or inconsistent hosts files: one line, exit 1" {
	bad() {
		printf "$1" > hosts
		run -1 --separate-stderr cg-probe --plan hosts -m "$D/m.cgm"
		refute_output
		[[ $stderr == *"$2"* ]] || fail "$stderr"
		[ "${#stderr_lines[@]}" = 1 ] || fail "$stderr"
	}
	bad 'a 100 1G 1G\nb 100 1G 1G\n' "host b: the last host has no next"
	bad 'a 100 1G -\nb 100 1G -\n' "host a: no link to the next host"
	bad 'a 100 1G 1G\na 100 1G -\n' "line 2: host a a second time"
	bad 'a 0 1G -\n' "line 1: examples/s"
	bad 'a nan 1G -\n' "line 1: examples/s"
	bad 'a -3 1G -\n' "line 1: examples/s"
	bad 'a 1e400 1G -\n' "line 1: examples/s"
	bad 'a 10 12Q -\n' "line 1: memory"
	bad 'a 10 0 -\n' "line 1: memory: 0 bytes"
	bad 'a 10 1G\n' "line 1: 3 words"
	bad 'a 10 1G - 1 2\n' "line 1: 6 words"
	bad '' "no hosts"
	bad '# none\n\n' "no hosts"
	bad 'a;rm 10 1G -\n' "line 1: host name"
	bad 'a 10 1G 0M\nb 1 1G -\n' "line 1: link '0M'"
	bad 'a 10 1G -5\nb 1 1G -\n' "line 1: link '-5'"
	bad 'a 10 1G 1Gx\nb 1 1G -\n' "line 1: link '1Gx'"
	bad 'a 10 1G 1G 99\nb 1 1G -\n' "line 1: round trip '99'"
	bad "a 10 1G - $(printf '%01100d' 0)\n" "line 1: longer than 1024 bytes"
	bad 'a 10 1G -\0 junk\n' "line 1: a NUL byte"
	# more than 256 hosts
	for i in $(seq 1 257); do echo "h$i 1 1G 1G"; done > many
	run -1 --separate-stderr cg-probe --plan many -m "$D/m.cgm"
	[[ $stderr == *"line 257: more than 256 hosts"* ]] || fail "$stderr"
	# the hosts on standard input, the model a file
	run -0 cg-probe --plan - -m "$D/m.cgm" --json < <(printf 'a 1 1G -\n')
	# a rate probed with a model of another arch
	images fm
	small_cvae fm-0.cgd v.cgm
	printf 'a 1 1G -\n' > one
	run -1 --separate-stderr cg-probe --plan one -m "$D/m.cgm" --probed v.cgm
	[[ $stderr == *"v.cgm"* ]] || fail "$stderr"
	# a model of an arch that has no stages
	run -1 --separate-stderr cg-probe --plan one -m v.cgm
	[[ $stderr == *"cannot be split"* ]] || fail "$stderr"
}
