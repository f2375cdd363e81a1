#!/bin/sh
# train.sh - one task of a round's job array: worker SLURM_ARRAY_TASK_ID
# trains on its shard from the published model (see run.sh).
#
#   sbatch --array=0-N-1 --chdir DIR train.sh STEP STEP0 STEPS BATCH SEED [OPTS]
#
# In DIR (shared by every node): model.cgm, of step STEP; shard-I.cgd;
# the worker's state for that model, wI.state.STEP (none at STEP0, the
# first model's step).  The delta goes to round/dI.cgg; the state, copied
# first so that a task run again starts where the first try started, is
# saved as wI.state.(STEP+1) once the delta is written.
set -eu
i=$SLURM_ARRAY_TASK_ID
s=$1 step0=$2 steps=$3 batch=$4 seed=$5
shift 5
t=w$i.state.$((s + 1)).tmp.$$
trap 'rm -f "$t"' EXIT
# an update of an earlier try of this round goes: the state copied names
# the update it wrote, of the round before, which reduce.sh removed
rm -f "round/d$i.cgg"
[ "$s" -eq "$step0" ] || cp "w$i.state.$s" "$t"
# shellcheck disable=SC2068
cg-train-step -q -m model.cgm -d "shard-$i.cgd" --emit delta \
	--steps "$steps" --batch "$batch" --seed "$seed" $@ \
	--state "$t" -o "round/d$i.cgg"
mv "$t" "w$i.state.$((s + 1))"
