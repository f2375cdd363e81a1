#!/usr/bin/env bats
#
# 012-shard-stream.bats - cg-shard splits inputs larger than its memory:
# run in a memory cgroup whose limit is a sixteenth of the input, it
# writes every shard.  JSON Lines (512 MiB under 32 MiB, about 30 s on 2
# cores), IDX images (256 MiB under 16 MiB: plain, gzip'd, and from
# standard input, which is copied to a temporary file), a directory of
# fortune files (256 MiB under 16 MiB) and gzip'd JSON Lines from
# standard input (128 MiB under 8 MiB); each of these three ways to read
# an input gives the same shards, byte for byte.  That the limit bites is
# shown by dd holding the input whole in one buffer, which the same limit
# kills.  Inputs are generated into the test's directory and removed with
# it; CG_TEST_BIG=1 runs 4 GiB of JSON Lines under 256 MiB too (several
# minutes and 8 GiB of disk: bench/shard-scale.sh measures it).  The
# temporary copies of standard input go to the test's directory too
# (TMPDIR), on the disk, where a tmpfs would count them as memory.
#
# The memory cgroup is cgroup v2's memory.max where /sys/fs/cgroup is a
# cgroup v2 tree with the memory controller, else cgroup v1's
# memory.limit_in_bytes; where neither can be made (not root, a
# read-only cgroupfs) the tests skip, saying why.  That the bytes are
# those of the input read whole is 011-shard-text.bats's part (and
# tests/unit/test_shard's, which reads every text and IDX case both
# ways).

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

# idx N DIR: N images of 64x64x4 (16 KiB each, the same line of bytes
# over and over) and their labels 1 to 10 in turn, as DIR's
# train-images-idx3-ubyte and train-labels-idx1-ubyte
idx() {
	local n=$1 d=$2 be
	mkdir -p "$d"
	be=$(printf '\\%03o\\%03o\\%03o\\%03o' $((n >> 24 & 255)) \
		$((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))
	{
		printf "\\0\\0\\10\\4$be\\0\\0\\0\\100\\0\\0\\0\\100\\0\\0\\0\\4"
		yes "$(awk 'BEGIN { for (i = 0; i < 16383; i++)
			printf("%c", 33 + (i * 7919) % 90) }')" |
			head -c $((n * 16384))
	} >"$d/train-images-idx3-ubyte"
	{
		printf "\\0\\0\\10\\1$be"
		yes "$(printf '\1\2\3\4\5\6\7\10\11')" | head -c "$n"
	} >"$d/train-labels-idx1-ubyte"
}

# fortunes MIB DIR: four fortune files of MIB/4 MiB each in DIR, entries
# of about 4 KiB in lines of words
fortunes() {
	local f
	mkdir -p "$2"
	awk 'BEGIN { srand(2); for (e = 0; e < 256; e++) { n = 0;
		while (n < 4000) { s = ""; while (length(s) < 70)
			s = s sprintf("w%d ", int(rand() * 100000));
			print s; n += length(s) + 1 }
		print "%" } }' >"$2.block"
	for f in alpha beta gamma delta; do
		for _ in $(seq $(($1 / 4))); do cat "$2.block"; done >"$2/$f"
	done
	rm -f "$2.block"
}

# bites LIMIT FILE: dd holding FILE whole in one buffer is killed in a
# cgroup of LIMIT bytes (what every reader of cg-shard but JSON Lines and
# TSV files did before)
bites() {
	mem_group "$1" || skip "$WHY"
	run ! in_group "$GROUP" dd if="$2" of=/dev/null bs=$(stat -c %s "$2") \
		count=1 iflag=fullblock
	echo "held whole: exit $status"
}

# shards LIMIT PREFIX N CMD...: CMD, a cg-shard run writing PREFIX-*.cgd
# with --json, in a new cgroup of LIMIT bytes (or, under the
# sanitizers, none); it must write N examples in all, each shard verified
shards() {
	local lim=$1 prefix=$2 n=$3 t0=$SECONDS
	shift 3
	if [ "${CG_SANITIZED:-0}" = 1 ]; then
		run -0 --separate-stderr "$@"
	else
		mem_group "$lim" || skip "$WHY"
		run -0 --separate-stderr in_group "$GROUP" "$@"
	fi
	echo "$*: $((SECONDS - t0)) s, peak $(peak "${GROUP:-?}") of $lim bytes"
	echo "$stderr"
	[ "$(echo "$output" | jq -s 'map(.examples) | add')" -eq "$n" ]
	for f in "$prefix"-*.cgd; do cg-inspect --verify -q "$f"; done
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1 TMPDIR=$BATS_TEST_TMPDIR
}

teardown() {
	local g
	rm -rf in.jsonl in.jsonl.gz s-*.cgd w-*.cgd g-*.cgd i-*.cgd im fort
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
	bites "$lim" in.jsonl
}

@test "cg-shard: 512 MiB of JSON Lines in 4 shards under a 32 MiB memory limit" {
	stream 512 $((32 << 20))
}

@test "cg-shard: 4 GiB of JSON Lines in 4 shards under a 256 MiB memory limit (CG_TEST_BIG=1)" {
	[ -n "${CG_TEST_BIG:-}" ] || skip "set CG_TEST_BIG=1 to run it"
	stream 4096 $((256 << 20))
}

# Under the sanitizers the inputs are an eighth as large (the same paths,
# checked, without the limit).
@test "cg-shard: 256 MiB of IDX images, plain, gzip'd and from standard input, in 4 shards under a 16 MiB memory limit" {
	local n=16384 lim=$((16 << 20))
	[ "${CG_SANITIZED:-0}" != 1 ] || n=2048
	idx $n im
	shards $lim s $n cg-shard -q -n 4 --json -o s im
	# hashed: each image is hashed on the first pass
	shards $lim w $n cg-shard -q -n 4 -s hashed --json -o w im
	gzip -1 im/train-images-idx3-ubyte
	shards $lim g $n cg-shard -q -n 4 --json -o g im
	for i in 0 1 2 3; do cmp s-$i.cgd g-$i.cgd; done
	gunzip im/train-images-idx3-ubyte.gz
	shards $lim i $n sh -c 'cg-shard -q -n 4 --json -o i - \
		im/train-labels-idx1-ubyte < im/train-images-idx3-ubyte'
	for i in 0 1 2 3; do cmp s-$i.cgd i-$i.cgd; done
	# no copy of standard input is left behind
	[ -z "$(ls | grep cg-input)" ]
	[ "${CG_SANITIZED:-0}" = 1 ] || bites $lim im/train-images-idx3-ubyte
}

@test "cg-shard: a 256 MiB fortune directory in 4 shards under a 16 MiB memory limit" {
	local mib=256 lim=$((16 << 20)) n
	[ "${CG_SANITIZED:-0}" != 1 ] || mib=32
	fortunes $mib fort
	n=$(cat fort/* | grep -c '^%$')
	shards $lim s "$n" cg-shard -q -n 4 --json -o s fort
	[ "${CG_SANITIZED:-0}" = 1 ] || bites $lim fort/alpha
}

@test "cg-shard: 128 MiB of gzip'd JSON Lines from standard input in 4 shards under an 8 MiB memory limit" {
	local mib=128 lim=$((8 << 20))
	[ "${CG_SANITIZED:-0}" != 1 ] || mib=16
	jsonl $mib in.jsonl
	cg-shard -q -n 4 -o s in.jsonl
	gzip -1 in.jsonl
	shards $lim w $((mib * 256)) sh -c \
		'cg-shard -q -n 4 --json --format jsonl -o w - < in.jsonl.gz'
	for i in 0 1 2 3; do cmp s-$i.cgd w-$i.cgd; done
}
