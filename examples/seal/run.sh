#!/bin/sh
# run.sh - a DiLoCo round with every file sealed: the shards, the model,
# the workers' deltas and states and the reduction are written sealed to
# one X25519 key (--encrypt-to, here through CG_ENCRYPT_TO) and opened
# with its private key (CG_SEAL_KEY); a file at rest then shows nothing
# of what it holds.  A reader without the key, or with another key, and a
# sealed file altered on the way are each refused with one line.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second or two.  The programs
# are taken from PATH, or from a build in the source tree (cmd/ or
# build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"

# One key pair seals and opens every file of the run; a second is a
# stranger's.
cg-key -f --x25519 -C run -o seal.key
cg-key -f --x25519 -C stranger -o stranger.key
export CG_ENCRYPT_TO="$out/seal.key.pub" CG_SEAL_KEY="$out/seal.key"

cg-shard -n 2 -o fm "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 64 --latent 8 --seed 3 -o model.cgm
for w in 0 1; do
	cg-train-step -m model.cgm -d fm-$w.cgd --emit delta --steps 5 \
		--batch 16 --state w$w.state -o d$w.cgg
done
cg-reduce d0.cgg d1.cgg | cg-apply -m model.cgm --outer nesterov -o model.cgm
cg-inspect --verify model.cgm d0.cgg w0.state fm-0.cgd

# At rest: the first bytes say sealed, and no name shows.
head -c 6 model.cgm
echo
if grep -q cg.json model.cgm; then exit 1; fi

# Without the key, with a stranger's, and altered: one line each.
if CG_SEAL_KEY= cg-inspect model.cgm; then exit 1; fi
if cg-inspect --seal-key stranger.key model.cgm; then exit 1; fi
cp d1.cgg altered.cgg
# byte 1000 turned over (written as 'x' it would be one run in 256 the
# byte it was: the sealed bytes are new every run)
b=$(od -An -tu1 -j1000 -N1 altered.cgg | tr -d ' ')
# shellcheck disable=SC2059 # the octal escape is the format
printf "$(printf '\\%03o' $((b ^ 255)))" |
	dd of=altered.cgg bs=1 seek=1000 conv=notrunc 2>/dev/null
cmp -s d1.cgg altered.cgg && exit 1
if cg-reduce d0.cgg altered.cgg -o /dev/null; then exit 1; fi

# The plain file a sealed one holds (written unsealed: CG_ENCRYPT_TO
# empty).
CG_ENCRYPT_TO= cg-convert -t cg model.cgm -o opened.cgm
tar tf opened.cgm | head -n 1
echo "files in $out"
