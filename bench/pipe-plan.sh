#!/bin/bash
# pipe-plan.sh - cg-probe --plan's predicted step time against the step
# time measured, for the split it prints: a cgpt (context CONTEXT, width
# WIDTH, LAYERS blocks, 4 heads, AdamW) trained in BATCH examples a step
# in MICRO micro-batches, every stage on one thread.
#
# Each row: the hosts' figures probed (cg-probe -j 1 at the micro-batch,
# the batch a stage's calls run: PROBE=alone, the default, probes one,
# on an otherwise idle machine, for every host; PROBE=together runs the
# N hosts' probes at once, each host's figure its own, as cg-probe run
# on every host of a cluster at the same time gives them: where hosts
# share cores, as these stages and test hosts share this machine's,
# what each trains while the others run), a hosts file of the N hosts, the plan
# (--micro-batches MICRO, the row's schedule and wire), its stages cut
# as it prints them (cg-convert -S -L), and the stages trained through
# pipes: all on this machine ("local"), or stage I on test host I-1
# (tests/hosts.sh: network namespaces with sshd, each link capped at
# RATE), the next stage run over ssh.  The measured step is (the wall
# time of 1 + STEPS steps - that of 1 step) / STEPS: the start, the
# reads, the writes and ssh's log-in cancel.  So is each stage's CPU
# time (GNU time, user + system), against the plan of the same hosts
# whose figure is the probe's examples a CPU second: what a host of its
# own would train, where this machine's wall clock is shared.  And
# each stage's peak memory against its maximum resident set size (GNU
# time's, of the longer call; a local stage's counts the stages it
# waited for, so only the largest of a chain is its own).
#
# usage: bench/pipe-plan.sh (from the top of the source tree, after a
# build, as root for the hosts' rows)
#
# Environment (defaults in brackets): CG_BIN [build/cmd], WIDTH [256],
# LAYERS [4], CONTEXT [64], BATCH [16], MICRO [4], STEPS [4],
# PROBE [alone],
# RATE [100mbit], ROWS [local1-gpipe local2-gpipe local2-1f1b
# local4-gpipe hosts2-gpipe hosts2-gpipe-bf16], FORTUNES [/usr/share/games/fortunes],
# HOSTS_RELAY [CG_BIN/../tests/unit/linkrelay].
set -u
cd "$(dirname "$0")/.."
. tests/hosts.sh
CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd) || exit 1
WIDTH=${WIDTH:-256}
LAYERS=${LAYERS:-4}
CONTEXT=${CONTEXT:-64}
BATCH=${BATCH:-16}
MICRO=${MICRO:-4}
STEPS=${STEPS:-4}
RATE=${RATE:-100mbit}
PROBE=${PROBE:-alone}
case $PROBE in
together | alone) ;;
*) echo "pipe-plan.sh: PROBE=$PROBE: not together or alone" >&2; exit 2 ;;
esac
ROWS=${ROWS:-local1-gpipe local2-gpipe local2-1f1b local4-gpipe hosts2-gpipe hosts2-gpipe-bf16}
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
export HOSTS_RELAY=${HOSTS_RELAY:-$CG_BIN/../tests/unit/linkrelay}
export PATH=$CG_BIN:$PATH LC_ALL=C OMP_NUM_THREADS=1

work=$(mktemp -d "${TMPDIR:-/tmp}/cg-pipe-plan.XXXXXX") || exit 1
up=0
trap '[ $up = 0 ] || hosts_down; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
cd "$work"
cg-shard -q -n 1 -o f "$FORTUNES" || exit 1
cg-init -a cgpt -d f-0.cgd --seed 1 --context "$CONTEXT" --width "$WIDTH" \
	--layers "$LAYERS" --heads 4 -o m.cgm || exit 1
mb=$(((BATCH + MICRO - 1) / MICRO))

now() { date +%s.%N; }

# chain N WHERE: stage I's command (I = 2..N) in stageI.sh, each
# running the next; over ssh to host I-1 where WHERE is hosts
chain() {
	local n=$1 where=$2 i next
	for ((i = n; i >= 2; i--)); do
		next=
		if [ "$i" -lt "$n" ]; then
			if [ "$where" = hosts ]; then
				next="--next '$HOSTS_SSH host$i sh $work/stage$((i + 1)).sh'"
			else
				next="--next 'sh stage$((i + 1)).sh'"
			fi
		fi
		echo "cd $work && exec /usr/bin/time -f '%U %S %M' -o cpu.$i env OMP_NUM_THREADS=1 $CG_BIN/cg-train-step -q -m s$i.cgm -e model --opt adamw --lr 1e-3 -j 1 -o o$i.cgm $next" >"stage$i.sh"
	done
}

# run N WHERE K SCHED WIRE: K steps through the stages; prints seconds
run() {
	local n=$1 where=$2 k=$3 sched=$4 wire=$5 t0 t1 next pre=
	if [ "$where" = hosts ]; then
		next="$HOSTS_SSH host1 sh $work/stage2.sh"
		pre="ip netns exec cgn${HOSTS_PREFIX}h0"
	else
		next="sh stage2.sh"
	fi
	# one stage: the unsplit call, whose chunks are the micro-batches
	local stage=(-m s1.cgm --pipeline "$sched" --wire "$wire" --next "$next")
	[ "$n" -gt 1 ] || stage=(-m m.cgm)
	t0=$(now)
	$pre /usr/bin/time -f '%U %S %M' -o cpu.1 \
		env OMP_NUM_THREADS=1 "$CG_BIN/cg-train-step" -q "${stage[@]}" \
		-d f-0.cgd -e model --opt adamw --lr 1e-3 -j 1 -k "$k" \
		-b "$BATCH" --micro-batches "$MICRO" -o o1.cgm || return 1
	t1=$(now)
	# the wall seconds, then each stage's CPU seconds: GNU time counts
	# the children a process waited for, so a local stage's less the
	# next stage's (on a host, its child is ssh, whose CPU counts)
	local c=()
	for ((i = 1; i <= n; i++)); do
		c[i]=$(awk '{ print $1 + $2 }' "cpu.$i")
	done
	printf '%s' "$(echo "$t1 - $t0" | bc -l)"
	for ((i = 1; i <= n; i++)); do
		if [ "$where" = local ] && [ "$i" -lt "$n" ]; then
			printf ' %s' "$(echo "${c[i]} - ${c[i + 1]}" | bc -l)"
		else
			printf ' %s' "${c[i]}"
		fi
	done
	for ((i = 1; i <= n; i++)); do
		printf ' %s' "$(awk '{ print int($3 / 1024) }' "cpu.$i")"
	done
	echo
}

printf '| row | stages | where | schedule | wire | probe ex/s, each host | split | predicted s/step | measured s/step | measured/predicted | CPU s/step per stage, predicted/measured | bytes/step down (predicted) | peak MiB per stage, predicted/max RSS |\n'
printf '|---|---:|---|---|---|---:|---|---:|---:|---:|---|---:|---|\n'
for row in $ROWS; do
	case $row in
	local1-*) n=1 where=local link=- ;;
	local2-*) n=2 where=local link=1000G ;;
	local4-*) n=4 where=local link=1000G ;;
	hosts2-*) n=2 where=hosts link=${RATE%mbit}M ;;
	*) echo "pipe-plan.sh: $row: no such row" >&2; exit 1 ;;
	esac
	case $row in *1f1b*) sched=1f1b ;; *) sched=gpipe ;; esac
	case $row in *bf16*) wire=bf16 ;; *) wire=f32 ;; esac
	if [ "$where" = hosts ] && [ $up = 0 ]; then
		why=$(hosts_skip_reason)
		[ -z "$why" ] || { echo "pipe-plan.sh: $row: $why" >&2; continue; }
		hosts_up 2 "$RATE" || exit 1
		up=1
	fi
	# the hosts' figures, just before the row (the load of this
	# machine moves): one thread at the micro-batch, a probe for each
	# host at once (or one for all)
	np=$n
	[ "$PROBE" = together ] || np=1
	for ((i = 0; i < np; i++)); do
		cg-probe -m m.cgm -d f-0.cgd -b "$mb" -j 1 --seconds 5 \
			--json >"probe$i.json" &
	done
	for ((i = 0; i < np; i++)); do
		wait -n || exit 1
	done
	: >hosts
	: >cpuhosts
	rate=
	for ((i = 0; i < n; i++)); do
		p=probe$((np > 1 ? i : 0)).json
		l=$link
		[ "$i" -lt $((n - 1)) ] || l=-
		r=$(jq .examples_per_s "$p")
		rate="$rate${rate:+ }$(printf '%.2f' "$r")"
		echo "h$i $r 64G $l" >>hosts
		# and in examples a CPU second: the figure of a host of its own
		echo "h$i $(jq '.examples / .cpu_seconds' "$p") 64G $l" >>cpuhosts
	done
	echo "pipe-plan.sh: $row: one thread a host trains $rate examples/s at batch $mb" >&2
	cpuplan=$(cg-probe --plan cpuhosts -m m.cgm -b "$BATCH" \
		--micro-batches "$MICRO" --pipeline "$sched" --wire "$wire" \
		--json) || exit 1
	plan=$(cg-probe --plan hosts -m m.cgm -b "$BATCH" \
		--micro-batches "$MICRO" --pipeline "$sched" --wire "$wire" \
		--json) || exit 1
	rm -f s*.cgm o*.cgm
	for ((i = 1; i <= n; i++)); do
		l=$(jq -r ".stages[$((i - 1))].layers | \"\(.[0]):\(.[1])\"" <<<"$plan")
		cg-convert -S "$i/$n" -L "$l" m.cgm -o "s$i.cgm" || exit 1
	done
	chain "$n" "$where"
	a=($(run "$n" "$where" 1 "$sched" "$wire")) || exit 1
	b=($(run "$n" "$where" $((1 + STEPS)) "$sched" "$wire")) || exit 1
	meas=$(echo "(${b[0]} - ${a[0]}) / $STEPS" | bc -l)
	cpu=
	for ((i = 1; i <= n; i++)); do
		cpu="$cpu $(printf '%.3f/%.3f' \
			"$(jq ".stages[$((i - 1))].compute_s" <<<"$cpuplan")" \
			"$(echo "(${b[i]} - ${a[i]}) / $STEPS" | bc -l)")"
	done
	pred=$(jq .step_s <<<"$plan")
	rss=
	for ((i = 1; i <= n; i++)); do
		rss="$rss $(jq ".stages[$((i - 1))].peak_bytes / 1048576 | floor" <<<"$plan")/${b[n + i]}"
	done
	printf '| %s | %d | %s | %s | %s | %s | %s | %.3f | %.3f | %.2f |%s | %s |%s |\n' \
		"$row" "$n" "$where" "$sched" "$wire" "$rate" \
		"$(jq -r '[.stages[].layers | "\(.[0]):\(.[1])"] | join(" ")' <<<"$plan")" \
		"$pred" "$meas" "$(echo "$meas / $pred" | bc -l)" "$cpu" \
		"$(jq .bytes_down <<<"$plan")" "$rss"
done
