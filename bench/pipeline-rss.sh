#!/bin/sh
# pipeline-rss.sh - peak resident memory of each pipeline stage against
# the unsplit call: a cgpt (context 64, width WIDTH, LAYERS blocks, 4
# heads, AdamW) trained STEPS steps of batch 8 in 4 micro-batches on the
# fortunes, whole and as N = 2 and 4 stages through pipes on this
# machine, each stage's peak measured by GNU time (maximum resident set
# size).  The joined stages are checked to be the unsplit call's bytes.
#
# usage: bench/pipeline-rss.sh (from the top of the source tree, after a
# build)
#
# Environment (defaults in brackets):
#   CG_BIN    cg programs [build/cmd]
#   THREADS   threads [2]
#   WIDTH     [512]
#   LAYERS    [8]
#   STEPS     [2]
#   FORTUNES  [/usr/share/games/fortunes]
set -eu
bin=$(cd "${CG_BIN:-build/cmd}" && pwd)
threads=${THREADS:-2}
width=${WIDTH:-512}
layers=${LAYERS:-8}
steps=${STEPS:-2}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
PATH=$bin:$PATH
export PATH

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cg-shard -q -n 1 -o f "$fortunes"
cg-init -a cgpt -d f-0.cgd --seed 1 --context 64 --width "$width" \
	--layers "$layers" --heads 4 -o m.cgm
common="-e model --opt adamw --lr 1e-3 -j $threads -q"
/usr/bin/time -f %M -o rss.whole cg-train-step -m m.cgm -d f-0.cgd \
	$common -k "$steps" -b 8 --micro-batches 4 -o whole.cgm
params=$(cg-inspect --json m.cgm | jq '[.tensors[].count] | add')
printf '| stages | stage | blocks | parameters | peak RSS (MiB) |\n'
printf '|---:|---:|---|---:|---:|\n'
printf '| 1 (unsplit) | - | %d | %d | %d |\n' "$layers" "$params" \
	$(($(cat rss.whole) / 1024))
for n in 2 4; do
	rm -f s*.cgm o*.cgm rss.[0-9]*
	for i in $(seq 1 "$n"); do
		cg-convert -S "$i/$n" m.cgm -o "s$i.cgm"
	done
	# stage I's command in stageI.sh, each running the next's
	for i in $(seq 2 "$n"); do
		next=
		[ "$i" -lt "$n" ] && next="--next 'sh stage$((i + 1)).sh'"
		echo "exec /usr/bin/time -f %M -o rss.$i cg-train-step -m s$i.cgm $common -o o$i.cgm $next" > "stage$i.sh"
	done
	/usr/bin/time -f %M -o rss.1 cg-train-step -m s1.cgm -d f-0.cgd \
		$common -k "$steps" -b 8 --micro-batches 4 -o o1.cgm \
		--next 'sh stage2.sh'
	cg-convert -J o*.cgm -o j.cgm
	cmp -s j.cgm whole.cgm || { echo "pipeline-rss.sh: $n stages: not the unsplit bytes" >&2; exit 1; }
	for i in $(seq 1 "$n"); do
		blocks=$(tar xOf "s$i.cgm" cg.json | jq -r '.stage.layers | "\(.[0])-\(.[1] - 1)"')
		p=$(tar xOf "s$i.cgm" cg.json | jq '[.tensors[] | select(.name | startswith("opt.") | not) | .shape | reduce .[] as $d (1; . * $d)] | add')
		printf '| %d | %d | %s | %d | %d |\n' "$n" "$i" "$blocks" "$p" \
			$(($(cat "rss.$i") / 1024))
	done
done
