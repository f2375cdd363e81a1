#!/bin/sh
# engines.sh - build bench/engines.c against a build's libcg and run it:
# every matrix engine built in (OpenBLAS, the built-in kernel, oneDNN),
# f32 and bf16, on square products and the models' own shapes, with a
# table of GFLOP/s.
#
# usage: bench/engines.sh [BUILD-DIR [REPS]] (from the top of the source
# tree after a build; default build, 9 timed calls a row).  THREADS sets
# OMP_NUM_THREADS (default: every core).
set -eu
dir=${1:-build}
reps=${2:-9}
[ -f "$dir/lib/libcg.a" ] || { echo "engines.sh: $dir/lib/libcg.a: build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# OpenBLAS's kernels as the programs choose them (lib/cli/runtime.c):
# SkylakeX on an AVX-512 CPU, which Debian's OpenBLAS 0.3.21 may not
# know (a Xeon of family 6 model 207 ran as a Prescott, 32-51 GFLOP/s)
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo &&
	grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
	export OPENBLAS_CORETYPE=SkylakeX
fi
# the libraries the build links, as its Makefile has them
libs=$(sed -n 's/^\(BLAS_LIBS\|DNNL_LIBS\) = //p' "$dir/Makefile" | tr '\n' ' ')
# shellcheck disable=SC2086 # $libs is words
cc -O2 -fopenmp -Ilib -o "$tmp/engines" bench/engines.c "$dir/lib/libcg.a" \
	$libs -lpthread -lm
echo "# $(uname -m), $(nproc) cores ($(grep -o 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); threads ${THREADS:-$(nproc)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=${THREADS:-$(nproc)} "$tmp/engines" "$reps" >"$tmp/out.jsonl"
echo
echo "| shape | M x N x K | engine | f32 GFLOP/s | bf16 GFLOP/s | bf16 products |"
echo "|---|---|---|--:|--:|---|"
jq -rs 'group_by(.shape + .engine) | sort_by(.[0].M * .[0].N * .[0].K) | .[] |
	(map(select(.precision == "f32"))[0]) as $f |
	(map(select(.precision == "bf16"))[0]) as $b |
	"| \($f.shape) | \($f.M) x \($f.N) x \($f.K) | \($f.engine) | \($f.gflops) | \($b.gflops) | \($b.impl) |"' \
	"$tmp/out.jsonl"
