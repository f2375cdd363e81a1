#!/usr/bin/env bats
#
# 066-prune.bats - cg-prune through the programs: its usage errors; a
# pruned model through a pipe into cg-inspect, which shows each tensor's
# sparsity; per tensor, global and 2:4 counts; Wanda and gradient
# importance on both archs; pruned weights exactly 0.0 (and the others
# moved) after cg-train-step (adamw, --emit model, --emit delta with
# --state) and a DiLoCo round through cg-reduce and cg-apply --outer
# nesterov; a pruned student distilled (--teacher) keeps its mask;
# a 90%-sparse model much smaller under zstd; hostile masks
# refused by every reader with one line.  The programs come from PATH;
# mkcg -x makes the broken files.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts t -n 2 --strategy round-robin
	model cgpt t-0.cgd init.cgm --width 32 --layers 1 --heads 2 \
		--context 32
	cg-train-step -q -m init.cgm -d t-0.cgd --emit model --steps 30 \
		--batch 8 --opt adamw --lr 3e-3 -o gpt.cgm
	images fm -n 1
	small_cvae fm-0.cgd vae.cgm --latent 2
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

manifest() { tar xOf "$1" cg.json; }

# the prunable tensors' names of model $1 (those with a mask in $2)
masked() { cg-inspect --json --no-stats "$1" | jq -r '.tensors[] | select(.pruned != null) | .name'; }

# Every weight of tensor $2 of model $1 that its mask prunes is exactly
# 0.0, and (with $3, the model before) every weight it keeps differs
# from $3's.  Prints "pruned N kept K moved M".
check_zero() {
	cg-inspect --tensor "mask.$2" "$1" >mask.txt
	cg-inspect --tensor "$2" "$1" >w.txt
	if [ -n "${3:-}" ]; then
		cg-inspect --tensor "$2" "$3" >w0.txt
	else
		cp w.txt w0.txt
	fi
	awk 'FILENAME == "mask.txt" { m[nm++] = $1; next }
	     FILENAME == "w0.txt" { w0[n0++] = $1; next }
	     { j = FNR - 1; bit = int(m[int(j / 8)] / 2 ^ (j % 8)) % 2
	       if (bit == 0) { p++; if ($1 != "0" && $1 != "-0") bad++ }
	       else { k++; if ($1 != w0[j]) mv++ } }
	     END { printf "pruned %d kept %d moved %d\n", p, k, mv
	           exit bad > 0 }' mask.txt w0.txt w.txt
}

@test "cg-prune: --help, --version, usage errors, a missing file" {
	run -0 cg-prune --help
	[[ $output == *'usage: cg-prune'* ]]
	[[ $output == *'--importance'* ]]
	run -0 cg-prune --version
	[[ $output == 'cg-prune (cg) '* ]]
	run -2 --separate-stderr cg-prune --frob "$D/gpt.cgm"
	[[ $stderr == *'usage: cg-prune'* ]]
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
$D/gpt.cgm|nothing to prune: give --sparsity X or --nm N:M
-s 0.5 --nm 2:4 $D/gpt.cgm|--sparsity and --nm: choose one
--nm 2:4 --global $D/gpt.cgm|--global ranks for --sparsity
-s 0.5 --global -i wanda -d $D/t-0.cgd $D/gpt.cgm|--global: wanda compares weights within each output row
-s 0.5 -i wanda $D/gpt.cgm|--importance wanda needs a calibration shard
-s 0.5 -d $D/t-0.cgd $D/gpt.cgm|--data is for --importance wanda
-s 0.5 -i grad $D/gpt.cgm|--importance grad needs a gradient file
-s 0.5 $D/gpt.cgm $D/gpt.cgm|a gradient ($D/gpt.cgm) is for --importance grad
-s 1.5 $D/gpt.cgm|--sparsity: 
--nm 4:4 $D/gpt.cgm|--nm: '4:4': not N:M with 1 <= N < M <= 256
--nm 2 $D/gpt.cgm|--nm: '2' is not N:M
-s 0.5 -i size $D/gpt.cgm|--importance: 'size' is not magnitude, wanda or grad
-s 0.5|no model
--nm 2:4 --group row $D/gpt.cgm|--group is for --sparsity
-s 0.5 --global --group row $D/gpt.cgm|--global and --group: a ranking is over all tensors
-s 0.5 --group col $D/gpt.cgm|--group: 'col' is not tensor or row
EOF
	run -1 --separate-stderr cg-prune -s 0.5 nosuch.cgm -o out.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-prune: nosuch.cgm: '* ]]
	run -1 --separate-stderr cg-prune -s 0.5 --exclude 'nope*' \
		"$D/gpt.cgm" -o out.cgm
	[ "$stderr" = "cg-prune: --exclude 'nope*': names no tensor that may be pruned" ]
	[ ! -e out.cgm ]
	run -1 --separate-stderr cg-prune -s 0.5 "$D/gpt.cgm" -o /nonexistent/out.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	# a write that fails part way: one line, exit 1
	run -1 --separate-stderr cg-prune -s 0.5 "$D/gpt.cgm" -o /dev/full
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-prune: '* ]]
}

@test "cg-prune: standard input and output, no temporary left behind" {
	cg-prune -s 0.5 - <"$D/gpt.cgm" >a.cgm
	cg-prune -s 0.5 "$D/gpt.cgm" -o b.cgm
	cmp a.cgm b.cgm
	# the gradient from standard input
	cg-train-step -q -m "$D/gpt.cgm" -d "$D/t-0.cgd" --batch 8 -o g.cgg
	cg-prune -s 0.5 -i grad "$D/gpt.cgm" - <g.cgg >c.cgm
	cg-prune -s 0.5 -i grad "$D/gpt.cgm" g.cgg -o d.cgm
	cmp c.cgm d.cgm
	run -2 --separate-stderr cg-prune -s 0.5 -i grad - - <g.cgg
	[[ $stderr == *'cannot both be standard input'* ]]
	# killed while it calibrates: neither the output nor a temporary
	cg-prune -s 0.5 -i wanda -d "$D/t-0.cgd" --calib 0 --batch 1 \
		"$D/gpt.cgm" -o k.cgm &
	local pid=$!
	sleep 0.2
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || true
	run -0 bash -c 'ls -a | grep -c "k\.cgm" || true'
	[ "$output" -le 1 ]
	[ -z "$(ls -a | grep '^\.k\.cgm')" ]
}

@test "cg-prune | cg-inspect -: each tensor's sparsity, exact counts" {
	run -0 --separate-stderr bash -c "cg-prune -s 0.5 '$D/gpt.cgm' | cg-inspect --no-stats -"
	[[ $output == *'pruned:     '*' weights of 5 tensors (50.0% of their '* ]]
	[[ $output == *'PRUNED%'* ]]
	local row
	row=$(grep '^h.0.mlp.fc.w ' <<<"$output")
	[[ $row == *' 50.0' ]]
	row=$(grep '^h.0.mlp.fc.b ' <<<"$output")
	[[ $row == *' -' ]]
	# per tensor: round(0.3 n) of each prunable tensor, nothing else
	cg-prune -s 0.3 "$D/gpt.cgm" -o p.cgm
	run -0 jq -r '.tensors[] | select(.pruned != null) |
		"\(.name) \(.pruned) \(.count)"' <(cg-inspect --json p.cgm)
	[ "${#lines[@]}" -eq 5 ]
	local name n count
	while read -r name n count; do
		[ "$n" -eq "$(( (3 * count + 5) / 10 ))" ] || {
			echo "$name: $n of $count"
			return 1
		}
		# the weights at zero are the pruned ones (none was 0 before)
		run -0 jq -r --arg n "$name" '.tensors[] | select(.name == $n) | .zeros' \
			<(cg-inspect --json p.cgm)
		[ "$output" -eq "$n" ]
	done < <(jq -r '.tensors[] | select(.pruned != null) |
		"\(.name) \(.pruned) \(.count)"' <(cg-inspect --json p.cgm))
	# biases, norms and embeddings are never masked
	run -0 masked p.cgm
	[ "$output" = "$(printf '%s\n' h.0.attn.qkv.w h.0.attn.proj.w \
		h.0.mlp.fc.w h.0.mlp.proj.w lm_head.w)" ]
	# global: round(0.3 N) of all N, unevenly spread
	cg-prune -s 0.3 --global "$D/gpt.cgm" -o g.cgm
	run -0 jq '[.tensors[] | select(.pruned != null) | .pruned] | add' \
		<(cg-inspect --json g.cgm)
	local total
	total=$(jq '[.tensors[] | select(.pruned != null) | .count] | add' \
		<(cg-inspect --json g.cgm))
	[ "$output" -eq "$(( (3 * total + 5) / 10 ))" ]
	run -0 jq '[.tensors[] | select(.pruned != null) | .sparsity] | unique | length' \
		<(cg-inspect --json g.cgm)
	[ "$output" -gt 1 ]
	# --exclude keeps a tensor dense
	cg-prune -s 0.3 --exclude 'lm_head.*' "$D/gpt.cgm" -o e.cgm
	run -0 masked e.cgm
	[[ $output != *lm_head* ]]
	[ "${#lines[@]}" -eq 4 ]
}

@test "cg-prune --nm 2:4: two of every four inputs of each row" {
	cg-prune --nm 2:4 "$D/gpt.cgm" -o nm.cgm
	run -0 jq -c '[.tensors[] | select(.pruned != null) | .sparsity] | unique' \
		<(cg-inspect --json nm.cgm)
	[ "$output" = "[0.5]" ]
	# each aligned run of 4 of a row (32 inputs) has exactly 2 zeros
	cg-inspect --tensor h.0.mlp.fc.w --rows nm.cgm |
		awk '{ for (g = 0; g < NF / 4; g++) { z = 0
			for (j = 1; j <= 4; j++) z += $(4 * g + j) == 0
			if (z != 2) bad++ } } END { exit bad > 0 }'
	run -0 jq -r .pruning.nm <(manifest nm.cgm)
	[ "$output" = "2:4" ]
}

@test "cg-prune: wanda and grad importance, on cgpt and cvae" {
	cg-prune -s 0.5 -i wanda -d "$D/t-1.cgd" --calib 16 "$D/gpt.cgm" -o w.cgm
	cg-prune -s 0.5 "$D/gpt.cgm" -o mag.cgm
	# every row of every tensor loses half
	cg-inspect --tensor h.0.attn.proj.w --rows w.cgm |
		awk '{ z = 0; for (j = 1; j <= NF; j++) z += $j == 0
			if (z != NF / 2) bad++ } END { exit bad > 0 }'
	# --group: magnitude by rows, each losing half; wanda by tensor, its
	# rows unevenly
	cg-prune -s 0.5 --group row "$D/gpt.cgm" -o mr.cgm
	cg-inspect --tensor h.0.attn.proj.w --rows mr.cgm |
		awk '{ z = 0; for (j = 1; j <= NF; j++) z += $j == 0
			if (z != NF / 2) bad++ } END { exit bad > 0 }'
	cg-prune -s 0.5 -i wanda -d "$D/t-1.cgd" --calib 16 --group tensor \
		"$D/gpt.cgm" -o wt.cgm
	run -0 jq -r '.pruning.group' <(manifest wt.cgm)
	[ "$output" = tensor ]
	run -0 jq -c '[.tensors[] | select(.pruned != null) | .sparsity] | unique' \
		<(cg-inspect --json wt.cgm)
	[ "$output" = "[0.5]" ]
	cg-inspect --tensor h.0.attn.proj.w --rows wt.cgm |
		awk '{ z = 0; for (j = 1; j <= NF; j++) z += $j == 0
			if (z != NF / 2) uneven++ } END { exit uneven == 0 }'
	# not magnitude's choice
	run -1 cmp -s <(cg-inspect --tensor mask.h.0.attn.proj.w w.cgm) \
		<(cg-inspect --tensor mask.h.0.attn.proj.w mag.cgm)
	# the same seed, the same bytes
	cg-prune -s 0.5 -i wanda -d "$D/t-1.cgd" --calib 16 "$D/gpt.cgm" -o w2.cgm
	cmp w.cgm w2.cgm
	# a gradient of the model: |w g|
	cg-train-step -q -m "$D/gpt.cgm" -d "$D/t-0.cgd" --batch 8 -o g.cgg
	cg-prune -s 0.5 "$D/gpt.cgm" --importance grad g.cgg -o gr.cgm
	run -0 jq -r .pruning.importance <(manifest gr.cgm)
	[ "$output" = grad ]
	# a coded gradient is decoded as cg-apply decodes one
	cg-train-step -q -m "$D/gpt.cgm" -d "$D/t-0.cgd" --batch 8 \
		--codec q8 --no-error-feedback -o g8.cgu
	cg-prune -s 0.5 -i grad "$D/gpt.cgm" g8.cgu -o gr8.cgm
	run -0 jq -r '[.tensors[] | select(.pruned) | .pruned] | add' \
		<(cg-inspect --json gr8.cgm)
	[ "$output" -eq "$(jq -r .pruning.pruned <(manifest gr.cgm))" ]
	# a gradient of another model is refused
	run -1 --separate-stderr cg-prune -s 0.5 -i grad w.cgm g.cgg -o x.cgm
	[[ $stderr == *'g.cgg'*'computed from another model'* ]]
	# cvae: wanda and grad
	cg-prune -s 0.7 -i wanda -d "$D/fm-0.cgd" "$D/vae.cgm" -o vw.cgm
	run -0 jq -c '[.tensors[] | select(.pruned != null) | .name] | length' \
		<(cg-inspect --json vw.cgm)
	[ "$output" -eq 5 ]
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --batch 8 -o vg.cgg
	cg-prune --nm 1:4 -i grad "$D/vae.cgm" vg.cgg -o vgr.cgm
	cg-eval -m vgr.cgm -d "$D/fm-0.cgd" >/dev/null
}

@test "pruned weights stay exactly 0.0 through cg-train-step and a DiLoCo round" {
	cg-prune -s 0.5 -i wanda -d "$D/t-1.cgd" --calib 16 "$D/gpt.cgm" -o p.cgm
	local t
	# plain training, adamw with weight decay
	cg-train-step -q -m p.cgm -d "$D/t-0.cgd" --emit model --steps 5 \
		--batch 8 --opt adamw --lr 1e-3 --wd 0.1 -o ft.cgm
	for t in $(masked p.cgm); do
		run -0 check_zero ft.cgm "$t" p.cgm
		[[ $output =~ kept\ ([0-9]+)\ moved\ ([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" -eq "${BASH_REMATCH[2]}" ] || {
			echo "$t: $output"
			return 1
		}
	done
	# the mask travels with the model
	run -0 masked ft.cgm
	[ "$output" = "$(masked p.cgm)" ]
	# DiLoCo: two workers' deltas with --state (twice: the state's moments
	# carry over), cg-reduce, cg-apply --outer nesterov
	local r w
	cp p.cgm m.cgm
	for r in 1 2; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d "$D/t-$w.cgd" --emit delta \
				--steps 3 --batch 8 --opt adamw --lr 1e-3 \
				--state "w$w.state" -o "d$w.cgu"
		done
		cg-reduce d0.cgu d1.cgu -o mean.cgu
		cg-apply -m m.cgm --outer nesterov mean.cgu -o m2.cgm
		mv m2.cgm m.cgm
	done
	for t in $(masked p.cgm); do
		run -0 check_zero m.cgm "$t" p.cgm
		[[ $output =~ kept\ ([0-9]+)\ moved\ ([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" -eq "${BASH_REMATCH[2]}" ]
		# the deltas and the outer momentum are 0 there too
		cg-inspect --tensor "$t" d0.cgu >d.txt
		awk 'NR == FNR { m[n++] = $1; next }
		     { j = FNR - 1; if (int(m[int(j / 8)] / 2 ^ (j % 8)) % 2 == 0 &&
		       $1 != "0" && $1 != "-0") bad++ } END { exit bad > 0 }' \
			<(cg-inspect --tensor "mask.$t" p.cgm) d.txt
	done
	run -0 jq '.tensors[] | select(.name == "outer.mom") | .zeros' \
		<(cg-inspect --json m.cgm)
	local pruned
	pruned=$(jq -r .pruning.pruned <(manifest p.cgm))
	[ "$output" -ge "$pruned" ]
	# gradients for synchronous training: 0 where pruned
	cg-train-step -q -m m.cgm -d "$D/t-0.cgd" --batch 8 -o g.cgg
	for t in $(masked p.cgm); do
		cg-inspect --tensor "$t" g.cgg >d.txt
		awk 'NR == FNR { m[n++] = $1; next }
		     { j = FNR - 1; if (int(m[int(j / 8)] / 2 ^ (j % 8)) % 2 == 0 &&
		       $1 != "0" && $1 != "-0") bad++ } END { exit bad > 0 }' \
			<(cg-inspect --tensor "mask.$t" p.cgm) d.txt
	done
	cg-apply -m m.cgm --opt adamw g.cgg -o m3.cgm
	for t in $(masked p.cgm); do
		run -0 check_zero m3.cgm "$t"
	done
}

@test "a pruned student distilled from its dense teacher stays pruned" {
	cg-prune -s 0.5 "$D/gpt.cgm" -o p.cgm
	local t
	cg-train-step -q -m p.cgm -d "$D/t-0.cgd" --emit model --steps 5 \
		--batch 8 --opt adamw --lr 1e-3 --teacher "$D/gpt.cgm" -o ft.cgm
	for t in $(masked p.cgm); do
		run -0 check_zero ft.cgm "$t" p.cgm
		[[ $output =~ kept\ ([0-9]+)\ moved\ ([0-9]+) ]]
		[ "${BASH_REMATCH[1]}" -eq "${BASH_REMATCH[2]}" ]
	done
	run -0 masked ft.cgm
	[ "$output" = "$(masked p.cgm)" ]
	# a distilled delta is 0 where pruned
	cg-train-step -q -m p.cgm -d "$D/t-0.cgd" --emit delta --steps 3 \
		--batch 8 --opt adamw --lr 1e-3 --teacher "$D/gpt.cgm" \
		--state w.state -o d.cgu
	for t in $(masked p.cgm); do
		cg-inspect --tensor "$t" d.cgu >d.txt
		awk 'NR == FNR { m[n++] = $1; next }
		     { j = FNR - 1; if (int(m[int(j / 8)] / 2 ^ (j % 8)) % 2 == 0 &&
		       $1 != "0" && $1 != "-0") bad++ } END { exit bad > 0 }' \
			<(cg-inspect --tensor "mask.$t" p.cgm) d.txt
	done
}

@test "coded deltas up, a coded change down: still 0.0, the same model on both ends" {
	cg-prune -s 0.5 "$D/gpt.cgm" -o p.cgm
	cp p.cgm w.cgm
	local w t
	for w in 0 1; do
		cg-train-step -q -m p.cgm -d "$D/t-$w.cgd" --emit delta \
			--steps 2 --batch 8 --opt adamw --codec lowrank:2 \
			--state "w$w.state" -o "d$w.cgu"
		# the residual owes nothing at a pruned weight
		cg-inspect --tensor ef.residual "w$w.state" >res.txt
		run -0 jq -r '.tensors[] | select(.name == "ef.residual") | .zeros' \
			<(cg-inspect --json "w$w.state")
		[ "$output" -ge "$(jq -r .pruning.pruned <(manifest p.cgm))" ]
	done
	cg-reduce d0.cgu d1.cgu | cg-apply -m p.cgm --outer nesterov \
		--codec q4 --change down.cgu -o c.cgm
	cg-apply -m w.cgm down.cgu -o w2.cgm
	run -0 cg-inspect --no-stats c.cgm w2.cgm
	[ "$(grep -c "$(cg-inspect --no-stats c.cgm | grep '^params:')" <<<"$output")" -eq 2 ]
	for t in $(masked p.cgm); do
		run -0 check_zero c.cgm "$t" p.cgm
		run -0 check_zero w2.cgm "$t"
	done
}

@test "the mask in other dtypes and formats: q4_0 weights, safetensors" {
	cg-prune -s 0.5 "$D/gpt.cgm" -o p.cgm
	# the weights in a 4-bit block format, the masks as they are
	mkcg -t q4_0 p.cgm q.cgm
	run -0 cg-inspect --no-stats q.cgm
	[[ $output == *'pruned:     '*' weights of 5 tensors (50.0% '* ]]
	cg-prune -s 0 q.cgm -o back.cgm
	local t
	for t in $(masked p.cgm); do
		run -0 check_zero back.cgm "$t"
	done
	cg-eval -m q.cgm -d "$D/t-1.cgd" >/dev/null
	# out to safetensors and back: the same bytes
	cg-convert p.cgm p.safetensors
	cg-convert p.safetensors p2.cgm
	cmp p.cgm p2.cgm
}

@test "a 90%-sparse model is much smaller under zstd" {
	cg-prune -s 0.9 "$D/gpt.cgm" -z zstd -o s.cgm
	# the dense model written the same way
	cg-prune -s 0 "$D/gpt.cgm" -z zstd -o d.cgm
	local sb db
	sb=$(stat -c %s s.cgm)
	db=$(stat -c %s d.cgm)
	echo "sparse $sb dense $db"
	[ $((sb * 2)) -lt "$db" ]
	cg-eval -m s.cgm -d "$D/t-1.cgd" >/dev/null
}

@test "hostile masks: every reader refuses them with one line" {
	cg-prune -s 0.5 "$D/gpt.cgm" -o p.cgm
	local how msg prog
	while IFS='|' read -r how msg; do
		mkcg -x "$how" p.cgm bad.cgm
		for prog in "cg-inspect bad.cgm" "cg-inspect --json bad.cgm" \
			"cg-eval -m bad.cgm -d $D/t-1.cgd" \
			"cg-train-step -m bad.cgm -d $D/t-0.cgd --batch 4 -o x.cgg" \
			"cg-prune -s 0.5 bad.cgm -o x.cgm" \
			"cg-sample -m bad.cgm -n 1" \
			"cg-apply -m bad.cgm $D/nothing.cgg -o x.cgm"; do
			# shellcheck disable=SC2086
			run -1 --separate-stderr $prog
			[ "${#stderr_lines[@]}" -eq 1 ] && [ -z "$output" ] &&
				[[ $stderr == *"bad.cgm: tensor mask."*"$msg"* ]] || {
				echo "$how, $prog: $stderr"
				return 1
			}
			[ ! -e x.cgm ] && [ ! -e x.cgg ]
		done
	done <<EOF
mask-dtype|expected u8 [
mask-short|expected u8 [
mask-name|a mask of wte, which cannot be pruned
EOF
}
