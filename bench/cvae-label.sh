#!/bin/sh
# cvae-label.sh - whether the cvae draws what its label asks for: the
# README's cvae (784-512-512-32, Adam 1e-3, batch 128, 2345 steps = 5
# epochs, seed 1) made four ways by cg-init's options, --class-prior and
# --cond-every off and on, each scored on the test set: its negative ELBO
# and bench/judge.sh's judge (784-1024-1024-10, 10 epochs then 5 at a
# tenth of the rate) over SAMPLES images a condition: conditional
# accuracy and Fréchet distance.  Where python3 has torch,
# bench/cvae_label.py then measures the first and the last model: where
# their draws lose the label.
#
# usage: bench/cvae-label.sh (from the top of the source tree, after a
# build in build/; CG_BIN overrides where the programs are, THREADS the
# threads (all cores), SAMPLES the images drawn per condition (1000),
# PYTHON the interpreter with torch (/usr/bin/python3)).  Prints one table
# row per model, then cvae_label.py's lines.
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-$(nproc)}
samples=${SAMPLES:-1000}
py=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# threads: $threads"
"$bin/cg-shard" -q -n 1 -o "$tmp/train" "$data"
"$bin/cg-shard" -q -n 1 --test -o "$tmp/test" "$data"

# the judge, as bench/judge.sh trains it
"$bin/cg-init" -a cclf -d "$tmp/train-0.cgd" --hidden 1024 --layers 2 \
	--seed 1 -o "$tmp/clf.cgm"
"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
	--emit model --steps 4688 --batch 128 --lr 1e-3 --seed 1 \
	--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
"$bin/cg-train-step" -q -m "$tmp/clf.cgm" -d "$tmp/train-0.cgd" \
	--emit model --steps 2344 --batch 128 --lr 1e-4 --seed 1 \
	--state "$tmp/clf.state" --threads "$threads" -o "$tmp/clf.cgm"
printf '# judge: test accuracy %s\n' "$("$bin/cg-eval" --json \
	-m "$tmp/clf.cgm" -d "$tmp/test-0.cgd" --threads "$threads" |
	jq -r .acc)"

printf '%-36s %9s %9s %9s\n' "cg-init options" nelbo cond_acc frechet
n=0
for opts in "--class-prior=0 --cond-every=0" "--cond-every=0" \
	"--class-prior=0" "(defaults)"; do
	n=$((n + 1))
	o=$opts
	[ "$o" = "(defaults)" ] && o=
	# shellcheck disable=SC2086
	"$bin/cg-init" -a cvae -d "$tmp/train-0.cgd" $o --seed 1 \
		-o "$tmp/vae$n.cgm"
	"$bin/cg-train-step" -q -m "$tmp/vae$n.cgm" -d "$tmp/train-0.cgd" \
		--emit model --steps 2345 --batch 128 --seed 1 \
		--threads "$threads" -o "$tmp/vae$n.cgm"
	# shellcheck disable=SC2046
	printf '%-36s %9.2f %9.4f %9.1f\n' "$opts" $("$bin/cg-eval" --json \
		-m "$tmp/vae$n.cgm" -d "$tmp/test-0.cgd" --judge "$tmp/clf.cgm" \
		--judge-samples "$samples" --seed 1 --threads "$threads" |
		jq -r '"\(.nelbo) \(.cond_acc) \(.frechet)"')
done

if "$py" -c 'import torch' 2>/dev/null; then
	"$py" "$here/cvae_label.py" "$tmp/vae1.cgm" "$tmp/clf.cgm" "$data"
	"$py" "$here/cvae_label.py" "$tmp/vae4.cgm" "$tmp/clf.cgm" "$data"
fi
