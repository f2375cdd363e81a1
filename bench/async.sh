#!/bin/sh
# async.sh - four workers, one of them 4x slower for real: wall time to a
# target held-out loss for lockstep rounds, time-boxed rounds, and the
# asynchronous inbox, with and without staleness weighting.
#
# usage: bench/async.sh [MODEL...]       (as root; MODEL: cvae, cgpt)
#
# Each worker is a process (one thread) in a CPU cgroup of its own: three
# capped at FAST (default 40000 of 100000 us, 0.4 of a CPU) and one at
# FAST/4, a quarter of their speed.  cgroup v2's cpu.max where
# /sys/fs/cgroup has the cpu controller, else cgroup v1's
# cpu.cfs_quota_us; every group of the largest weight, so that other work
# on the machine does not take their share.  The caps add up to 1.3 CPUs:
# on a 2-CPU machine the coordinator (cg-reduce, cg-apply, cg-inbox) has
# the rest, outside the groups.
#
# Rows, each from the same first model (cg-init --seed 1), DiLoCo deltas
# of H local steps (Adam or AdamW, a state file a worker), batch B:
#   lockstep      rounds: the four run H steps, cg-reduce | cg-apply
#                 (outer Nesterov), the next round starts when the
#                 slowest is done
#   timebox       rounds: the four run until the time the fast workers
#                 take for H steps (cg-train-step --time-limit, the
#                 median of lockstep's fast calls), the reduction weighs
#                 each delta by its examples
#   async         an inbox (cg-inbox in a loop, --max-staleness 1000,
#                 --max-inputs 1): each worker runs H steps from the
#                 newest published model, drops its delta in the inbox,
#                 and starts again; a pass applies the first delta there,
#                 stale or not, at full weight (constant), as FedAsync
#                 applies one update at a time
#   async-poly    the same, each delta weighed by 1/(1+s)^0.5 for its
#                 staleness s (cg-reduce --staleness-weight poly:0.5)
#   async-hinge   the same, hinge:0.5,4 (full weight up to 4 steps stale)
# Lockstep runs ROUNDS rounds (4 x H x B examples each), the others on to
# 1.5 times as many examples (the loss at equal examples is that of
# their last model within lockstep's count); time counts the training and the exchange, not
# the evaluations, which score copies of the models afterwards: every
# lockstep and timebox round, and for async the first model published
# after each further 4 x H x B examples (the same grid as lockstep).
# The outer step is plain averaging (OUTER_LR 1, OUTER_MOMENTUM 0: each
# round adds the mean delta, as FedAvg does); the asynchronous rows use
# it with the learning rate over 4 (ASYNC_LR): a pass applies one
# worker's delta, not the mean of four, so four passes move the model as
# one round does (FedAsync's mixing weight 1/4).  Each worker's update
# goes into the inbox under the time it came, and a pass takes one, the
# freshest (--max-inputs 1): the coordinator keeps up when a pass is
# shorter than the time between updates, which H sets.
#
# Output: a table a row: the time to TARGET, the speed-up over lockstep,
# the loss at equal examples and its gap to lockstep's, and the
# staleness of the deltas used (mean, max).  TARGET defaults to the loss
# lockstep has after 3/4 of its rounds; the trace of every row (elapsed
# s, examples, loss) goes to standard error.
#
# Environment: CG_BIN (programs, default build/cmd), DATA, FORTUNES,
# FAST (40000), ROUNDS, H, B, TARGET (per model: TARGET_cvae,
# TARGET_cgpt), ROWS (all five), REPEAT (1: how many times each async row
# runs; the table then ends with each one's mean and range),
# KEEP (a directory to keep the runs in).
set -eu
models=${*:-cvae cgpt}
bin=${CG_BIN:-build/cmd}
PATH=$(cd "$bin" && pwd):$PATH
fast=${FAST:-40000}
slow=$((fast / 4))
rows=${ROWS:-lockstep timebox async async-poly async-hinge}
repeat=${REPEAT:-1}
# with REPEAT n, each async row n times, in turns (async.1 async-hinge.1
# async.2 ...), so that a slow spell of the machine falls on all of them
if [ "$repeat" -gt 1 ]; then
	once= again=
	for row in $rows; do
		case $row in
		async*) again="$again $row" ;;
		*) once="$once $row" ;;
		esac
	done
	rows=$once
	for k in $(seq "$repeat"); do
		for row in $again; do rows="$rows $row.$k"; done
	done
fi
export LC_ALL=C

[ "$(id -u)" = 0 ] || { echo "async.sh: needs root (cgroups)" >&2; exit 1; }
for p in jq flock bc; do
	command -v $p >/dev/null || { echo "async.sh: no $p" >&2; exit 1; }
done

work=$(mktemp -d)
groups=
cleanup() {
	[ ! -f "$work/pids" ] || kill $(cat "$work/pids") 2>/dev/null || true
	for g in $groups; do
		[ -d "$g" ] || continue
		for p in $(cat "$g/cgroup.procs" 2>/dev/null); do
			kill -9 "$p" 2>/dev/null || true
		done
		sleep 0.2
		rmdir "$g" 2>/dev/null || true
	done
	if [ -n "${KEEP:-}" ]; then
		mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

root=/sys/fs/cgroup
i=0
for w in 0 1 2 3; do
	q=$fast
	[ $w -lt 3 ] || q=$slow
	if [ -f "$root/cgroup.controllers" ]; then
		g=$root/cg-async-w$w.$$
		mkdir "$g"
		echo 10000 >"$g/cpu.weight"
		echo "$q 100000" >"$g/cpu.max"
		how="cgroup v2 cpu.max"
	else
		g=$root/cpu/cg-async-w$w.$$
		mkdir "$g"
		echo 262144 >"$g/cpu.shares"
		echo 100000 >"$g/cpu.cfs_period_us"
		echo "$q" >"$g/cpu.cfs_quota_us"
		how="cgroup v1 cpu.cfs_quota_us"
	fi
	groups="$groups $g"
	eval "g$w=\$g"
done
echo "caps: $how $fast, $fast, $fast and $slow of 100000 us (worker 3 the slow one)" >&2

# ingroup W CMD...: run CMD in worker W's group
ingroup() {
	eval "_g=\$g$1"
	shift
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$_g" "$@"
}

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l; }

for model in $models; do
	case $model in
	cvae)
		data=${DATA:-/usr/share/datasets/fashion-mnist}
		cg-shard -q -n 4 --strategy stratified --seed 1 -o "$work/w" "$data"
		cg-shard -q -n 1 -o "$work/all" "$data"
		cg-shard -q -n 1 --test -o "$work/held" "$data"
		held=$work/held-0.cgd
		init="-a cvae"
		train="--seed 1"
		metric=nelbo
		h=${H:-800} b=${B:-32} rounds=${ROUNDS:-8}
		target=${TARGET_cvae:-${TARGET:-}}
		;;
	cgpt)
		data=${FORTUNES:-/usr/share/games/fortunes}
		cg-shard -q -n 4 --strategy stratified --holdout-fraction 0.05 \
			--holdout "$work/held.cgd" --seed 1 -o "$work/w" "$data"
		cg-shard -q -n 1 --holdout-fraction 0.05 \
			--holdout "$work/held1.cgd" --seed 1 -o "$work/all" "$data"
		held=$work/held.cgd
		init="-a cgpt --context 64 --width 128 --layers 2 --heads 4"
		train="--seed 1 --opt adamw --lr 1e-3 --wd 0.1"
		metric=bpb
		h=${H:-200} b=${B:-8} rounds=${ROUNDS:-8}
		target=${TARGET_cgpt:-${TARGET:-}}
		;;
	*)
		echo "async.sh: no such model '$model' (cvae, cgpt)" >&2
		exit 2
		;;
	esac
	olr=${OUTER_LR:-1}
	omu=${OUTER_MOMENTUM:-0}
	alr=${ASYNC_LR:-$(echo "$olr / 4" | bc -l | sed 's/^\./0./')}
	# shellcheck disable=SC2086
	cg-init $init -d "$work/all-0.cgd" --seed 1 -o "$work/init.cgm"
	grid=$((4 * h * b))
	total=$((rounds * grid))
	more=$((total * 3 / 2))
	ev() { cg-eval --json -m "$1" -d "$held" | jq -r ".$metric"; }

	# one worker's call: W MODEL OUTPUT [more options]
	step() {
		w=$1 m=$2 o=$3
		shift 3
		# shellcheck disable=SC2086
		ingroup "$w" cg-train-step -q -m "$m" -d "$work/w-$w.cgd" \
			--emit delta --steps "$h" --batch "$b" $train -j 1 \
			--state "$d/w$w.state" "$@" -o "$o"
	}

	for row in $rows; do
		d=$work/$model-$row
		mkdir -p "$d/hist"
		: >"$d/trace"
		case $row in
		lockstep | timebox)
			cp "$work/init.cgm" "$d/model.cgm"
			limit=
			if [ $row = timebox ]; then
				[ -f "$work/$model-lockstep/fast" ] || {
					echo "async.sh: timebox needs the lockstep row first" >&2
					exit 1
				}
				limit="--time-limit $(cat "$work/$model-lockstep/fast")"
				hstep=1000000
			fi
			el=0 ex=0 r=0 runto=$total
			[ $row = lockstep ] || runto=$more
			while [ "$ex" -lt "$runto" ]; do
				r=$((r + 1))
				t0=$(now)
				pids=
				for w in 0 1 2 3; do
					(
						s0=$(now)
						if [ -n "$limit" ]; then
							# shellcheck disable=SC2086
							step $w "$d/model.cgm" "$d/d$w.cgg" \
								--steps $hstep $limit
						else
							step $w "$d/model.cgm" "$d/d$w.cgg"
						fi
						since "$s0" >"$d/t$w"
					) &
					pids="$pids $!"
				done
				for p in $pids; do wait "$p"; done
				cg-reduce -q "$d"/d?.cgg | cg-apply -m "$d/model.cgm" \
					--outer nesterov --outer-lr "$olr" \
					--outer-momentum "$omu" -o "$d/model.cgm"
				el=$(echo "$el + $(since "$t0")" | bc -l)
				n=0
				for w in 0 1 2 3; do
					n=$((n + $(cg-inspect --json "$d/d$w.cgg" | jq -r .samples)))
				done
				ex=$((ex + n))
				cp "$d/model.cgm" "$d/hist/$r.cgm"
				echo "$r $el $ex 0" >>"$d/trace"
				[ $row != lockstep ] || cat "$d/t0" "$d/t1" "$d/t2" >>"$d/fastcalls"
			done
			[ $row != lockstep ] ||
				sort -g "$d/fastcalls" | awk '{ v[NR] = $1 } END {
					printf "%.2f\n", v[int((NR + 1) / 2)] }' >"$d/fast"
			;;
		async*)
			case ${row%.*} in
			async) rule= ;;
			async-poly) rule="--staleness-weight poly:0.5" ;;
			async-hinge) rule="--staleness-weight hinge:0.5,4" ;;
			esac
			box=$d/box
			cg-inbox -q -m "$work/init.cgm" "$box"
			: >"$work/pids"
			t0=$(now)
			for w in 0 1 2 3; do
				(
					k=0
					mkdir -p "$d/out$w"
					while [ ! -f "$d/stop" ]; do
						k=$((k + 1))
						step $w "$box/model.cgm" "$d/out$w/$k.cgg" ||
							[ -f "$d/stop" ] || exit 1
						# into the inbox under the time it came, so that
						# the first by name is the first come
						mv "$d/out$w/$k.cgg" \
							"$box/inbox/$(date +%s%N)-w$w-$k.cgg"
					done
				) &
				echo $! >>"$work/pids"
			done
			last=$(cg-inspect --json "$box/model.cgm" | jq -r .step)
			ex=0 next=$grid
			while [ "$ex" -lt "$more" ]; do
				cg-inbox -q --max-staleness 1000 --max-inputs 1 \
					${rule:+-R "$rule"} \
					-A "--outer-lr $alr --outer-momentum $omu" "$box"
				s=$(cg-inspect --json "$box/model.cgm" | jq -r .step)
				if [ "$s" = "$last" ]; then
					sleep 0.05
					continue
				fi
				el=$(since "$t0")
				last=$s
				ex=$(($(find "$box/used" -type f | wc -l) * h * b))
				if [ "$ex" -ge "$next" ]; then
					cp "$box/model.cgm" "$d/hist/$s.cgm"
					echo "$s $el $ex" >>"$d/trace.raw"
					while [ "$next" -le "$ex" ]; do
						next=$((next + grid))
					done
				fi
			done
			touch "$d/stop"
			for p in $(cat "$work/pids"); do
				pkill -P "$p" 2>/dev/null || true
				kill "$p" 2>/dev/null || true
			done
			wait
			: >"$work/pids"
			# the staleness of every delta used: used/STEP/ holds those
			# that made the model of STEP, from that of STEP - 1
			for f in "$box"/used/*/*; do
				s=$(basename "$(dirname "$f")")
				bs=$(cg-inspect --json "$f" | jq -r .base.step)
				echo $((s - 1 - bs))
			done >"$d/staleness"
			while read -r s el ex; do
				echo "$s $el $ex" >>"$d/trace"
			done <"$d/trace.raw"
			;;
		esac
		# evaluate
		: >"$d/scored"
		while read -r r el ex st; do
			echo "$r $el $ex $(ev "$d/hist/$r.cgm")" >>"$d/scored"
		done <"$d/trace"
		sed "s/^/$model $row /" "$d/scored" >&2
	done

	# the table
	ls=$work/$model-lockstep/scored
	[ -n "$target" ] || {
		n=$(wc -l <"$ls")
		target=$(sed -n "$(((3 * n + 3) / 4))p" "$ls" | cut -d' ' -f4)
	}
	lt=$(awk -v t="$target" '$4 <= t { print $2; exit }' "$ls")
	lf=$(tail -n 1 "$ls" | cut -d' ' -f4)
	echo
	echo "$model: target held-out $metric $target; $total examples a row" \
		"($rounds x 4 x $h steps x batch $b); outer lr $olr (async $alr)," \
		"momentum $omu"
	echo
	echo "| row | s to target | speed-up | $metric at equal examples | vs lockstep | examples | staleness mean / max |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for row in $rows; do
		d=$work/$model-$row
		t=$(awk -v t="$target" '$4 <= t { print $2; exit }' "$d/scored")
		f=$(awk -v n="$total" '$3 <= n { f = $4 } END { print f }' "$d/scored")
		e=$(awk -v n="$total" '$3 <= n { e = $3 } END { print e }' "$d/scored")
		if [ -n "$t" ] && [ -n "$lt" ]; then
			sp=$(echo "$lt / $t" | bc -l)
			t=$(printf '%.1f' "$t")
			sp=$(printf '%.2fx' "$sp")
		else
			t="not reached" sp=-
		fi
		gap=$(echo "($f / $lf - 1) * 100" | bc -l)
		st=-
		[ ! -s "$d/staleness" ] || st=$(awk '{ s += $1; if ($1 > m) m = $1 }
			END { printf "%.1f / %d", s / NR, m }' "$d/staleness")
		printf '| %s | %s | %s | %.4f | %+.2f%% | %s | %s |\n' "$row" "$t" \
			"$sp" "$f" "$gap" "$e" "$st"
		echo "${row%.*} $gap $t" >>"$work/$model-gaps"
	done
	[ "$repeat" -le 1 ] || {
		echo
		echo "| row, $repeat runs | gap at equal examples: mean (min, max) | s to target: mean |"
		echo "|---|---:|---:|"
		awk '$1 ~ /^async/ { n[$1]++; s[$1] += $2
			if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2
			if (!($1 in hi) || $2 > hi[$1]) hi[$1] = $2
			if ($3 != "not") { tn[$1]++; ts[$1] += $3 } }
			END { for (r in n) printf "| %s | %+.2f%% (%+.2f%%, %+.2f%%) | %s |\n",
				r, s[r] / n[r], lo[r], hi[r],
				tn[r] == n[r] ? sprintf("%.1f", ts[r] / tn[r]) : "not always reached" }' \
			"$work/$model-gaps" | sort
	}
done
