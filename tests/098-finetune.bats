#!/usr/bin/env bats
#
# 098-finetune.bats - fine-tuning a trained model: cg-train-step --freeze
# (frozen tensors keep their bytes through --emit model, delta and grad,
# a delta call's state keeps moments of the others only, and the update
# carries only the tensors that train, which cg-reduce and cg-apply take,
# plain and coded, leaving the frozen ones as they are); its errors.
# cg-init --from: a cgpt trained on two of the fortunes' categories made
# over for all three (the rows of the conditions it has moved by name,
# the new one's as cg-init makes it, the rest its own), which then
# trains where the old one is refused; a cvae made over for one more
# condition (columns of its first layers, rows of its tables) and for
# its own in another order.  cg-init --lora: adapters on the
# matrices named, B zero (the function as it was), only they train, a
# DiLoCo round's deltas carry them alone, and cg-convert -M merges them
# into a plain model of the same losses.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 2 --strategy round-robin
	small_cgpt t-0.cgd m.cgm
	# two of the three categories, the middle one left out
	mkdir two
	cp "$FIXTURES/text/fortunes/animals" "$FIXTURES/text/fortunes/wisdom" two/
	cg-shard -q -n 1 -o two two
	small_cgpt two-0.cgd m2.cgm
	cg-train-step -q -m m2.cgm -d two-0.cgd --emit model -k 4 -b 4 \
		-o m2t.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# the bytes of tensor $2 of file $1
member() { tar xOf "$1" "$2"; }
# whether tensor $3 has the same bytes in files $1 and $2
same() { cmp -s <(member "$1" "$3") <(member "$2" "$3"); }
# the tensor names of file $1, one a line
names() { tar tf "$1" | grep -v '^cg.json$'; }

FROZEN="h.0.attn.qkv.w h.0.attn.proj.w h.0.mlp.fc.w h.0.mlp.proj.w wpe h.0.ln1.b"
TRAINS="wte lm_head.w lnf.w"

@test "--freeze: frozen tensors keep their bytes through --emit model, the others move" {
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit model \
		-k 3 -b 4 --opt adamw --freeze 'h.0.*' --freeze wpe -o out.cgm
	for t in $FROZEN; do
		same "$D/m.cgm" out.cgm "$t" || fail "$t moved"
	done
	for t in $TRAINS; do
		! same "$D/m.cgm" out.cgm "$t" || fail "$t did not move"
	done
	# a frozen tensor's moments stay as they were: zero from scratch
	run -0 bash -c "cg-inspect --json out.cgm | jq -c '.tensors[] | select(.name == \"opt.m\") | .shape'"
	assert_output "[$(cg-inspect --json "$D/m.cgm" | jq '[.tensors[].count] | add')]"
}

@test "--freeze: a delta carries the tensors that train, its state their moments only" {
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit delta \
		-k 2 -b 4 --freeze 'h.0.*' -s f.state -o f.cgg
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit delta \
		-k 2 -b 4 -s a.state -o a.cgg
	run -0 names f.cgg
	assert_output "$(printf 'wte\nwpe\nlnf.w\nlnf.b\nlm_head.w')"
	run -0 jq -r .partial <(member f.cgg cg.json)
	assert_output true
	run -0 jq -r '.partial // "absent"' <(member a.cgg cg.json)
	assert_output absent
	# opt.m: the parameters of the five tensors that train, 4 bytes each
	n=$(cg-inspect --json "$D/m.cgm" | jq '[.tensors[] | select(.name | startswith("h.0.") | not) | .count] | add')
	run -0 bash -c "tar xOf f.state opt.m | wc -c"
	assert_output $((4 * n))
	full=$(tar xOf a.state opt.m | wc -c)
	[ "$((4 * n))" -lt "$full" ]
	[ "$(stat -c %s f.cgg)" -lt "$(stat -c %s a.cgg)" ]
	# a second call continues the state: same frozen set, same sizes
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit delta \
		-k 2 -b 4 --freeze 'h.0.*' -s f.state -o f2.cgg
	# another frozen set does not fit the state's moments
	run -1 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit delta \
		-k 2 -b 4 --freeze 'wpe' -s f.state -o f3.cgg
	assert_output --partial "opt.m"
}

@test "--freeze: the first step of a tensor that trains is the step without --freeze" {
	for f in "" "--freeze h.0.* --freeze wpe"; do
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" \
			--emit delta -k 1 -b 4 --opt adamw $f \
			-o "d${f:+f}.cgg"
	done
	for t in $TRAINS; do
		same d.cgg df.cgg "$t" || fail "$t differs"
	done
}

@test "--freeze: partial deltas through cg-reduce and cg-apply (avg, nesterov, coded)" {
	for w in 0 1; do
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-$w.cgd" \
			--emit delta -k 2 -b 4 --freeze 'h.0.*' -o "d$w.cgg"
		run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-$w.cgd" \
			--emit delta -k 2 -b 4 --freeze 'h.0.*' --codec q8 \
			--no-error-feedback -o "q$w.cgg"
	done
	run -0 cg-reduce --model "$D/m.cgm" d0.cgg d1.cgg -o r.cgg
	run -0 cg-reduce q0.cgg q1.cgg -o rq.cgg
	for outer in avg nesterov; do
		run -0 cg-apply -m "$D/m.cgm" --outer $outer r.cgg -o $outer.cgm
		for t in h.0.attn.qkv.w h.0.mlp.fc.b h.0.ln2.w; do
			same "$D/m.cgm" $outer.cgm "$t" || fail "$outer: $t moved"
		done
		! same "$D/m.cgm" $outer.cgm wte || fail "$outer: wte still"
	done
	run -0 cg-apply -m "$D/m.cgm" rq.cgg -o q.cgm
	same "$D/m.cgm" q.cgm h.0.mlp.fc.w
	! same "$D/m.cgm" q.cgm lm_head.w
	# a partial and a whole update do not reduce together
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --emit delta \
		-k 2 -b 4 -o whole.cgg
	run -1 cg-reduce d0.cgg whole.cgg -o x.cgg
	assert_output --partial "whole.cgg"
	[ ! -e x.cgg ]
}

@test "--freeze: a partial gradient through cg-apply adamw: no decay of what is frozen" {
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" -k 2 -b 4 \
		--freeze 'h.0.*' -o g.cgg
	run -0 names g.cgg
	refute_output --partial h.0.
	run -0 cg-apply -m "$D/m.cgm" --opt adamw --wd 0.5 g.cgg -o a.cgm
	same "$D/m.cgm" a.cgm h.0.attn.proj.w
	! same "$D/m.cgm" a.cgm lm_head.w
}

@test "--freeze: a pattern that matches nothing, or everything, is refused" {
	run -1 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" \
		--freeze 'nosuch*' -o x.cgg
	assert_output "cg-train-step: --freeze 'nosuch*': matches no tensor of the model (cg-inspect lists them)"
	run -1 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --freeze '*' \
		-o x.cgg
	assert_output --partial "every tensor is frozen"
	run -2 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" --freeze wte \
		--deterministic -o x.cgg
	assert_output --partial "--freeze and --deterministic conflict"
	[ ! -e x.cgg ]
}

# row $3 (16 floats: the small cgpt's width) of tensor $2 of model $1
row() { tar xOf "$1" "$2" | dd bs=64 skip="$3" count=1 status=none | od -An -tx1; }

@test "cg-init --from: a trained cgpt made over for a shard with one more condition" {
	run -1 cg-train-step -q -m "$D/m2t.cgm" -d "$D/t-0.cgd" --emit model \
		-o x.cgm
	assert_output "cg-train-step: $D/t-0.cgd: 3 conditions in the data, 2 in the model (cg-init --from MODEL -d SHARD makes it over for the data's)"
	run -0 cg-init --from "$D/m2t.cgm" -d "$D/t-0.cgd" --seed 1 -o g.cgm
	run -0 jq -c '[.conditions, .config.ncond, .step]' <(tar xOf g.cgm cg.json)
	assert_output '[["animals","computers","wisdom"],3,0]'
	# the rest of the model is the trained one's
	for t in $(tar tf g.cgm | grep -v '^cg.json$\|^wte$\|^lm_head.w$'); do
		same "$D/m2t.cgm" g.cgm "$t" || fail "$t differs"
	done
	# the rows of the vocabulary: bytes and the conditions it had
	# (animals 256, wisdom 257, the end mark 258) are the trained ones,
	# the new condition's (computers, 257) cg-init's of the same seed
	cg-init -a cgpt -d "$D/t-0.cgd" --seed 1 --context 32 --width 16 \
		--layers 1 --heads 2 -o fresh.cgm
	for t in wte lm_head.w; do
		for r in 0 65 255; do
			[ "$(row g.cgm $t $r)" = "$(row "$D/m2t.cgm" $t $r)" ]
		done
		[ "$(row g.cgm $t 256)" = "$(row "$D/m2t.cgm" $t 256)" ]
		[ "$(row g.cgm $t 258)" = "$(row "$D/m2t.cgm" $t 257)" ]
		[ "$(row g.cgm $t 259)" = "$(row "$D/m2t.cgm" $t 258)" ]
		[ "$(row g.cgm $t 257)" = "$(row fresh.cgm $t 257)" ]
		[ "$(row g.cgm $t 257)" != "$(row "$D/m2t.cgm" $t 257)" ]
	done
	run -0 cg-train-step -q -m g.cgm -d "$D/t-0.cgd" --emit model -k 2 \
		-b 4 -o gt.cgm
}

@test "cg-init --from: its usage errors and what it refuses" {
	run -2 cg-init --from "$D/m2t.cgm" -a cgpt -d "$D/t-0.cgd" -o x.cgm
	assert_output --partial "--from takes the architecture from the model"
	run -2 cg-init --from "$D/m2t.cgm" --width 32 -d "$D/t-0.cgd" -o x.cgm
	assert_output --partial "no --width"
	run -1 cg-init --from nosuch.cgm -d "$D/t-0.cgd" -o x.cgm
	assert_output --partial "nosuch.cgm"
	images fm -n 1
	small_cvae fm-0.cgd vae.cgm
	run -1 cg-init --from vae.cgm -d "$D/t-0.cgd" -o x.cgm
	assert_output --partial "needs image data"
	run -1 cg-init --from "$D/m2t.cgm" -d fm-0.cgd -o x.cgm
	assert_output --partial "cgpt needs text data"
	[ ! -e x.cgm ]
}

# the tensor names of model $1 that are no adapter's
base_names() { names "$1" | grep -v '\.lora_[ab]$\|^opt\.\|^outer\.'; }

@test "cg-init --lora: adapters on the matrices named, B zero, the model's function as it was" {
	run -0 cg-init --from "$D/m2t.cgm" --lora 4 --lora-on 'h.*.attn.*.w' \
		--lora-on lm_head.w --seed 3 -o l.cgm
	run -0 jq -c '[.lora, .step // 0]' <(tar xOf l.cgm cg.json)
	assert_output '[{"r":4,"alpha":4,"targets":["h.0.attn.qkv.w","h.0.attn.proj.w","lm_head.w"]},0]'
	run -0 bash -c "tar tf l.cgm | grep lora_"
	assert_output "$(printf '%s\n' h.0.attn.qkv.w.lora_a h.0.attn.qkv.w.lora_b h.0.attn.proj.w.lora_a h.0.attn.proj.w.lora_b lm_head.w.lora_a lm_head.w.lora_b)"
	for t in $(base_names l.cgm); do
		same "$D/m2t.cgm" l.cgm "$t" || fail "$t differs"
	done
	run -0 cg-inspect --json l.cgm
	[ "$(jq -r '.tensors[] | select(.name == "lm_head.w.lora_b") | .zero_frac' <<<"$output")" = 1 ]
	[ "$(jq -r '.tensors[] | select(.name == "lm_head.w.lora_a") | .zero_frac' <<<"$output")" = 0 ]
	# B = 0: the same losses as the model without adapters
	a=$(cg-eval --json -m l.cgm -d "$D/two-0.cgd" | jq -c '[.nats_per_token, .bpb]')
	b=$(cg-eval --json -m "$D/m2t.cgm" -d "$D/two-0.cgd" | jq -c '[.nats_per_token, .bpb]')
	[ "$a" = "$b" ]
}

@test "--lora: only the adapters train; a DiLoCo round moves only their bytes; cg-convert -M merges" {
	run -0 cg-init --from "$D/m2t.cgm" --lora 2 --lora-on 'h.*.w' \
		--lora-alpha 4 -o l.cgm
	run -0 cg-train-step -q -m l.cgm -d "$D/two-0.cgd" --emit model -k 4 \
		-b 4 --opt adamw --lr 1e-2 -o lt.cgm
	for t in $(base_names l.cgm); do
		same l.cgm lt.cgm "$t" || fail "$t moved"
	done
	! same l.cgm lt.cgm h.0.mlp.fc.w.lora_b
	# the workers' deltas carry the adapters alone
	for w in 0 1; do
		run -0 cg-train-step -q -m lt.cgm -d "$D/two-0.cgd" --emit delta \
			-k 2 -b 4 --seed $w -s w$w.state -o d$w.cgg
	done
	run -0 names d0.cgg
	assert_output "$(names lt.cgm | grep '\.lora_[ab]$')"
	run -0 cg-reduce d0.cgg d1.cgg -o r.cgg
	run -0 cg-apply -m lt.cgm --outer nesterov r.cgg -o next.cgm
	for t in $(base_names l.cgm); do
		same lt.cgm next.cgm "$t" || fail "$t moved"
	done
	# a plain model whose losses are those of the model with adapters
	run -0 cg-convert -M next.cgm -o plain.cgm
	run -0 jq -r '.lora // "none"' <(tar xOf plain.cgm cg.json)
	assert_output none
	run -0 names plain.cgm
	assert_output "$(base_names next.cgm)"
	! same next.cgm plain.cgm h.0.mlp.fc.w
	same next.cgm plain.cgm wte
	a=$(cg-eval --json -m next.cgm -d "$D/two-0.cgd" | jq -c '[.nats_per_token, .bpb]')
	b=$(cg-eval --json -m plain.cgm -d "$D/two-0.cgd" | jq -c '[.nats_per_token, .bpb]')
	[ "$a" = "$b" ]
	run -0 cg-train-step -q -m plain.cgm -d "$D/two-0.cgd" --emit model \
		-k 1 -b 4 -o more.cgm
	# and the same samples
	run -0 cg-sample -m next.cgm -c animals -n 2 --seed 1 --max-bytes 40 \
		-o a.txt
	run -0 cg-sample -m plain.cgm -c animals -n 2 --seed 1 --max-bytes 40 \
		-o b.txt
	cmp a.txt b.txt
}

@test "--lora and cg-convert -M: usage errors and refusals" {
	run -2 cg-init --lora 2 --lora-on 'h.*' -d "$D/t-0.cgd" -a cgpt -o x.cgm
	assert_output --partial "--lora adds adapters to a model: --from MODEL"
	run -2 cg-init --from "$D/m.cgm" --lora 2 -o x.cgm
	assert_output --partial "--lora needs --lora-on GLOB"
	run -2 cg-init --from "$D/m.cgm" --lora-on 'h.*' -o x.cgm
	assert_output --partial "--lora-on needs --lora R"
	run -2 cg-init --from "$D/m.cgm" --lora 2 --lora-on wte -d "$D/t-0.cgd" -o x.cgm
	assert_output --partial "one at a time"
	run -1 cg-init --from "$D/m.cgm" --lora 2 --lora-on 'nosuch*' -o x.cgm
	assert_output --partial "--lora-on 'nosuch*': matches no matrix"
	run -1 cg-init --from "$D/m.cgm" --lora 17 --lora-on 'h.0.attn.proj.w' -o x.cgm
	assert_output --partial "rank 17 above h.0.attn.proj.w's 16x16"
	run -1 cg-convert -M "$D/m.cgm" -o x.cgm
	assert_output --partial "no adapters"
	run -0 cg-init --from "$D/m2t.cgm" --lora 2 --lora-on 'h.*.w' -o l.cgm
	run -1 cg-init --from l.cgm --lora 2 --lora-on 'h.*.w' -o x.cgm
	assert_output --partial "adapters already"
	run -1 cg-init --from l.cgm -d "$D/t-0.cgd" -o x.cgm
	assert_output "cg-init: l.cgm: a model with adapters: merge them first (cg-convert --merge-lora)"
	# stored quantized weights cannot take their adapters as they run
	run -0 cg-quantize -q -o lq.cgm l.cgm q8_0
	run -1 cg-eval -m lq.cgm -d "$D/two-0.cgd"
	assert_output --partial "and the model has adapters: merge them before quantizing"
	run -0 cg-train-step -q -m "$D/m.cgm" -d "$D/t-0.cgd" -o g.cgg
	run -1 cg-convert -M g.cgg -o x.cgm
	assert_output --partial "a grad file, not a model"
	[ ! -e x.cgm ]
}

@test "--lora on a cvae: only the adapters train, the merged model scores the same" {
	images fm -n 1
	small_cvae fm-0.cgd v.cgm
	run -0 cg-init --from v.cgm --lora 2 --lora-on 'dec.*.w' -o vl.cgm
	run -0 cg-train-step -q -m vl.cgm -d fm-0.cgd --emit model -k 3 -b 8 \
		-o vlt.cgm
	for t in $(base_names vl.cgm); do
		same vl.cgm vlt.cgm "$t" || fail "$t moved"
	done
	run -0 cg-convert -M vlt.cgm -o vm.cgm
	a=$(cg-eval --json --seed 1 -m vlt.cgm -d fm-0.cgd | jq -c .nelbo)
	b=$(cg-eval --json --seed 1 -m vm.cgm -d fm-0.cgd | jq -c .nelbo)
	[ -n "$a" ] && [ "$a" = "$b" ]
}

# column $4 of every row of the [rows, $3] tensor $2 of model $1, in hex
col() { tar xOf "$1" "$2" | od -An -v -tx4 -w$(($3 * 4)) | awk -v c="$4" '{print $(c + 1)}'; }
# row $3 of the [rows, 4] tensor $2 of model $1
row4() { tar xOf "$1" "$2" | dd bs=16 skip="$3" count=1 status=none | od -An -tx1; }

@test "cg-init --from: a cvae made over for one more condition, the old ones moved by name" {
	images fm -n 1
	model cvae fm-0.cgd v.cgm --hidden 16 --layers 2 --latent 4
	run -0 cg-train-step -q -m v.cgm -d fm-0.cgd --emit model -k 2 -b 8 \
		-o vt.cgm
	{ echo new; tar xOf fm-0.cgd cg.json | jq -r '.conditions[]'; } >names
	cg-shard -q -n 1 --conditions names -o fm11 "$FIXTURES/fashion-mnist-mini"
	run -1 cg-train-step -q -m vt.cgm -d fm11-0.cgd -o x.cgg
	assert_output --partial "cg-init --from MODEL -d SHARD makes it over"
	run -0 cg-init --from vt.cgm -d fm11-0.cgd --seed 1 -o g.cgm
	model cvae fm11-0.cgd fresh.cgm --hidden 16 --layers 2 --latent 4
	# the first layers' condition columns (after 784 and 4 inputs), the
	# tables' rows: old k is new k + 1, new 0 cg-init's
	for k in 0 4 9; do
		[ "$(col g.cgm enc.0.w 795 $((785 + k)))" = "$(col vt.cgm enc.0.w 794 $((784 + k)))" ]
		[ "$(col g.cgm dec.0.w 15 $((5 + k)))" = "$(col vt.cgm dec.0.w 14 $((4 + k)))" ]
		[ "$(row4 g.cgm prior.mu $((k + 1)))" = "$(row4 vt.cgm prior.mu $k)" ]
	done
	[ "$(col g.cgm enc.0.w 795 784)" = "$(col fresh.cgm enc.0.w 795 784)" ]
	[ "$(col g.cgm enc.0.w 795 3)" = "$(col vt.cgm enc.0.w 794 3)" ]
	[ "$(row4 g.cgm prior.logvar 0)" = "$(row4 fresh.cgm prior.logvar 0)" ]
	cmp <(tar xOf g.cgm enc.1.cond | tail -c $((10 * 64))) <(tar xOf vt.cgm enc.1.cond)
	for t in enc.1.w dec.out.w dec.out.b enc.mu.w; do
		same vt.cgm g.cgm "$t" || fail "$t differs"
	done
	run -0 cg-train-step -q -m g.cgm -d fm11-0.cgd --emit model -k 1 -b 8 \
		-o gt.cgm
	# the same conditions in another order: each moved by name
	tac names | sed '/^new$/d' >rev
	cg-shard -q -n 1 --conditions rev -o rev "$FIXTURES/fashion-mnist-mini"
	run -0 cg-init --from vt.cgm -d rev-0.cgd -o r.cgm
	[ "$(row4 r.cgm prior.mu 0)" = "$(row4 vt.cgm prior.mu 9)" ]
	[ "$(row4 r.cgm prior.mu 9)" = "$(row4 vt.cgm prior.mu 0)" ]
}
