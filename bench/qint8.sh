#!/bin/sh
# qint8.sh - the products of q8_0 weights against a base build's (an
# older commit, say, or a build whose kernels are forced), where a batch
# has many rows: cg-eval of a cgpt of about 25M parameters on a small
# text shard, and cg-sample of the default cddpm's picture grid.  Each
# round runs every (build, dtype) pair in turn; reports median wall
# seconds, the spread, and peak RSS, and each dtype's ratio of the base
# build's median to this build's.
#
# usage: BASE_BIN=DIR bench/qint8.sh
#
# The cgpt is qsample.sh's (cg-init seed 1 on the fortunes: width 512, 8
# blocks, 8 heads, context 128); it is scored on a shard made of the
# first BYTES_EACH bytes (3000) of each fortune file, with --batch 16.
# The cddpm is cg-init's default (seed 1) on Fashion-MNIST, drawn with
# --steps STEPS (500): 10 images of each of its 10 classes.  Both models'
# q8_0 copies are made by mkcg -t.  The outputs of the two builds are
# compared (the same bytes where the same arithmetic ran).
#
# Environment: CG_BIN (this build's programs; default build/cmd, mkcg
# from build/tests/unit), BASE_BIN (required), ROUNDS (5), THREADS (1),
# STEPS (500), BYTES_EACH (3000), FORTUNES, FMNIST.
set -eu
bin=${CG_BIN:-build/cmd}
base=${BASE_BIN:?the base build (a folder of cg programs)}
mkcg=$bin/mkcg
[ -x "$mkcg" ] || mkcg=$bin/../tests/unit/mkcg
rounds=${ROUNDS:-5}
threads=${THREADS:-1}
steps=${STEPS:-500}
each=${BYTES_EACH:-3000}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 1 -o "$tmp/fort" "$fortunes"
mkdir "$tmp/small"
for f in "$fortunes"/*; do
	n=${f##*/}
	case $n in *.*) continue ;; esac
	[ -f "$f" ] && head -c "$each" "$f" >"$tmp/small/$n"
done
"$bin/cg-shard" -q -n 1 -o "$tmp/held" "$tmp/small"
"$bin/cg-init" -a cgpt -d "$tmp/fort-0.cgd" --width 512 --layers 8 \
	--heads 8 --context 128 --seed 1 -o "$tmp/gpt-f32.cgm"
"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$fmnist"
"$bin/cg-init" -a cddpm -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/dm-f32.cgm"
for m in gpt dm; do
	"$mkcg" -t q8_0 "$tmp/$m-f32.cgm" "$tmp/$m-q8_0.cgm"
done

# run WHICH MODEL DTYPE: one call; prints "SECONDS RSS_KIB".
run() {
	b=$bin
	[ "$1" = base ] && b=$base
	t0=$(date +%s%N)
	if [ "$2" = gpt ]; then
		/usr/bin/time -o "$tmp/time" -f '%M' "$b/cg-eval" -q \
			--threads "$threads" -m "$tmp/gpt-$3.cgm" \
			-d "$tmp/held-0.cgd" --batch 16 >"$tmp/out-$1-$2-$3"
	else
		/usr/bin/time -o "$tmp/time" -f '%M' "$b/cg-sample" \
			--threads "$threads" -m "$tmp/dm-$3.cgm" \
			--steps "$steps" -o "$tmp/out-$1-$2-$3.pgm"
	fi
	t1=$(date +%s%N)
	echo "$t0 $t1 $(cat "$tmp/time")" |
		awk '{ printf "%.3f %s\n", ($2 - $1) / 1e9, $3 }'
}

echo "threads $threads, $rounds rounds; cddpm --steps $steps;" \
	"held-out shard $(stat -c %s "$tmp/held-0.cgd") bytes"
for r in $(seq "$rounds"); do
	for m in gpt dm; do
		for d in f32 q8_0; do
			for w in base this; do
				set -- $(run "$w" "$m" "$d")
				echo "$r $m $d $w $1 $2" >>"$tmp/runs"
				echo "round $r $m $d $w: $1 s, peak $2 KiB"
			done
		done
	done
done
for m in gpt dm; do
	for d in f32 q8_0; do
		if [ $m = gpt ]; then
			a=$tmp/out-base-$m-$d b=$tmp/out-this-$m-$d
		else
			a=$tmp/out-base-$m-$d.pgm b=$tmp/out-this-$m-$d.pgm
		fi
		if cmp -s "$a" "$b"; then s=same; else s=differ; fi
		echo "$m $d: the builds' last outputs $s"
		[ $m = gpt ] && { sed 's/^/  base: /' "$a"; sed 's/^/  this: /' "$b"; }
	done
done

awk '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	k = $2 " " $3 " " $4
	if (!(k in n)) order[++nk] = k
	i = ++n[k]; t[k, i] = $5; rss[k, i] = $6
}
END {
	printf "%-18s %9s %17s %10s\n", "call", "seconds", "spread", "peak KiB"
	for (o = 1; o <= nk; o++) {
		k = order[o]; lo = hi = t[k, 1]
		for (i = 1; i <= n[k]; i++) {
			a[i] = t[k, i]; b[i] = rss[k, i]
			if (a[i] < lo) lo = a[i]
			if (a[i] > hi) hi = a[i]
		}
		med[k] = median(a, n[k]); mr = median(b, n[k])
		printf "%-18s %9.3f %8.3f-%-8.3f %10d\n", k, med[k], lo, hi, mr
	}
	for (o = 1; o <= nk; o++) {
		split(order[o], f, " ")
		if (f[3] == "this" && (f[1] " " f[2] " base") in med)
			printf "%s %s: base / this %.2fx\n", f[1], f[2],
			       med[f[1] " " f[2] " base"] / med[order[o]]
	}
}' "$tmp/runs"
