#!/bin/bash
# pipeline.sh - cg's pipeline stages against PyTorch's
# torch.distributed.pipelining on the same cgpt and the same split:
# STAGES stages, one thread each, GPipe and 1F1B, batch BATCH in MICRO
# micro-batches, AdamW.  cg: cg-train-step --next (the stages cut by
# cg-convert -S -L), each stage with --log, whose timings give the
# share of a step it stood idle; PyTorch: bench/torch_pipe.py
# (ScheduleGPipe or Schedule1F1B, gloo).
#
# Without RATE every stage runs on this machine: cg's through pipes,
# PyTorch's ranks by torch.multiprocessing.  With RATE (e.g. 100mbit),
# on STAGES test hosts (tests/hosts.sh: network namespaces with an sshd
# each, each link capped at RATE both ways by a token bucket): cg's
# stage I on host I-1, each running the next over ssh; PyTorch's rank
# I-1 alone in host I-1's namespace (ip netns exec), gloo over the
# links, its master host 0.  Then the bytes a step are those the links
# carried, from the veths' counters: cg's the difference between the
# calls of 1 + STEPS and of 1 step, over STEPS; PyTorch's each rank's
# interface's over its timed steps.
#
# Each side: the tokens a second of STEPS steps after a first step (cg:
# the wall time of 1 + STEPS steps less that of 1), each stage's CPU
# seconds a step, and each stage's peak resident set size.  cg's idle
# share of a step: each stage's --log, (wait_seconds -
# first_wait_seconds) / (seconds - first_step_seconds), of the longer
# call, beside the same of cg's schedule where stages cost alike and
# links nothing (bench/pipe_bubble.py) and the textbook's bubble
# (N - 1) / (M + N - 1).
#
# usage: bench/pipeline.sh (from the top of the source tree, after a
# build; as root with RATE)
#
# Environment (defaults in brackets): CG_BIN [build/cmd], WIDTH [256],
# LAYERS [4], HEADS [4], CONTEXT [64], BATCH [16], MICRO [4], STAGES [2],
# SPLIT [2] (two stages' cut; more stages are cut evenly), STEPS [4],
# RATE [none: this machine], SCHEDULES [gpipe 1f1b], SIDES [cg torch],
# WIRES [f32] (cg's --wire: with bf16 or q8_0 too, a cg row each), TORCH_WIRES
# [f32] (torch_pipe.py --wire: bf16 casts each stage's output, and so
# the gradient that comes back, to bf16 at the stage boundary),
# PY [/opt/cg-bench-venv/bin/python], FORTUNES [/usr/share/games/fortunes].
set -eu
cd "$(dirname "$0")/.."
top=$PWD
. tests/hosts.sh
CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd)
WIDTH=${WIDTH:-256}
LAYERS=${LAYERS:-4}
HEADS=${HEADS:-4}
CONTEXT=${CONTEXT:-64}
BATCH=${BATCH:-16}
MICRO=${MICRO:-4}
STAGES=${STAGES:-2}
SPLIT=${SPLIT:-2}
STEPS=${STEPS:-4}
RATE=${RATE:-}
SCHEDULES=${SCHEDULES:-gpipe 1f1b}
SIDES=${SIDES:-cg torch}
WIRES=${WIRES:-f32}
TORCH_WIRES=${TORCH_WIRES:-f32}
PY=${PY:-/opt/cg-bench-venv/bin/python}
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
export PATH=$CG_BIN:$PATH LC_ALL=C OMP_NUM_THREADS=1
N=$STAGES

work=$(mktemp -d "${TMPDIR:-/tmp}/cg-pipeline.XXXXXX")
trap '[ -z "${HOSTS_DIR:-}" ] || hosts_down; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
cd "$work"
cg-shard -q -n 1 -o f "$FORTUNES"
cg-init -a cgpt -d f-0.cgd --seed 1 --context "$CONTEXT" --width "$WIDTH" \
	--layers "$LAYERS" --heads "$HEADS" -o m.cgm
# the cuts: layer bounds[i] to bounds[i + 1] on stage i + 1
bounds=(0)
if [ "$N" = 2 ]; then
	bounds+=("$SPLIT")
else
	for ((i = 1; i < N; i++)); do
		bounds+=($((LAYERS * i / N)))
	done
fi
bounds+=("$LAYERS")
cuts=$(IFS=,; echo "${bounds[*]:1:N-1}")
split=
for ((i = 1; i <= N; i++)); do
	cg-convert -S "$i/$N" -L "${bounds[i - 1]}:${bounds[i]}" m.cgm -o "s$i.cgm"
	split="$split ${bounds[i - 1]}:${bounds[i]}"
done
split=${split# }
if [ -n "$RATE" ]; then
	why=$(hosts_skip_reason)
	[ -z "$why" ] || { echo "pipeline.sh: $why" >&2; exit 1; }
	hosts_up "$N" "$RATE"
	where="$N hosts, $RATE"
else
	where="this machine"
fi
# stage I's command (I = 2..N) in stageI.sh, each running the next
for ((i = N; i >= 2; i--)); do
	next=
	if [ "$i" -lt "$N" ]; then
		if [ -n "$RATE" ]; then
			next="--next '$HOSTS_SSH host$i sh $work/stage$((i + 1)).sh'"
		else
			next="--next 'sh stage$((i + 1)).sh'"
		fi
	fi
	echo "cd $work && exec /usr/bin/time -f '%U %S %M' -o cpu.$i env OMP_NUM_THREADS=1 $CG_BIN/cg-train-step -q -m s$i.cgm -e model --opt adamw --lr 1e-3 -j 1 --log log.$i -o o$i.cgm $next" >"stage$i.sh"
done

# the bytes all hosts have sent on their links so far
sent() {
	local i s=0 rx tx
	for ((i = 0; i < N; i++)); do
		read -r rx tx < <(hosts_bytes "$i")
		s=$((s + rx))
	done
	echo "$s"
}

# cg SCHED K WIRE: "wall bytes cpu1..cpuN rss1..rssN" of K steps (a
# local stage's CPU less its child's: GNU time counts the stage it
# waited for)
cg() {
	local t0 t1 b0=0 b1=0 pre= next="sh stage2.sh" i c=()
	rm -f log.* cpu.*
	if [ -n "$RATE" ]; then
		pre="ip netns exec cgn${HOSTS_PREFIX}h0"
		next="$HOSTS_SSH host1 sh $work/stage2.sh"
		b0=$(sent)
	fi
	t0=$(date +%s.%N)
	$pre /usr/bin/time -f '%U %S %M' -o cpu.1 env OMP_NUM_THREADS=1 \
		"$CG_BIN/cg-train-step" -q -m s1.cgm -d f-0.cgd -e model \
		--opt adamw --lr 1e-3 -j 1 -k "$2" -b "$BATCH" \
		--micro-batches "$MICRO" --pipeline "$1" --wire "$3" --log log.1 \
		-o o1.cgm --next "$next"
	t1=$(date +%s.%N)
	[ -z "$RATE" ] || b1=$(sent)
	for ((i = 1; i <= N; i++)); do
		c[i]=$(awk '{ print $1 + $2 }' "cpu.$i")
	done
	printf '%s %s' "$(echo "$t1 - $t0" | bc -l)" $((b1 - b0))
	for ((i = 1; i <= N; i++)); do
		if [ -z "$RATE" ] && [ "$i" -lt "$N" ]; then
			printf ' %s' "$(echo "${c[i]} - ${c[i + 1]}" | bc -l)"
		else
			printf ' %s' "${c[i]}"
		fi
	done
	for ((i = 1; i <= N; i++)); do
		printf ' %s' "$(awk '{ print int($3 / 1024) }' "cpu.$i")"
	done
	echo
}

# torch SCHED: torch.jsonl, one line a rank
torch() {
	local i pids=() rc=0
	local args=(--width "$WIDTH" --layers "$LAYERS" --heads "$HEADS"
		--context "$CONTEXT" --batch "$BATCH" --micro "$MICRO"
		--steps "$STEPS" --stages "$N" --schedule "$1" --threads 1
		--wire "${2:-f32}")
	[ "$N" = 1 ] || args+=(--cuts "$cuts")
	if [ -z "$RATE" ]; then
		"$PY" "$top/bench/torch_pipe.py" "${args[@]}" >torch.jsonl
		return
	fi
	for ((i = 0; i < N; i++)); do
		ip netns exec "cgn${HOSTS_PREFIX}h$i" timeout 900 env \
			GLOO_SOCKET_IFNAME="cgp${HOSTS_PREFIX}h$i" \
			OMP_NUM_THREADS=1 "$PY" "$top/bench/torch_pipe.py" \
			"${args[@]}" --rank "$i" --master "$HOSTS_NET.1" \
			--port 29571 --ifname "cgp${HOSTS_PREFIX}h$i" \
			>"torch.$i.jsonl" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	cat torch.[0-9]*.jsonl >torch.jsonl
	return $rc
}

# the micro-batches a step runs: of ceil(BATCH / MICRO) rows each
most=$(((BATCH + MICRO - 1) / MICRO))
nmb=$(((BATCH + most - 1) / most))
bubble=$(echo "($N - 1) / ($nmb + $N - 1)" | bc -l)
echo "pipeline.sh: $where; split $split; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf '| side | schedule | where | split | tokens/s | bytes/step on the links | CPU s/step per stage | peak RSS MiB per stage | idle share of a step per stage | the same, modelled | (N-1)/(M+N-1) |\n'
printf '|---|---|---|---|---:|---:|---|---|---|---|---:|\n'
for sched in $SCHEDULES; do
	for wire in $WIRES; do
		[[ " $SIDES " == *" cg "* ]] || continue
		a=($(cg "$sched" 1 "$wire"))
		b=($(cg "$sched" $((1 + STEPS)) "$wire"))
		step=$(echo "(${b[0]} - ${a[0]}) / $STEPS" | bc -l)
		cpu= rss= idle=
		for ((i = 1; i <= N; i++)); do
			cpu="$cpu $(printf '%.3f' "$(echo "(${b[i + 1]} - ${a[i + 1]}) / $STEPS" | bc -l)")"
			rss="$rss ${b[N + i + 1]}"
			idle="$idle $(jq -r '(.wait_seconds - .first_wait_seconds) / (.seconds - .first_step_seconds) * 1000 | round / 1000' "log.$i")"
		done
		if [ -n "$RATE" ]; then
			bytes=$(((b[1] - a[1]) / STEPS))
		else
			# what the pipes carry: cg-probe --plan's count (tests/111)
			bytes="$(printf 'h0 1 1G 1G\nh1 1 1G -\n' |
				cg-probe --plan - -m m.cgm -b "$BATCH" \
					--micro-batches "$MICRO" --wire "$wire" --json |
				jq -r '.bytes_down + .bytes_up') (pipes, 2 stages)"
		fi
		side=cg
		[ "$wire" = f32 ] || side="cg --wire $wire"
		printf '| %s | %s | %s | %s | %.0f | %s |%s |%s |%s | %s | %.3f |\n' \
			"$side" "$sched" "$where" "$split" \
			"$(echo "$BATCH * $CONTEXT / $step" | bc -l)" "$bytes" \
			"$cpu" "$rss" "$idle" \
			"$(python3 "$top/bench/pipe_bubble.py" "$N" "$nmb" "$sched")" \
			"$bubble"
	done
	for twire in $TORCH_WIRES; do
		[[ " $SIDES " == *" torch "* ]] || continue
		torch "$sched" "$twire"
		if [ -n "$RATE" ]; then
			bytes=$(jq -s "map(.tx_bytes) | add / $STEPS | round" torch.jsonl)
		else
			bytes="not measured"
		fi
		tside=PyTorch
		[ "$twire" = f32 ] || tside="PyTorch, $twire at stage boundaries"
		printf '| %s | %s | %s | %s | %.0f | %s | %s | %s | not measured | - | %.3f |\n' \
			"$tside" "$sched" "$where" "$split" \
			"$(jq -s 'map(select(.rank == 0))[0].tokens_per_s' torch.jsonl)" \
			"$bytes" \
			"$(jq -rs 'sort_by(.rank) | map(.cpu_s_per_step * 1000 | round / 1000 | tostring) | join(" ")' torch.jsonl)" \
			"$(jq -rs 'sort_by(.rank) | map(.rss_mib | round | tostring) | join(" ")' torch.jsonl)" \
			"$bubble"
	done
done
echo "pipeline.sh: load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
