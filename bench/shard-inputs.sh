#!/bin/sh
# shard-inputs.sh - cg-shard's throughput and peak memory on the inputs
# other than JSON Lines (bench/shard-scale.sh measures those): IDX images
# of GIB GiB (default 1; 64x64x4 images of 16 KiB), plain, gzip'd (gzip
# -1) and from standard input; a directory of four fortune files of GIB
# GiB in all (entries of about 4 KiB); and Fashion-MNIST's training set
# as Debian ships it (gzip'd IDX, dataset-fashion-mnist), where it is
# installed.  Each is split into 4 shards beside it.  With OLD set to a
# directory holding an older cg-shard (one that holds its input whole),
# each input is split by it too, for the time and memory that costs.
#
# usage: bench/shard-inputs.sh [GIB] (from the top of the source tree,
# after a build in build/; CG_BIN overrides the programs' directory,
# TMPDIR where the inputs go: twice GIB GiB of disk and the shards)
#
# One line per run: the input, what ran, the input's bytes (decompressed),
# wall seconds, MB/s of input (10^6 bytes), peak RSS in KiB (GNU time).
set -eu
bin=$(cd "${CG_BIN:-build/cmd}" && pwd)
gib=${1:-1}
fm=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shard-inputs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export TMPDIR="$tmp"

# run INPUT LABEL BYTES CMD: CMD (a shell line) timed, one line out
run() {
	input=$1 label=$2 bytes=$3
	if /usr/bin/time -f '%e %M' -o "$tmp/time" sh -c "$4"; then
		st=ok
	else
		st="failed($?)"
	fi
	read -r secs rss <"$tmp/time" || secs=? rss=?
	printf '%-10s %-28s %12s %8s %7s %9s %s\n' "$input" "$label" "$bytes" \
		"$secs" "$(echo "scale=1; $bytes / 1000000 / $secs" | bc)" \
		"$rss" "$st"
	rm -f "$tmp"/s-*.cgd
}

# both INPUT LABEL BYTES ARGS: cg-shard -q -n 4 -o s ARGS, new and old
both() {
	run "$1" "$2" "$3" "'$bin/cg-shard' -q -n 4 -o '$tmp/s' $4"
	[ -z "${OLD:-}" ] ||
		run "$1" "$2 (old)" "$3" "'$OLD/cg-shard' -q -n 4 -o '$tmp/s' $4"
}

printf '%-10s %-28s %12s %8s %7s %9s %s\n' input run bytes secs MB/s \
	rss_KiB status

if [ -f "$fm/train-images-idx3-ubyte.gz" ]; then
	b=$(gzip -dc "$fm/train-images-idx3-ubyte.gz" | wc -c)
	both fashion "-n 4, gzip" "$b" "'$fm'"
	both fashion "-n 4 -s hashed, gzip" "$b" "-s hashed '$fm'"
fi

# IDX: a 16 KiB line of bytes over and over, labels 1 to 10 in turn
n=$((gib * 65536))
be=$(printf '\\%03o\\%03o\\%03o\\%03o' $((n >> 24 & 255)) \
	$((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))
mkdir "$tmp/im"
{
	printf "\\0\\0\\10\\4$be\\0\\0\\0\\100\\0\\0\\0\\100\\0\\0\\0\\4"
	yes "$(awk 'BEGIN { for (i = 0; i < 16383; i++)
		printf("%c", 33 + (i * 7919) % 90) }')" | head -c $((n * 16384))
} >"$tmp/im/train-images-idx3-ubyte"
{
	printf "\\0\\0\\10\\1$be"
	yes "$(printf '\1\2\3\4\5\6\7\10\11')" | head -c "$n"
} >"$tmp/im/train-labels-idx1-ubyte"
b=$((n * 16384))
both "idx $gib GiB" "-n 4, plain" "$b" "'$tmp/im'"
both "idx $gib GiB" "-n 4 -s hashed, plain" "$b" "-s hashed '$tmp/im'"
run "idx $gib GiB" "-n 4, images from stdin" "$b" \
	"'$bin/cg-shard' -q -n 4 -o '$tmp/s' - \
	'$tmp/im/train-labels-idx1-ubyte' <'$tmp/im/train-images-idx3-ubyte'"
gzip -1 "$tmp/im/train-images-idx3-ubyte"
both "idx $gib GiB" "-n 4, gzip -1" "$b" "'$tmp/im'"
rm -rf "$tmp/im"

# fortunes: four files of entries of about 4 KiB in lines of words
mkdir "$tmp/fort"
awk 'BEGIN { srand(2); for (e = 0; e < 256; e++) { n = 0;
	while (n < 4000) { s = ""; while (length(s) < 70)
		s = s sprintf("w%d ", int(rand() * 100000));
		print s; n += length(s) + 1 }
	print "%" } }' >"$tmp/block"
for f in alpha beta gamma delta; do
	i=0
	while [ "$i" -lt $((gib * 256)) ]; do
		cat "$tmp/block"
		i=$((i + 1))
	done >"$tmp/fort/$f"
done
b=$(cat "$tmp"/fort/* | wc -c)
both "fortune $gib GiB" "-n 4, a directory of 4" "$b" "'$tmp/fort'"
