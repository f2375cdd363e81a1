#!/bin/sh
# run.sh - a signed DiLoCo round: each worker signs its delta with its own
# key (cg-key), and the coordinator reduces and applies only deltas signed
# by a key of its trust list; a delta from an unknown key, or one altered
# on the way, is refused.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second or two.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq, python3 (to alter a file) and
# openssl.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"

# Keys: one for the coordinator, one a worker; the trust list is the
# coordinator's and the workers' public keys.
for k in coord w0 w1 stranger; do
	cg-key -f -C "$k" -o "$k.key"
done
cat coord.key.pub w0.key.pub w1.key.pub >trusted.pub
cg-key -l coord.key.pub w0.key.pub w1.key.pub

cg-shard -n 2 --sign coord.key -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 64 --latent 8 --seed 3 \
	--sign coord.key -o model.cgm

# The workers trust what the coordinator sent and sign what they send back.
for w in 0 1; do
	cg-train-step --trust trusted.pub --sign w$w.key -m model.cgm \
		-d fm-$w.cgd --emit delta --steps 5 --batch 16 -o d$w.cgg
done
cg-inspect --verify --trust trusted.pub d0.cgg d1.cgg

# The round: only trusted deltas; the reduction names who signed them.
export CG_TRUST="$out/trusted.pub"
cg-reduce --sign coord.key d0.cgg d1.cgg -o mean.cgg
tar xOf mean.cgg cg.json | jq -r '.signers[]' | sed 's/^/signer: /'
cg-apply --sign coord.key -m model.cgm --outer nesterov mean.cgg -o model.cgm
cg-inspect --verify model.cgm

# A stranger's delta, and a worker's delta with its loss changed on the
# way, are each refused with one line.
cg-train-step --sign stranger.key -m model.cgm -d fm-0.cgd --emit delta \
	--steps 1 --batch 16 -o d2.cgg
python3 - d1.cgg altered.cgg <<'PY'
import io, json, sys, tarfile
src, dst = sys.argv[1:]
with tarfile.open(src) as t, tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as o:
    for m in t.getmembers():
        b = t.extractfile(m).read()
        if m.name == "cg.json":
            j = json.loads(b); j["loss"] = 0.0; b = json.dumps(j).encode()
        ti = tarfile.TarInfo(m.name); ti.size = len(b)
        o.addfile(ti, io.BytesIO(b))
PY
for f in d2.cgg altered.cgg; do
	if cg-reduce "$f" -o /dev/null; then exit 1; fi
done

# The signature is plain Ed25519 over cg.json: OpenSSL checks it alone.
tar xOf d0.cgg cg.json >m.json
tar xOf d0.cgg cg.sig | jq -r .sig | xxd -r -p >m.sig
openssl pkey -in w0.key -pubout -out w0.pem
openssl pkeyutl -verify -pubin -inkey w0.pem -rawin -in m.json -sigfile m.sig
echo "files in $out"
