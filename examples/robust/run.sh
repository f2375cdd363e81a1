#!/bin/sh
# run.sh - a DiLoCo round with one bad worker of four: its delta blown up
# a millionfold, then a nan in it.  The mean follows the blown-up delta;
# the median, the trimmed mean and centred clipping do not; the nan is
# refused by every operation, or left out with --skip-nonfinite.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second or two.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq and python3 (to make the bad
# delta: what a broken worker sends is a valid file, its digests right,
# only its numbers wrong).
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"

cg-shard -n 4 -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 64 --latent 8 --seed 3 -o model.cgm
for w in 0 1 2 3; do
	cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta --steps 5 \
		--batch 16 -o d$w.cgg
done

# Worker 3 goes bad: every value of its delta times SCALE, or element 0
# a nan (SCALE nan), the digests in cg.json made again.
bad() {
	python3 - "$1" "$2" "$3" <<'PY'
import array, hashlib, io, json, sys, tarfile
src, scale, dst = sys.argv[1], sys.argv[2], sys.argv[3]
with tarfile.open(src) as t:
    members = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
man = json.loads(members[0][1])
out = [None]
for i, (name, b) in enumerate(members[1:]):
    a = array.array("f", b)
    if scale == "nan":
        if i == 0:
            a[0] = float("nan")
    else:
        a = array.array("f", (x * float(scale) for x in a))
    b = a.tobytes()
    man["tensors"][i]["sha256"] = hashlib.sha256(b).hexdigest()
    out.append((name, b))
out[0] = ("cg.json", json.dumps(man).encode())
with tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as o:
    for name, b in out:
        ti = tarfile.TarInfo(name)
        ti.size = len(b)
        o.addfile(ti, io.BytesIO(b))
PY
}
bad d3.cgg 1e6 big.cgg
bad d3.cgg nan nan.cgg
cg-inspect --verify big.cgg nan.cgg

# The largest value of each reduction of d0 d1 d2 and the bad delta,
# next to the honest deltas' own: the mean follows the bad one.
absmax() {
	cg-inspect --json "$1" |
		jq '[.tensors[] | (.max | fabs), (.min | fabs)] | max'
}
echo "honest delta: $(absmax d0.cgg)"
for op in mean median trimmed-mean:0.25 clip-mean:0.1; do
	cg-reduce --op $op d0.cgg d1.cgg d2.cgg big.cgg -o r.cgg
	printf '%-18s %s\n' "$op" "$(absmax r.cgg)"
done

# A nan: refused, one line naming it; with --skip-nonfinite left out,
# said on stderr and in the log, and the round goes on with three.
if cg-reduce --op median d0.cgg d1.cgg d2.cgg nan.cgg -o r.cgg; then
	exit 1
fi
cg-reduce --op median --skip-nonfinite --log reduce.log \
	d0.cgg d1.cgg d2.cgg nan.cgg |
	cg-apply -m model.cgm --outer nesterov -o model.cgm
jq -c '{inputs, skipped}' reduce.log
echo "files in $out"
