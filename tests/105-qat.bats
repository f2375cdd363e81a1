#!/usr/bin/env bats
# 105-qat.bats - quantization-aware training (cg-train-step --qat) and
# the per-tensor bit allocation (cg-quantize --bits-per-weight).
#
# --qat's forward pass is the forward pass of the model cg-quantize
# makes: a gradient call under --qat and a plain one on the quantized
# file give the same bytes (loss and every tensor), for every
# architecture.  That the step moves the f32 masters by the gradient at
# the quantized weights is tests/unit/test_qat's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm --holdout held-img.cgd --holdout-count 64
	small_cvae fm-0.cgd cvae0.cgm
	texts fort --holdout-fraction 0.2 --holdout held.cgd
	model cgpt fort-0.cgd cgpt0.cgm --context 32 --width 32 --layers 2 \
		--heads 2
	# trained a little, so that the weights are no longer the init's
	cg-train-step -q -m cvae0.cgm -d fm-0.cgd --emit model --steps 3 \
		--batch 8 -o cvae.cgm
	cg-train-step -q -m cgpt0.cgm -d fort-0.cgd --emit model --steps 3 \
		--batch 4 --opt adamw --lr 1e-3 -o cgpt.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# err0 TEXT: the first line on stderr holds TEXT
err0() {
	[[ ${stderr_lines[0]} == *"$1"* ]] ||
		fail "stderr: '${stderr_lines[0]}', not '$1'"
}

# what of an update must agree: the loss, the samples, every tensor
body() {
	tar xOf "$1" cg.json | jq -c '[.loss, .samples, [.tensors[] | .name, .sha256]]'
}

# same_forward MODEL SHARD TYPE [CG-TRAIN-STEP OPTION...]
same_forward() {
	local m=$1 s=$2 t=$3
	shift 3
	cg-quantize -q -o q.cgm "$m" "$t"
	cg-train-step -q -m "$m" -d "$s" --qat "$t" "$@" -o qat.cgg
	cg-train-step -q -m q.cgm -d "$s" "$@" -o plain.cgg
	[ "$(body qat.cgg)" = "$(body plain.cgg)" ] || {
		echo "--qat $t on $m differs from $m quantized:" >&2
		body qat.cgg >&2
		body plain.cgg >&2
		return 1
	}
	# and the quantization did something
	cg-train-step -q -m "$m" -d "$s" "$@" -o f32.cgg
	[ "$(body qat.cgg)" != "$(body f32.cgg)" ]
}

@test "cg-train-step --qat: the forward and gradient of the quantized model, exactly (cvae, cgpt)" {
	local t
	for t in q8_0 q4_0 q4_1; do
		same_forward "$D/cvae.cgm" "$D/fm-0.cgd" $t --steps 2 --batch 8
		same_forward "$D/cgpt.cgm" "$D/fort-0.cgd" $t --steps 2 \
			--batch 4
	done
}

@test "cg-train-step --qat: every architecture at cg-init's sizes" {
	local a
	default_models "$D/fm-0.cgd" "$D/fort-0.cgd"
	for a in $(archs); do
		same_forward "$a.cgm" "$([ "$a" = cgpt ] && echo "$D/fort-0.cgd" ||
			echo "$D/fm-0.cgd")" q4_0 --batch 2 ||
			fail "$a: --qat q4_0 is not the quantized model's forward"
	done
}

@test "cg-train-step --qat: a trained model quantized runs the weights it trained against" {
	# two steps under --qat, then the file: the forward of its q4_0 is
	# the forward of the next --qat step
	run -0 cg-train-step -q -m "$D/cgpt.cgm" -d "$D/fort-0.cgd" --qat q4_0 \
		--emit model --steps 2 --batch 4 --opt adamw --lr 1e-3 -o t.cgm
	same_forward t.cgm "$D/fort-0.cgd" q4_0 --batch 4
	# the masters stay f32, not rounded
	run -0 cg-inspect --json --no-stats t.cgm
	assert_equal "$(jq -r '[.tensors[].dtype] | unique | join(",")' <<<"$output")" f32
	cg-quantize -q -o tq.cgm t.cgm q4_0
	! cmp -s <(tar xOf t.cgm h.0.mlp.fc.w) <(cg-quantize -q t.cgm f32 |
		tar xO h.0.mlp.fc.w)
	# delta and model calls take it too; a state carries on
	run -0 cg-train-step -q -m "$D/cgpt.cgm" -d "$D/fort-0.cgd" --qat q8_0 \
		--emit delta --steps 2 --batch 4 --state w.state -o d.cgg
	run -0 cg-train-step -q -m "$D/cgpt.cgm" -d "$D/fort-0.cgd" --qat q8_0 \
		--emit delta --steps 2 --batch 4 --state w.state -o d.cgg
}

@test "cg-train-step --qat: refusals, one line each" {
	local t
	for t in f32 u8 i8 q5_0 '' Q4_0; do
		run -2 --separate-stderr cg-train-step -m "$D/cgpt.cgm" \
			-d "$D/fort-0.cgd" --qat "$t" -o g.cgg
		err0 "cg-train-step: "
		err0 "to quantize weights to"
		[ ! -e g.cgg ]
	done
	run -2 --separate-stderr cg-train-step -m "$D/cgpt.cgm" \
		-d "$D/fort-0.cgd" --qat q4_0 --deterministic -o g.cgg
	err0 "--qat and --deterministic conflict"
	# adapters train alone: their matrices are not trained quantized
	cg-init --from "$D/cgpt.cgm" --lora 2 --lora-on 'h.*.attn.qkv.w' \
		--seed 3 -o l.cgm
	run -1 --separate-stderr cg-train-step -m l.cgm -d "$D/fort-0.cgd" \
		--qat q4_0 -o g.cgg
	assert_equal "${#stderr_lines[@]}" 1
	err0 "cg-train-step: --qat: l.cgm: a model with adapters"
	[ ! -e g.cgg ]
	run -0 cg-train-step --list-options
	assert_line -p "--qat - TYPE word"
}

# alloc_table: the rows of the allocation's report (rank name weights
# q2_0 q4_0 q8_0 f16 type)
alloc_table() {
	awk '/^  rank /{on=1; next} on && /^  [0-9]/{print} /^cg-quantize: .* bits per weight over/{on=0}' "$1"
}

# width TYPE: its place on the ladder
width() {
	case $1 in q2_0) echo 0 ;; q4_0) echo 1 ;; q8_0) echo 2 ;; f16) echo 3 ;; esac
}

# check_alloc MODEL SHARD B: the budget met, the order kept
check_alloc() {
	local m=$1 s=$2 b=$3
	run -0 --separate-stderr cg-quantize --bits-per-weight "$b" -d "$s" \
		-o a.cgm "$m"
	printf '%s\n' "$stderr" >report
	alloc_table report >rows
	[ -s rows ]
	# the budget, from the file itself: bits over the quantized tensors
	cg-inspect --json --no-stats a.cgm | jq --argjson b "$b" -e '
		[.tensors[] | select(.dtype != "f32" and (.name | test("^(opt|outer)\\.") | not))] |
		(map(.bytes) | add) * 8 / (map(.shape | reduce .[] as $d (1; . * $d)) | add) <= $b' ||
		fail "budget $b not met"
	# most sensitive first (q2_0's change per weight), and never
	# narrower than one after it
	awk '{ s = $4 / $3; if (NR > 1 && s > prev) bad = 1; prev = s }
		END { exit bad }' rows ||
		fail "not in order of sensitivity"
	local w prev=3 t
	while read -r _ name _ _ _ _ _ t; do
		w=$(width "$t")
		[ "$w" -le "$prev" ] || fail "$name: $t after a narrower tensor"
		prev=$w
		# and the file holds that type
		[ "$(cg-inspect --json --no-stats a.cgm |
			jq -r --arg n "$name" '.tensors[] | select(.name == $n) | .dtype')" = "$t" ]
	done <rows
}

@test "cg-quantize --bits-per-weight: the budget met, the order of measured sensitivity kept" {
	local b
	for b in 2.5 3.5 4.5 6 9 16; do
		check_alloc "$D/cgpt.cgm" "$D/held.cgd" $b
	done
	# at 2.5 every tensor is q2_0; at 16 every one f16
	check_alloc "$D/cgpt.cgm" "$D/held.cgd" 2.5
	[ "$(awk '{print $8}' rows | sort -u)" = q2_0 ]
	check_alloc "$D/cgpt.cgm" "$D/held.cgd" 16
	[ "$(awk '{print $8}' rows | sort -u)" = f16 ]
	# in between, the most sensitive tensor is wider than the least
	check_alloc "$D/cgpt.cgm" "$D/held.cgd" 6
	[ "$(width "$(head -1 rows | awk '{print $8}')")" -gt \
		"$(width "$(tail -1 rows | awk '{print $8}')")" ]
	check_alloc "$D/cvae.cgm" "$D/held-img.cgd" 4.5
	# the file runs
	run -0 cg-eval -m a.cgm -d "$D/held-img.cgd"
}

@test "cg-quantize --bits-per-weight: hostile budgets and missing pieces refused" {
	local b
	for b in nan inf -inf -1 0 2.4 32.5 1e309 4.5x ''; do
		run -2 --separate-stderr cg-quantize --bits-per-weight "$b" \
			-d "$D/held.cgd" -o a.cgm "$D/cgpt.cgm"
		err0 "cg-quantize: --bits-per-weight"
		[ ! -e a.cgm ]
	done
	run -2 --separate-stderr cg-quantize --bits-per-weight 4.5 \
		-o a.cgm "$D/cgpt.cgm"
	err0 "give -d SHARD"
	run -2 --separate-stderr cg-quantize --bits-per-weight 4.5 \
		-d "$D/held.cgd" -o a.cgm "$D/cgpt.cgm" q4_0
	err0 "no TYPE"
	run -2 --separate-stderr cg-quantize -d "$D/held.cgd" -o a.cgm \
		"$D/cgpt.cgm" q4_0
	err0 "-d is the shard of --bits-per-weight"
	# a shard the model cannot read, a missing one: one line, exit 1
	run -1 --separate-stderr cg-quantize --bits-per-weight 4.5 \
		-d "$D/held-img.cgd" -o a.cgm "$D/cgpt.cgm"
	assert_equal "${#stderr_lines[@]}" 1
	err0 "cg-quantize: "
	run -1 --separate-stderr cg-quantize --bits-per-weight 4.5 \
		-d nothing.cgd -o a.cgm "$D/cgpt.cgm"
	assert_equal "${#stderr_lines[@]}" 1
	err0 "nothing.cgd"
	[ ! -e a.cgm ]
}
