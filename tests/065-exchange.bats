#!/usr/bin/env bats
#
# 065-exchange.bats - compressed exchange through the programs: every
# codec of cg-train-step --codec, with its sizes in the manifest; error
# feedback kept in the state; --budget; cg-reduce over mixed codecs, a
# reduction of reductions, and --codec on its output; the downlink
# (cg-apply --codec --change), after which every worker holds the
# coordinator's model bit for bit; hostile coded files refused with one
# line.  The programs come from PATH; mkcg -x makes the broken files.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# a delta of model.cgm on shard W (0 or 1) under codec C, state S,
# seed N (0)
delta() {
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-$1.cgd" --emit delta \
		--steps 2 --batch 8 --codec "$2" --state "$3" --seed "${5:-0}" \
		-o "$4"
}

manifest() { tar xOf "$1" cg.json; }

@test "--codec: each codec's spec, encoded and dense sizes in the manifest" {
	local c
	for c in f32 f16 bf16 q8 q4 q2 q2:sr topk:0.05 topk:k=3,val=f32 \
		sign lowrank:2; do
		delta 0 "$c" "s.state" u.cgu
		rm -f s.state
		run -0 jq -r '.codec | "\(.bytes) \(.dense_bytes)"' <(manifest u.cgu)
		local bytes=${output% *} dense=${output#* }
		# the coded tensors take exactly "bytes"; the dense update
		# 4 bytes a parameter
		run -0 jq '[.tensors[].bytes] | add' <(manifest u.cgu)
		[ "$output" -eq "$bytes" ] || {
			echo "$c: tensors $output, codec bytes $bytes"
			return 1
		}
		run -0 jq '[.tensors[].count] | add' \
			<(cg-inspect --json "$D/model.cgm")
		[ "$dense" -eq $((4 * output)) ]
		cg-inspect --verify -q u.cgu
	done
	# smaller than dense, in the order of their bits
	local prev=999999999 b
	for c in f32 f16 q8 q4 q2 sign; do
		delta 0 "$c" "s-$c" u.cgu
		b=$(manifest u.cgu | jq .codec.bytes)
		[ "$b" -lt "$prev" ] || {
			echo "$c: $b bytes, not fewer than $prev"
			return 1
		}
		prev=$b
	done
}

@test "a lossy codec without --state is a usage error; --no-error-feedback allows it" {
	run -2 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec q4 -o u.cgu
	[[ $stderr == "cg-train-step: a lossy --codec keeps what it did not send in --state FILE (or give --no-error-feedback)"* ]]
	[ ! -e u.cgu ]
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--codec q4 --no-error-feedback -o u.cgu
	# f32 loses nothing: no state needed
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--codec f32 -o v.cgu
	run -2 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit model --codec q4 -o m.cgm
	[[ $stderr == *"--codec and --budget encode a grad or a delta, not a model"* ]]
	run -2 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec q3 -o u.cgu
	[[ $stderr == "cg-train-step: --codec: unknown codec 'q3'"* ]]
}

@test "error feedback: the residual is kept in the state and sent later" {
	delta 0 topk:0.02 s.state u1.cgu
	run -0 cg-inspect s.state
	assert_line --regexp '^ef\.residual +f32 '
	# the residual is what was not sent: nonzero
	run -0 cg-inspect --json s.state
	run -0 jq -r '.tensors[] | select(.name == "ef.residual") | .zero_frac' \
		<<<"$output"
	awk -v z="$output" 'BEGIN { exit !(z < 0.5) }'
	# the next call adds it: its update differs from a fresh worker's
	cp s.state keep.state
	delta 0 topk:0.02 s.state u2.cgu
	rm -f f.state
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--steps 2 --batch 8 --codec topk:0.02 --no-error-feedback \
		--state f.state -o u3.cgu
	run -0 cg-inspect f.state
	refute_line --regexp '^ef\.residual'
	! cmp -s u2.cgu u3.cgu
	# --no-error-feedback drops a residual kept before
	cp keep.state n.state
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--steps 2 --batch 8 --codec topk:0.02 --no-error-feedback \
		--state n.state -o u5.cgu
	run -0 cg-inspect --json n.state
	run -0 jq -r '.tensors[] | select(.name == "ef.residual") | .zero_frac' \
		<<<"$output"
	[ "$output" = 1 ]
	# the same call from the same state gives the same bytes
	cp keep.state s.state
	delta 0 topk:0.02 s.state u4.cgu
	cmp u2.cgu u4.cgu
}

@test "--budget: the update fits; too small a budget is refused" {
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--steps 2 --batch 8 --budget 2000 --state s.state -o u.cgu
	run -0 jq -r '.codec | "\(.name) \(.bytes)"' <(manifest u.cgu)
	[[ $output == "topk "* ]]
	[ "${output#* }" -le 2000 ]
	[ "${output#* }" -gt 1900 ]
	rm -f s.state
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit delta \
		--steps 2 --batch 8 --codec q8 --budget 20000 --state s.state \
		-o v.cgu
	run -0 jq -r '.codec.name' <(manifest v.cgu)
	[ "$output" = q4 ]
	rm -f s.state
	run -1 --separate-stderr cg-train-step -q -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --codec q8 --budget 100 \
		--state s.state -o w.cgu
	[[ $stderr == "cg-train-step: --budget 100: the smallest q2 update takes "*" bytes" ]]
	[ ! -e w.cgu ] && [ ! -e s.state ]
}

@test "cg-reduce: mixed codecs; a reduction of reductions is one reduction" {
	# four workers on two shards: two seeds (a shard and a seed are a
	# worker, and each counts once)
	delta 0 topk:0.1 s0 a.cgu
	delta 1 q4 s1 b.cgu
	delta 0 f16 s2 c.cgu 1
	delta 1 sign s3 d.cgu 1
	cg-reduce --op sum a.cgu b.cgu c.cgu d.cgu -o flat.cgg
	cg-reduce --op sum a.cgu b.cgu -o ab.cgg
	cg-reduce --op sum ab.cgg c.cgu d.cgu -o tree.cgg
	run -0 cg-inspect --diff flat.cgg tree.cgg
	assert_line --regexp '^tensors: +12 in A, 12 in B: 12 identical'
	# the mean, as a tree of partial means
	cg-reduce a.cgu b.cgu c.cgu d.cgu -o m.cgg
	cg-reduce a.cgu b.cgu -o m1.cgg
	cg-reduce c.cgu d.cgu -o m2.cgg
	cg-reduce m1.cgg m2.cgg -o m12.cgg
	run -0 cg-inspect --diff --tolerance 1e-6 m.cgg m12.cgg
	assert_line --regexp '^tensors: +12 in A, 12 in B: (12 identical|.*equal)'
	# --codec re-encodes the result
	cg-reduce --codec q8 a.cgu b.cgu -o q.cgu
	run -0 jq -r '.codec.name, .inputs' <(manifest q.cgu)
	assert_line -n 0 q8
	assert_line -n 1 2
}

@test "cg-reduce --log: a line per call, the folding's seconds within the call's" {
	delta 0 q8 s0 a.cgu
	delta 1 topk:0.1 s1 b.cgu
	cg-reduce --log l a.cgu b.cgu -o m.cgg
	cg-reduce --log l m.cgg -o m2.cgg
	run -0 jq -r '[.inputs, .samples, (.fold_seconds > 0),
	              (.fold_seconds <= .seconds)] | @tsv' l
	assert_line -n 0 "$(printf '2\t32\ttrue\ttrue')"
	assert_line -n 1 "$(printf '2\t32\ttrue\ttrue')"
	[ "${#lines[@]}" -eq 2 ]
	run -1 cg-reduce --log /nonexistent/dir/l a.cgu -o x.cgg
	assert_output --partial '/nonexistent/dir/l: cannot append'
}

@test "downlink: every worker rebuilds the coordinator's model, same digest" {
	cp "$D/model.cgm" coord.cgm
	cp "$D/model.cgm" w0.cgm
	cp "$D/model.cgm" w1.cgm
	local r w
	for r in 1 2 3; do
		for w in 0 1; do
			cg-train-step -q -m w$w.cgm -d "$D/fm-$w.cgd" --emit delta \
				--steps 2 --batch 8 --codec topk:0.05 --state s$w \
				-z zstd -o up$w.cgu
		done
		cg-reduce up0.cgu up1.cgu | cg-apply -m coord.cgm \
			--outer nesterov --codec q4 --change down.cgu -z zstd \
			-o coord.cgm
		run -0 jq -r '.downlink, .codec.name' <(tar xOf down.cgu cg.json)
		assert_output $'true\nq4'
		for w in 0 1; do
			run -0 --separate-stderr cg-apply -m w$w.cgm down.cgu \
				-o w$w.cgm
			[ -z "$stderr" ] # a published change needs no --outer
		done
	done
	local want
	want=$(cg-inspect coord.cgm | awk '/^params:/ { print $3 }')
	for w in 0 1; do
		[ "$(cg-inspect w$w.cgm | awk '/^params:/ { print $3 }')" = "$want" ]
	done
	# the coordinator keeps its residual; the workers never see it
	run -0 cg-inspect coord.cgm
	assert_line --regexp '^ef\.down +f32 '
	run -0 cg-inspect w0.cgm
	refute_line --regexp '^ef\.down'
	# a change of another base is refused
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" down.cgu -o x.cgm
	[[ $stderr == "cg-apply: down.cgu: computed from another model"* ]]
	run -2 --separate-stderr cg-apply -m w0.cgm --outer nesterov down.cgu \
		-o x.cgm
	[[ $stderr == "cg-apply: down.cgu: a published change is added as it is: --outer nesterov would make another model than the coordinator's"* ]]
	run -2 --separate-stderr cg-apply -m coord.cgm --codec q4 up0.cgu \
		-o x.cgm
	[[ $stderr == *"--codec and --budget publish a change: name its file with --change"* ]]
}

@test "hostile coded files: one line, exit 1, nothing written" {
	delta 0 topk:0.1 s0 t.cgu
	delta 0 q4 s1 q.cgu
	local how msg
	for how in idx-range idx-repeat scale-nan blocks; do
		case $how in
		scale-nan | blocks) mkcg -x "$how" q.cgu bad.cgu ;;
		*) mkcg -x "$how" t.cgu bad.cgu ;;
		esac
		case $how in
		idx-range) msg="bad.cgu: tensor enc.0.w.idx: index 4294967295 outside its 12704 elements" ;;
		idx-repeat) msg="bad.cgu: tensor enc.0.w.idx: index * repeated or out of order" ;;
		scale-nan) msg="bad.cgu: tensor enc.0.w: block 0 has a scale that is not finite" ;;
		blocks) msg="bad.cgu: tensor enc.0.w: its shape is not the layout's" ;;
		esac
		run -1 --separate-stderr cg-reduce t.cgu bad.cgu -o r.cgg
		[ -z "$output" ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		# shellcheck disable=SC2053
		[[ ${stderr_lines[0]} == "cg-reduce: "$msg ]] || {
			echo "$how: ${stderr_lines[0]}"
			return 1
		}
		[ ! -e r.cgg ]
		run -1 --separate-stderr cg-apply -m "$D/model.cgm" bad.cgu -o m.cgm
		[ "${#stderr_lines[@]}" -eq 1 ]
		[ ! -e m.cgm ]
	done
	# an update of another codec's shape: a layout that is not the model's
	run -1 --separate-stderr cg-reduce t.cgu "$D/model.cgm" -o r.cgg
	[[ $stderr == "cg-reduce: $D/model.cgm: a model file, not a grad or delta" ]]
}
