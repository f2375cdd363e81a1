#!/bin/sh
# run.sh - loop.sh killed (SIGKILL, every process of it) three times in
# the middle of a round and run again each time, beside a run never
# interrupted: the two end on the same bytes.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a few seconds.  The programs are
# taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs setsid (util-linux).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out/start"
cd "$out"
export ROUNDS=10 OMP_NUM_THREADS=1

cg-shard -q -n 2 --strategy stratified -o start/fm \
	"$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d start/fm-0.cgd --hidden 16 --layers 1 --latent 4 \
	--seed 1 -o start/model.cgm
rm -rf whole cut
cp -r start whole
cp -r start cut

"$here/loop.sh" whole

step() {
	cg-inspect --no-stats "$1" | sed -n 's/^step: *//p'
}

# running PGID: a process of group PGID has not exited.  A zombie has
# (it writes nothing more), though kill -0 finds it until init reaps it,
# which some inits do only every few seconds.
running() {
	for s in /proc/[0-9]*/stat; do
		{ read -r l <"$s"; } 2>/dev/null || continue
		l=${l##*) }	# pid (comm) state ppid pgrp ...
		set -- $l
		[ "$1" != Z ] && [ "$1" != X ] && [ "$3" = "$pgid" ] && return 0
	done
	return 1
}

# Cut short three times, once the model is at step 2, 4 and 6 and a
# round is under way, then run to the end.
for i in 2 4 6; do
	setsid "$here/loop.sh" cut &
	pid=$!
	while [ "$(step cut/model.cgm)" -lt "$i" ]; do sleep 0.01; done
	sleep 0.02
	kill -KILL -"$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pgid=$pid
	while running; do sleep 0.01; done
	echo "killed at step $(step cut/model.cgm) of $ROUNDS"
	cg-inspect --verify -q cut/*
done
"$here/loop.sh" cut

for f in whole/*; do
	cmp "$f" "cut/${f##*/}"
done
echo "the same bytes: $(cd cut && ls | tr '\n' ' ')"
echo "files in $out"
