#!/bin/sh
# run.sh - DiLoCo rounds as Slurm jobs: each round a job array of
# cg-train-step, one task a worker, and a reduce/apply job that runs once
# every task has succeeded (--dependency=afterok).
#
#   run.sh -n N -m MODEL -o DIR [-r|--rounds R] [-k|--steps K] [-b|--batch B]
#          [--seed S] [-T TRAIN-OPTS] [-A APPLY-OPTS] [-S SBATCH-OPTS]
#          [-q] [DATA...]
#
# DIR must be on a file system every node sees (the jobs run there); the
# cg programs must be on the PATH the jobs get (sbatch passes this
# one's).  The first run shards DATA into DIR for N workers (cg-shard,
# stratified, with the seed) and copies MODEL to DIR/model.cgm; then each
# round is
#
#   sbatch --array=0-N-1 train.sh ...           # worker i: shard-i.cgd
#   sbatch --dependency=afterok:ARRAY --kill-on-invalid-dep=yes reduce.sh
#
# and run.sh waits for the reduce job (scontrol) before the next.  With
# the same seeds the model is, byte for byte, that of the README's DiLoCo
# loop in one directory and of cg-cluster on N hosts.  Run again, it goes
# on after the last round published (the round is the model's step).  A
# task that fails leaves the reduce job never run (Slurm cancels it):
# run.sh says which in one line and exits 1, nothing published; run it
# again to retry the round.  Job logs: DIR/slurm/.
set -u
prog=run.sh
here=$(cd "$(dirname "$0")" && pwd)

usage() {
	sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p;}' "$0"
}
die() {
	echo "$prog: $*" >&2
	exit 1
}
usage_error() {
	echo "$prog: $*" >&2
	echo "usage: $prog -n N -m MODEL -o DIR [options] [DATA...]" >&2
	exit 2
}
say() {
	[ "$quiet" = 1 ] || echo "$prog: $*" >&2
}
count() {
	case $2 in
	'' | *[!0-9]*) usage_error "$1: '$2' is not a whole number" ;;
	esac
	[ "$2" -ge "$3" ] || usage_error "$1: must be at least $3"
}

n='' model='' dir='' rounds=1 steps=50 batch=32 seed=0 train_opts=''
apply_opts='' sbatch_opts='' quiet=0
while [ $# -gt 0 ]; do
	case $1 in
	-A) apply_opts=${2?}; shift ;;
	-S) sbatch_opts=${2?}; shift ;;
	-T) train_opts=${2?}; shift ;;
	-b | --batch) count "$1" "${2-}" 1; batch=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	-k | --steps) count "$1" "${2-}" 1; steps=$2; shift ;;
	-m) model=${2?}; shift ;;
	-n) count -n "${2-}" 1; n=$2; shift ;;
	-o) dir=${2?}; shift ;;
	-q) quiet=1 ;;
	-r | --rounds) count "$1" "${2-}" 1; rounds=$2; shift ;;
	--seed) count --seed "${2-}" 0; seed=$2; shift ;;
	--) shift; break ;;
	-?*) usage_error "unknown option '$1'" ;;
	*) break ;;
	esac
	shift
done
[ -n "$n" ] || usage_error "no number of workers (-n)"
[ -n "$model" ] || usage_error "no model (-m)"
[ -n "$dir" ] || usage_error "no directory (-o)"
for p in sbatch scontrol scancel cg-shard cg-inspect; do
	command -v "$p" >/dev/null 2>&1 || die "no $p on PATH"
done

# the shards and the first model, once
if [ ! -f "$dir/shards.done" ]; then
	[ $# -gt 0 ] || usage_error "no DATA to shard into $dir"
	mkdir -p "$dir" || die "$dir: cannot make the directory"
	cg-shard -q -n "$n" --seed "$seed" "$@" -o "$dir/shard" ||
		die "cg-shard failed: no shards"
	cp "$model" "$dir/model.cgm.tmp" && mv "$dir/model.cgm.tmp" "$dir/model.cgm" ||
		die "$dir/model.cgm: cannot write"
	cg-inspect --no-stats "$dir/model.cgm" | sed -n 's/^step: *//p' \
		>"$dir/step0" && echo "$n" >"$dir/workers" && : >"$dir/shards.done" ||
		die "$dir: cannot write"
fi
[ "$(cat "$dir/workers")" = "$n" ] ||
	die "$dir was made for $(cat "$dir/workers") workers, not $n"
dir=$(cd "$dir" && pwd)
step0=$(cat "$dir/step0")
mkdir -p "$dir/round" "$dir/slurm" || die "$dir: cannot write"

jobs=''
trap '[ -z "$jobs" ] || scancel $jobs 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# job_states JOB: the state of each of its jobs (an array: each task)
job_states() {
	scontrol -o show job "$1" 2>/dev/null |
		sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# wait_job JOB: until no job of JOB is pending or running; 1 if
# Slurm no longer knows it
wait_job() {
	while :; do
		st=$(job_states "$1")
		[ -n "$st" ] || return 1
		printf '%s\n' "$st" | grep -Eq '^(PENDING|RUNNING|COMPLETING|CONFIGURING|SUSPENDED|REQUEUED|RESIZING)$' ||
			return 0
		sleep 0.2
	done
}

# failed_tasks ARRAY: "TASK EXIT" for each task that did not complete
failed_tasks() {
	scontrol -o show job "$1" 2>/dev/null | awk '
		{
			t = ""; s = ""; e = ""
			for (k = 1; k <= NF; k++) {
				if ($k ~ /^ArrayTaskId=/) t = substr($k, 13)
				if ($k ~ /^JobState=/) s = substr($k, 10)
				if ($k ~ /^ExitCode=/) e = substr($k, 10)
			}
			if (s != "COMPLETED") print t, s, e
		}' | sort -n
}

step=$(cg-inspect --no-stats "$dir/model.cgm" | sed -n 's/^step: *//p')
done_rounds=$((step - step0))
[ "$done_rounds" -lt "$rounds" ] ||
	say "$dir/model.cgm: $done_rounds rounds done already"
set -f
while [ "$done_rounds" -lt "$rounds" ]; do
	r=$((done_rounds + 1))
	t0=$(date +%s)
	# shellcheck disable=SC2086
	a=$(sbatch --parsable $sbatch_opts --job-name "cg-train-$r" \
		--array "0-$((n - 1))" --chdir "$dir" \
		--output "$dir/slurm/train-$r-%a.log" \
		"$here/train.sh" "$step" "$step0" "$steps" "$batch" "$seed" \
		$train_opts) || die "round $r: sbatch of the array failed"
	a=${a%%;*}
	[ -n "$a" ] || die "round $r: sbatch gave no job ID"
	jobs=$a
	# shellcheck disable=SC2086
	b=$(sbatch --parsable $sbatch_opts --job-name "cg-reduce-$r" \
		--dependency "afterok:$a" --kill-on-invalid-dep=yes \
		--chdir "$dir" --output "$dir/slurm/reduce-$r.log" \
		"$here/reduce.sh" "$n" "$step" $apply_opts) ||
		die "round $r: sbatch of the reduce job failed"
	b=${b%%;*}
	jobs="$a $b"
	wait_job "$b" || die "round $r: Slurm lost job $b"
	st=$(job_states "$b")
	if [ "$st" != COMPLETED ]; then
		# the array's other tasks end first, so that all are named
		wait_job "$a"
		bad=$(failed_tasks "$a")
		jobs=''
		if [ -n "$bad" ]; then
			task=$(printf '%s\n' "$bad" | head -n 1 | cut -d' ' -f1)
			m=$(sed -n '/./h; ${x;p;}' "$dir/slurm/train-$r-$task.log" |
				cut -c 1-200)
			die "round $r: task$(printf '%s\n' "$bad" |
				awk '{ printf " %s (%s, exit %s)", $1, $2, $3 }')" \
				"failed: $m; reduce job $b not run: nothing published"
		fi
		m=$(sed -n '/./h; ${x;p;}' "$dir/slurm/reduce-$r.log" | cut -c 1-200)
		die "round $r: reduce job $b $st: ${m:-no output}: nothing published"
	fi
	jobs=''
	step=$((step + 1))
	done_rounds=$r
	say "round $r/$rounds: step $step published (array $a, reduce $b)," \
		"$(($(date +%s) - t0)) s"
done
exit 0
