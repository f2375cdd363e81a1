#!/bin/sh
# fuzz-campaign.sh - a long fuzzing campaign over the libFuzzer targets of
# tests/fuzz/, one process at a time, niced: rounds in which each target
# runs SECONDS from its corpus of all earlier rounds (DIR/corpus/NAME,
# grown from the seeds of tests/fuzz/corpus/NAME, with the dictionary
# tests/fuzz/NAME.dict where there is one), until DEADLINE.
#
# Each round runs copies of the targets of build-fuzz taken at the round's
# start (make fuzz there may go on meanwhile; a fix reaches the next
# round).  A run that crashes, leaks or trips a sanitizer leaves its
# input in DIR/findings/ and the log beside it; the campaign goes on
# with the next target.  Each run's figures go to DIR/runs.tsv: round,
# target, seconds, executions, exec/s, cov, corpus files, exit status;
# the summary (bench/fuzz-summary.sh DIR) adds them up.
#
# usage: bench/fuzz-campaign.sh DIR SECONDS DEADLINE
# DEADLINE: a time date(1) understands ("09:15"); no run starts that
# would end after it.  Targets: TARGETS (default all); NICE (15).
set -eu
cd "$(dirname "$0")/.."
top=$PWD
dir=$1
secs=$2
end=$(date -d "$3" +%s)
targets=${TARGETS:-$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')}
mkdir -p "$dir/bin" "$dir/findings" "$dir/logs"
[ -f "$dir/runs.tsv" ] ||
	printf 'round\ttarget\tseconds\texecs\texec_per_s\tcov\tcorpus\tstatus\n' \
		>"$dir/runs.tsv"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then ftmp=/dev/shm; else ftmp=/tmp; fi
round=$(($(tail -n +2 "$dir/runs.tsv" | cut -f1 | sort -n | tail -n 1) + 0))
while :; do
	round=$((round + 1))
	cp build-fuzz/tests/fuzz/fuzz_* "$dir/bin/" 2>/dev/null
	rm -f "$dir"/bin/*.o
	for t in $targets; do
		now=$(date +%s)
		if [ $((now + secs)) -gt "$end" ]; then
			echo "fuzz-campaign: deadline: stopped in round $round"
			exit 0
		fi
		name=${t#fuzz_}
		mkdir -p "$dir/corpus/$name"
		log=$dir/logs/$round-$name.log
		st=0
		dict=
		[ ! -f "tests/fuzz/$name.dict" ] ||
			dict=-dict=$top/tests/fuzz/$name.dict
		TMPDIR=$ftmp nice -n "${NICE:-15}" "$dir/bin/$t" \
			-max_total_time="$secs" -timeout=25 -print_final_stats=1 \
			-artifact_prefix="$dir/findings/$round-$name-" $dict \
			"$dir/corpus/$name" "$top/tests/fuzz/corpus/$name" \
			>"$log" 2>&1 || st=$?
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
		cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
		n=$(ls "$dir/corpus/$name" | wc -l)
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" \
			"$(($(date +%s) - now))" "${runs:-0}" "${rate:-0}" \
			"${cov:-0}" "$n" "$st" >>"$dir/runs.tsv"
		[ "$st" -eq 0 ] || echo "fuzz-campaign: $name: exit $st (see $log)"
	done
done
