#!/bin/sh
# reduce.sh - the job that closes a round, once every task of its array
# has succeeded (--dependency=afterok): the deltas' mean, the outer
# Nesterov step, the next model published by cg-apply's rename (see
# run.sh).
#
#   sbatch --dependency=afterok:ARRAY --chdir DIR reduce.sh N STEP [OPTS]
#
# N: the workers; STEP: the model's step; OPTS: more cg-apply options.
set -eu
n=$1 s=$2
shift 2
set -f
opts=$*
set --
i=0
while [ "$i" -lt "$n" ]; do
	set -- "$@" "round/d$i.cgg"
	i=$((i + 1))
done
cg-reduce -q --min-inputs "$n" "$@" -o round/mean.cgu
# shellcheck disable=SC2086
cg-apply -m model.cgm --outer nesterov $opts round/mean.cgu -o model.cgm
# the states of the model before go; those of this one stay
i=0
while [ "$i" -lt "$n" ]; do
	rm -f "w$i.state.$s" "round/d$i.cgg"
	i=$((i + 1))
done
rm -f round/mean.cgu
