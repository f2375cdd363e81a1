#!/usr/bin/env bats
#
# 113-step-distill.bats - cg-train-step --distill-steps: progressive
# distillation of a cddpm, a student that learns to take in one DDIM
# step what its teacher takes in two.
#
# A round trip of two stages (a plain teacher to 15 steps, 15 to 8)
# leaves each student's record in its manifest, which cg-sample follows;
# the two workers' reduced gradient is the one worker's (the teacher
# draws nothing); and what cannot be distilled is refused in one line.
# That the target and its loss are what cddpm.h says, against a
# reference in double, and every gradient, is tests/unit/test_stepdistill's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images all -n 1 --strategy round-robin
	images rr -n 2 --strategy round-robin
	# a small teacher (T = 100) trained a little, and one of another
	# schedule
	model cddpm all-0.cgd t0.cgm --hidden 32 --layers 2 --embed 16 \
		--timesteps 100
	cg-train-step -q -m t0.cgm -d all-0.cgd --emit model --steps 20 \
		--batch 32 --seed 1 -o teacher.cgm
	model cddpm all-0.cgd t200.cgm --hidden 32 --layers 2 --embed 16 \
		--timesteps 200
	small_cvae all-0.cgd vae.cgm
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

# manifest FILE FILTER: jq -c FILTER of FILE's manifest
manifest() {
	tar xOf "$1" cg.json | jq -c "$2"
}

@test "step-distill: usage errors" {
	run -2 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--distill-steps 8 -o s.cgm
	stderr_has "--distill-steps needs --teacher"
	run -2 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm --distill-guidance 1 -o s.cgm
	stderr_has "--distill-guidance needs --distill-steps"
	run -2 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm --distill-steps 8 --teacher-temp 2 \
		-o s.cgm
	stderr_has "no temperature"
	run -2 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm --distill-steps 1 -o s.cgm
	run -2 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm --distill-steps 8 --distill-guidance -1 \
		-o s.cgm
	[ ! -e s.cgm ]
	run -0 cg-train-step --help
	assert_output --partial "--distill-steps N"
	assert_output --partial "--distill-guidance W"
}

@test "step-distill: two stages, each student's record, cg-sample follows it" {
	cg-train-step -q -m teacher.cgm -d all-0.cgd --teacher teacher.cgm \
		--distill-steps 15 --distill-guidance 1 --emit model \
		--steps 3 --batch 16 --lr 1e-4 --log l15.json -o s15.cgm
	[ "$(manifest s15.cgm .distilled)" = '{"steps":15,"guidance":1}' ]
	# the teacher term alone (weight 1 unless told), and logged
	[ "$(jq -c '[.teacher_weight, .loss == .teacher, .data > 0]' \
		l15.json)" = '[1,true,true]' ]
	cg-train-step -q -m s15.cgm -d all-0.cgd --teacher s15.cgm \
		--distill-steps 8 --emit model --steps 3 --batch 16 \
		--lr 1e-4 -o s8.cgm
	# the guidance stays with the student
	[ "$(manifest s8.cgm .distilled)" = '{"steps":8,"guidance":1}' ]
	# and is not given again: the distilled teacher runs as it is drawn,
	# unguided, as the same weights without a record do
	mkdir p && tar xf s15.cgm -C p
	jq -c 'del(.distilled)' p/cg.json >p/j && mv p/j p/cg.json
	(cd p && tar cf ../p15.cgm cg.json $(tar tf ../s15.cgm | tail -n +2))
	for t in s15 p15; do
		cg-train-step -q -m s15.cgm -d all-0.cgd --teacher $t.cgm \
			--distill-steps 8 --batch 16 --seed 2 -o g-$t.cgg
	done
	run -0 cg-inspect --diff -q g-s15.cgg g-p15.cgg
	cg-train-step -q -m s15.cgm -d all-0.cgd --teacher p15.cgm \
		--distill-steps 8 --distill-guidance 1 --batch 16 --seed 2 \
		-o g-guided.cgg
	run -1 cg-inspect --diff -q g-s15.cgg g-guided.cgg
	run -1 cg-inspect --diff -q s15.cgm s8.cgm
	# cg-sample draws it in its 8 DDIM steps unless told otherwise
	cg-sample -m s8.cgm -c 0 -c 1 -n 2 --seed 3 -o a.pgm
	cg-sample -m s8.cgm -c 0 -c 1 -n 2 --seed 3 --steps 8 --sampler ddim \
		-o b.pgm
	cg-sample -m s8.cgm -c 0 -c 1 -n 2 --seed 3 --steps 50 -o c.pgm
	cmp a.pgm b.pgm
	! cmp -s a.pgm c.pgm
	# a record that is not one is refused by the reader of it
	mkdir m && tar xf s8.cgm -C m
	jq -c '.distilled.steps = 1.5' m/cg.json >m/j && mv m/j m/cg.json
	(cd m && tar cf ../bad.cgm cg.json $(tar tf ../s8.cgm | tail -n +2))
	run -1 --separate-stderr cg-sample -m bad.cgm -c 0 -o d.pgm
	stderr_has "distilled"
	[ ! -e d.pgm ]
}

@test "step-distill: two workers' reduced gradient is one worker's" {
	for w in 0 1; do
		cg-train-step -q -m teacher.cgm -d rr-$w.cgd --teacher teacher.cgm \
			--distill-steps 6 --distill-guidance 2 --teacher-weight 0.6 \
			--order sequential --batch 8 --seed 4 -o g$w.cgg
	done
	cg-reduce g0.cgg g1.cgg -o red.cgg
	cg-train-step -q -m teacher.cgm -d all-0.cgd --teacher teacher.cgm \
		--distill-steps 6 --distill-guidance 2 --teacher-weight 0.6 \
		--order sequential --batch 16 --seed 4 -o g.cgg
	run -0 cg-inspect --diff -q --tolerance 1e-5 red.cgg g.cgg
	# the teacher's steps changed it
	cg-train-step -q -m teacher.cgm -d all-0.cgd --order sequential \
		--batch 16 --seed 4 -o plain.cgg
	run -1 cg-inspect --diff -q --tolerance 1e-5 plain.cgg g.cgg
}

@test "step-distill: what cannot be distilled is refused in one line" {
	# a teacher of another architecture
	run -1 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher vae.cgm --distill-steps 8 -o s.cgm
	stderr_has "the teacher is a cvae model"
	# a student that does not sample in steps
	run -1 --separate-stderr cg-train-step -m vae.cgm -d all-0.cgd \
		--teacher vae.cgm --distill-steps 8 -o s.cgm
	stderr_has "cvae models do not sample in steps"
	# another schedule
	run -1 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher t200.cgm --distill-steps 8 -o s.cgm
	stderr_has "schedule has 200 timesteps, the model's 100"
	model cddpm all-0.cgd cos.cgm --hidden 32 --layers 2 --embed 16 \
		--timesteps 100 --cosine
	run -1 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher cos.cgm --distill-steps 8 -o s.cgm
	stderr_has "noise schedule is cosine, the model's linear (--cosine)"
	# a cddpm teacher without steps to distill
	run -1 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm -o s.cgm
	stderr_has "steps to distill is missing"
	# more steps than T = 100 halves: the teacher's grid would be 101
	run -1 --separate-stderr cg-train-step -m teacher.cgm -d all-0.cgd \
		--teacher teacher.cgm --distill-steps 51 -o s.cgm
	stderr_has "not in [2, 50]"
	# a distilled teacher: only its own grid halves, and its guidance
	# is not given twice
	cg-train-step -q -m teacher.cgm -d all-0.cgd --teacher teacher.cgm \
		--distill-steps 8 --distill-guidance 1 --emit model --steps 1 \
		--batch 8 -o s8.cgm
	run -1 --separate-stderr cg-train-step -m s8.cgm -d all-0.cgd \
		--teacher s8.cgm --distill-steps 4 -o s.cgm
	stderr_has "the teacher samples in 8 steps, not the 7"
	stderr_has "an even count"
	cg-train-step -q -m teacher.cgm -d all-0.cgd --teacher teacher.cgm \
		--distill-steps 15 --emit model --steps 1 --batch 8 -o s15.cgm
	run -1 --separate-stderr cg-train-step -m s15.cgm -d all-0.cgd \
		--teacher s15.cgm --distill-steps 8 --distill-guidance 1 \
		-o s.cgm
	stderr_has "--distill-guidance would guide it twice"
	[ ! -e s.cgm ]
	[ "$(wc -l <<<"$stderr")" = 1 ]
}
