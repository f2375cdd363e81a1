#!/bin/sh
# run.sh - DiLoCo rounds under GNU parallel: each round one job a worker,
# spread by parallel over the hosts of --sshlogin, then the deltas' mean
# and the outer Nesterov step on this machine.
#
#   run.sh -n N -m MODEL -o DIR [-S SSHLOGINS] [--ssh CMD] [-P PREFIX]
#          [-r|--rounds R] [-k|--steps K] [-b|--batch B] [--seed S]
#          [-T TRAIN-OPTS] [-A APPLY-OPTS] [-q] [DATA...]
#
# SSHLOGINS is parallel's --sshlogin list (default ":", this machine;
# "2/host0,2/host1" runs at most two jobs at a time on each of two
# hosts); --ssh CMD is the ssh command parallel uses to reach them.  DIR
# must be on a file system every host sees at the same path (the jobs cd
# there); PREFIX goes before each cg program a job runs (a directory
# ending in /, or "env OMP_NUM_THREADS=1 /opt/cg/bin/"), as cg-cluster's
# --remote-prefix.  The first run shards DATA into DIR for N workers
# (cg-shard, stratified, with the seed) and copies MODEL to
# DIR/model.cgm; then each round is
#
#   parallel -S SSHLOGINS 'cd DIR && cg-train-step ... -d shard-{}.cgd \
#       --state w{}.state.STEP+1 -o round/d{}.cgg' ::: 0 1 ... N-1
#   cg-reduce round/d*.cgg | cg-apply -m DIR/model.cgm --outer nesterov
#
# With the same seeds the model is, byte for byte, that of the README's
# DiLoCo loop in one directory, of examples/slurm/run.sh and of cg-cluster
# on N hosts: which host runs which worker does not matter, since a
# worker is its shard and its state file.  Run again, it goes on after
# the last round published (the round is the model's step).  A job that
# fails stops the round (--halt now,fail=1): run.sh names the worker and
# the last line it wrote, in one line, exits 1 and publishes nothing;
# run it again to retry the round.  Logs: DIR/parallel/ (train-R-I.log
# worker I's in round R, jobs-R.log parallel's --joblog, parallel-R.log
# what parallel said).
set -u
prog=run.sh

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
# quote S: S in single quotes, for a shell on another host
quote() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

n='' model='' dir='' rounds=1 steps=50 batch=32 seed=0 train_opts=''
apply_opts='' logins=: ssh='' prefix='' quiet=0
while [ $# -gt 0 ]; do
	case $1 in
	-A) apply_opts=${2?}; shift ;;
	-P) prefix=${2?}; shift ;;
	-S | --sshlogin) logins=${2?}; shift ;;
	-T) train_opts=${2?}; shift ;;
	--ssh) ssh=${2?}; shift ;;
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
for p in parallel cg-shard cg-inspect cg-reduce cg-apply; do
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
mkdir -p "$dir/round" "$dir/parallel" || die "$dir: cannot write"
trap 'exit 130' INT
trap 'exit 143' TERM

step=$(cg-inspect --no-stats "$dir/model.cgm" | sed -n 's/^step: *//p')
done_rounds=$((step - step0))
[ "$done_rounds" -lt "$rounds" ] ||
	say "$dir/model.cgm: $done_rounds rounds done already"
set -f
while [ "$done_rounds" -lt "$rounds" ]; do
	r=$((done_rounds + 1))
	t0=$(date +%s)
	# Worker {} of the round: its delta to round/d{}.cgg, and its state,
	# copied first so that a job run again starts where the first try
	# started, saved as w{}.state.STEP+1 once the delta is written.  An
	# update of an earlier try goes first.
	next=$((step + 1))
	job="cd $(quote "$dir") && exec 2>parallel/train-$r-{}.log &&"
	job="$job rm -f round/d{}.cgg &&"
	[ "$step" -eq "$step0" ] || job="$job cp w{}.state.$step w{}.state.$next.tmp &&"
	job="$job ${prefix}cg-train-step -q -m model.cgm -d shard-{}.cgd"
	job="$job --emit delta --steps $steps --batch $batch --seed $seed"
	job="$job $train_opts --state w{}.state.$next.tmp -o round/d{}.cgg &&"
	job="$job mv w{}.state.$next.tmp w{}.state.$next"
	rm -f "$dir/parallel/jobs-$r.log"
	# shellcheck disable=SC2086
	parallel --will-cite --halt now,fail=1 -S "$logins" \
		${ssh:+--ssh "$ssh"} --joblog "$dir/parallel/jobs-$r.log" \
		"$job" ::: $(seq 0 $((n - 1))) </dev/null \
		2>"$dir/parallel/parallel-$r.log"
	st=$?
	if [ "$st" -ne 0 ]; then
		# the first job in the log that did not exit 0 (Exitval, the
		# seventh column; a job killed by --halt has its signal in the
		# eighth), and the last line it wrote
		bad=$(awk -F '\t' 'NR > 1 && $7 != 0 && $8 == 0 { print $NF; exit }' \
			"$dir/parallel/jobs-$r.log" 2>/dev/null)
		w=$(printf '%s\n' "$bad" | sed -n 's/.*shard-\([0-9]*\)\.cgd.*/\1/p')
		[ -n "$w" ] || die "round $r: parallel exited $st: nothing published"
		m=$(sed -n '/./h; ${x;p;}' "$dir/parallel/train-$r-$w.log" |
			cut -c 1-200)
		die "round $r: worker $w failed: ${m:-no output}: nothing published"
	fi
	set --
	i=0
	while [ "$i" -lt "$n" ]; do
		set -- "$@" "$dir/round/d$i.cgg"
		i=$((i + 1))
	done
	cg-reduce -q --min-inputs "$n" "$@" -o "$dir/round/mean.cgu" ||
		die "round $r: cg-reduce failed: nothing published"
	# shellcheck disable=SC2086
	cg-apply -m "$dir/model.cgm" --outer nesterov $apply_opts \
		"$dir/round/mean.cgu" -o "$dir/model.cgm" ||
		die "round $r: cg-apply failed: nothing published"
	# the states of the model before go; those of this one stay
	i=0
	while [ "$i" -lt "$n" ]; do
		rm -f "$dir/w$i.state.$step" "$dir/round/d$i.cgg"
		i=$((i + 1))
	done
	rm -f "$dir/round/mean.cgu"
	step=$next
	done_rounds=$r
	say "round $r/$rounds: step $step published, $(($(date +%s) - t0)) s"
done
exit 0
