#!/usr/bin/env bats
#
# 103-structured-prune.bats - cg-prune --structured: a smaller model of
# the same arch.  The surgery is proven by the figures: the smaller
# model's loss on a shard is the dense model's with the removed
# structures zeroed (--keep-shape), to float rounding; its parameter
# count is the one its smaller config gives; every program takes it
# (cg-inspect, cg-train-step plain and toward the dense model as its
# teacher, cg-sample, cg-eval, cg-quantize then cg-eval as stored); and
# bad options and archs without structures are refused with one line,
# nothing written.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 1 --holdout held.cgd
	model cgpt t-0.cgd init.cgm --width 32 --layers 2 --heads 4 \
		--context 32
	cg-train-step -q -m init.cgm -d t-0.cgd --emit model --steps 20 \
		--batch 8 --opt adamw --lr 3e-3 -o gpt.cgm
	images fm -n 1
	small_cvae fm-0.cgd vinit.cgm --layers 2
	cg-train-step -q -m vinit.cgm -d fm-0.cgd --emit model --steps 20 \
		--batch 8 --opt adamw --lr 3e-3 -o vae.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

config() { tar xOf "$1" cg.json | jq -c .config; }
# the number of floats in model $1's tensors
nparams() {
	cg-inspect --json --no-stats "$1" |
		jq '[.tensors[] | .shape | reduce .[] as $x (1; . * $x)] | add'
}
# cg-eval's figure $3 of model $1 on shard $2
figure() { cg-eval --json -m "$1" -d "$2" | jq -r ".$3"; }
# whether $1 and $2 agree to a relative 1e-5
close() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d
		s = a < 0 ? -a : a; print "difference " d
		exit !(d <= 1e-5 * s) }'
}

@test "cg-prune --structured heads,rows: the cgpt's loss is the dense one's with them zeroed" {
	for x in 0.3 0.5; do
		cg-prune --structured heads,rows --remove $x "$D/gpt.cgm" \
			-o small.cgm
		cg-prune --structured heads,rows --remove $x --keep-shape \
			"$D/gpt.cgm" -o zero.cgm
		# the zeroed model is the dense one's shape, the small one not
		[ "$(config zero.cgm)" = "$(config "$D/gpt.cgm")" ]
		run -0 close "$(figure small.cgm "$D/held.cgd" loss)" \
			"$(figure zero.cgm "$D/held.cgd" loss)"
		echo "$x: $output"
		# and the removed structures mattered
		! close "$(figure small.cgm "$D/held.cgd" loss)" \
			"$(figure "$D/gpt.cgm" "$D/held.cgd" loss)"
	done
}

@test "cg-prune --structured: the cgpt's smaller config and parameter count" {
	local V C=32 T=32 L=2
	V=$(($(tar xOf "$D/gpt.cgm" cg.json | jq .config.ncond) + 257))
	# GPT-2's count: 12 C^2 + 13 C a block, untied head (init.cgm: no
	# optimizer state)
	[ "$(nparams "$D/init.cgm")" -eq \
		$((2 * V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C)) ]
	# 4 heads of 8, 0.3: 1 removed, MLP 128 rows: round(38.4) = 38
	# removed; 0.5: 2 heads, 64 rows
	for case in 0.3:3:90 0.5:2:64; do
		IFS=: read -r x nh f <<<"$case"
		local a=$((nh * 8))
		cg-prune --structured heads,rows --remove "$x" "$D/gpt.cgm" \
			-o small.cgm
		config small.cgm | jq -e ".heads == $nh and .head_size == 8 and
			.ffn == $f and .width == $C"
		[ "$(nparams small.cgm)" -eq \
			$((2 * V * C + T * C + 2 * C + L * (4 * a * C + 2 * f * C + 3 * a + f + 6 * C))) ]
	done
	# one kind alone: the other stays as it was
	cg-prune --structured rows --remove 0.5 "$D/gpt.cgm" -o rows.cgm
	config rows.cgm | jq -e '.heads == 4 and .head_size == null and
		.ffn == 64'
	tar xOf rows.cgm cg.json | jq -e '.pruning.structures == {rows: 0.5}
		and .step == 0'
	# --remove 0 removes nothing: the same weights
	cg-prune --structured heads --remove 0 "$D/init.cgm" -o same.cgm
	run -0 cg-inspect --diff "$D/init.cgm" same.cgm
	[[ $output == *'tensors:    29 in A, 29 in B: 29 identical'* ]]
}

@test "cg-prune --structured units: the cvae's ELBO is the dense one's with them zeroed, and its count" {
	cg-prune --structured units --remove 0.5 "$D/vae.cgm" -o small.cgm
	cg-prune --structured units --remove 0.5 --keep-shape "$D/vae.cgm" \
		-o zero.cgm
	for f in nelbo rec kl; do
		run -0 close "$(figure small.cgm "$D/fm-0.cgd" $f)" \
			"$(figure zero.cgm "$D/fm-0.cgd" $f)"
		echo "$f: $output"
	done
	# hidden 16 -> 8, in 784 pixels, 10 conditions, latent 4, two
	# layers a side, a prior per class, the condition at every layer
	local H=8 D0=784 K=10 Z=4
	config small.cgm | jq -e ".hidden == $H and .layers == 2"
	[ "$(nparams small.cgm)" -eq $((H * (D0 + K) + H + 2 * (H * H + H) +
		2 * (Z * H + Z) + H * (Z + K) + H + D0 * H + D0 + 2 * K * Z +
		2 * K * H)) ]
}

@test "cg-prune --structured: every program takes the smaller models" {
	cg-prune --structured heads,rows --remove 0.5 "$D/gpt.cgm" -o g.cgm
	cg-prune --structured units --remove 0.5 "$D/vae.cgm" -o v.cgm
	run -0 cg-inspect g.cgm
	[[ $output == *'h.0.attn.qkv.w   f32    48x32'* ]]
	[[ $output == *'h.1.mlp.proj.w   f32    32x64'* ]]
	cg-inspect --verify g.cgm
	# trained plainly and toward the dense model (pipes both ways)
	cg-train-step -q -m g.cgm -d "$D/t-0.cgd" --emit model --steps 3 \
		--batch 4 --opt adamw -o g1.cgm
	cg-train-step -q -m - -d "$D/t-0.cgd" --emit model --steps 3 \
		--batch 4 --opt adamw --teacher "$D/gpt.cgm" <g.cgm >g2.cgm
	cg-train-step -q -m v.cgm -d "$D/fm-0.cgd" --emit model --steps 3 \
		--batch 4 --opt adamw --teacher "$D/vae.cgm" -o v2.cgm
	tar xOf g2.cgm cg.json | jq -e '.step == 3'
	# evaluated, sampled, and run quantized as stored
	figure g2.cgm "$D/held.cgd" bpb
	figure v2.cgm "$D/fm-0.cgd" nelbo
	run -0 cg-sample -m g2.cgm -c 0 --max-bytes 20 --seed 1
	cg-sample -m v2.cgm -c 0 -n 2 -o s.png
	[ -s s.png ]
	cg-quantize -q g2.cgm q8_0 -o q.cgm
	figure q.cgm "$D/held.cgd" bpb
	# a structured model shrinks again
	cg-prune --structured rows --remove 0.5 g2.cgm -o g3.cgm
	config g3.cgm | jq -e '.heads == 2 and .ffn == 32'
}

@test "cg-prune --structured: bad options, archs without structures, masked models" {
	local args
	while IFS='|' read -r args msg; do
		# shellcheck disable=SC2086
		run -2 --separate-stderr cg-prune $args -o out.cgm
		[[ ${stderr_lines[0]} == "cg-prune: $msg"* ]] || {
			echo "$args: ${stderr_lines[0]}"
			return 1
		}
		[ ! -e out.cgm ]
	done <<EOF
--structured heads $D/gpt.cgm|--structured needs --remove X
--remove 0.5 $D/gpt.cgm|--remove is for --structured
--keep-shape -s 0.5 $D/gpt.cgm|--keep-shape is for --structured
--structured heads --remove 1.5 $D/gpt.cgm|--remove: 
--structured heads --remove -0.1 $D/gpt.cgm|--remove: 
--structured heads --remove 1 $D/gpt.cgm|--remove 1: a layer keeps one at least
--structured heads --remove 0.5 -s 0.5 $D/gpt.cgm|--structured removes whole structures
--structured heads --remove 0.5 -i wanda -d $D/t-0.cgd $D/gpt.cgm|--structured removes whole structures
EOF
	# what the file decides: one line, exit 1, nothing written
	model cgan "$D/fm-0.cgd" gan.cgm
	while IFS='|' read -r args msg; do
		# shellcheck disable=SC2086
		run -1 --separate-stderr cg-prune $args -o out.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-prune: $msg"* ]] || {
			echo "$args: $stderr"
			return 1
		}
		[ ! -e out.cgm ]
	done <<EOF
--structured units --remove 0.5 gan.cgm|gan.cgm: cgan models have no structures to remove
--structured units --remove 0.5 $D/gpt.cgm|$D/gpt.cgm: --structured 'units': cgpt models have heads, rows
--structured heads,cols --remove 0.5 $D/gpt.cgm|$D/gpt.cgm: --structured 'cols': cgpt models have heads, rows
--structured heads --remove 0.5 nosuch.cgm|nosuch.cgm: 
EOF
	cg-prune -s 0.5 "$D/gpt.cgm" -o masked.cgm
	run -1 --separate-stderr cg-prune --structured heads --remove 0.5 \
		masked.cgm -o out.cgm
	[[ $stderr == 'cg-prune: masked.cgm: a model pruned weight by weight'* ]]
	[ ! -e out.cgm ]
}
