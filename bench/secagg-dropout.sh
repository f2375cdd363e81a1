#!/bin/sh
# secagg-dropout.sh - what a round that survives lost workers costs each
# worker, at N workers (default 8, 32 and 128): a delta of a tiny cvae
# (--hidden 16 --layers 1 --latent 4, 26364 parameters) masked with
# --mask-threshold T (T = 3N/4) against masked with no threshold; N/8
# workers lost mid-round; each survivor's reveal (cg-reduce --reveal
# over the updates in) and the coordinator's cg-reduce --unmask against
# cg-reduce of the N no-threshold updates.
#
# Per worker: the bytes of its update (and of its manifest), the
# encoding's seconds (cg-train-step --log's encode_seconds: the masks,
# the shares and their sealing), the seconds and bytes of its reveal;
# at the coordinator, the reduction's seconds.  Medians over the
# workers; every worker runs one after another (-j THREADS).
#
# usage: bench/secagg-dropout.sh [N...]
# CG_BIN overrides the programs' directory (build/cmd); DATA the
# dataset (tests/fixtures/fashion-mnist-mini); THREADS the programs' -j
# (1).
set -eu
bin=${CG_BIN:-build/cmd}
data=${DATA:-tests/fixtures/fashion-mnist-mini}
j=${THREADS:-1}
[ $# -gt 0 ] || set -- 8 32 128
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$data"
"$bin/cg-init" -a cvae --hidden 16 --layers 1 --latent 4 \
	-d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/m.cgm"
P=$("$bin/cg-inspect" --json "$tmp/m.cgm" | jq '[.tensors[].count] | add')
printf '# a cvae of %s parameters, -j %s; T = 3N/4, N/8 lost; medians over the workers\n' "$P" "$j"
printf '%5s %4s %5s | %9s %9s %9s | %8s %8s | %8s %8s | %8s %8s\n' \
	N T lost "bytes" "+thresh" manifest "enc s" "+thresh" "reveal s" "bytes" \
	"reduce s" "+unmask"
for n in "$@"; do
	d=$tmp/n$n
	mkdir "$d"
	t=$((3 * n / 4))
	lost=$((n / 8))
	keep=$((n - lost))
	w=0
	while [ $w -lt "$n" ]; do
		"$bin/cg-key" --x25519 -o "$d/k$w"
		cat "$d/k$w.pub" >>"$d/peers"
		w=$((w + 1))
	done
	w=0
	while [ $w -lt "$n" ]; do
		for kind in plain thresh; do
			if [ $kind = thresh ]; then th="--mask-threshold $t"; else th=; fi
			# shellcheck disable=SC2086
			"$bin/cg-train-step" -q -j "$j" -m "$tmp/m.cgm" \
				-d "$tmp/fm-0.cgd" --emit delta --steps 1 --batch 8 \
				--seed $w --mask "$d/k$w" --peers "$d/peers" $th \
				--log "$d/log-$kind" -o "$d/$kind$w.cgg"
		done
		w=$((w + 1))
	done
	# the survivors: workers 0 .. keep-1
	ins=
	w=0
	while [ $w -lt "$keep" ]; do
		ins="$ins $d/thresh$w.cgg"
		w=$((w + 1))
	done
	w=0
	: >"$d/t-reveal"
	while [ $w -lt "$keep" ]; do
		t0=$(now)
		# shellcheck disable=SC2086
		"$bin/cg-reduce" -j "$j" --reveal "$d/k$w" --peers "$d/peers" \
			-o "$d/r$w.json" $ins
		echo "$(now) - $t0" | bc -l >>"$d/t-reveal"
		w=$((w + 1))
	done
	t0=$(now)
	"$bin/cg-reduce" -j "$j" "$d"/plain*.cgg -o "$d/plain.cgg"
	rp=$(echo "$(now) - $t0" | bc -l)
	t0=$(now)
	# shellcheck disable=SC2086
	"$bin/cg-reduce" -j "$j" --unmask "$d/r*.json" $ins -o "$d/mean.cgg"
	ru=$(echo "$(now) - $t0" | bc -l)
	bp=$(stat -c %s "$d/plain0.cgg")
	bt=$(stat -c %s "$d/thresh0.cgg")
	bm=$(tar xOf "$d/thresh0.cgg" cg.json | wc -c)
	ep=$(jq .encode_seconds "$d/log-plain" | median)
	et=$(jq .encode_seconds "$d/log-thresh" | median)
	rs=$(median <"$d/t-reveal")
	rb=$(stat -c %s "$d/r0.json")
	printf '%5s %4s %5s | %9s %9s %9s | %8.4f %8.4f | %8.3f %8s | %8.3f %8.3f\n' \
		"$n" "$t" "$lost" "$bp" "$bt" "$bm" "$ep" "$et" "$rs" "$rb" "$rp" "$ru"
	rm -rf "$d"
done
