#!/bin/sh
# memory.sh - what --checkpoint-activations and --max-memory cost and save
# on cgpt (context 128, width 256, 4 blocks, 4 heads, batch 16, AdamW, the
# fortunes): peak resident memory and wall time of one cg-train-step call
# against the same call keeping every activation.
#
# usage: bench/memory.sh (from the top of the source tree, after a build)
#
# Environment (defaults in brackets):
#   CG_BIN    cg programs [build/cmd]
#   THREADS   threads [2]
#   STEPS     optimizer steps of a timed call [20]
#   RUNS      timed calls of each configuration, taking turns [3]
#   BUDGETS   --max-memory budgets to try [256M 192M 128M]
#   FORTUNES  [/usr/share/games/fortunes]
#
# Peak memory is the process's own (getrusage, in the --log line) and GNU
# time's maximum resident set size, which agree; wall time is the median
# of the training loop's seconds, with min-max.  A budget near the edge
# can get different plans in different runs (the plan counts what is
# resident when it is made): each plan then has its own row.
set -eu
bin=${CG_BIN:-build/cmd}
threads=${THREADS:-2}
steps=${STEPS:-20}
runs=${RUNS:-3}
budgets=${BUDGETS:-256M 192M 128M}
fortunes=${FORTUNES:-/usr/share/games/fortunes}

say() { echo "memory.sh: $(date +%T): $*" >&2; }

for p in cg-shard cg-init cg-train-step; do
	[ -x "$bin/$p" ] || { say "$bin/$p missing: build first, or set CG_BIN"; exit 1; }
done
for t in jq /usr/bin/time; do
	command -v "$t" >/dev/null || { say "$t missing"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/cg-shard" -q -n 1 --seed 1 -o "$work/fort" "$fortunes"
"$bin/cg-init" -a cgpt -d "$work/fort-0.cgd" --context 128 --width 256 \
	--layers 4 --heads 4 --seed 1 -o "$work/init.cgm"

# Configurations: a name and the options that make it.
configs="plain|
checkpoint|--checkpoint-activations"
for b in $budgets; do
	configs="$configs
max-memory $b|--max-memory $b"
done

r=1
while [ "$r" -le "$runs" ]; do
	printf '%s\n' "$configs" | while IFS='|' read -r name opts; do
		say "run $r: $name"
		# shellcheck disable=SC2086
		/usr/bin/time -f '%M' -o "$work/time" \
			"$bin/cg-train-step" -q -m "$work/init.cgm" \
			-d "$work/fort-0.cgd" --emit model --steps "$steps" \
			--batch 16 --opt adamw --lr 3e-4 --wd 0.1 --seed 1 \
			-j "$threads" $opts --log "$work/log" -o "$work/out.cgm"
		tail -n 1 "$work/log" | jq -c --arg n "$name" \
			--argjson t "$(tail -n 1 "$work/time")" \
			'{name: $n, seconds, chunk, checkpoint, memory_plan,
			  memory_peak, time_rss: ($t * 1024), loss}' >>"$work/all"
	done
	r=$((r + 1))
done

echo "cg-train-step, cgpt 128/256/4/4, batch 16, $steps AdamW steps," \
	"$threads threads, median of $runs"
echo
echo "| configuration | plan | runs | wall s (min-max) | time | peak RSS MiB | RSS | planned MiB |"
echo "|---|---|--:|---|---|---|---|---|"
jq -s -r '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor]
                  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def mib: . / 1048576 | . * 10 | round / 10;
  group_by([.name, .chunk, .checkpoint]) | map({
    name: .[0].name, runs: length,
    plan: ((if .[0].chunk > 0 then "chunks of \(.[0].chunk)" else "whole batch" end)
           + (if .[0].checkpoint then ", checkpointed" else "" end)),
    s: (map(.seconds) | med), lo: (map(.seconds) | min),
    hi: (map(.seconds) | max), peak: (map(.memory_peak) | max),
    trss: (map(.time_rss) | max), planned: (map(.memory_plan) | max) })
  as $rows
  | ($rows[] | select(.name == "plain")) as $p
  | ($rows | sort_by(.name != "plain", .name != "checkpoint", -.planned))[]
  | "| \(.name) | \(.plan) | \(.runs) | \(.s * 100 | round / 100) (\(.lo * 100 | round / 100)-\(.hi * 100 | round / 100)) | \((.s / $p.s - 1) * 1000 | round / 10)% | \(.peak | mib) (time: \(.trss | mib)) | \((.peak / $p.peak - 1) * 1000 | round / 10)% | \(.planned | mib) |"
' "$work/all"
