#!/usr/bin/env bats
#
# 102-cluster-schedule.bats - when cg-cluster synchronises: a schedule
# of the steps a round (--steps K[xN],...) and synchronous rounds first,
# then DiLoCo (--sync-rounds).  Round r runs the steps the schedule gives
# it, in the kind of round it should be (the --log lines say both, and
# the examples each round's update counts agree), the model is the shell
# loop's of the same rounds byte for byte, a run resumed keeps to its
# schedule, and a bad schedule is a usage error.
#
# The hosts are this machine: a stand-in for ssh runs each command here,
# each host in a directory of its own.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images all -n 1
	small_cvae all-0.cgd init.cgm
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	cp "$BATS_FILE_TMPDIR/init.cgm" .
	printf 'one\ntwo\n' >hosts
	printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >here
	chmod +x here
	mkdir -p h/0 h/1
}

# cluster ARGS...: cg-cluster on two hosts that are this machine, batch 4
cluster() {
	cg-cluster -q -f hosts -m init.cgm -o run --ssh "$PWD/here" \
		--remote-dir "$PWD/h/%i" -b 4 --seed 1 --log log "$@" "$FX"
}

@test "cg-cluster: a bad schedule or --sync-rounds is a usage error" {
	local e
	for e in '--steps=' --steps=0 --steps=4x0 --steps=x3 --steps=4x \
		--steps=4,,8 --steps=4, --steps=,4 --steps=4x2x3 --steps=4y2 \
		--steps=-4 --sync-rounds=-1 --sync-rounds=x; do
		run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
			"$e" "$FX"
		echo "$e: $stderr"
		[[ ${stderr_lines[0]} == "cg-cluster: --s"* ]]
	done
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--steps 4x0 "$FX"
	assert_equal "${stderr_lines[0]}" 'cg-cluster: --steps: must be at least 1'
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--steps 4,,8 "$FX"
	assert_equal "${stderr_lines[0]}" "cg-cluster: --steps: '4,,8' has an empty item"
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--mode sync --sync-rounds 2 "$FX"
	[[ ${stderr_lines[0]} == 'cg-cluster: --sync-rounds: with --mode diloco only'* ]]
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--sync-apply-opts '--lr 1' "$FX"
	assert_equal "${stderr_lines[0]}" 'cg-cluster: --sync-apply-opts: with --sync-rounds only'
	[ ! -e run ]
	run -0 cg-cluster --help
	assert_output --partial '-k, --steps SCHEDULE'
	assert_output --partial '--sync-rounds R'
	assert_output --partial '--sync-apply-opts OPTS'
}

@test "cg-cluster --steps K[xN],...: round r runs the steps the schedule gives it" {
	run -0 cluster -k 1x2,3,2 -r 5
	run -0 jq -c '[.round, .mode, .steps, .samples]' log
	# samples: steps x batch 4 x 2 hosts
	assert_output '[1,"diloco",1,8]
[2,"diloco",1,8]
[3,"diloco",3,24]
[4,"diloco",2,16]
[5,"diloco",2,16]'
	# the same rounds by hand: the model, byte for byte
	local r k w
	cg-shard -q -n 2 --seed 1 -o fm "$FX"
	cp init.cgm m.cgm
	for k in 1 1 3 2 2; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta \
				--steps $k --batch 4 --seed 1 --state w$w.state \
				-o d$w.cgg
		done
		cg-reduce d0.cgg d1.cgg |
			cg-apply -m m.cgm --outer nesterov -o m.cgm
	done
	cmp m.cgm run/model.cgm
	# resumed, it keeps to the schedule; another schedule is refused
	run -0 cluster -k 1x2,3,2 -r 6
	run -0 jq -c '[.round, .steps]' log
	assert_line --index 5 '[6,2]'
	run -1 --separate-stderr cluster -k 2 -r 7
	[[ $stderr == 'cg-cluster: run was made with other options'* ]]
}

@test "cg-cluster --sync-rounds R: R synchronous rounds, then DiLoCo; the shell loop's model" {
	run -0 cluster --sync-rounds 2 --sync-apply-opts '--lr 3e-3' \
		-k 1x2,3 -r 4 -A '--outer-lr 0.5'
	run -0 jq -c '[.round, .mode, .steps, .samples]' log
	assert_output '[1,"sync",1,8]
[2,"sync",1,8]
[3,"diloco",3,24]
[4,"diloco",3,24]'
	local r w
	cg-shard -q -n 2 --seed 1 -o fm "$FX"
	cp init.cgm m.cgm
	for r in 1 2; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --batch 4 --seed 1 \
				-o g$w.cgg
		done
		cg-reduce g0.cgg g1.cgg | cg-apply -m m.cgm --lr 3e-3 -o m.cgm
	done
	for r in 3 4; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta \
				--steps 3 --batch 4 --seed 1 --state w$w.state \
				-o d$w.cgg
		done
		cg-reduce d0.cgg d1.cgg | cg-apply -m m.cgm --outer nesterov \
			--outer-lr 0.5 -o m.cgm
	done
	cmp m.cgm run/model.cgm
}

@test "cg-cluster --sync-rounds R: one synchronous step a round, then 50 local steps, unless --steps says" {
	run -0 cluster --sync-rounds 2 -r 3
	run -0 jq -c '[.round, .mode, .steps]' log
	assert_output '[1,"sync",1]
[2,"sync",1]
[3,"diloco",50]'
	grep -qx 'mode=diloco steps=1x2,50 .* sync-rounds=2 sync-apply-opts=' \
		run/options
}

@test "cg-cluster --sync-rounds with --down-codec: the whole model after the synchronous rounds, changes after" {
	run -0 cluster --sync-rounds 1 -k 1x1,2 -r 3 --down-codec q8
	run -0 jq -c '[.round, .mode, .steps]' log
	assert_output '[1,"sync",1]
[2,"diloco",2]
[3,"diloco",2]'
	# rounds 1 and 2 sent the whole model, round 3 its change
	local b1 b2 b3
	read -r b1 b2 b3 < <(jq -r .bytes_down log | paste -sd' ')
	echo "bytes down: $b1 $b2 $b3"
	[ "$b1" -eq "$b2" ]
	[ "$b3" -lt "$b2" ]
}
