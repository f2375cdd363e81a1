#!/bin/sh
# bf16-train.sh - what --precision bf16 does to training: the README's
# cvae (cg-init's defaults, 2345 Adam steps of 128, test-set nelbo) and
# the cgpt of bench/cgpt-parity.sh (context 128, width 256, 4 layers, 4
# heads; batch 16, AdamW 3e-4, weight decay 0.1; held-out bits per byte
# every EVERY steps up to STEPS), each trained from the same weights in
# f32 and in each of PRECISIONS (bf16; "bf16 f16" adds f16 with its
# dynamic loss scaling at cg-train-step's defaults, f16-unscaled f16
# with the loss scale held at 1, what the scaling buys); each one's
# difference from f32 in percent, and each call's wall time.  Where the
# CPU has no bf16 instructions, bf16 is emulated (the same numbers, no
# faster; cg-train-step says so); f16 is emulated everywhere.
#
# usage: bench/bf16-train.sh [STEPS] (from the top of the source tree
# after a build; CG_BIN, EVERY (1000), THREADS (all cores), MODELS
# ("cvae cgpt"), PRECISIONS (bf16) override).
set -eu
steps=${1:-3000}
every=${EVERY:-1000}
bin=${CG_BIN:-build/cmd}
threads=${THREADS:-$(nproc)}
models=${MODELS:-cvae cgpt}
precs=${PRECISIONS:-bf16}
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# machine: $(uname -m), $(nproc) cores ($(grep -o 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')); threads $threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
# pct A B: 100 (B - A) / A
pct() { echo "100 * ($2 - $1) / $1" | bc -l; }
# popts P: cg-train-step's options for a row of PRECISIONS
popts() {
	case $1 in
	f16-unscaled) echo "--precision f16 --loss-scale 1 --scale-growth 0" ;;
	*) echo "--precision $1" ;;
	esac
}
# secs COMMAND...: run it, print its wall seconds
secs() {
	t0=$(date +%s.%N)
	"$@"
	echo "$(date +%s.%N) - $t0" | bc -l
}

for m in $models; do
	case $m in
	cvae)
		"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$fmnist"
		"$bin/cg-shard" -q -n 1 --test -o "$tmp/fmtest" "$fmnist"
		"$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/cvae.cgm"
		printf '%-5s %12s %12s %10s %9s\n' model precision test_nelbo train_s diff%
		for p in f32 $precs; do
			# shellcheck disable=SC2046 # the options split on purpose
			s=$(secs "$bin/cg-train-step" -q -m "$tmp/cvae.cgm" \
				-d "$tmp/fm-0.cgd" --emit model --steps 2345 \
				$(popts "$p") -j "$threads" -o "$tmp/cvae-$p.cgm")
			n=$("$bin/cg-eval" -q --json -m "$tmp/cvae-$p.cgm" \
				-d "$tmp/fmtest-0.cgd" | jq -r .nelbo)
			[ "$p" = f32 ] && nelbo_f32=$n
			printf '%-5s %12s %12.4f %10.1f %+9.3f\n' cvae "$p" "$n" "$s" \
				"$(pct "$nelbo_f32" "$n")"
		done
		;;
	cgpt)
		"$bin/cg-shard" -q -n 1 --holdout-fraction 0.05 \
			--holdout "$tmp/held.cgd" --seed 1 -o "$tmp/ft" "$fortunes"
		"$bin/cg-init" -a cgpt -d "$tmp/ft-0.cgd" --context 128 \
			--width 256 --layers 4 --heads 4 --seed 1 -o "$tmp/cgpt.cgm"
		printf '%6s %12s %10s %9s %8s\n' step precision bpb diff% train_s
		for p in f32 $precs; do
			cp "$tmp/cgpt.cgm" "$tmp/cgpt-$p.cgm"
		done
		done=0
		while [ "$done" -lt "$steps" ]; do
			k=$every
			[ $((done + k)) -gt "$steps" ] && k=$((steps - done))
			done=$((done + k))
			for p in f32 $precs; do
				# shellcheck disable=SC2046 # the options split on purpose
				s=$(secs "$bin/cg-train-step" -q -m "$tmp/cgpt-$p.cgm" \
					-d "$tmp/ft-0.cgd" --emit model --steps "$k" \
					--batch 16 --opt adamw --lr 3e-4 --wd 0.1 \
					--seed 1 $(popts "$p") -j "$threads" \
					-o "$tmp/cgpt-$p.cgm")
				b=$("$bin/cg-eval" --json --seed 0 --batch 500 \
					-m "$tmp/cgpt-$p.cgm" -d "$tmp/held.cgd" | jq -r .bpb)
				[ "$p" = f32 ] && bpb_f32=$b
				printf '%6d %12s %10.4f %+9.3f %8.1f\n' "$done" "$p" "$b" \
					"$(pct "$bpb_f32" "$b")" "$s"
			done
		done
		;;
	*)
		echo "bf16-train.sh: MODELS: $m: not cvae or cgpt" >&2
		exit 2
		;;
	esac
done
