#!/usr/bin/env bats
# 052-eval-text.bats - cg-eval on text shards: nats per token, bits per
# byte and perplexity of a fresh cgpt model, exact per-token means, and
# --generate's BLEU and ROUGE-L.
#
# Made once per file from the fortunes fixture (12 texts, 3 conditions):
# one shard, a fresh model (context 32, so the longer texts are windowed)
# and the same model after 300 Adam steps on that shard, which has learnt
# its texts well enough for greedy continuations to share words with
# them.  The programs under test come from PATH; JSON is read with jq.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 1
	model cgpt fort-0.cgd m.cgm --context 32 --width 32 --layers 1 \
		--heads 2
	cg-train-step -q -m m.cgm -d fort-0.cgd --emit model --steps 300 \
		--batch 12 --lr 3e-3 -o trained.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

@test "cg-eval --help documents the text figures and options" {
	run -0 --separate-stderr cg-eval --help
	for w in --generate --limit --max-bytes --temperature --top-k \
		--top-p nats_per_token bpb ppl bleu rouge_l; do
		assert_output --partial -- "$w"
	done
	[ -z "$stderr" ]
}

@test "cg-eval: text table names nats_per_token, bpb and ppl" {
	run -0 --separate-stderr cg-eval -m "$D/m.cgm" -d "$D/fort-0.cgd"
	assert_line --index 0 "model $D/m.cgm (cgpt, step 0)"
	assert_line --index 1 --regexp '^ *examples +nats_per_token +tokens +bpb +ppl  data$'
	assert_line --index 2 --regexp "^ +12 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+  $D/fort-0.cgd\$"
	[ "${#lines[@]}" -eq 3 ]
}

@test "cg-eval --json: text keys and the figures of a fresh model" {
	run -0 --separate-stderr cg-eval --json -m "$D/m.cgm" -d "$D/fort-0.cgd"
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	run -0 jq -c 'keys_unsorted' <<<"$output"
	assert_output '["model","data","arch","step","seed","examples","loss","tokens","nats_per_token","bpb","ppl"]'
	# V = 256 bytes + 3 conditions + EOT = 260 tokens.  The fresh
	# model's logits are near 0, so every scored byte (end-of-text
	# counted as one) costs about log2(260) = 8.02 bits; bpb is
	# nats_per_token / ln 2 and ppl is 2^bpb.  Each text is scored
	# whole (its bytes and end-of-text) or, past the context of 32,
	# in a window of 32: between 2 and 32 tokens per example.
	run -0 cg-eval --json -m "$D/m.cgm" -d "$D/fort-0.cgd"
	jq -e '(.bpb - (260 | log2) | fabs) < 0.1 and
		((.nats_per_token / (2 | log)) - .bpb | fabs) < 1e-12 and
		(.loss == .nats_per_token) and
		((pow(2; .bpb) - .ppl) / .ppl | fabs) < 1e-12 and
		.tokens >= 2 and .tokens <= 32 and .examples == 12' \
		<<<"$output"
	run -0 cg-eval --json -m "$D/trained.cgm" -d "$D/fort-0.cgd"
	jq -e '.bpb < 4 and .ppl < 16 and .step == 300' <<<"$output"
}

@test "cg-eval: text figures are exact per-token means, whatever --batch" {
	# The last batch is short and texts differ in length: weighting
	# batches by examples, not tokens, would move bpb in the 3rd digit.
	run -0 cg-eval --json -b 500 -m "$D/trained.cgm" -d "$D/fort-0.cgd"
	a=$output
	for b in 1 5 7 11; do
		run -0 cg-eval --json -b $b -m "$D/trained.cgm" \
			-d "$D/fort-0.cgd"
		jq -e --argjson a "$a" \
			'((.bpb - $a.bpb) | fabs) < 1e-6 * $a.bpb and
			.tokens == $a.tokens' <<<"$output"
	done
}

@test "cg-eval --generate: bleu and rouge_l in [0, 1], table and JSON" {
	run -0 --separate-stderr cg-eval --generate -m "$D/trained.cgm" \
		-d "$D/fort-0.cgd"
	[ -z "$stderr" ]
	assert_line --index 1 --regexp '^ *examples +nats_per_token +tokens +bpb +ppl +bleu +rouge_l  data$'
	assert_line --index 2 --regexp "^ +12( +[0-9.]+){6}  $D/fort-0.cgd\$"
	run -0 cg-eval --json --generate -m "$D/trained.cgm" -d "$D/fort-0.cgd"
	run -0 jq -c 'keys_unsorted' <<<"$output"
	assert_output '["model","data","arch","step","seed","examples","loss","tokens","nats_per_token","bpb","ppl","generated","generated_bytes","temperature","top_k","top_p","bleu","rouge_l"]'
	run -0 cg-eval --json --generate -m "$D/trained.cgm" -d "$D/fort-0.cgd"
	# Greedy (temperature 0) by default.  The trained model has learnt
	# some words of each condition's texts; a fresh one has not.
	jq -e '.generated == 12 and .temperature == 0 and .top_k == 0 and
		.top_p == 1 and .bleu > 0 and .bleu <= 1 and .rouge_l > 0.1 and
		.rouge_l <= 1 and .generated_bytes > 0' <<<"$output"
	run -0 cg-eval --json --generate -m "$D/m.cgm" -d "$D/fort-0.cgd"
	jq -e '.bleu >= 0 and .bleu < 0.05 and .rouge_l >= 0 and
		.rouge_l < 0.2' <<<"$output"
}

@test "cg-eval --generate: a reference equal to the greedy text scores 1" {
	# cg-sample's greedy text for each condition becomes the one text
	# of that condition; eval's greedy continuation must be the same
	# bytes (same hook, no prompt, a budget of its length + 16).
	for c in animals computers wisdom; do
		cg-sample -m "$D/trained.cgm" -c $c --temperature 0 -o $c.txt
	done
	python3 - <<'EOF'
with open("greedy.tsv", "w", encoding="utf-8") as out:
    for c in ("animals", "computers", "wisdom"):
        t = open(c + ".txt", encoding="utf-8").read()
        for a, b in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"),
                     ("\r", "\\r")):
            t = t.replace(a, b)
        out.write(c + "\t" + t + "\n")
EOF
	cg-shard -q -n 1 -o greedy greedy.tsv
	run -0 cg-eval --json --generate -m "$D/trained.cgm" -d greedy-0.cgd
	jq -e '.generated == 3 and .bleu > 0.999999 and .bleu <= 1 and
		.rouge_l == 1' <<<"$output"
}

@test "cg-eval --generate: the same seed gives the same figures" {
	for opts in "" "--temperature 1 --seed 5" \
		"--temperature 0.8 --top-k 5 --top-p 0.9 --seed 9"; do
		run -0 cg-eval --json --generate $opts -m "$D/trained.cgm" \
			-d "$D/fort-0.cgd"
		a=$output
		run -0 cg-eval --json --generate $opts -j 1 -b 3 \
			-m "$D/trained.cgm" -d "$D/fort-0.cgd"
		[ "$(jq -c '{bleu, rouge_l, generated_bytes}' <<<"$a")" = \
			"$(jq -c '{bleu, rouge_l, generated_bytes}' <<<"$output")" ]
	done
	run -0 cg-eval --json --generate --temperature 1 --seed 5 \
		-m "$D/trained.cgm" -d "$D/fort-0.cgd"
	jq -e '.temperature == 1 and .seed == 5 and .bleu >= 0 and
		.bleu <= 1 and .rouge_l >= 0 and .rouge_l <= 1' <<<"$output"
}

@test "cg-eval --generate --limit N and --max-bytes N" {
	run -0 cg-eval --json --generate --limit 5 -m "$D/trained.cgm" \
		-d "$D/fort-0.cgd"
	jq -e '.generated == 5 and .examples == 12' <<<"$output"
	run -0 cg-eval --json --generate --limit 1000 -m "$D/trained.cgm" \
		-d "$D/fort-0.cgd"
	jq -e '.generated == 12' <<<"$output"
	run -0 cg-eval --json --generate --max-bytes 3 --temperature 1 \
		-m "$D/m.cgm" -d "$D/fort-0.cgd"
	jq -e '.generated_bytes <= 36 and .generated_bytes > 0' <<<"$output"
}

@test "cg-eval --generate: prompts come from the shard" {
	cg-shard -q -n 1 -o p "$BATS_TEST_DIRNAME/fixtures/text/prompt.jsonl"
	cg-init -a cgpt -d p-0.cgd --context 16 --width 16 --layers 1 \
		--heads 1 --seed 2 -o pm.cgm
	run -0 cg-eval --json --generate --temperature 1 -m pm.cgm -d p-0.cgd
	jq -e '.generated == 7 and .bleu >= 0 and .bleu <= 1 and
		.rouge_l >= 0 and .rouge_l <= 1' <<<"$output"
	# ... and from standard input.
	run -0 cg-eval --json --generate --temperature 1 -m pm.cgm -d - \
		<p-0.cgd
	jq -e '.generated == 7' <<<"$output"
}

@test "cg-eval: generation options are usage errors without --generate" {
	for o in "--limit 3" "--max-bytes 9" "--top-k 2" "--top-p 0.5"; do
		run -2 --separate-stderr cg-eval $o -m "$D/m.cgm" \
			-d "$D/fort-0.cgd"
		[[ ${stderr_lines[0]} == "cg-eval: ${o% *} needs --generate" ]]
		[ -z "$output" ]
	done
	# an image model's --judge takes it too
	run -2 --separate-stderr cg-eval --temperature 1 -m "$D/m.cgm" \
		-d "$D/fort-0.cgd"
	[[ ${stderr_lines[0]} == "cg-eval: --temperature needs --generate or --judge" ]]
	[ -z "$output" ]
}

@test "cg-eval --generate: bad numbers are usage errors" {
	for o in "--limit 0" "--limit x" "--max-bytes 0" "--max-bytes 1e3" \
		"--temperature -1" "--temperature nan" "--top-k -1" \
		"--top-p 1.5" "--top-p -0.1"; do
		run -2 --separate-stderr cg-eval --generate $o -m "$D/m.cgm" \
			-d "$D/fort-0.cgd"
		[[ ${stderr_lines[0]} == "cg-eval: ${o% *}: "* ]]
		[ -z "$output" ]
	done
}

@test "cg-eval --generate on an image model is a usage error" {
	cg-shard -q -o img "$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	cg-init -a cvae -d img-0.cgd --hidden 16 --layers 1 --latent 2 \
		--seed 1 -o cvae.cgm
	run -2 --separate-stderr cg-eval --generate -m cvae.cgm -d img-0.cgd
	[[ ${stderr_lines[0]} == "cg-eval: cvae.cgm: --generate is for text models (cvae makes images)" ]]
	[ -z "$output" ]
	# Without it, image models print what they always did.
	run -0 cg-eval --json -m cvae.cgm -d img-0.cgd
	run -0 jq -c 'keys_unsorted' <<<"$output"
	assert_output '["model","data","arch","step","seed","examples","nelbo","rec","kl","bits_per_dim"]'
}
