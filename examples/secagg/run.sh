#!/bin/sh
# run.sh - a DiLoCo round with secure aggregation: three workers each mask
# their delta with pairwise masks (cg-key --x25519, cg-train-step --mask),
# so that no delta can be read alone, and the coordinator's cg-reduce sums
# the three into their mean, which it applies.  The same round unmasked
# gives the same model within the fixed point's bound; a round short of a
# worker is refused, and run again by the two that remain.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second or two.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"

# Each worker's masking key; every worker gets the list of all three.
for w in 0 1 2; do
	cg-key --x25519 -f -C "worker$w" -o "w$w.key"
done
cat w0.key.pub w1.key.pub w2.key.pub >peers
cg-key -l peers

cg-shard -n 3 -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 64 --latent 8 --seed 3 -o model.cgm

# The round, masked, and the same round in the clear for comparison.
for w in 0 1 2; do
	cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta --steps 5 \
		--batch 16 --seed $w --mask w$w.key --peers peers -o md$w.cgg
	cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta --steps 5 \
		--batch 16 --seed $w -o d$w.cgg
done
tar xOf md0.cgg cg.json | jq -c '{samples, codec: .codec.spec, peers: (.mask.peers | length)}'

# The coordinator sees only the mean, and applies it.
cg-reduce md0.cgg md1.cgg md2.cgg | cg-apply -m model.cgm --outer nesterov \
	-o masked.cgm
cg-reduce d0.cgg d1.cgg d2.cgg | cg-apply -m model.cgm --outer nesterov \
	-o plain.cgm
cg-inspect --diff plain.cgm masked.cgm | sed -n '/^NAME/,$p' | head -4

# A worker drops out: its round cannot be unmasked without it.  The two
# that remain run it again with a list without it (new masks).
if cg-reduce md0.cgg md2.cgg -o /dev/null; then exit 1; fi
cat w0.key.pub w2.key.pub >peers2
for w in 0 2; do
	cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta --steps 5 \
		--batch 16 --seed $w --mask w$w.key --peers peers2 -o re$w.cgg
done
cg-reduce re0.cgg re2.cgg | cg-apply -m model.cgm --outer nesterov \
	-o model2.cgm
echo "files in $out"
