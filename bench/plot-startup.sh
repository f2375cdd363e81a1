#!/bin/sh
# bench/plot-startup.sh - what a plot costs, gnuplot's way (cg-plot -o)
# against pixels drawn and encoded with libpng (bench/plot-png.c, no type:
# a lower bound), and the logs read alone (cg-plot -t).  One plot of
# cg-plot's default size (1440x960: three series in nine panels) from
# logs of N lines (default 1000) each; each command run RUNS times
# (default 20), the median wall time printed.
#
#   bench/plot-startup.sh [N] [RUNS]
set -eu
n=${1:-1000}
runs=${2:-20}
bin=${CG_BIN:-build/cmd}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc -O2 -o "$work/plot-png" bench/plot-png.c -lpng
# three workers' logs of n lines, a held-out line every tenth, a reduction
# with a staleness every line: every panel drawn
for w in 0 1 2; do
	awk -v n="$n" -v w="$w" 'BEGIN {
		for (i = 1; i <= n; i++) {
			printf "{\"emit\":\"delta\",\"step\":%d,\"samples\":128,", i
			printf "\"loss\":%.4f,\"seconds\":0.05,", 500 - i / 10 + w
			printf "\"update_bytes\":%d}\n", 15000 + w * 10
			if (i % 10 == 0)
				printf "{\"examples\":50,\"step\":%d,\"nelbo\":%.4f}\n",
					i, 520 - i / 12
			printf "{\"inputs\":3,\"samples\":384,\"seconds\":0.01,"
			printf "\"fold_seconds\":0.001,\"staleness\":{\"inputs\":"
			printf "[{\"staleness\":%d},{\"staleness\":0}]}}\n", i % 3
		}
	}' >"$work/w$w.log"
done

# median of RUNS wall times of the command, in milliseconds
median() {
	i=0
	while [ "$i" -lt "$runs" ]; do
		s=$(date +%s%N)
		"$@" >/dev/null
		e=$(date +%s%N)
		echo $(((e - s) / 1000))
		i=$((i + 1))
	done | sort -n | awk '{ a[NR] = $1 } END {
		printf "%.1f ms\n", a[int((NR + 1) / 2)] / 1000 }'
}

echo "logs: 3 of $n training lines (and their reductions, evaluations)"
printf 'cg-plot -o (gnuplot pngcairo)  '
median "$bin/cg-plot" -o "$work/a.png" "$work"/w*.log
printf 'cg-plot -t (the logs read)     '
median "$bin/cg-plot" -t "$work"/w*.log
printf 'plot-png (libpng, no type)     '
median "$work/plot-png" "$n" "$work/b.png"
printf 'gnuplot -e exit (its start)    '
median gnuplot -e exit
