#!/usr/bin/env bats
#
# 101-relay.bats - the test hosts' links with a delay and a loss
# (tests/hosts.sh's RTT and LOSS, made by tests/unit/linkrelay.c, as the
# kernel has no netem): a TCP round trip between two hosts takes at least
# the RTT asked for, a connection from the machine to a host at least
# half of it (it crosses one link of two), bytes cross the lossy links
# intact both ways through ssh, the losses are real (TCP retransmitted),
# and the veths still count what crossed them.  Lower bounds only: a
# loaded machine adds its own latency.  Under set -e, hosts_up removes a
# dead run's leftovers though each removal may find its object gone, and
# hosts_down may be called twice.
#
# The tests that need hosts skip where network namespaces cannot be made
# (not root, no ip, no sshd).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
. "$BATS_TEST_DIRNAME/hosts.sh"

RTT=100

setup_file() {
	# 2% of the frames lost each way on each link
	hosts_setup_file 2 "" "$RTT" 0.02
}

teardown_file() {
	hosts_down
}

setup() {
	cd "$BATS_TEST_TMPDIR"
}

needs_hosts() {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	[ -n "${HOSTS_DIR:-}" ] || skip "no test hosts"
}

# in_host I CMD...: CMD in host I's network namespace
in_host() {
	local i=$1
	shift
	ip netns exec "cgn${HOSTS_PREFIX}h$i" "$@"
}

# connect_ms ADDR: milliseconds a TCP connection to ADDR's port 22 takes
# to open (a SYN there and its answer back: one round trip), from here
connect_ms() {
	local t0 t1
	t0=$(date +%s%N)
	exec 3<>"/dev/tcp/$1/22" || return 1
	t1=$(date +%s%N)
	exec 3>&-
	echo $(((t1 - t0) / 1000000))
}

@test "linkrelay: usage errors exit 2, a missing interface 1" {
	run -2 --separate-stderr linkrelay
	assert_output ''
	[[ $stderr == "usage: linkrelay "* ]]
	run -2 --separate-stderr linkrelay -x a b
	run -2 --separate-stderr linkrelay -d -1 a b
	assert_equal "$stderr" "linkrelay: -d: '-1' is out of range"
	run -2 --separate-stderr linkrelay -l 1.5 a b
	assert_equal "$stderr" "linkrelay: -l: '1.5' is out of range"
	run -2 --separate-stderr linkrelay -d 5ms a b
	run -0 linkrelay -h
	assert_output --partial "usage: linkrelay"
	run -1 --separate-stderr linkrelay cg-no-such-if0 cg-no-such-if1
	assert_equal "$stderr" "linkrelay: cg-no-such-if0: no such interface"
}

@test "hosts_up: a RTT that is not a whole number of ms is refused" {
	run -1 hosts_up 1 "" 12.5
	assert_output "hosts_up: RTT '12.5' is not a whole number of ms"
}

@test "hosts_up and hosts_down under set -e: a dead run's two hosts and their one bridge removed" {
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	# above any pid_max (2^22): a run whose PID is surely gone
	local dead=$((4200000 + $$)) i
	for i in 0 1; do
		ip netns add "cgn${dead}h$i"
		ip link add "cgv${dead}h$i" type veth peer name "cgp${dead}h$i" \
			netns "cgn${dead}h$i"
	done
	ip link add "cgb$dead" type bridge
	ip link set "cgv${dead}h0" master "cgb$dead"
	ip link set "cgv${dead}h1" master "cgb$dead"
	# the first host's removal takes the bridge: the second finds it gone
	# (stderr apart: a login's shell start-up on the host may talk there)
	run -0 --separate-stderr bash -c 'set -e; . "$1"; hosts_up 1; $HOSTS_SSH host0 true
		hosts_down; hosts_down; echo up and down' _ \
		"$BATS_TEST_DIRNAME/hosts.sh"
	assert_output 'up and down'
	run ip netns list
	refute_output --partial "cgn${dead}h"
	run ip link show "cgb$dead"
	[ "$status" -ne 0 ]
	# this file's hosts, whose run lives, are left alone
	[ -z "${HOSTS_DIR:-}" ] || ip netns pids "cgn${HOSTS_PREFIX}h1" >/dev/null
}

@test "a round trip between two hosts takes at least the RTT" {
	needs_hosts
	local k ms
	# a few tries: a lost SYN only adds to the time
	for k in 1 2 3; do
		ms=$(in_host 0 bash -c "$(declare -f connect_ms); connect_ms $HOSTS_NET.2")
		echo "host0 -> host1: $ms ms (RTT $RTT)"
		[ "$ms" -ge "$RTT" ]
		# from the machine, over host0's link alone: half
		ms=$(connect_ms "$HOSTS_NET.1")
		echo "machine -> host0: $ms ms"
		[ "$ms" -ge $((RTT / 2)) ]
	done
}

@test "bytes cross the lossy links intact through ssh, both ways" {
	needs_hosts
	local r0 r1 rx tx
	head -c 262144 /dev/urandom >up
	read -r r0 < <(in_host 0 awk '/^Tcp:/ && n++ { print $13 }' /proc/net/snmp)
	read -r rx tx < <(hosts_bytes 1)
	# host0 to host1 (the file lands in host1's directory), then back
	in_host 0 $HOSTS_SSH host1 "cat > '$HOSTS_DIR/host1/f'" <up
	cmp up "$HOSTS_DIR/host1/f"
	in_host 0 $HOSTS_SSH host1 "cat '$HOSTS_DIR/host1/f'" >down
	assert_equal "$(sha256sum <down)" "$(sha256sum <up)"
	# frames were lost: host0's TCP sent some again
	read -r r1 < <(in_host 0 awk '/^Tcp:/ && n++ { print $13 }' /proc/net/snmp)
	echo "host0's TCP retransmitted $((r1 - r0)) segments"
	[ "$r1" -gt "$r0" ]
	# host1's veth carried the bytes both ways
	read -r r0 r1 < <(hosts_bytes 1)
	[ $((r0 - rx)) -ge 262144 ]
	[ $((r1 - tx)) -ge 262144 ]
}
