#!/usr/bin/env bats
#
# 123-stage-keep.bats - a pipeline stage keeps the activations of the
# micro-batches in flight between their forward and backward passes (no
# forward pass run again) unless --checkpoint-activations or its
# --max-memory says otherwise: under GPipe and 1F1B, as 2 and 3 stages,
# a model or a grad, both give the unsplit run's bytes; --max-memory
# below what kept activations take runs the forward passes again, below
# that it is refused with one line and nothing written; the bytes a
# stage holds itself to are those cg-probe --plan counts for it.  The
# programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1
	small_cgpt t-0.cgd m.cgm --layers 4
	cg-train-step -q -m m.cgm -d t-0.cgd --emit model -k 3 -b 8 \
		--micro-batches 3 -o u.cgm
	stages m.cgm 2 3
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# run N EMIT STEPS TAG [options of every stage]: N stages writing
# TAG-I.cgm and logging to TAG-I.log, 8 examples in 3 micro-batches
run_stages() {
	local n=$1 emit=$2 k=$3 tag=$4
	shift 4
	local i=$n opts
	opts=$(printf '%q ' "$@")
	local cmd="cg-train-step -q -m $D/s$n-$n.cgm -e $emit -o $tag-$n.cgm --log $tag-$n.log $opts"
	while [ "$i" -gt 2 ]; do
		i=$((i - 1))
		cmd="cg-train-step -q -m $D/s$i-$n.cgm -e $emit -o $tag-$i.cgm --log $tag-$i.log $opts --next $(printf '%q' "$cmd")"
	done
	cg-train-step -q -m "$D/s1-$n.cgm" -d "$D/t-0.cgd" -e "$emit" -k "$k" \
		-b 8 --micro-batches 3 -o "$tag-1.cgm" --log "$tag-1.log" \
		"$@" --next "$cmd"
}

# the "checkpoint" of each stage's log, as "false false true"
checkpoints() {
	local out=()
	for i in $(seq 1 "$2"); do
		out+=("$(jq -r .checkpoint "$1-$i.log")")
	done
	echo "${out[*]}"
}

@test "kept activations and forward passes run again: the same bytes, the unsplit run's" {
	for n in 2 3; do
		for sched in gpipe 1f1b; do
			rm -f k-* r-* j.cgm
			run -0 run_stages "$n" model 3 k --pipeline "$sched"
			refute_output
			run -0 run_stages "$n" model 3 r --pipeline "$sched" \
				--checkpoint-activations
			refute_output
			if [ "$n" = 2 ]; then
				[ "$(checkpoints k 2)" = "false false" ] &&
					[ "$(checkpoints r 2)" = "true false" ] ||
					fail "$n $sched: $(checkpoints k 2), $(checkpoints r 2)"
			else
				[ "$(checkpoints k 3)" = "false false false" ] &&
					[ "$(checkpoints r 3)" = "true true false" ] ||
					fail "$n $sched: $(checkpoints k 3), $(checkpoints r 3)"
			fi
			for i in $(seq 1 $n); do
				cmp "k-$i.cgm" "r-$i.cgm" ||
					fail "$n stages, $sched: stage $i differs"
			done
			run -0 cg-convert -J k-*.cgm -o j.cgm
			cmp j.cgm "$D/u.cgm" ||
				fail "$n stages, $sched: not the unsplit run's bytes"
		done
	done
}

@test "a grad: the same bytes kept or not, under both schedules" {
	for sched in gpipe 1f1b; do
		rm -f k-* r-*
		run -0 run_stages 3 grad 2 k --pipeline "$sched"
		run -0 run_stages 3 grad 2 r --pipeline "$sched" \
			--checkpoint-activations
		[ "$(checkpoints r 3)" = "true true false" ] ||
			fail "$(checkpoints r 3)"
		for i in 1 2 3; do
			cmp "k-$i.cgm" "r-$i.cgm" || fail "$sched: stage $i differs"
		done
	done
}

@test "--max-memory: below the kept activations the forward passes run again; below that, refused" {
	for sched in gpipe 1f1b; do
		rm -f k-* r-* x-* y-*
		run -0 run_stages 2 model 3 k --pipeline "$sched"
		run -0 run_stages 2 model 3 r --pipeline "$sched" \
			--checkpoint-activations
		kept=$(jq .memory_plan k-1.log)
		least=$(jq .memory_plan r-1.log)
		[ "$least" -lt "$kept" ] || fail "$sched: $least, $kept"
		# exactly what kept activations take: kept
		run -0 run_stages 2 model 3 x --pipeline "$sched" \
			--max-memory "$kept"
		[ "$(checkpoints x 2)" = "false false" ] || fail "$(checkpoints x 2)"
		rm -f x-*
		# a byte less: run again, the same bytes
		run -0 run_stages 2 model 3 x --pipeline "$sched" \
			--max-memory $((kept - 1))
		refute_output
		[ "$(checkpoints x 2)" = "true false" ] || fail "$(checkpoints x 2)"
		[ "$(jq .memory_plan x-1.log)" = "$least" ] ||
			fail "$(jq .memory_plan x-1.log), not $least"
		cmp x-1.cgm k-1.cgm && cmp x-2.cgm k-2.cgm ||
			fail "$sched: --max-memory changed the bytes"
		# below even that: the first stage refuses in one line before
		# the next one starts, exit 1, nothing written
		run -1 --separate-stderr run_stages 2 model 3 y \
			--pipeline "$sched" --max-memory $((least - 1))
		refute_output
		[ "$stderr" = "cg-train-step: stage 1 of 2: --max-memory $((least - 1)): the stage takes $least bytes at the least (fewer layers, or more micro-batches)" ] ||
			fail "$stderr"
		[ ! -e y-1.cgm ] && [ ! -e y-2.cgm ] && [ ! -e y-2.log ] ||
			fail "an output written"
	done
	# a later stage's own budget, which it checks once it has heard
	# the first's options: its line first, then its neighbour's about
	# the stream it left
	last=$(jq .memory_plan k-2.log)
	run -1 --separate-stderr cg-train-step -q -m "$D/s1-2.cgm" \
		-d "$D/t-0.cgd" -e model -k 1 -b 8 --micro-batches 3 -o z1.cgm \
		--next "cg-train-step -q -m $D/s2-2.cgm -e model -o z2.cgm --max-memory $((last - 1))"
	[ "${stderr%%$'\n'*}" = "cg-train-step: stage 2 of 2: --max-memory $((last - 1)): the stage takes $last bytes at the least (fewer layers, or more micro-batches)" ] ||
		fail "$stderr"
	[ ! -e z1.cgm ] && [ ! -e z2.cgm ] || fail "an output written"
}

@test "a stage holds itself to the bytes cg-probe --plan counts for it" {
	printf 'a 100 1G 100M\nb 100 1G -\n' > h
	for sched in gpipe 1f1b; do
		for ck in "" --checkpoint-activations; do
			run -0 cg-probe --plan h -m "$D/m.cgm" -b 8 \
				--micro-batches 3 --pipeline "$sched" $ck --json
			plan=$output
			a=$(jq -r '.stages[0].layers | "\(.[0]):\(.[1])"' <<<"$plan")
			b=$(jq -r '.stages[1].layers | "\(.[0]):\(.[1])"' <<<"$plan")
			cg-convert -S 1/2 -L "$a" "$D/m.cgm" -o p1.cgm
			cg-convert -S 2/2 -L "$b" "$D/m.cgm" -o p2.cgm
			rm -f p*.log
			run -0 cg-train-step -q -m p1.cgm -d "$D/t-0.cgd" -e model \
				-k 1 -b 8 --micro-batches 3 --pipeline "$sched" \
				$ck -o o1.cgm --log p1.log \
				--next "cg-train-step -q -m p2.cgm -e model -o o2.cgm --log p2.log $ck"
			for i in 0 1; do
				want=$(jq ".stages[$i].peak_bytes" <<<"$plan")
				got=$(jq .memory_plan "p$((i + 1)).log")
				[ "$want" = "$got" ] ||
					fail "$sched $ck: stage $((i + 1)): plan $want, stage $got"
			done
			[ "$(jq .stages[0].kept_activations <<<"$plan")" = \
				"$([ -z "$ck" ] && echo true || echo false)" ] ||
				fail "$plan"
		done
	done
}

@test "--help, the options of a stage" {
	run -0 cg-probe --help
	assert_output --partial "--checkpoint-activations"
	run -2 --separate-stderr cg-probe -m "$D/m.cgm" -d "$D/t-0.cgd" \
		--checkpoint-activations
	[[ $stderr == *"--plan's"* ]] || fail "$stderr"
}
