#!/bin/sh
# cgpt-parity.sh - cg against PyTorch on the same cgpt, from the same
# initial weights: held-out bits per byte every EVERY steps up to STEPS on
# Debian's fortunes (5% held out), batch 16, context 128, width 256, 4
# layers, 4 heads, AdamW 3e-4, weight decay 0.1; and each side's training
# throughput in positions (tokens) per second.
#
# usage: bench/cgpt-parity.sh [STEPS] (from the top of the source tree
# after a build; CG_BIN, PYTHON (default: the venv bench/speed.sh makes,
# else Debian's python3), EVERY (500) and THREADS (all cores) override).
# torch_cgpt.py --init rebuilds cg's data order, windows and noise, so the
# two runs see the same bits of data.
set -eu
steps=${1:-3000}
every=${EVERY:-500}
bin=${CG_BIN:-build/cmd}
threads=${THREADS:-$(nproc)}
if [ -z "${PYTHON:-}" ]; then
	if [ -x /opt/cg-bench-venv/bin/python ]; then
		PYTHON=/opt/cg-bench-venv/bin/python
	else
		PYTHON=/usr/bin/python3
	fi
fi
data=${DATA:-/usr/share/games/fortunes}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/cg-shard" -q -n 1 --holdout-fraction 0.05 --holdout "$tmp/held.cgd" \
	--seed 1 -o "$tmp/train" "$data"
"$bin/cg-init" -a cgpt -d "$tmp/train-0.cgd" --context 128 --width 256 \
	--layers 4 --heads 4 --seed 1 -o "$tmp/init.cgm"
echo "# machine: $(uname -m), $(nproc) cores; threads $threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# torch: $("$PYTHON" -c 'import torch; print(torch.__version__)') ($PYTHON), OMP_WAIT_POLICY=passive"
OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$threads "$PYTHON" bench/torch_cgpt.py \
	"$tmp/train-0.cgd" "$tmp/held.cgd" --steps "$steps" --eval-every "$every" \
	--threads "$threads" --seed 1 --init "$tmp/init.cgm" --json >"$tmp/torch.jsonl"
cp "$tmp/init.cgm" "$tmp/m.cgm"
printf '%6s %10s %10s %10s %10s\n' step cg_bpb cg_tok/s torch_bpb torch_tok/s
done=0
train=0
while [ "$done" -lt "$steps" ]; do
	k=$every
	[ $((done + k)) -gt "$steps" ] && k=$((steps - done))
	t0=$(date +%s.%N)
	"$bin/cg-train-step" -q -m "$tmp/m.cgm" -d "$tmp/train-0.cgd" --emit model \
		--steps "$k" --batch 16 --opt adamw --lr 3e-4 --wd 0.1 --seed 1 \
		-j "$threads" -o "$tmp/m.cgm"
	t1=$(date +%s.%N)
	train=$(echo "$train + $t1 - $t0" | bc -l)
	done=$((done + k))
	bpb=$("$bin/cg-eval" --json --seed 0 --batch 500 -m "$tmp/m.cgm" \
		-d "$tmp/held.cgd" | jq -r .bpb)
	row=$(jq -c "select(.step == $done)" "$tmp/torch.jsonl")
	tb=$(echo "$row" | jq -r .test_bits_per_byte)
	ts=$(echo "$row" | jq -r .train_s)
	printf '%6d %10.4f %10.0f %10.4f %10.0f\n' "$done" "$bpb" \
		"$(echo "$done * 16 * 128 / $train" | bc -l)" "$tb" \
		"$(echo "$done * 16 * 128 / $ts" | bc -l)"
done
cp "$tmp/m.cgm" "${KEEP:-/dev/null}" 2>/dev/null || true
