#!/bin/sh
# run.sh - split Fashion-MNIST into weighted, stratified shards and look
# inside them.
#
# Uses the real dataset where it is installed and the 100-example test
# fixture otherwise, so it runs anywhere in a second.  The programs are
# taken from PATH, or from a build in the source tree (cmd/ or build/cmd/).
# Output goes to a fresh directory, printed at the end; pass one as $1 to
# choose it.  Needs jq and tar.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || data=$top/tests/fixtures/fashion-mnist-mini
out=${1:-$(mktemp -d)}
mkdir -p "$out"

# Three workers, the first twice as fast as the others; 10% held out for
# evaluation.  --json prints one line per file written.
cg-shard -n 3 -w 2,1,1 --holdout "$out/val.cgd" --seed 1 --json \
	-o "$out/fm" "$data" |
	jq -r '[.path, .examples, .counts["Ankle boot"]] | @tsv' |
	awk 'BEGIN { print "path\texamples\tankle boots" } { print }'

# A shard is a tar archive: the manifest first, then one member per tensor.
tar tvf "$out/fm-0.cgd"
tar xOf "$out/fm-0.cgd" cg.json | jq -c '{examples, shard, image}'

# Same seed, same bytes: a second run reproduces the first exactly.
cg-shard -n 3 -w 2,1,1 --holdout "$out/val2.cgd" --seed 1 -o "$out/again" \
	"$data"
for i in 0 1 2; do
	cmp "$out/fm-$i.cgd" "$out/again-$i.cgd"
done
cmp "$out/val.cgd" "$out/val2.cgd"
echo "reproducible: yes"

if command -v cg-inspect >/dev/null 2>&1; then
	cg-inspect --verify "$out"/fm-*.cgd "$out/val.cgd"
fi
echo "shards in $out"
