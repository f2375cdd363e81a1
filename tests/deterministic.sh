# deterministic.sh - the pipeline whose digests tests/deterministic.sha256
# holds: sourced by 092-deterministic.bats, which runs it at several
# thread counts, and by scripts/cross, which runs it on other CPUs.  The
# cg programs are taken from PATH; CG_SRCDIR locates the fixtures,
# THREADS is the thread count.

# pipeline DIR: cvae and cgpt at sizes whose products are shared among
# threads: a grad, two deltas through a state, eval, generation and
# samples, a q8_0 copy's figures, all --deterministic; prints every
# file's SHA-256.
pipeline() {
	local fix=$CG_SRCDIR/tests/fixtures
	local j="--threads $THREADS --deterministic"
	mkdir -p "$1"
	cd "$1"
	cg-shard -q -n 1 -o fm "$fix/fashion-mnist-mini"
	cg-init -a cvae -d fm-0.cgd --hidden 200 --latent 8 --seed 3 -o cvae.cgm
	cg-train-step $j -q -m cvae.cgm -d fm-0.cgd --steps 2 --batch 50 \
		--seed 5 -o cvae-g.cgg
	for k in 1 2; do
		cg-train-step $j -q -m cvae.cgm -d fm-0.cgd --emit delta \
			--steps 2 --batch 50 --seed 5 --state cvae.state \
			-o cvae-d$k.cgg
	done
	cg-eval $j -m cvae.cgm -d fm-0.cgd --json >cvae-eval.json
	cg-sample $j -m cvae.cgm --seed 7 -n 3 --format pgm -o cvae.pgm
	cg-shard -q -n 1 -o fort "$fix/text/fortunes"
	cg-init -a cgpt -d fort-0.cgd --width 64 --heads 4 --layers 2 \
		--context 64 --seed 3 -o cgpt.cgm
	cg-train-step $j -q -m cgpt.cgm -d fort-0.cgd --steps 2 --batch 8 \
		--seed 5 -o cgpt-g.cgg
	cg-train-step $j -q -m cgpt.cgm -d fort-0.cgd --emit delta \
		--steps 2 --batch 8 --seed 5 --state cgpt.state -o cgpt-d.cgg
	cg-eval $j -m cgpt.cgm -d fort-0.cgd --json --generate \
		--max-bytes 8 --limit 4 >cgpt-eval.json
	cg-sample $j -m cgpt.cgm -c computers -n 2 --seed 7 \
		--max-bytes 30 >cgpt-sample.txt
	# int8 products, on the portable path whatever the CPU has
	cg-quantize -o cgpt-q8.cgm cgpt.cgm q8_0 2>/dev/null
	cg-eval $j -m cgpt-q8.cgm -d fort-0.cgd --json >cgpt-q8-eval.json
	sha256sum -- * | LC_ALL=C sort -k 2
}
