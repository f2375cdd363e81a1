#!/usr/bin/env bats
#
# 080-cluster.bats - cg-cluster trains on real hosts over ssh: three network
# namespaces with an sshd each (tests/hosts.sh), every byte between them
# through ssh, each host in its own directory.  Its DiLoCo and synchronous
# runs give the model, byte for byte, that the shell loop of the README
# gives in one directory with the same options and seed; the veths carried
# at least the shards, models and updates; a host that cannot be reached,
# or a worker that fails, fails the run with one line naming it and the
# last model published stays; a run cut short resumes where it stopped.
#
# The tests that need hosts skip where network namespaces cannot be made
# (not root, no ip, no sshd).  The programs come from PATH, cg-cluster from
# the build tree beside them; the hosts run them from the same directory.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers
. "$BATS_TEST_DIRNAME/hosts.sh"

FX=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images all -n 1
	model cvae all-0.cgd init.cgm --hidden 32 --layers 1 --latent 4
	# a token bucket on each link, so that the path tc takes is tested
	hosts_setup_file 3 100mbit
}

teardown_file() {
	hosts_down
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	cp "$BATS_FILE_TMPDIR/init.cgm" .
	# the hosts run the programs of this build, in this environment (the
	# thread count and BLAS kernels the bytes depend on)
	PREFIX=$(hosts_prefix)
}

# needs_hosts: skip this test where there are none
needs_hosts() {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	[ -n "${HOSTS_DIR:-}" ] || skip "no test hosts"
	# each test starts with empty host directories
	rm -rf "$HOSTS_DIR"/host[0-9]*/*
}

# cluster ARGS...: cg-cluster on the test hosts, with the first model
# init.cgm, its directory run/
cluster() {
	cg-cluster -f hosts -m init.cgm -o run --ssh "$HOSTS_SSH" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" "$@"
}

# local_diloco ROUNDS STEPS BATCH WEIGHTS: the README's DiLoCo loop on
# the same shards in this directory, into m.cgm; d*.cgg are the last
# round's deltas.
local_diloco() {
	local r w
	cg-shard -q -n 3 --seed 1 ${4:+--weights "$4"} -o fm "$FX"
	cp init.cgm m.cgm
	rm -f w*.state
	for r in $(seq "$1"); do
		for w in 0 1 2; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta \
				--steps "$2" --batch "$3" --seed 1 \
				--state w$w.state -o d$w.cgg &
		done
		wait
		cg-reduce d0.cgg d1.cgg d2.cgg |
			cg-apply -m m.cgm --outer nesterov -o m.cgm
	done
}

@test "cg-cluster: --help, --version, usage errors exit 2" {
	run -0 cg-cluster --help
	assert_line --index 0 --partial 'usage: cg-cluster -f HOSTS -m MODEL -o DIR'
	run -0 cg-cluster -V
	assert_output --regexp '^cg-cluster \(cg\) [0-9.]+$'
	run -2 --separate-stderr cg-cluster --bogus
	[ "${stderr_lines[0]}" = "cg-cluster: unknown option '--bogus'" ]
	run -2 --separate-stderr cg-cluster -m init.cgm -o run
	[ "${stderr_lines[0]}" = 'cg-cluster: no host file (-f)' ]
	run -2 --separate-stderr cg-cluster -f hosts -o run
	[ "${stderr_lines[0]}" = 'cg-cluster: no model (-m)' ]
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm
	[ "${stderr_lines[0]}" = 'cg-cluster: no directory (-o)' ]
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run -r 0
	[ "${stderr_lines[0]}" = 'cg-cluster: --rounds: must be at least 1' ]
	run -2 cg-cluster -f hosts -m init.cgm -o run --steps 2x
	run -2 cg-cluster -f hosts -m init.cgm -o run --batch=-1
	run -2 cg-cluster -f hosts -m init.cgm -o run --mode async
	run -2 cg-cluster -f hosts -m init.cgm -o run --rounds
	[ ! -e run ]
	# no data, and nothing sharded yet
	printf 'host0\n' >hosts
	run -2 --separate-stderr cg-cluster -f hosts -m init.cgm -o run
	[ "${stderr_lines[0]}" = 'cg-cluster: no DATA to shard into run' ]
	[ ! -e run ]
}

@test "cg-cluster: a bad host file is one line naming it, exit 1" {
	run -1 --separate-stderr cg-cluster -f nope -m init.cgm -o run "$FX"
	[ "$stderr" = 'cg-cluster: nope: cannot read' ]
	printf '# only a comment\n\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run "$FX"
	[ "$stderr" = 'cg-cluster: hosts: no hosts' ]
	printf 'a 1\nb x\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run "$FX"
	[ "$stderr" = 'cg-cluster: hosts: line 2: weight "x" is not a positive number' ]
	printf 'a 1 2\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run "$FX"
	[ "$stderr" = 'cg-cluster: hosts: line 1: more than HOST [WEIGHT]' ]
	printf 'a\nb\na\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run "$FX"
	[[ $stderr == 'cg-cluster: hosts: a is listed twice '* ]]
	[ "${#stderr_lines[@]}" -eq 1 ]
}

@test "cg-cluster: a set-up that failed is taken over by the next command" {
	printf 'host0 1\nhost1 3\n' >hosts
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--strategy bogus "$FX"
	[ "${stderr_lines[-1]}" = 'cg-cluster: cg-shard failed: no shards' ]
	# no host is reached here: an ssh that fails
	run -1 --separate-stderr cg-cluster -f hosts -m init.cgm -o run \
		--ssh false "$FX"
	[ "$stderr" = $'cg-cluster: host0: cannot send its shard: exit status 1\ncg-cluster: host1: cannot send its shard: exit status 1' ]
	[ -e run/shards.done ] && [ ! -e run/pushed.0 ]
	cmp init.cgm run/model.cgm
	run -0 cat run/hosts
	assert_output $'host0 1\nhost1 3'
}

@test "cg-cluster: DiLoCo on 3 hosts over ssh is the shell loop in one directory, byte for byte" {
	needs_hosts
	local i rx tx want_rx want_tx
	printf '# weighted: host0 takes half\nhost0 2\nhost1\t1\nhost2 # the last\n' >hosts
	run -0 --separate-stderr cluster -q -r 3 -k 5 -b 8 --seed 1 "$FX"
	[ -z "$stderr" ]
	local_diloco 3 5 8 2,1,1
	cmp m.cgm run/model.cgm
	run -0 cg-inspect --verify run/model.cgm
	[ "$(cg-inspect --no-stats run/model.cgm | sed -n 's/^step: *//p')" = 3 ]
	# the shards were split by weight and sent whole
	for i in 0 1 2; do
		cmp fm-$i.cgd run/shard-$i.cgd
		cmp fm-$i.cgd "$HOSTS_DIR/host$i/shard.cgd"
	done
	[ "$(stat -c %s fm-0.cgd)" -gt "$(stat -c %s fm-1.cgd)" ]
	# every byte between the hosts went through their links: down, the
	# shard and three models (each at least as large as the first), up,
	# three deltas
	for i in 0 1 2; do
		read -r rx tx < <(hosts_bytes $i)
		want_tx=$(($(stat -c %s fm-$i.cgd) + 3 * $(stat -c %s init.cgm)))
		want_rx=$((3 * $(stat -c %s d$i.cgg)))
		echo "host$i: $tx bytes down (>= $want_tx), $rx up (>= $want_rx)"
		[ "$tx" -ge "$want_tx" ] && [ "$rx" -ge "$want_rx" ]
	done
	# each host keeps the state of the last model and the one before
	run -0 ls "$HOSTS_DIR/host1"
	assert_output $'shard.cgd\nw.state.2\nw.state.3'
}

@test "cg-cluster: synchronous rounds over ssh are the shell loop, byte for byte" {
	needs_hosts
	local r w
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 --separate-stderr cluster --mode sync -r 3 -b 8 --seed 1 \
		-A '--lr 3e-3' --strategy round-robin "$FX"
	assert_equal "${#stderr_lines[@]}" 4
	[[ ${stderr_lines[0]} == 'cg-cluster: 3 shards sent ('*' bytes)' ]]
	[[ ${stderr_lines[3]} =~ ^cg-cluster:\ round\ 3/3:\ step\ 3\ published,\ loss\ [0-9.]+, ]]
	cg-shard -q -n 3 --seed 1 --strategy round-robin -o fm "$FX"
	cp init.cgm m.cgm
	for r in 1 2 3; do
		for w in 0 1 2; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --batch 8 \
				--seed 1 -o g$w.cgg &
		done
		wait
		cg-reduce g0.cgg g1.cgg g2.cgg | cg-apply -m m.cgm --lr 3e-3 -o m.cgm
	done
	cmp m.cgm run/model.cgm
	# what went down is the weights alone, the moments kept here
	run -0 cg-inspect --no-stats run/down.cgm
	refute_output --partial opt.
	[ "$(cg-inspect --no-stats run/down.cgm | sed -n 's/^step: *//p')" = 2 ]
	[ "$(stat -c %s run/down.cgm)" -lt "$(stat -c %s m.cgm)" ]
	# no state on the hosts: a gradient needs none
	run -0 ls "$HOSTS_DIR/host0"
	assert_output shard.cgd
}

@test "cg-cluster -T '--time-limit S': each host stops in time, weighed by what it did" {
	needs_hosts
	local t0 n
	printf 'host0\nhost1\nhost2\n' >hosts
	t0=$SECONDS
	# a million steps asked, half a second given
	run -0 cluster -q -r 2 -k 1000000 -b 8 -T '--time-limit 0.5' "$FX"
	echo "2 rounds in $((SECONDS - t0)) s"
	[ $((SECONDS - t0)) -lt 30 ]
	run -0 cg-inspect --verify run/model.cgm
	n=$(cg-inspect --no-stats run/model.cgm | sed -n 's/^samples: *//p')
	echo "$n examples"
	[ "$n" -ge $((2 * 3 * 8)) ] && [ "$n" -lt $((2 * 3 * 1000000 * 8)) ]
	[ $((n % 8)) -eq 0 ]
}

@test "cg-cluster: run again, it resumes after the last round published" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 cluster -q -r 1 -k 3 -b 8 --seed 1 "$FX"
	# the same command with more rounds: no shard is sent again
	run -0 --separate-stderr cluster -r 3 -k 3 -b 8 --seed 1 "$FX"
	assert_equal "${#stderr_lines[@]}" 2
	[[ ${stderr_lines[0]} == 'cg-cluster: round 2/3: step 2 published, '* ]]
	local_diloco 3 3 8
	cmp m.cgm run/model.cgm
	run -0 --separate-stderr cluster -r 3 -k 3 -b 8 --seed 1 "$FX"
	[ "$stderr" = 'cg-cluster: run/model.cgm: 3 rounds done already' ]
	# another host file or other options do not mix with this run's
	printf 'host0\nhost1\n' >hosts
	run -1 --separate-stderr cluster -r 4 -k 3 -b 8 --seed 1 "$FX"
	[[ $stderr == 'cg-cluster: run was made for other hosts '* ]]
	printf 'host0\nhost1\nhost2\n' >hosts
	run -1 --separate-stderr cluster -r 4 -k 4 -b 8 --seed 1 "$FX"
	[[ $stderr == 'cg-cluster: run was made with other options '* ]]
	cmp m.cgm run/model.cgm
}

@test "cg-cluster --push-only: the shards go ahead, no round; the next run starts with its first round" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 --separate-stderr cluster --push-only -k 3 -b 8 --seed 1 "$FX"
	[[ $stderr == 'cg-cluster: 3 shards sent ('*' bytes)' ]]
	cmp init.cgm run/model.cgm
	cmp run/shard-1.cgd "$HOSTS_DIR/host1/shard.cgd"
	run -0 --separate-stderr cluster -r 2 -k 3 -b 8 --seed 1 "$FX"
	assert_equal "${#stderr_lines[@]}" 2
	[[ ${stderr_lines[0]} == 'cg-cluster: round 1/2: step 1 published, '* ]]
	local_diloco 2 3 8
	cmp m.cgm run/model.cgm
}

@test "cg-cluster --sign --trust: every file signed, each side reads only what its trust list names" {
	needs_hosts
	local w
	cg-key -f -C coord -o coord.key
	cg-key -f -C stranger -o x.key
	cp coord.key.pub trusted.pub
	# a key a host, in its directory (a key is one worker to cg-reduce)
	for w in 0 1; do
		cg-key -f -C worker$w -o "$HOSTS_DIR/host$w/w.key"
		cat "$HOSTS_DIR/host$w/w.key.pub" >>trusted.pub
	done
	printf 'host0\nhost1\n' >hosts
	# the first model, signed as cg-init --sign would
	cg-quantize -q --sign coord.key init.cgm f32 -o init.cgm
	# the hosts sign what they send back (their states too, which they
	# read again: their own key is in their list)
	local t="--sign w.key --trust $PWD/trusted.pub"
	run -0 --separate-stderr cluster -q -r 2 -k 3 -b 8 --seed 1 \
		--sign coord.key --trust trusted.pub -T "$t" "$FX"
	[ -z "$stderr" ]
	run -0 cg-inspect --verify --trust coord.key.pub run/model.cgm \
		run/down.cgm run/shard-0.cgd "$HOSTS_DIR/host1/shard.cgd"
	# the same model as an unsigned run's, but for its signature
	mv run signed
	run -0 cluster -q -r 2 -k 3 -b 8 --seed 1 "$FX"
	[ "$(cg-inspect --no-stats signed/model.cgm | grep '^params:')" = \
		"$(cg-inspect --no-stats run/model.cgm | grep '^params:')" ]
	# a worker whose key the coordinator does not trust: refused, one
	# line, nothing published
	rm -rf run "$HOSTS_DIR"/host[0-9]*/*
	run -1 --separate-stderr cluster -q -r 1 -k 3 -b 8 --seed 1 \
		--sign coord.key --trust trusted.pub \
		-T "--sign $PWD/x.key --trust $PWD/trusted.pub" "$FX"
	[[ $stderr == *"not in the trust list"* ]]
	cmp init.cgm run/model.cgm
	# hosts that trust only another key refuse the coordinator's model
	rm -rf run "$HOSTS_DIR"/host[0-9]*/*
	run -1 --separate-stderr cluster -q -r 1 -k 3 -b 8 --seed 1 \
		--sign coord.key -T "--trust $PWD/x.key.pub" "$FX"
	[[ $stderr == *"host0"*"not in the trust list"* ]]
	cmp init.cgm run/model.cgm
}

@test "cg-cluster: stopped in a round, run again it ends with the model of a run never stopped" {
	needs_hosts
	local pid i st=0 n
	printf 'host0\nhost1\nhost2\n' >hosts
	# cg-cluster itself in the background, not a shell running it
	cg-cluster -f hosts -m init.cgm -o run --ssh "$HOSTS_SSH" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$PREFIX" \
		-q -r 3 -k 5 -b 8 --seed 1 "$FX" 3>&- &
	pid=$!
	# stopped once round 1 is published: in round 2, most likely
	for i in $(seq 400); do
		n=$(cg-inspect --no-stats run/model.cgm 2>/dev/null |
			sed -n 's/^step: *//p')
		[ "${n:-0}" -lt 1 ] || break
		sleep 0.05
	done
	kill -TERM "$pid"
	wait "$pid" || st=$?
	n=$(cg-inspect --no-stats run/model.cgm | sed -n 's/^step: *//p')
	echo "stopped with status $st at step $n"
	[ "$st" -eq 143 ] || [ "$st" -eq 0 ]
	[ ! -e run/round ]
	run -0 cluster -q -r 3 -k 5 -b 8 --seed 1 "$FX"
	local_diloco 3 5 8
	cmp m.cgm run/model.cgm
}

@test "cg-cluster: a host that cannot be reached fails the run, one line, nothing published" {
	needs_hosts
	printf 'host0\nnosuchhost.invalid\nhost2\n' >hosts
	run -1 --separate-stderr cluster -r 2 -k 2 -b 8 "$FX"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-cluster: nosuchhost.invalid: cannot send its shard: ssh: '* ]]
	cmp init.cgm run/model.cgm
	run -0 ls run
	refute_output --partial tmp
	refute_output --partial round
}

@test "cg-cluster: a worker that fails fails the round, naming its host; the last model stays" {
	needs_hosts
	printf 'host0\nhost1\nhost2\n' >hosts
	run -0 cluster -q -r 1 -k 2 -b 8 "$FX"
	cp run/model.cgm one.cgm
	# host1 loses its state
	rm "$HOSTS_DIR/host1/w.state.1"
	run -1 --separate-stderr cluster -q -r 2 -k 2 -b 8 "$FX"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-cluster: host1: round 2: cp: "*"w.state.1"* ]]
	cmp one.cgm run/model.cgm
	[ ! -e run/round ]
}
