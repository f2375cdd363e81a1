#!/bin/sh
# fuzz-summary.sh - the figures of a fuzz campaign (bench/fuzz-campaign.sh
# DIR): per target the executions, seconds and exec/s summed over its
# runs, its highest cov, its corpus now, and the runs that ended in a
# finding; then the totals.  A Markdown table on stdout.
#
# usage: bench/fuzz-summary.sh DIR
set -eu
tail -n +2 "$1/runs.tsv" | sort -k2,2 -s | awk -F'\t' '
	$2 != t { if (t != "") row(); t = $2; e = s = c = k = f = 0 }
	{ e += $4; s += $3; if ($6 > c) c = $6; k = $7; if ($8 != 0) f++ }
	function row() {
		printf "| %s | %d | %d | %.0f | %d | %d | %d |\n", t, e, s,
		    s ? e / s : 0, c, k, f
		E += e; S += s; F += f
	}
	BEGIN {
		print "| target | executions | seconds | exec/s | cov | corpus | findings |"
		print "|---|---:|---:|---:|---:|---:|---:|"
	}
	END {
		if (t != "") row()
		printf "| all | %d | %d | %.0f | | | %d |\n", E, S, S ? E / S : 0, F
	}'
