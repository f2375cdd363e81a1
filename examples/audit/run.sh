#!/bin/sh
# run.sh - a DiLoCo round audited by recomputation: four workers make
# their deltas with --deterministic, each at another thread count; the
# coordinator keeps each worker's state from before the call and
# cg-audit makes a drawn half of the deltas again, bit for bit.  One
# worker then changes one weight of its delta by one ulp (its digest
# made again, so the file verifies): the audit of every delta catches it.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a few seconds.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs python3 (to change a weight).
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"

cg-shard -q -n 4 -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 64 --latent 8 --seed 3 -o model.cgm

# Two rounds; the second's states before the call are the coordinator's
# copies (the call rewrites w$w.state).
for round in 1 2; do
	for w in 0 1 2 3; do
		[ "$round" = 2 ] && cp "w$w.state" "w$w.before"
		cg-train-step --deterministic -q -j $((w + 1)) -m model.cgm \
			-d fm-$w.cgd --emit delta --steps 5 --batch 10 \
			--seed $w --state w$w.state -o d$w.cgg
	done
done
for w in 0 1 2 3; do
	echo "d$w.cgg fm-$w.cgd w$w.before"
done >round

# Half of the round, drawn by a seed the workers could not know.
cg-audit -m model.cgm -r round --fraction 0.5 \
	--seed "$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')"

# Worker 2 changes one weight by one ulp and rewrites the digest.
python3 - d2.cgg <<'PY'
import hashlib, io, json, struct, sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    members = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
man = json.loads(members[0][1])
name, data = members[1]
x = struct.unpack_from("<f", data)[0]
bits = struct.unpack("<I", struct.pack("<f", x))[0]
data = struct.pack("<I", bits + (1 if x >= 0 else -1)) + data[4:]
members[1] = (name, data)
for t in man["tensors"]:
    if t["name"] == name:
        t["sha256"] = hashlib.sha256(data).hexdigest()
members[0] = ("cg.json", json.dumps(man).encode())
with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as o:
    for n, b in members:
        ti = tarfile.TarInfo(n); ti.size = len(b)
        o.addfile(ti, io.BytesIO(b))
PY
cg-inspect --verify d2.cgg
if cg-audit -m model.cgm -r round; then
	echo "the changed delta passed" >&2
	exit 1
fi
echo "files in $out"
