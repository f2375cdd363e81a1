#!/usr/bin/env bats
#
# 067-distill.bats - cg-train-step --teacher: a model trained toward a
# teacher's outputs as well as the data.
#
# The teacher runs forward only and draws no randomness, and the
# student's windows and noise are seeded per example as in plain
# training, so a distilled gradient splits among workers as a plain one
# does: two workers' gradients reduced by cg-reduce are the one worker's
# over their union.  A teacher weight of 0 leaves plain training's bytes.
# A teacher of another arch, other conditions or a shorter context is
# refused, and so is a state made with another teacher.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	texts fort -n 2 --strategy stratified --seed 1
	texts all -n 1
	# the student, and a wider teacher of a longer context, trained a
	# little so that it differs from an initial model
	small_cgpt all-0.cgd init.cgm
	model cgpt all-0.cgd t0.cgm --context 48 --width 24 --layers 1 \
		--heads 2 --seed 2
	cg-train-step -q -m t0.cgm -d all-0.cgd --emit model --steps 6 \
		--batch 8 --opt adamw --lr 1e-2 --seed 5 -z gzip -o teacher.cgm
	# a cvae student and teacher on the images, two round-robin shards
	images fm -n 2 --strategy round-robin
	images fmall -n 1 --strategy round-robin
	small_cvae fmall-0.cgd vinit.cgm
	model cvae fmall-0.cgd v0.cgm --hidden 32 --layers 2 --latent 6 \
		--seed 2
	cg-train-step -q -m v0.cgm -d fmall-0.cgd --emit model --steps 4 \
		--batch 16 --seed 5 -o vteacher.cgm
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp "$BATS_FILE_TMPDIR"/*.cgd "$BATS_FILE_TMPDIR"/*.cgm .
}

# stderr_has TEXT: the last run's standard error holds TEXT
stderr_has() {
	[[ "$stderr" == *"$1"* ]] || {
		echo "stderr: $stderr"
		return 1
	}
}

# examples SHARD: how many examples it holds
examples() {
	tar xOf "$1" cg.json | jq '.tensors[] | select(.name == "cond") | .shape[0]'
}

@test "distill: usage errors" {
	run -2 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher-temp 2 -o g.cgg
	stderr_has "--teacher-temp needs --teacher"
	run -2 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher-weight 0.5 -o g.cgg
	stderr_has "--teacher-weight needs --teacher"
	run -2 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher teacher.cgm --teacher-weight 1.5 -o g.cgg
	run -2 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher teacher.cgm --teacher-temp 0 -o g.cgg
	run -2 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher teacher.cgm --teacher-temp x -o g.cgg
	run -2 --separate-stderr sh -c \
		'cg-train-step -m - -d all-0.cgd --teacher - -o g.cgg < init.cgm'
	stderr_has "the teacher and the model cannot both"
	[ ! -e g.cgg ]
	run -0 cg-train-step --help
	assert_output --partial "--teacher FILE"
	assert_output --partial "--teacher-temp"
	assert_output --partial "--teacher-weight"
}

@test "distill: a teacher that cannot teach is refused in one line" {
	# another arch
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher vteacher.cgm -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: vteacher.cgm: the teacher is a cvae model, not cgpt"
	# a context shorter than the student's
	cg-init -a cgpt -d all-0.cgd --context 16 --width 16 --layers 1 \
		--heads 2 --seed 3 -o short.cgm
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher short.cgm -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	stderr_has "context of 16 is shorter"
	# other conditions: a teacher made for one shard's categories only
	printf '%s\n' a b c | jq -R -c '{cond: "x", text: .}' >x.jsonl
	cg-shard -q -n 1 -o x x.jsonl
	cg-init -a cgpt -d x-0.cgd --context 32 --width 16 --layers 1 \
		--heads 2 --seed 3 -o other.cgm
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher other.cgm -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	stderr_has "cg-train-step: other.cgm: the teacher:"
	# a missing, a truncated and a non-model teacher
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher nothere.cgm -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	head -c 3000 init.cgm >trunc.cgm
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher trunc.cgm -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	run -1 --separate-stderr cg-train-step -m init.cgm -d all-0.cgd \
		--teacher all-0.cgd -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ ! -e g.cgg ]
}

@test "distill: teacher weight 0 is plain training, byte for byte" {
	cg-train-step -q -m init.cgm -d all-0.cgd --emit model --steps 3 \
		--batch 4 --opt adamw --lr 3e-3 --seed 2 -o plain.cgm
	cg-train-step -q -m init.cgm -d all-0.cgd --emit model --steps 3 \
		--batch 4 --opt adamw --lr 3e-3 --seed 2 --teacher teacher.cgm \
		--teacher-weight 0 --teacher-temp 2 -o w0.cgm
	cmp plain.cgm w0.cgm
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 -o plain.cgg
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher teacher.cgm --teacher-weight 0 -o w0.cgg
	cmp plain.cgg w0.cgg
	cg-train-step -q -m vinit.cgm -d fmall-0.cgd --steps 2 --batch 8 \
		--seed 2 -o vplain.cgg
	cg-train-step -q -m vinit.cgm -d fmall-0.cgd --steps 2 --batch 8 \
		--seed 2 --teacher vteacher.cgm --teacher-weight 0 -o vw0.cgg
	cmp vplain.cgg vw0.cgg
	# and a weight above 0 is not
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher teacher.cgm -o w5.cgg
	run -1 cg-inspect --diff -q plain.cgg w5.cgg
}

@test "distill: the log has both terms, and the loss mixes them" {
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher teacher.cgm --teacher-weight 0.25 \
		--teacher-temp 2 --log g.log -o g.cgg
	run -0 jq -r '[.loss, .data, .teacher, .teacher_weight, .teacher_temp] | @tsv' g.log
	echo "$output"
	read -r loss data teach a tau <<<"$output"
	[ "$a" = 0.25 ] && [ "$tau" = 2 ]
	awk -v l="$loss" -v d="$data" -v t="$teach" 'BEGIN {
		m = 0.75 * d + 0.25 * t; e = l - m; if (e < 0) e = -e
		exit !(t > 0 && d > 0 && e <= 1e-9 * l) }'
	[ "$(tar xOf g.cgg cg.json | jq .loss)" = "$loss" ]
	cg-train-step -q -m vinit.cgm -d fmall-0.cgd --steps 2 --batch 8 \
		--seed 2 --teacher vteacher.cgm --log v.log -o v.cgg
	run -0 jq -r '[.loss, .data, .teacher, .rec, .kl] | @tsv' v.log
	echo "$output"
	read -r loss data teach rec kl <<<"$output"
	# cvae: (1 - a) rec + kl + a teacher, a = 0.9 by default;
	# data = rec + kl
	awk -v l="$loss" -v d="$data" -v t="$teach" -v r="$rec" -v k="$kl" 'BEGIN {
		m = 0.1 * r + k + 0.9 * t; e = l - m; if (e < 0) e = -e
		f = d - r - k; if (f < 0) f = -f
		exit !(t > 0 && e <= 1e-9 * l && f <= 1e-9 * d) }'
}

@test "distill: cgpt, two workers' reduced gradient is one worker's" {
	local n0 n1 na
	n0=$(examples fort-0.cgd)
	n1=$(examples fort-1.cgd)
	na=$(examples all-0.cgd)
	[ $((n0 + n1)) -eq "$na" ]
	for w in 0 1; do
		eval n=\$n$w
		cg-train-step -q -m init.cgm -d fort-$w.cgd --order sequential \
			--batch "$n" --seed 3 --teacher teacher.cgm \
			--teacher-temp 2 --teacher-weight 0.7 -o g$w.cgg
	done
	cg-train-step -q -m init.cgm -d all-0.cgd --order sequential \
		--batch "$na" --seed 3 --teacher teacher.cgm --teacher-temp 2 \
		--teacher-weight 0.7 -o ga.cgg
	cg-reduce g0.cgg g1.cgg -o r.cgg
	[ "$(tar xOf r.cgg cg.json | jq .weight)" = "$(tar xOf ga.cgg cg.json | jq .weight)" ]
	run -0 cg-inspect --diff -q --tolerance 1e-6 r.cgg ga.cgg
	run -1 cg-inspect --diff -q --tolerance 1e-6 g0.cgg ga.cgg
	# the teacher changed the gradient
	cg-train-step -q -m init.cgm -d all-0.cgd --order sequential \
		--batch "$na" --seed 3 -o plain.cgg
	run -1 cg-inspect --diff -q --tolerance 1e-6 plain.cgg ga.cgg
}

@test "distill: cvae, two workers' reduced gradients are one worker's, step after step" {
	# round-robin shards read in order: two workers of batch 8 see the
	# one worker's batch of 16 (tests/061-sync-equivalence.bats)
	cp vinit.cgm m.cgm
	cp vinit.cgm s.cgm
	for r in 1 2 3; do
		for w in 0 1; do
			cg-train-step -q -m m.cgm -d fm-$w.cgd --steps 1 --batch 8 \
				--order sequential --seed 7 --teacher vteacher.cgm \
				--teacher-temp 2 -o g$w.cgg
		done
		cg-reduce g0.cgg g1.cgg -o red.cgg
		cg-train-step -q -m s.cgm -d fmall-0.cgd --steps 1 --batch 16 \
			--order sequential --seed 7 --teacher vteacher.cgm \
			--teacher-temp 2 -o g.cgg
		run -0 cg-inspect --diff -q --tolerance 1e-5 red.cgg g.cgg
		cg-apply -m m.cgm red.cgg -o m.cgm
		cg-apply -m s.cgm g.cgg -o s.cgm
	done
	run -0 cg-inspect --diff -q --tolerance 1e-5 m.cgm s.cgm
}

@test "distill: --emit delta with a state; another teacher is refused" {
	for r in 1 2; do
		cg-train-step -q -m init.cgm -d fort-0.cgd --emit delta --steps 3 \
			--batch 4 --opt adamw --lr 3e-3 --seed 3 --state w.cgs \
			--teacher teacher.cgm -o d.cgg
	done
	[ "$(tar xOf d.cgg cg.json | jq -r .kind)" = delta ]
	local digest
	digest=$(tar xOf w.cgs cg.json | jq -r .teacher.sha256)
	[ "${#digest}" -eq 64 ]
	run -1 --separate-stderr cg-train-step -m init.cgm -d fort-0.cgd \
		--emit delta --steps 3 --batch 4 --opt adamw --lr 3e-3 \
		--seed 3 --state w.cgs --teacher t0.cgm -o d2.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	stderr_has "made with another teacher"
	run -1 --separate-stderr cg-train-step -m init.cgm -d fort-0.cgd \
		--emit delta --steps 3 --batch 4 --opt adamw --lr 3e-3 \
		--seed 3 --state w.cgs -o d2.cgg
	stderr_has "made with a teacher"
	[ ! -e d2.cgg ]
	# a plain state does not take a teacher either
	cg-train-step -q -m init.cgm -d fort-1.cgd --emit delta --steps 2 \
		--batch 4 --seed 3 --state p.cgs -o p.cgg
	run -1 --separate-stderr cg-train-step -m init.cgm -d fort-1.cgd \
		--emit delta --steps 2 --batch 4 --seed 3 --state p.cgs \
		--teacher teacher.cgm -o p.cgg
	stderr_has "made without a teacher"
}

@test "distill: --max-memory counts the teacher's workspace" {
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 1 --batch 8 \
		--seed 3 --log plain.log -o g.cgg
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 1 --batch 8 \
		--seed 3 --teacher teacher.cgm --log t.log -o g.cgg
	local p t
	p=$(jq .memory_plan plain.log)
	t=$(jq .memory_plan t.log)
	echo "planned: $p plain, $t with the teacher"
	[ "$t" -gt "$p" ]
	# a budget halfway between the two plans makes chunks
	run -0 cg-train-step -q -m init.cgm -d all-0.cgd --steps 1 --batch 8 \
		--seed 3 --teacher teacher.cgm \
		--max-memory $(((t - (t - p) / 2) / 1024))K --log c.log -o g2.cgg
	[ "$(jq .chunk c.log)" -gt 0 ] || [ "$(jq .checkpoint c.log)" = true ]
	run -0 cg-inspect --diff -q --tolerance 1e-6 g.cgg g2.cgg
}

@test "distill: a teacher stored in f16 or q8_0 teaches as its values decoded" {
	# the same values in f32: the same gradient, to the byte
	mkcg -t f16 teacher.cgm t16.cgm
	mkcg -t f32 t16.cgm t16as32.cgm
	[ "$(tar xOf t16.cgm cg.json | jq -r '[.tensors[].dtype] | unique | join(",")')" = f16 ]
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher t16.cgm -o g16.cgg
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher t16as32.cgm -o g32.cgg
	cmp g16.cgg g32.cgg
	mkcg -t q8_0 teacher.cgm tq8.cgm
	tar xOf tq8.cgm cg.json | jq -e '[.tensors[].dtype] | index("q8_0")'
	mkcg -t f32 tq8.cgm tq8as32.cgm
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher tq8.cgm -o gq8.cgg
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher tq8as32.cgm -o gq8as32.cgg
	cmp gq8.cgg gq8as32.cgg
	# and rounding the teacher changed it a little, not nothing
	cg-train-step -q -m init.cgm -d all-0.cgd --steps 2 --batch 4 \
		--seed 2 --teacher teacher.cgm -o g.cgg
	run -1 cg-inspect --diff -q g.cgg g16.cgg
	run -0 cg-inspect --diff -q --tolerance 1e-3 g.cgg g16.cgg
}
