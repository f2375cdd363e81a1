#!/bin/sh
# quantize.sh - a llama.cpp-style table of cg-quantize's types for one
# trained model: file size (the optimizer's state stripped, f32
# included, so that every row is a model for scoring and sampling),
# bits per parameter over the whole model, the held-out figure (cvae:
# negative ELBO in nats per image; cgpt: bits per byte) and its change
# from f32, and the time cg-sample takes (text: bytes per second over
# REPS runs of --max-bytes BYTES from condition 0; images: seconds for
# a grid of 10 per condition), the median of REPS runs.
#
# usage: bench/quantize.sh MODEL HELD [TYPE...]
#   (default types: f32 f16 bf16 q8_0 q4_1 q4_1:ref q4_0 q4_0:ref q2_0;
#   TYPE:ref is TYPE by ggml's reference rule, cg-quantize --reference)
# CG_BIN overrides the programs' directory (build/cmd); THREADS the
# thread count of cg-eval and cg-sample (1); REPS (3); BYTES (256);
# KEEP, a --keep pattern for every row ("" none).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 MODEL HELD [TYPE...]" >&2; exit 2; }
bin=${CG_BIN:-build/cmd}
threads=${THREADS:-1}
reps=${REPS:-3}
bytes=${BYTES:-256}
keep=${KEEP:-}
model=$1
held=$2
shift 2
[ $# -gt 0 ] || set -- f32 f16 bf16 q8_0 q4_1 q4_1:ref q4_0 q4_0:ref q2_0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

arch=$("$bin/cg-inspect" --json --no-stats "$model" | jq -r .arch)
if [ "$arch" = cgpt ]; then
	fig=bpb
	unit="bytes/s"
else
	fig=nelbo
	unit="s/grid"
fi
printf '# %s: %s, held out %s; cg-eval and cg-sample on %s thread(s), %s runs\n' \
	"$arch" "$model" "$held" "$threads" "$reps"
printf '| type | file bytes | bits/param | %s | change | sample %s |\n' "$fig" "$unit"
printf '|---|---:|---:|---:|---:|---:|\n'
base=
for t in "$@"; do
	set --
	[ -n "$keep" ] && set -- --keep "$keep"
	case $t in *:ref) set -- "$@" --reference ;; esac
	"$bin/cg-quantize" --strip "$@" -o "$tmp/q.cgm" "$model" "${t%:ref}" \
		2>"$tmp/report"
	bpp=$(sed -n 's/.* \([0-9.]*\) bits per parameter$/\1/p' "$tmp/report")
	size=$(stat -c %s "$tmp/q.cgm")
	v=$("$bin/cg-eval" --json -j "$threads" -m "$tmp/q.cgm" -d "$held" |
		jq ".$fig")
	[ -n "$base" ] || base=$v
	: >"$tmp/times"
	i=0
	while [ $i -lt "$reps" ]; do
		t0=$(now)
		if [ "$arch" = cgpt ]; then
			"$bin/cg-sample" -j "$threads" -m "$tmp/q.cgm" -c 0 \
				--seed $((i + 1)) --max-bytes "$bytes" >"$tmp/out"
			t1=$(now)
			n=$(wc -c <"$tmp/out")
			echo "$n / ($t1 - $t0)" | bc -l >>"$tmp/times"
		else
			"$bin/cg-sample" -j "$threads" -m "$tmp/q.cgm" \
				--seed $((i + 1)) -o "$tmp/s.png"
			t1=$(now)
			echo "$t1 - $t0" | bc -l >>"$tmp/times"
		fi
		i=$((i + 1))
	done
	speed=$(median <"$tmp/times")
	printf '| %s | %s | %s | %.4f | %+.3f%% | %.3f |\n' "$t" "$size" "$bpp" \
		"$v" "$(echo "100 * ($v - $base) / $base" | bc -l)" "$speed"
done
