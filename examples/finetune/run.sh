#!/bin/sh
# run.sh - a trained text model adapted to a category it never saw:
# made over for the new condition (cg-init --from), then trained three
# ways on the new category's texts: low-rank adapters only (cg-init
# --lora), every tensor, and every tensor but the embeddings
# (--freeze); the bits per byte of each on held-out texts of the new
# category, the bytes of one DiLoCo round's delta with adapters and
# without, and the adapters merged into a plain model (cg-convert -M).
#
# Shards three files of Debian's fortunes (DATA, default
# /usr/share/games/fortunes; the tests' few fortunes where it is
# missing), trains a tiny cgpt for a few hundred steps on two of them
# and adapts it to the third, so it runs in a minute.  The programs are
# taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out/base" "$out/new"

data=${DATA:-/usr/share/games/fortunes}
if [ -f "$data/computers" ]; then
	cp "$data/computers" "$data/wisdom" "$out/base/"
	cp "$data/science" "$out/new/"
else
	cp "$top/tests/fixtures/text/fortunes/"[a-z]* "$out/base/"
	rm -f "$out/base/"*.*
	# the last category is the new one
	n=$(ls "$out/base" | tail -n 1)
	mv "$out/base/$n" "$out/new/"
fi
cg-shard -q -n 1 -o "$out/b" "$out/base"
cg-shard -q -n 1 --holdout-fraction 0.2 --holdout "$out/held.cgd" \
	-o "$out/n" "$out/new"
cg-init -a cgpt -d "$out/b-0.cgd" --width 32 --layers 2 --heads 2 \
	--context 64 --seed 1 -o "$out/init.cgm"
cg-train-step -q -m "$out/init.cgm" -d "$out/b-0.cgd" --emit model \
	--steps 300 --batch 16 --opt adamw --lr 2e-3 -o "$out/base.cgm"

# The model made over for the new shard's condition: its row new,
# every other weight the base's.
cg-init --from "$out/base.cgm" -d "$out/n-0.cgd" -o "$out/grown.cgm"

# Adapters of rank 4 on every matrix of the blocks, on the embedding
# (which holds the new condition's row) and on the head; only they
# train.
cg-init --from "$out/grown.cgm" --lora 4 --lora-on 'h.*.w' --lora-on wte \
	--lora-on lm_head.w -o "$out/lora0.cgm"
cg-train-step -q -m "$out/lora0.cgm" -d "$out/n-0.cgd" --emit model \
	--steps 100 --batch 16 --opt adamw --lr 3e-3 -o "$out/lora.cgm"
# every tensor, and every tensor but the embeddings
cg-train-step -q -m "$out/grown.cgm" -d "$out/n-0.cgd" --emit model \
	--steps 100 --batch 16 --opt adamw --lr 1e-3 -o "$out/full.cgm"
cg-train-step -q -m "$out/grown.cgm" -d "$out/n-0.cgd" --emit model \
	--steps 100 --batch 16 --opt adamw --lr 1e-3 --freeze wte \
	--freeze wpe -o "$out/frozen.cgm"
# the adapters merged: a plain model every program takes
cg-convert -M "$out/lora.cgm" -o "$out/merged.cgm"

for m in grown lora full frozen merged; do
	printf '%-7s ' "$m"
	cg-eval --json -m "$out/$m.cgm" -d "$out/held.cgd" |
		jq -r '"\(.bpb) bits per byte"'
done

# One worker's part of a DiLoCo round: the delta of the adapters is
# theirs alone.
for m in lora full; do
	cg-train-step -q -m "$out/$m.cgm" -d "$out/n-0.cgd" --emit delta \
		--steps 2 --batch 16 -o "$out/$m-delta.cgg"
done
echo "a round's delta: $(stat -c %s "$out/lora-delta.cgg") bytes with" \
	"adapters, $(stat -c %s "$out/full-delta.cgg") with every tensor"
echo "output in $out"
