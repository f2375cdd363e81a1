#!/bin/bash
# pipeline.sh - cg's pipeline stages against PyTorch's
# torch.distributed.pipelining on the same cgpt and the same split: two
# stages on this machine, one thread each, GPipe and 1F1B, batch BATCH
# in MICRO micro-batches, AdamW.  cg: cg-train-step --next through a
# pipe (the stages cut by cg-convert -S -L); PyTorch: bench/torch_pipe.py
# (ScheduleGPipe or Schedule1F1B, gloo, two processes).  Each side: the
# tokens a second of STEPS steps after a first step (cg: the wall time
# of 1 + STEPS steps less that of 1), each stage's CPU seconds a step,
# and each stage's peak resident set size.
#
# usage: bench/pipeline.sh (from the top of the source tree, after a
# build)
#
# Environment (defaults in brackets): CG_BIN [build/cmd], WIDTH [256],
# LAYERS [4], HEADS [4], CONTEXT [64], BATCH [16], MICRO [4], SPLIT [2],
# STEPS [4], PY [/opt/cg-bench-venv/bin/python],
# FORTUNES [/usr/share/games/fortunes].
set -eu
cd "$(dirname "$0")/.."
top=$PWD
CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd)
WIDTH=${WIDTH:-256}
LAYERS=${LAYERS:-4}
HEADS=${HEADS:-4}
CONTEXT=${CONTEXT:-64}
BATCH=${BATCH:-16}
MICRO=${MICRO:-4}
SPLIT=${SPLIT:-2}
STEPS=${STEPS:-4}
PY=${PY:-/opt/cg-bench-venv/bin/python}
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
export PATH=$CG_BIN:$PATH LC_ALL=C OMP_NUM_THREADS=1

work=$(mktemp -d "${TMPDIR:-/tmp}/cg-pipeline.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
cg-shard -q -n 1 -o f "$FORTUNES"
cg-init -a cgpt -d f-0.cgd --seed 1 --context "$CONTEXT" --width "$WIDTH" \
	--layers "$LAYERS" --heads "$HEADS" -o m.cgm
cg-convert -S 1/2 -L "0:$SPLIT" m.cgm -o s1.cgm
cg-convert -S 2/2 -L "$SPLIT:$LAYERS" m.cgm -o s2.cgm
echo "exec /usr/bin/time -f '%U %S %M' -o cpu.2 cg-train-step -q -m s2.cgm -e model --opt adamw --lr 1e-3 -j 1 -o o2.cgm" >stage2.sh

# cg SCHED K: "wall cpu1 cpu2 rss1 rss2" of K steps (cpu1 less cpu2:
# GNU time counts the child stage in its parent)
cg() {
	local t0 t1
	t0=$(date +%s.%N)
	/usr/bin/time -f '%U %S %M' -o cpu.1 cg-train-step -q -m s1.cgm \
		-d f-0.cgd -e model --opt adamw --lr 1e-3 -j 1 -k "$2" \
		-b "$BATCH" --micro-batches "$MICRO" --pipeline "$1" \
		-o o1.cgm --next 'sh stage2.sh'
	t1=$(date +%s.%N)
	read -r u1 s1 r1 <cpu.1
	read -r u2 s2 r2 <cpu.2
	echo "$(echo "$t1 - $t0" | bc -l) $(echo "$u1 + $s1 - $u2 - $s2" | bc -l) $(echo "$u2 + $s2" | bc -l) $((r1 / 1024)) $((r2 / 1024))"
}

printf '| side | schedule | split | tokens/s | CPU s/step per stage | peak RSS MiB per stage | bytes/step down, up |\n'
printf '|---|---|---|---:|---|---|---|\n'
for sched in gpipe 1f1b; do
	a=($(cg "$sched" 1))
	b=($(cg "$sched" $((1 + STEPS))))
	step=$(echo "(${b[0]} - ${a[0]}) / $STEPS" | bc -l)
	printf '| cg | %s | 0:%d %d:%d | %.0f | %.3f %.3f | %d %d | %s |\n' \
		"$sched" "$SPLIT" "$SPLIT" "$LAYERS" \
		"$(echo "$BATCH * $CONTEXT / $step" | bc -l)" \
		"$(echo "(${b[1]} - ${a[1]}) / $STEPS" | bc -l)" \
		"$(echo "(${b[2]} - ${a[2]}) / $STEPS" | bc -l)" \
		"${b[3]}" "${b[4]}" \
		"$(printf 'h0 1 1G 1G\nh1 1 1G -\n' |
			cg-probe --plan - -m m.cgm -b "$BATCH" \
				--micro-batches "$MICRO" --json |
			jq -r '"\(.bytes_down), \(.bytes_up)"')"
	"$PY" "$top/bench/torch_pipe.py" --width "$WIDTH" --layers "$LAYERS" \
		--heads "$HEADS" --context "$CONTEXT" --batch "$BATCH" \
		--micro "$MICRO" --steps "$STEPS" --split "$SPLIT" \
		--schedule "$sched" --threads 1 >torch.jsonl
	printf '| PyTorch | %s | 0:%d %d:%d | %.0f | %s | %s | not measured |\n' \
		"$sched" "$SPLIT" "$SPLIT" "$LAYERS" \
		"$(jq -s 'map(select(.rank == 0))[0].tokens_per_s' torch.jsonl)" \
		"$(jq -rs 'sort_by(.rank) | map(.cpu_s_per_step * 1000 | round / 1000 | tostring) | join(" ")' torch.jsonl)" \
		"$(jq -rs 'sort_by(.rank) | map(.rss_mib | round | tostring) | join(" ")' torch.jsonl)"
done
