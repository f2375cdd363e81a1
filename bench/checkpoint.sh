#!/bin/sh
# checkpoint.sh - what --checkpoint-activations saves and costs on each
# architecture that has it: peak resident memory and wall time of one
# cg-train-step call of a fixed batch, against the same call keeping
# every activation (the reference), taking turns.
#
# usage: bench/checkpoint.sh (from the top of the source tree, after a
# build)
#
# Environment (defaults in brackets):
#   CG_BIN    cg programs [build/cmd]
#   THREADS   threads [1]
#   BATCH     examples of the image models' batch [64]
#   STEPS     AdamW steps of a timed call [5]
#   RUNS      timed calls of each configuration [3]
#   MODELS    [cddpm-unet cvae-conv cgan-conv cgpt]
#   FASHION   Fashion-MNIST's IDX files [/usr/share/datasets/fashion-mnist]
#   FORTUNES  [/usr/share/games/fortunes]
#
# The models: the U-Net of bench/speed.sh (--unet 16 --hidden 128
# --embed 64, film), the conv cvae at --conv 32 --latent 16, the conv
# cgan of bench/speed.sh (--conv 32), and
# bench/memory.sh's cgpt (context 128, width 256, 4 blocks, batch 16) for
# the architecture that had checkpointing first.  Peak memory is the
# process's own (getrusage, in the --log line) and GNU time's maximum
# resident set size; wall time is the median of the training loop's
# seconds, with min-max; the load average before and after the runs is
# printed with the table.  Each pair of calls also checks that the two
# models are the same bytes.
set -eu
bin=${CG_BIN:-build/cmd}
threads=${THREADS:-1}
batch=${BATCH:-64}
steps=${STEPS:-5}
runs=${RUNS:-3}
models=${MODELS:-cddpm-unet cvae-conv cgan-conv cgpt}
fashion=${FASHION:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}

say() { echo "checkpoint.sh: $(date +%T): $*" >&2; }

for p in cg-shard cg-init cg-train-step; do
	[ -x "$bin/$p" ] || { say "$bin/$p missing: build first, or set CG_BIN"; exit 1; }
done
for t in jq /usr/bin/time; do
	command -v "$t" >/dev/null || { say "$t missing"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for m in $models; do
	case $m in
	cddpm-unet | cvae-conv | cgan-conv)
		[ -e "$work/fm-0.cgd" ] ||
			"$bin/cg-shard" -q -n 1 --seed 1 -o "$work/fm" "$fashion"
		data=$work/fm-0.cgd b=$batch ;;
	cgpt)
		[ -e "$work/ft-0.cgd" ] ||
			"$bin/cg-shard" -q -n 1 --seed 1 -o "$work/ft" "$fortunes"
		data=$work/ft-0.cgd b=16 ;;
	*) say "unknown model $m"; exit 1 ;;
	esac
	case $m in
	cddpm-unet) "$bin/cg-init" -a cddpm -d "$data" --unet 16 \
		--hidden 128 --embed 64 --seed 1 -o "$work/$m.cgm" ;;
	cvae-conv) "$bin/cg-init" -a cvae -d "$data" --conv 32 \
		--latent 16 --seed 1 -o "$work/$m.cgm" ;;
	cgan-conv) "$bin/cg-init" -a cgan -d "$data" --conv 32 --seed 1 \
		-o "$work/$m.cgm" ;;
	cgpt) "$bin/cg-init" -a cgpt -d "$data" --context 128 --width 256 \
		--layers 4 --heads 4 --seed 1 -o "$work/$m.cgm" ;;
	esac
	r=1
	while [ "$r" -le "$runs" ]; do
		for c in plain checkpoint; do
			opt=
			[ $c = checkpoint ] && opt=--checkpoint-activations
			say "$m, run $r: $c"
			# shellcheck disable=SC2086
			/usr/bin/time -f '%M' -o "$work/time" \
				"$bin/cg-train-step" -q -m "$work/$m.cgm" \
				-d "$data" --emit model --steps "$steps" \
				--batch "$b" --opt adamw --lr 1e-3 --seed 1 \
				-j "$threads" $opt --log "$work/log" \
				-o "$work/$c.cgm"
			tail -n 1 "$work/log" | jq -c --arg m "$m" --arg c "$c" \
				--argjson b "$b" \
				--argjson t "$(tail -n 1 "$work/time")" \
				'{model: $m, config: $c, batch: $b, seconds,
				  chunk, checkpoint, memory_plan, memory_peak,
				  time_rss: ($t * 1024)}' >>"$work/all"
		done
		cmp "$work/plain.cgm" "$work/checkpoint.cgm" ||
			{ say "$m: the checkpointed model differs"; exit 1; }
		r=$((r + 1))
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

echo "cg-train-step, $steps AdamW steps, $threads thread(s), median of" \
	"$runs; load average $load0 before, $load1 after"
echo
echo "| model | batch | checkpointed | wall s (min-max) | time | peak RSS MiB | RSS | planned MiB | plan |"
echo "|---|--:|---|---|--:|---|--:|--:|--:|"
jq -s -r '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor]
                  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def mib: . / 1048576 | . * 10 | round / 10;
  def pct(a; b): (a / b - 1) * 1000 | round / 10;
  group_by(.model) | .[] | group_by(.config) | map({
    model: .[0].model, config: .[0].config, batch: .[0].batch,
    s: (map(.seconds) | med), lo: (map(.seconds) | min),
    hi: (map(.seconds) | max), peak: (map(.memory_peak) | max),
    trss: (map(.time_rss) | max), planned: (map(.memory_plan) | max) })
  | (.[] | select(.config == "plain")) as $p
  | sort_by(.config != "plain")[]
  | "| \(.model) | \(.batch) | \(if .config == "plain" then "no" else "yes" end) | \(.s * 100 | round / 100) (\(.lo * 100 | round / 100)-\(.hi * 100 | round / 100)) | \(pct(.s; $p.s))% | \(.peak | mib) (time: \(.trss | mib)) | \(pct(.peak; $p.peak))% | \(.planned | mib) | \(pct(.planned; $p.planned))% |"
' "$work/all"
echo
echo "The checkpointed models are the same bytes as the plain ones (cmp)."
