#!/bin/sh
# qsample.sh - cg-sample at batch 1 from a cgpt of about 25M parameters
# with f32 weights and with q8_0 (q4_0, f16) weights multiplied as stored:
# tokens per second and peak memory, the dtypes' runs alternated.
#
# usage: bench/qsample.sh
#
# The model is cg-init's (seed 1) on a shard of the fortunes: width 512,
# 8 blocks, 8 heads, context 128, untied head (25.6M parameters); its
# copies in other dtypes are made by mkcg -t.  Each round runs every
# dtype in turn (f32 first, then DTYPES), each as two commands: BYTES
# bytes greedy (temperature 0) from condition 0, and 1 byte, so that the
# load and the first token can be told from the generation: the decode
# rate is (BYTES - 1) / (wall(BYTES) - wall(1)).  Every run must write
# all BYTES bytes (end-of-text would stop it short and the script fails
# rather than count bytes that were never made).  Peak RSS is GNU time's
# %M of the BYTES run.  Reports each dtype's median rate over ROUNDS
# rounds with the spread (lowest and highest), its ratio to f32's median,
# the end-to-end bytes per second of the BYTES run, and the median peak
# RSS with its ratio to f32's.
#
# Environment: CG_BIN (directory holding cg-shard, cg-init, cg-sample
# and mkcg; default build/cmd, with mkcg from build/tests/unit), ROUNDS (5),
# BYTES (512), THREADS (1), DTYPES ("q8_0 q4_0 f16"), DATA (the fortunes
# directory), CG_QKERNEL (passed on: the kernel path), BASE_BIN (a
# second build's directory, e.g. an older commit's: each round runs every
# dtype but f32 with it too, labelled DTYPE@base, and the summary gives
# each dtype's rate against its base's).
set -eu
bin=${CG_BIN:-build/cmd}
mkcg=$bin/mkcg
[ -x "$mkcg" ] || mkcg=$bin/../tests/unit/mkcg
rounds=${ROUNDS:-5}
bytes=${BYTES:-512}
threads=${THREADS:-1}
dtypes=${DTYPES:-q8_0 q4_0 f16}
data=${DATA:-/usr/share/games/fortunes}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 1 -o "$tmp/fort" "$data"
"$bin/cg-init" -a cgpt -d "$tmp/fort-0.cgd" --width 512 --layers 8 \
	--heads 8 --context 128 --seed 1 -o "$tmp/f32.cgm"
for d in $dtypes; do
	"$mkcg" -t "$d" "$tmp/f32.cgm" "$tmp/$d.cgm"
done

base=${BASE_BIN:-}

# run DTYPE N [BIN]: one cg-sample of N bytes (BIN's, default bin's);
# prints "WALL RSS_KIB", the wall in milliseconds' precision.
run() {
	t0=$(date +%s%N)
	/usr/bin/time -o "$tmp/time" -f '%M' "${3:-$bin}/cg-sample" \
		--threads "$threads" -m "$tmp/$1.cgm" -c 0 --temperature 0 \
		--max-bytes "$2" --separator '' -o "$tmp/out"
	t1=$(date +%s%N)
	got=$(stat -c %s "$tmp/out")
	if [ "$got" -ne "$2" ]; then
		echo "qsample.sh: $1: $got bytes of $2 (end-of-text came first)" >&2
		exit 1
	fi
	echo "$t0 $t1 $(cat "$tmp/time")" |
		awk '{ printf "%.3f %s\n", ($2 - $1) / 1e9, $3 }'
}

echo "model: $(stat -c %s "$tmp/f32.cgm") bytes f32; $(for d in $dtypes; do
	printf '%s %s bytes; ' "$d" "$(stat -c %s "$tmp/$d.cgm")"; done)"
echo "threads $threads, $bytes bytes a run, $rounds rounds," \
	"kernel path ${CG_QKERNEL:-(the CPU's best)}"
for r in $(seq "$rounds"); do
	for d in f32 $dtypes; do
		set -- $(run "$d" "$bytes")
		full=$1 rss=$2
		set -- $(run "$d" 1)
		one=$1
		echo "$r $d $full $one $rss" >>"$tmp/runs"
		echo "round $r $d: ${full} s for $bytes bytes, ${one} s for 1," \
			"peak ${rss} KiB"
		[ -n "$base" ] && [ "$d" != f32 ] || continue
		set -- $(run "$d" "$bytes" "$base")
		full=$1 rss=$2
		set -- $(run "$d" 1 "$base")
		one=$1
		echo "$r $d@base $full $one $rss" >>"$tmp/runs"
		echo "round $r $d@base: ${full} s for $bytes bytes, ${one} s" \
			"for 1, peak ${rss} KiB"
	done
done

# The medians, spreads and ratios, per dtype.
awk -v bytes="$bytes" '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	d = $2
	if (!(d in n)) order[++nd] = d
	k = ++n[d]
	gen = $3 - $4
	rate[d, k] = gen > 0 ? (bytes - 1) / gen : 0
	e2e[d, k] = bytes / $3
	rss[d, k] = $5
}
END {
	printf "%-10s %12s %20s %10s %10s %10s %7s\n", "dtype", "tokens/s",
	       "spread", "vs f32", "e2e B/s", "peak KiB", "vs f32"
	for (i = 1; i <= nd; i++) {
		d = order[i]
		lo = hi = rate[d, 1]
		for (k = 1; k <= n[d]; k++) {
			r[k] = rate[d, k]; e[k] = e2e[d, k]; m[k] = rss[d, k]
			if (r[k] < lo) lo = r[k]
			if (r[k] > hi) hi = r[k]
		}
		mr[d] = median(r, n[d]); me = median(e, n[d])
		mm[d] = median(m, n[d])
		printf "%-10s %12.1f %9.1f-%-10.1f %9.2fx %10.1f %10d %6.3fx\n",
		       d, mr[d], lo, hi, mr[d] / mr["f32"], me, mm[d],
		       mm[d] / mm["f32"]
	}
	for (i = 1; i <= nd; i++) {
		d = order[i]
		if ((d "@base") in mr)
			printf "%s against the base build: %.2fx tokens/s, " \
			       "%.3fx peak\n", d, mr[d] / mr[d "@base"],
			       mm[d] / mm[d "@base"]
	}
}' "$tmp/runs"
