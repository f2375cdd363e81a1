#!/bin/sh
# run.sh - asynchronous training through an inbox: three workers, the
# third slowed (it sleeps SLOW seconds before it sends each update), each
# training from the newest published model and dropping its delta into
# run/inbox/ whenever it is done, and a coordinator loop of cg-inbox
# passes that publishes a model from whatever is there.  An update of a
# model that was replaced while it was computed is late: set aside, with
# its reason, in run/rejected/.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a few seconds.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Environment: CALLS (4), each worker's
# calls; SLOW (1).
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
CALLS=${CALLS:-4}
SLOW=${SLOW:-1}
mkdir -p "$out"
cd "$out"

cg-shard -q -n 3 -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 32 --latent 4 --seed 1 -o first.cgm
# the coordinator's directory: run/model.cgm, run/inbox/, ...
cg-inbox -q -m first.cgm run

# worker W [SLEEP]: CALLS calls, each from the newest model, its delta
# into the inbox under a name of its own (cg-train-step writes it under
# a dot name there and renames it)
worker() {
	n=0
	while [ "$n" -lt "$CALLS" ]; do
		n=$((n + 1))
		cg-train-step -q -m run/model.cgm -d "fm-$1.cgd" --emit delta \
			--steps 5 --batch 16 --seed "$n" --threads 1 \
			--state "w$1.state" -o "w$1.tmp" 2>>workers.err
		[ -z "${2:-}" ] || sleep "$2"
		mv "w$1.tmp" "run/inbox/w$1-$n.cgg"
	done
}
worker 0 &
p0=$!
worker 1 &
p1=$!
worker 2 "$SLOW" &
p2=$!

# the coordinator: a pass every 0.2 s until the workers are done, and
# one more for what came last
while kill -0 "$p0" 2>/dev/null || kill -0 "$p1" 2>/dev/null ||
	kill -0 "$p2" 2>/dev/null; do
	cg-inbox -q --wait run
	sleep 0.2
done
wait "$p0" "$p1" "$p2"
cg-inbox -q --wait run

used=$(find run/used -type f | wc -l)
late=$(find run/rejected -name '*.why' | wc -l)
echo "model: step $(cg-inspect --no-stats run/model.cgm |
	sed -n 's/^step: *//p') from $used updates; $late set aside"
for f in run/rejected/*.why; do
	[ -f "$f" ] || continue
	n=${f##*/}
	echo "${n%.why}: $(cat "$f")"
done
cat run/log
echo "files in $out"
