#!/bin/sh
# golden.sh - run every program once, the way a small distributed run
# does, with fixed seeds and one thread, and print the SHA-256 of every
# file and every output stream it made ("DIGEST  NAME", sorted by name).
#
# tests/golden.sha256 holds what this printed in the portable build
# (configure --without-blas --disable-native), in which the same inputs
# and seed give the same bytes on any x86-64; 090-golden.bats compares.
# A change that must alter bytes records the new values in a commit of
# its own and says why:
#
#     tests/golden.sh SCRATCH-DIR > tests/golden.sha256
#
# The cg programs are taken from PATH; CG_SRCDIR (default: this file's
# folder's parent) locates the fixtures.  THREADS (default 1) is the
# thread count every program is given (091-threads.bats compares the
# digests at 1, 2 and 3).  DET=1 gives --deterministic to the programs
# whose arithmetic has matrix products (cg-train-step, cg-eval and
# cg-sample); tests/golden-det.sha256 holds what that prints, in every
# build (092-deterministic.bats).
set -eu
dir=$1
src=${CG_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
fix=$src/tests/fixtures
threads=${THREADS:-1}
export OMP_NUM_THREADS="$threads" LC_ALL=C
mkdir -p "$dir"
cd "$dir"
j="--threads $threads"
det=
[ "${DET:-0}" = 1 ] && det=--deterministic

# ------------------------------------------------------------ images
cg-shard -q -n 2 -s round-robin -o fm "$fix/fashion-mnist-mini"
cg-shard -q -n 1 --test -o fmtest "$fix/fashion-mnist-mini"
cg-init -a cvae -d fm-0.cgd --hidden 24 --latent 4 --seed 3 -o cvae.cgm
for w in 0 1; do
	cg-train-step $j $det -q -m cvae.cgm -d fm-$w.cgd --steps 2 --batch 8 \
		--seed 5 -o cvae-g$w.cgg
	cg-train-step $j $det -q -m cvae.cgm -d fm-$w.cgd --emit delta --steps 3 \
		--batch 8 --seed 5 --state cvae-w$w.state -o cvae-d$w.cgg
done
cg-train-step $j $det -q -m cvae.cgm -d fm-0.cgd --emit model --steps 4 \
	--batch 10 --opt adamw --seed 5 -o cvae-trained.cgm
cg-reduce $j -q -o cvae-g.cgg cvae-g0.cgg cvae-g1.cgg
cg-reduce $j -q --op sum -o cvae-gsum.cgg cvae-g0.cgg cvae-g1.cgg
cg-apply $j -m cvae.cgm --opt momentum -o cvae-sync.cgm cvae-g.cgg
cg-reduce $j -q cvae-d0.cgg cvae-d1.cgg |
	cg-apply $j -m cvae.cgm --outer nesterov -o cvae-diloco.cgm -
cg-eval $j $det -m cvae-trained.cgm -d fmtest-0.cgd --json >cvae-eval.json
cg-sample $j $det -m cvae-trained.cgm --seed 7 -n 3 -o cvae-samples.png
cg-sample $j $det -m cvae-diloco.cgm --seed 7 -n 2 -c 1 -o cvae-samples.pgm

# -------------------------------------------------------------- text
cg-shard -q -n 2 -s round-robin -o fort "$fix/text/fortunes"
cg-shard -q -n 1 -o cond "$fix/text/cond.jsonl"
cg-init -a cgpt -d fort-0.cgd --width 16 --heads 2 --layers 1 \
	--context 32 --seed 3 -o cgpt.cgm
for w in 0 1; do
	cg-train-step $j $det -q -m cgpt.cgm -d fort-$w.cgd --steps 2 --batch 2 \
		--seed 5 -o cgpt-g$w.cgg
	cg-train-step $j $det -q -m cgpt.cgm -d fort-$w.cgd --emit delta \
		--steps 2 --batch 2 --seed 5 --state cgpt-w$w.state \
		-o cgpt-d$w.cgg
done
cg-train-step $j $det -q -m cgpt.cgm -d fort-0.cgd --emit model --steps 3 \
	--batch 2 --opt adamw --lr 3e-3 --seed 5 -o cgpt-trained.cgm
cg-reduce $j -q -o cgpt-g.cgg cgpt-g0.cgg cgpt-g1.cgg
cg-apply $j -m cgpt.cgm -o cgpt-sync.cgm cgpt-g.cgg
cg-reduce $j -q cgpt-d0.cgg cgpt-d1.cgg |
	cg-apply $j -m cgpt.cgm --outer nesterov -o cgpt-diloco.cgm
cg-eval $j $det -m cgpt-trained.cgm -d fort-1.cgd --json --generate \
	--max-bytes 12 >cgpt-eval.json
cg-sample $j $det -m cgpt-trained.cgm -c computers -n 2 --seed 7 \
	--temperature 0.8 --top-p 0.9 --max-bytes 40 >cgpt-sample.txt
cg-init -a cgpt -d cond-0.cgd --width 16 --heads 2 --layers 1 \
	--context 48 --tied --seed 4 -o cond.cgm
cg-train-step $j $det -q -m cond.cgm -d cond-0.cgd --emit model --steps 2 \
	--batch 3 --seed 5 -o cond-trained.cgm
cg-sample $j $det -m cond-trained.cgm -c en -p 'Hel' --seed 2 --max-bytes 20 \
	--top-k 5 >cond-sample.txt

sha256sum -- * | LC_ALL=C sort -k 2
