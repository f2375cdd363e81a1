#!/bin/sh
# run.sh - look inside a model and a data shard with cg-inspect, check
# them, and catch a damaged copy.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second.  The programs are taken
# from PATH, or from a build in the source tree (cmd/ or build/cmd/).
# Output goes to a fresh directory, printed at the end; pass one as $1 to
# choose it.  Needs jq, awk and dd.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"

cg-shard -n 2 --seed 1 -o "$out/fm" "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d "$out/fm-0.cgd" --hidden 64 --latent 8 --seed 3 \
	-o "$out/model.cgm"

# The table for people: manifest, then one row per tensor with its
# statistics and a histogram.
cg-inspect "$out/model.cgm" "$out/fm-0.cgd"

# The same as JSON for scripts: the spread of each weight matrix, and how
# many examples of each condition the shard holds.
cg-inspect --json "$out/model.cgm" |
	jq -r '.tensors[] | select(.name | endswith(".w")) |
		"\(.name)\t\(.shape | map(tostring) | join("x"))\tstd \(.std)"'
cg-inspect --json --no-stats "$out/fm-0.cgd" |
	jq -r '.cond_counts[] | "\(.count)\t\(.name)"'

# One tensor as text, for any other tool: the largest output bias.
cg-inspect --tensor dec.out.b "$out/model.cgm" | sort -g | tail -n 1

# Every digest checks out; a copy with one byte changed does not.
cg-inspect --verify "$out/model.cgm" "$out"/fm-*.cgd
cp "$out/model.cgm" "$out/damaged.cgm"
printf 'X' | dd of="$out/damaged.cgm" bs=1 seek=5000 conv=notrunc \
	2>/dev/null
if cg-inspect --verify -q "$out/damaged.cgm"; then
	echo "damage not caught" >&2
	exit 1
fi
echo "files in $out"
