#!/bin/sh
# io.sh - cg-shard and cg-inspect on the full Fashion-MNIST training set,
# next to cat/zcat moving the same bytes.  Medians of RUNS runs (default 5),
# wall seconds, with min and max.
#
# usage: bench/io.sh (from the top of the source tree, after a build in
# build/; CG_BIN overrides the programs' directory)
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
runs=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
img=$data/train-images-idx3-ubyte.gz
lab=$data/train-labels-idx1-ubyte.gz

# time CMD...: print "median min max" of runs wall times
timeit() {
	i=0
	: >"$tmp/times"
	while [ "$i" -lt "$runs" ]; do
		t0=$(date +%s.%N)
		sh -c "$1" >/dev/null
		t1=$(date +%s.%N)
		echo "$t1 - $t0" | bc -l >>"$tmp/times"
		i=$((i + 1))
	done
	sort -g "$tmp/times" | awk '{ a[NR] = $1 } END {
		printf "%.4f %.4f %.4f", a[int((NR + 1) / 2)], a[1], a[NR] }'
}

"$bin/cg-shard" -q -n 1 -o "$tmp/one" "$data"
bytes=$(stat -c %s "$tmp/one-0.cgd")
echo "# full Fashion-MNIST training set: 60000 images; one shard is $bytes bytes"
printf '%-48s %9s %9s %9s %7s\n' task median_s min_s max_s ratio
row() {
	printf '%-48s %9s %9s %9s %7s\n' "$1" $2 "$3"
}
zc=$(timeit "zcat '$img' '$lab' > '$tmp/raw'")
row "zcat images+labels > file (reference)" "$zc" ""
s1=$(timeit "'$bin/cg-shard' -q -n 1 -o '$tmp/s1' '$data'")
row "cg-shard -n 1 (gzip IDX in, one shard out)" "$s1" \
	"$(echo "${s1%% *} / ${zc%% *}" | bc -l | xargs printf %.2f)"
s4=$(timeit "'$bin/cg-shard' -q -n 4 --strategy stratified -o '$tmp/s4' '$data'")
row "cg-shard -n 4 --strategy stratified" "$s4" \
	"$(echo "${s4%% *} / ${zc%% *}" | bc -l | xargs printf %.2f)"
ct=$(timeit "cat '$tmp/one-0.cgd' > /dev/null")
row "cat shard > /dev/null (reference)" "$ct" ""
iv=$(timeit "'$bin/cg-inspect' --verify -q '$tmp/one-0.cgd'")
row "cg-inspect --verify (read, check digests)" "$iv" \
	"$(echo "${iv%% *} / ${ct%% *}" | bc -l | xargs printf %.2f)"
is=$(timeit "'$bin/cg-inspect' '$tmp/one-0.cgd'")
row "cg-inspect (statistics of every tensor)" "$is" \
	"$(echo "${is%% *} / ${ct%% *}" | bc -l | xargs printf %.2f)"
