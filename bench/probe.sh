#!/bin/sh
# probe.sh - cg-probe on a host slowed 4x for real: the same probe run
# free and in a CPU cgroup capped at a quarter of one CPU, alternated;
# the capped weight over the free one, which should be 1/4.
#
# usage: bench/probe.sh [RUNS]
#   RUNS probes of each kind (5), free and capped alternated, each one
#   thread, SECONDS (5) timed after a 1 s warm-up, in 5 windows; the
#   figure is the median of the runs' examples/s.  Models: the cvae of
#   cg-init's defaults on Fashion-MNIST (batch 32), and a cgpt (context
#   128, width 128, 2 blocks) on the fortunes (batch 8).  The cap is
#   cgroup v2's cpu.max "25000 100000" where /sys/fs/cgroup is cgroup
#   v2 with the cpu controller, else cgroup v1's cpu.cfs_quota_us
#   25000 of cpu.cfs_period_us 100000; the free probe runs in a group
#   of its own, uncapped, both of the largest weight (as in
#   tests/073-probe.bats); it needs root.
#   Then a round in each group, which is what a probe's weight is for:
#   one cg-train-step call of the steps the free probe's rate does in
#   ROUND_SECONDS (20), a quarter of them capped; its examples over its
#   wall time, capped over free, beside the probes' ratio.
#
# Environment: CG_BIN (programs, default build/cmd), DATA, FORTUNES,
# SECONDS_ (5), ROUND_SECONDS (20; 0: no rounds).
set -eu
runs=${1:-5}
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
secs=${SECONDS_:-5}
round_secs=${ROUND_SECONDS:-20}
PATH=$(cd "$bin" && pwd):$PATH
export LC_ALL=C

work=$(mktemp -d)
free= capped=
cleanup() {
	for g in $free $capped; do
		rmdir "$g" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# Two groups of the largest weight, so that the machine's other work
# (other sessions are autogroups, out of nice's reach) takes no share of
# the free probe's core; one of them capped.
root=/sys/fs/cgroup
if [ -f "$root/cgroup.controllers" ]; then
	free=$root/cg-probe-free.$$ capped=$root/cg-probe-capped.$$
	mkdir "$free" "$capped"
	echo 10000 >"$free/cpu.weight"
	echo 10000 >"$capped/cpu.weight"
	echo "25000 100000" >"$capped/cpu.max"
	how="cgroup v2 cpu.max 25000 100000, cpu.weight 10000 both"
else
	free=$root/cpu/cg-probe-free.$$ capped=$root/cpu/cg-probe-capped.$$
	mkdir "$free" "$capped"
	echo 262144 >"$free/cpu.shares"
	echo 262144 >"$capped/cpu.shares"
	echo 100000 >"$capped/cpu.cfs_period_us"
	echo 25000 >"$capped/cpu.cfs_quota_us"
	how="cgroup v1 cpu.cfs_quota_us 25000 of cpu.cfs_period_us 100000, cpu.shares 262144 both"
fi

cg-shard -q -n 1 -o "$work/fm" "$data"
cg-init -a cvae -d "$work/fm-0.cgd" --seed 1 -o "$work/cvae.cgm"
cg-shard -q -n 1 -o "$work/fort" "$fortunes"
cg-init -a cgpt -d "$work/fort-0.cgd" --context 128 --width 128 \
	--layers 2 --seed 1 -o "$work/cgpt.cgm"

# median: of the numbers on standard input
median() {
	sort -g | awk '{ v[NR] = $1 } END {
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "cap: $how; $runs runs of each, one thread, $secs s each" >&2
# round GROUP MODEL SHARD BATCH STEPS: a cg-train-step call's examples/s
round() {
	t0=$(date +%s.%N)
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$1" \
		cg-train-step -q -j 1 -m "$work/$2.cgm" -d "$3" -b "$4" -k "$5" \
		-e delta -o "$work/round.cgu"
	t1=$(date +%s.%N)
	awk -v k="$5" -v b="$4" -v t0="$t0" -v t1="$t1" \
		'BEGIN { printf "%.1f", k * b / (t1 - t0) }'
}

echo "| model | free examples/s (median) | capped examples/s (median) | capped / free | round free examples/s | round capped | round capped / free |"
echo "|---|---|---|---|---|---|---|"
for m in cvae cgpt; do
	if [ $m = cvae ]; then
		shard=$work/fm-0.cgd batch=32
	else
		shard=$work/fort-0.cgd batch=8
	fi
	: >"$work/free" && : >"$work/capped"
	i=0
	while [ "$i" -lt "$runs" ]; do
		i=$((i + 1))
		for g in free capped; do
			eval "group=\$$g"
			sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' \
				sh "$group" cg-probe -m "$work/$m.cgm" -d "$shard" \
				-b "$batch" -j 1 --seconds "$secs" --warmup 1 --json |
				sed 's/.*"examples_per_s":\([0-9.e+-]*\).*/\1/' \
				>>"$work/$g"
		done
		echo "$m run $i: free $(tail -n 1 "$work/free")," \
			"capped $(tail -n 1 "$work/capped")" >&2
	done
	f=$(median <"$work/free")
	c=$(median <"$work/capped")
	rf=- rc=- rr=-
	if [ "$round_secs" != 0 ]; then
		k=$(awk -v f="$f" -v s="$round_secs" -v b="$batch" \
			'BEGIN { printf "%d", f * s / b }')
		rf=$(round "$free" "$m" "$shard" "$batch" "$k")
		rc=$(round "$capped" "$m" "$shard" "$batch" $((k / 4)))
		rr=$(awk -v f="$rf" -v c="$rc" 'BEGIN { printf "%.3f", c / f }')
		echo "$m round: $k steps free $rf, $((k / 4)) capped $rc" >&2
	fi
	echo "| $m | $f | $c | $(awk -v f="$f" -v c="$c" 'BEGIN { printf "%.3f", c / f }') | $rf | $rc | $rr |"
done
