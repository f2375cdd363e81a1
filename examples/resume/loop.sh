#!/bin/sh
# loop.sh - DiLoCo rounds in one directory that a kill at any instant
# leaves resumable: run it again and it goes on from what is on disk,
# ending on the same bytes as a run never cut short.
#
# usage: loop.sh DIR
#
# DIR holds the workers' shards fm-0.cgd ... fm-N.cgd and the model,
# model.cgm; the loop runs rounds until the model's step is ROUNDS.  In a
# round each worker (a background job here; put "ssh host$w" in front on
# real machines) takes STEPS local steps from model.cgm with its state
# file w$w.state and writes d$w.cgg; cg-reduce and cg-apply (the outer
# Nesterov step) make the next model.cgm.  Environment: ROUNDS (3), STEPS
# (5), BATCH (16), SEED (1), THREADS (1, a worker).
#
# Nothing here keeps a record of its own: where a run stands is read from
# the files.  Every program writes under a temporary name and renames, and
# cg-train-step renames its delta before its state, so a kill leaves each
# worker in one of three places:
#   - nothing renamed: the delta is absent, or of an older model; the
#     state is the one the call started from: run the call again;
#   - the delta renamed, not the state: a delta of this model that is not
#     the output the state names (cg-train-step would refuse the pair):
#     remove it and run the call again from the same state, which writes
#     the same bytes;
#   - both renamed: a delta of this model that the state names: the
#     worker is done with this round.
# The reduction is made again from the deltas each time (the same
# bytes); cg-apply replaces model.cgm at once or not at all, and once it
# has, every delta is of an older model.  Temporaries left by a kill are
# removed by the next write of the same file.
set -eu

[ $# -eq 1 ] || { echo "usage: loop.sh DIR" >&2; exit 2; }
cd "$1"
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-5}
BATCH=${BATCH:-16}
SEED=${SEED:-1}
THREADS=${THREADS:-1}

# field FILE NAME: the value cg-inspect prints for NAME (step, params,
# base, output) on one line
field() {
	cg-inspect --no-stats "$1" | sed -n "s/^$2: *//p"
}

# digest TEXT: the first 64-hex-digit digest in TEXT
digest() {
	printf '%s\n' "$1" | grep -o '[0-9a-f]\{64\}' | head -n 1
}

# done_round W BASE: worker W's delta is of the model BASE and is the
# output its state names
done_round() {
	[ -f "d$1.cgg" ] && [ -f "w$1.state" ] || return 1
	[ "$(digest "$(field "d$1.cgg" base)")" = "$2" ] || return 1
	[ "$(digest "$(field "w$1.state" output)")" = \
		"$(sha256sum <"d$1.cgg" | cut -c1-64)" ]
}

while [ "$(field model.cgm step)" -lt "$ROUNDS" ]; do
	base=$(digest "$(field model.cgm params)")
	pids=
	for shard in fm-*.cgd; do
		w=${shard#fm-}
		w=${w%.cgd}
		done_round "$w" "$base" && continue
		rm -f "d$w.cgg"
		cg-train-step -q -m model.cgm -d "$shard" --emit delta \
			--steps "$STEPS" --batch "$BATCH" --seed "$SEED" \
			--threads "$THREADS" --state "w$w.state" -o "d$w.cgg" &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p"
	done
	cg-reduce d*.cgg -o mean.cgg
	cg-apply -m model.cgm --outer nesterov mean.cgg -o model.cgm
done
