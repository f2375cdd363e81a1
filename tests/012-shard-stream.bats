#!/usr/bin/env bats
#
# 012-shard-stream.bats - cg-shard splits a JSON Lines file larger than
# its memory: run in a memory cgroup whose limit is a sixteenth of the
# input, it writes every shard, and the same input read whole (from
# standard input, which cannot be read again) fails under the same limit,
# which shows that the limit bites.  The input is generated into the
# test's directory and removed with it: 512 MiB under 32 MiB here (about
# 30 s on 2 cores); CG_TEST_BIG=1 runs the 4 GiB file under 256 MiB too
# (several minutes and 8 GiB of disk: bench/shard-scale.sh measures it).
#
# The memory cgroup is cgroup v2's memory.max where /sys/fs/cgroup is a
# cgroup v2 tree with the memory controller, else cgroup v1's
# memory.limit_in_bytes; where neither can be made (not root, a
# read-only cgroupfs) the tests skip, saying why.  That the bytes are
# those of the input read whole is 011-shard-text.bats's part.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

GROUPS_MADE=

# mem_group LIMIT: a new memory cgroup of LIMIT bytes, its path in GROUP;
# or 1 with the reason in WHY
mem_group() {
	local root=/sys/fs/cgroup limit=memory.max
	if [ -f "$root/cgroup.controllers" ]; then
		grep -qw memory "$root/cgroup.controllers" || {
			WHY="cgroup v2 without the memory controller"
			return 1
		}
	elif [ -f "$root/memory/memory.limit_in_bytes" ]; then
		root=$root/memory
		limit=memory.limit_in_bytes
	else
		WHY="no memory cgroup: neither cgroup v2's controller nor v1's under $root"
		return 1
	fi
	GROUP=$root/cg-shard-test.$$.$RANDOM
	mkdir "$GROUP" 2>/dev/null || {
		WHY="$root is not writable (not root?)"
		return 1
	}
	GROUPS_MADE="$GROUPS_MADE $GROUP"
	echo "$1" >"$GROUP/$limit" || {
		WHY="$GROUP: cannot set $limit"
		return 1
	}
	# no swap to escape to, where the kernel has it
	[ ! -f "$GROUP/memory.swap.max" ] || echo 0 >"$GROUP/memory.swap.max"
	[ ! -f "$GROUP/memory.memsw.limit_in_bytes" ] ||
		echo "$1" >"$GROUP/memory.memsw.limit_in_bytes" 2>/dev/null || :
}

# peak GROUP: the most memory GROUP has used, in bytes (or "?")
peak() {
	cat "$1/memory.peak" 2>/dev/null ||
		cat "$1/memory.max_usage_in_bytes" 2>/dev/null || echo '?'
}

# in_group GROUP CMD...: CMD in GROUP
in_group() {
	sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$@"
}

# jsonl MIB FILE: MIB MiB of JSON Lines (1 MiB blocks of 256 records of
# about 4 KiB of words, 10 conditions)
jsonl() {
	awk 'BEGIN { srand(1); for (i = 0; i < 256; i++) { s = "";
		while (length(s) < 4000) s = s sprintf("w%d ", int(rand() * 100000));
		printf("{\"cond\":\"c%d\",\"text\":\"%s\"}\n", i % 10, s) } }' \
		>"$2.block"
	for _ in $(seq "$1"); do cat "$2.block"; done >"$2"
	rm -f "$2.block"
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
}

teardown() {
	local g
	rm -f in.jsonl s-*.cgd w-*.cgd
	for g in $GROUPS_MADE; do
		rmdir "$g" 2>/dev/null || :
	done
}

# stream MIB LIMIT: MIB MiB of JSON Lines into 4 shards under LIMIT
# bytes; and read whole, from standard input, under the same limit it fails
stream() {
	local mib=$1 lim=$2 t0=$SECONDS
	if [ "${CG_SANITIZED:-0}" = 1 ]; then
		# the sanitizers' shadow memory is not the program's: the
		# same streaming, checked, without the limit
		jsonl "$mib" in.jsonl
		run -0 --separate-stderr cg-shard -q -n 4 --json -o s in.jsonl
		[ "$(echo "$output" | jq -s 'map(.examples) | add')" -eq $((mib * 256)) ]
		cg-inspect --verify -q s-0.cgd
		return 0
	fi
	mem_group "$lim" || skip "$WHY"
	jsonl "$mib" in.jsonl
	echo "generated $mib MiB in $((SECONDS - t0)) s"
	t0=$SECONDS
	run -0 --separate-stderr in_group "$GROUP" cg-shard -q -n 4 --json \
		-o s in.jsonl
	echo "cg-shard: $((SECONDS - t0)) s, peak $(peak "$GROUP") of $lim bytes"
	echo "$stderr"
	[ "$(echo "$output" | jq -s 'map(.examples) | add')" -eq $((mib * 256)) ]
	[ -s s-3.cgd ]
	cg-inspect --verify -q s-0.cgd
	mem_group "$lim" || skip "$WHY"
	run ! in_group "$GROUP" sh -c \
		'cg-shard -q -n 4 --format jsonl -o w - < in.jsonl'
	echo "read whole: exit $status"
	[ ! -e w-0.cgd ]
}

@test "cg-shard: 512 MiB of JSON Lines in 4 shards under a 32 MiB memory limit" {
	stream 512 $((32 << 20))
}

@test "cg-shard: 4 GiB of JSON Lines in 4 shards under a 256 MiB memory limit (CG_TEST_BIG=1)" {
	[ -n "${CG_TEST_BIG:-}" ] || skip "set CG_TEST_BIG=1 to run it"
	stream 4096 $((256 << 20))
}
