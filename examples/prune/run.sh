#!/bin/sh
# run.sh - pruning a small text model with cg-prune: by magnitude and by
# Wanda's score, a look at each tensor's sparsity with cg-inspect, a
# fine-tune that keeps the pruned weights at zero, and the bits per byte
# of each on held-out text; then a smaller model, half its heads and MLP
# rows removed (--structured), fine-tuned toward the dense one.
#
# Shards three files of Debian's fortunes (DATA, default
# /usr/share/games/fortunes; the tests' few fortunes where it is
# missing) and trains a tiny cgpt for a few hundred steps, so it runs in
# a minute.  The programs are taken from
# PATH, or from a build in the source tree (cmd/ or build/cmd/).  Output
# goes to a fresh directory, printed at the end; pass one as $1 to choose
# it.  Needs jq.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"

data=${DATA:-/usr/share/games/fortunes}
mkdir -p "$out/text"
if [ -f "$data/computers" ]; then
	cp "$data/computers" "$data/science" "$data/wisdom" "$out/text/"
else
	cp "$top/tests/fixtures/text/fortunes/"[a-z]* "$out/text/"
	rm -f "$out/text/"*.*
fi
cg-shard -q -n 1 --holdout "$out/held.cgd" -o "$out/t" "$out/text"
cg-init -a cgpt -d "$out/t-0.cgd" --width 32 --layers 2 --heads 2 \
	--context 64 --seed 1 -o "$out/init.cgm"
cg-train-step -q -m "$out/init.cgm" -d "$out/t-0.cgd" --emit model \
	--steps 400 --batch 16 --opt adamw --lr 2e-3 -o "$out/model.cgm"

# Half of each Linear layer, twice: the smallest weights, and the
# smallest by |w| times the norm of what reaches them (Wanda).
cg-prune -s 0.5 "$out/model.cgm" -o "$out/mag.cgm"
cg-prune -s 0.5 -i wanda -d "$out/t-0.cgd" "$out/model.cgm" \
	-o "$out/wanda.cgm"
# 2:4 straight into cg-inspect: each tensor's share pruned
cg-prune --nm 2:4 "$out/model.cgm" | cg-inspect --no-stats - |
	grep -E '^(pruned|NAME|h\.0\.)'

# Fine-tuning keeps the mask: the pruned weights stay exactly 0.
cg-train-step -q -m "$out/wanda.cgm" -d "$out/t-0.cgd" --emit model \
	--steps 100 --batch 16 --opt adamw --lr 3e-4 -o "$out/ft.cgm"
cg-inspect --json "$out/ft.cgm" | jq -r '.tensors[] |
	select(.pruned != null) | "\(.name): \(.pruned) pruned, \(.zeros) zeros"'

# Weight by weight saves only file size under zstd: the matrices stay
# dense.  A smaller model: half the heads and MLP rows of each block
# taken out, then trained toward the dense model as its teacher.
cg-prune --structured heads,rows --remove 0.5 "$out/model.cgm" \
	-o "$out/cut.cgm"
cg-inspect --json "$out/cut.cgm" |
	jq -r '"config of the smaller model: \(.config | tojson)"'
cg-train-step -q -m "$out/cut.cgm" -d "$out/t-0.cgd" --emit model \
	--steps 100 --batch 16 --opt adamw --lr 1e-3 \
	--teacher "$out/model.cgm" -o "$out/small.cgm"

for m in model mag wanda ft small; do
	printf '%-6s ' "$m"
	cg-eval --json -m "$out/$m.cgm" -d "$out/held.cgd" | jq -r '"\(.bpb) bits per byte"'
done
echo "output in $out"
