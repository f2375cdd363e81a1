#!/bin/sh
# shard-scale.sh - cg-shard's throughput and peak memory against the size
# of its input: JSON Lines of GIB GiB (default 1, 4 and 16), generated
# into a directory of its own and removed after each size, so that at
# most one input is on disk at once.  Each size is split twice: into 4
# shard files beside the input (-n 4; the disk then holds twice the
# input, so only for sizes up to FILES_GIB, default 4) and as one shard
# to /dev/null (-n 1 -o -), which costs no disk.  With WHOLE=1 the 1 GiB
# input is also read from standard input, which cg-shard cannot read
# again and so holds whole, as every input was before.  With MEM_LIMIT
# set (bytes; root, cgroup v2 or v1) every cg-shard runs in a memory
# cgroup of that limit.
#
# usage: bench/shard-scale.sh [GIB...] (from the top of the source tree,
# after a build in build/; CG_BIN overrides the programs' directory,
# TMPDIR where the input goes)
#
# One line per run: GiB, what ran, the input's bytes, wall seconds, MB/s
# of input (10^6 bytes), peak RSS in KiB (GNU time), and the cgroup's
# peak where MEM_LIMIT is set.
set -eu
bin=$(cd "${CG_BIN:-build/cmd}" && pwd)
files_gib=${FILES_GIB:-4}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shard-scale.XXXXXX")
group=
cleanup() {
	rm -rf "$tmp"
	[ -z "$group" ] || rmdir "$group" 2>/dev/null || :
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[ $# -gt 0 ] || set -- 1 4 16

# a memory cgroup of MEM_LIMIT bytes, made afresh for each run (its peak
# is then the run's)
new_group() {
	[ -n "${MEM_LIMIT:-}" ] || return 0
	[ -z "$group" ] || rmdir "$group" 2>/dev/null || :
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		group=/sys/fs/cgroup/cg-shard-scale.$$
		mkdir "$group" && echo "$MEM_LIMIT" >"$group/memory.max" &&
			echo 0 >"$group/memory.swap.max"
	else
		group=/sys/fs/cgroup/memory/cg-shard-scale.$$
		mkdir "$group" && echo "$MEM_LIMIT" >"$group/memory.limit_in_bytes"
	fi
}
group_peak() {
	[ -n "$group" ] || { echo -; return; }
	cat "$group/memory.peak" 2>/dev/null ||
		cat "$group/memory.max_usage_in_bytes" 2>/dev/null || echo '?'
}

# run LABEL GIB CMD: CMD (a shell line) timed, one line out
run() {
	label=$1 gib=$2
	shift 2
	new_group
	bytes=$(stat -c %s "$tmp/in.jsonl")
	if [ -n "$group" ]; then
		set -- sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' \
			sh "$group" /usr/bin/time -f '%e %M' -o "$tmp/time" sh -c "$1"
	else
		set -- /usr/bin/time -f '%e %M' -o "$tmp/time" sh -c "$1"
	fi
	if "$@"; then st=ok; else st="failed($?)"; fi
	read -r secs rss <"$tmp/time" || secs=? rss=?
	printf '%-4s %-22s %12s %8s %7s %9s %10s %s\n' "$gib" "$label" \
		"$bytes" "$secs" "$(echo "scale=1; $bytes / 1000000 / $secs" | bc)" \
		"$rss" "$(group_peak)" "$st"
	rm -f "$tmp"/s-*.cgd
}

printf '%-4s %-22s %12s %8s %7s %9s %10s %s\n' GiB run bytes secs MB/s \
	rss_KiB cg_peak status
for gib in "$@"; do
	# 1 MiB of 256 records of about 4 KiB of words, 10 conditions,
	# repeated
	awk 'BEGIN { srand(1); for (i = 0; i < 256; i++) { s = "";
		while (length(s) < 4000) s = s sprintf("w%d ", int(rand() * 100000));
		printf("{\"cond\":\"c%d\",\"text\":\"%s\"}\n", i % 10, s) } }' \
		>"$tmp/block"
	i=0
	while [ "$i" -lt $((gib * 1024)) ]; do
		cat "$tmp/block"
		i=$((i + 1))
	done >"$tmp/in.jsonl"
	run "-n 1 -o - >/dev/null" "$gib" \
		"'$bin/cg-shard' -q -n 1 -o - '$tmp/in.jsonl' >/dev/null"
	[ "$gib" -gt "$files_gib" ] ||
		run "-n 4 (files)" "$gib" \
			"'$bin/cg-shard' -q -n 4 -o '$tmp/s' '$tmp/in.jsonl'"
	[ "${WHOLE:-}" != 1 ] || [ "$gib" -ne 1 ] ||
		run "-n 1, stdin (whole)" "$gib" \
			"'$bin/cg-shard' -q --format jsonl -n 1 -o - - \
			<'$tmp/in.jsonl' >/dev/null"
	rm -f "$tmp/in.jsonl"
done
