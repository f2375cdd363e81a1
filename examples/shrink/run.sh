#!/bin/sh
# run.sh - a model made smaller with cg-quantize, scored and sampled as
# it is, and trained on.
#
# Shards the small fortunes fixture and trains a small cgpt for a few
# steps, so it runs anywhere in seconds; give it a model and a held-out
# shard of your own as $2 and $3 to see real figures.  The programs are
# taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"

if [ $# -ge 3 ]; then
	model=$2
	held=$3
else
	cg-shard -q --holdout-fraction 0.2 --holdout "$out/held.cgd" \
		-o "$out/fort" "$top/tests/fixtures/text/fortunes"
	cg-init -a cgpt -d "$out/fort-0.cgd" --context 32 --width 64 \
		--layers 2 --heads 2 --seed 1 -o "$out/init.cgm"
	cg-train-step -q -m "$out/init.cgm" -d "$out/fort-0.cgd" \
		--emit model --steps 40 --batch 8 --opt adamw --lr 3e-3 \
		--seed 1 -o "$out/model.cgm"
	model=$out/model.cgm
	held=$out/held.cgd
fi

# Each type: the file (the optimizer's state stripped: a model to score
# and sample), its bits per parameter, and the held-out bits per byte.
printf '%-6s %10s %s\n' type bytes "held-out bits/byte"
for t in f32 f16 q8_0 q4_1 q4_0; do
	cg-quantize -q --strip -o "$out/model-$t.cgm" "$model" $t
	printf '%-6s %10s %s\n' $t "$(wc -c <"$out/model-$t.cgm")" \
		"$(cg-eval --json -m "$out/model-$t.cgm" -d "$held" | jq -r '.bpb * 10000 | round / 10000')"
done

# What each tensor became.
cg-inspect --no-stats "$out/model-q4_1.cgm" | sed -n '/^NAME/,$p' | head -8

# A quantized model samples and trains like any other (training decodes
# it to f32 and writes f32); a pipe needs no file between the steps.
cg-sample -m "$out/model-q8_0.cgm" -c 0 --max-bytes 60 --seed 1
echo
cg-quantize -q "$model" q4_1 | cg-quantize -q - f32 >"$out/back.cgm"
cg-inspect --verify "$out/back.cgm"
echo "files in $out"
