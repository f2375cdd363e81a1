#!/usr/bin/env bats
#
# 114-overlap.bats - cg-cluster --overlap: each host computes round r + 1
# from the model of round r - 1 while round r's updates come up and the
# model they make goes down.  The model is the shell loop's of the same
# schedule byte for byte, a run cut into calls or stopped mid-round and
# run again gives it too, and what it cannot do is refused.
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
	# the shell loop of 5 overlapped rounds of 2 steps on two workers:
	# round u trains from the model of round u - 2 (the first model
	# for rounds 1 and 2), its mean delta goes on the model of round
	# u - 1; m.N is the model of round N
	local u w
	cg-shard -q -n 2 --seed 1 -o fm "$FX"
	cp init.cgm m.0
	for u in 1 2 3 4 5; do
		for w in 0 1; do
			cg-train-step -q -m m.$((u > 2 ? u - 2 : 0)) -d fm-$w.cgd \
				--emit delta --steps 2 --batch 4 --seed 1 \
				--state w$w.state -o d$u.$w.cgg
		done
		cg-reduce --model m.$((u - 1)) d$u.0.cgg d$u.1.cgg |
			cg-apply -m m.$((u - 1)) --outer nesterov -o m.$u
	done
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

# cluster ARGS...: cg-cluster --overlap on two hosts that are this
# machine, 2 steps of batch 4 a round
cluster() {
	cg-cluster -q -f hosts -m init.cgm -o run --ssh "$PWD/here" \
		--remote-dir "$PWD/h/%i" -b 4 -k 2 --seed 1 --log log --overlap \
		"$@" "$FX"
}

@test "cg-cluster --overlap: the shell loop's model, byte for byte" {
	run -0 cluster -r 3
	cmp "$BATS_FILE_TMPDIR/m.3" run/model.cgm
	run -0 jq -c '[.round, .published, .steps, .samples, .hosts]' log
	assert_output '[1,1,2,16,2]
[2,2,2,16,2]
[3,3,2,16,2]'
	# round 4 is computed, its update kept on the hosts
	[ "$(cat run/computed)" = 4 ]
	[ -f h/0/o.delta.4 ] && [ -f h/1/o.delta.4 ]
	# the next call goes on from there
	run -0 cluster -r 5
	cmp "$BATS_FILE_TMPDIR/m.5" run/model.cgm
	run -0 jq -c .round log
	assert_output "$(seq 5)"
	run -0 cluster -r 5
	cmp "$BATS_FILE_TMPDIR/m.5" run/model.cgm
}

@test "cg-cluster --overlap: rounds stopped and run again give the same model" {
	# round 3 cannot be computed on the second host: round 2 is
	# published all the same, and the call fails
	cat >here <<'SH'
#!/bin/sh
shift
case $* in
*/h/1*o.delta.3*) [ -e "${0%/*}/fail" ] && exit 5 ;;
esac
exec sh -c "$*"
SH
	touch fail
	run -1 cluster -r 4
	[[ $output == *'round 3: not computed on every host (round 2 published)'* ]]
	rm fail
	run -0 cluster -r 4
	cmp "$BATS_FILE_TMPDIR/m.4" run/model.cgm
	# stopped before the round's model goes down, and run again
	cat >here <<'SH'
#!/bin/sh
shift
case $* in
*o.model.5.tmp*) [ -e "${0%/*}/fail" ] && exit 5 ;;
esac
exec sh -c "$*"
SH
	touch fail
	run -1 cluster -r 5
	[[ $output == *'the model of step 5 is not on every host'* ]]
	rm fail
	run -0 cluster -r 5
	cmp "$BATS_FILE_TMPDIR/m.5" run/model.cgm
}

@test "cg-cluster --overlap: what it cannot do is refused" {
	local e
	touch key
	for e in '--mode sync' '--sync-rounds 1' '--quorum 1' \
		'--down-codec q4' '--sign key'; do
		run -2 --separate-stderr cluster $e
		echo "$e: $stderr"
		[[ ${stderr_lines[0]} == "cg-cluster: --overlap: "* ]]
	done
	run -2 --separate-stderr cluster --mode sync
	assert_equal "${stderr_lines[0]}" 'cg-cluster: --overlap: with --mode diloco only'
	run -2 --separate-stderr cluster --sync-rounds 1
	assert_equal "${stderr_lines[0]}" 'cg-cluster: --overlap: not with --sync-rounds'
	run -2 --separate-stderr cg-cluster --overlap=1 -f hosts -m init.cgm \
		-o run "$FX"
	assert_equal "${stderr_lines[0]}" "cg-cluster: option '--overlap' takes no argument"
	[ ! -e run ]
	# a slot: every line needs its host
	printf 'one\n-\n' >hosts
	run -1 --separate-stderr cluster
	assert_equal "$stderr" 'cg-cluster: hosts: a slot (-): --overlap needs a host on every line'
	# a run made with --overlap is not gone on without it, nor with
	# another host
	printf 'one\ntwo\n' >hosts
	run -0 cluster -r 1
	run -1 --separate-stderr cg-cluster -q -f hosts -m init.cgm -o run \
		--ssh "$PWD/here" --remote-dir "$PWD/h/%i" -b 4 -k 2 --seed 1 \
		-r 2 "$FX"
	[[ $stderr == 'cg-cluster: run was made with other options'* ]]
	printf 'one\nthree\n' >hosts
	run -1 --separate-stderr cluster -r 2
	[[ $stderr == 'cg-cluster: run was made for other hosts (see run/hosts): with --overlap'* ]]
	run -0 cg-cluster --help
	assert_output --partial '--overlap'
}
