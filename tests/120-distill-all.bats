#!/usr/bin/env bats
#
# 120-distill-all.bats - cg-train-step --teacher for the classifier and the
# GAN: a cclf learns a teacher cclf's class distribution at a temperature
# (an MLP or a CNN teacher, any size), a cgan's generator learns the
# teacher generator's image for the same noise and condition beside its
# own discriminator's game.
#
# Each distilled student moves toward its teacher (its teacher term, on
# the same batch, falls below the start's and below the same student's
# trained without a teacher), weight 0 is plain training to the byte,
# two workers' reduced gradient is the one worker's (the teacher draws
# nothing), and a teacher that cannot teach is refused in one line.  The
# terms and every gradient against finite differences and PyTorch are
# the unit tests' (test_cclf, test_cgan, test_fdarch, torch-check).

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images all -n 1 --strategy round-robin
	images rr -n 2 --strategy round-robin
	# classifiers: an MLP teacher and a CNN teacher, trained a little,
	# and two students, an MLP and a smaller CNN
	model cclf all-0.cgd t0.cgm --hidden 48 --layers 2
	cg-train-step -q -m t0.cgm -d all-0.cgd --emit model --steps 30 \
		--batch 32 --lr 3e-3 --seed 5 -o teacher.cgm
	model cclf all-0.cgd c0.cgm --hidden 16 --layers 1 --conv 4
	cg-train-step -q -m c0.cgm -d all-0.cgd --emit model --steps 20 \
		--batch 32 --lr 3e-3 --seed 5 -o cteacher.cgm
	model cclf all-0.cgd student.cgm --hidden 8 --layers 1 --seed 3
	model cclf all-0.cgd cstudent.cgm --hidden 8 --layers 1 --conv 2 \
		--seed 3
	# GANs of the same noise width: a wider teacher trained a little
	model cgan all-0.cgd g0.cgm --latent 8 --hidden 48 --layers 2
	cg-train-step -q -m g0.cgm -d all-0.cgd --emit model --steps 20 \
		--batch 32 --lr 1e-3 --seed 5 -o gteacher.cgm
	model cgan all-0.cgd gstudent.cgm --latent 8 --hidden 16 --layers 1 \
		--seed 3
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

# teacher_term MODEL TEACHER: MODEL's teacher term on the whole shard,
# in order (one step's log; the model is not changed)
teacher_term() {
	rm -f term.log
	cg-train-step -q -m "$1" -d all-0.cgd --teacher "$2" --steps 1 \
		--batch "$(examples all-0.cgd)" --order sequential --seed 9 \
		--log term.log -o term.cgg
	jq .teacher term.log
}

# below A B: A < B (numbers)
below() {
	echo "$1 < $2 ?"
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'
}

# trained MODEL OUT [OPTION...]: MODEL after 40 Adam steps of batch 16
trained() {
	local m=$1 o=$2
	shift 2
	cg-train-step -q -m "$m" -d all-0.cgd --emit model --steps 40 \
		--batch 16 --lr 3e-3 --seed 2 "$@" -o "$o"
}

@test "distill-all: cclf students move toward an MLP and a CNN teacher" {
	local t pair
	for pair in student:teacher student:cteacher cstudent:cteacher \
		cstudent:teacher; do
		s=${pair%:*}
		t=${pair#*:}
		trained "$s.cgm" scratch.cgm
		trained "$s.cgm" taught.cgm --teacher "$t.cgm" --teacher-temp 2
		start=$(teacher_term "$s.cgm" "$t.cgm")
		plain=$(teacher_term scratch.cgm "$t.cgm")
		dist=$(teacher_term taught.cgm "$t.cgm")
		echo "$s <- $t: teacher term $start at the start, $plain" \
			"trained alone, $dist distilled"
		below "$dist" "$start"
		below "$dist" "$plain"
	done
	# the log's loss mixes the two terms; acc is reported beside them
	cg-train-step -q -m student.cgm -d all-0.cgd --steps 2 --batch 8 \
		--seed 2 --teacher teacher.cgm --teacher-weight 0.25 \
		--teacher-temp 3 --log g.log -o g.cgg
	run -0 jq -r '[.loss, .data, .teacher, .teacher_weight, .teacher_temp, .acc] | @tsv' g.log
	echo "$output"
	read -r loss data teach a tau acc <<<"$output"
	[ "$a" = 0.25 ] && [ "$tau" = 3 ]
	awk -v l="$loss" -v d="$data" -v t="$teach" -v c="$acc" 'BEGIN {
		m = 0.75 * d + 0.25 * t; e = l - m; if (e < 0) e = -e
		exit !(t > 0 && d > 0 && e <= 1e-9 * l && c >= 0 && c <= 1) }'
}

@test "distill-all: a cgan's generator moves toward the teacher's" {
	trained gstudent.cgm scratch.cgm --lr 1e-3
	trained gstudent.cgm taught.cgm --lr 1e-3 --teacher gteacher.cgm
	start=$(teacher_term gstudent.cgm gteacher.cgm)
	plain=$(teacher_term scratch.cgm gteacher.cgm)
	dist=$(teacher_term taught.cgm gteacher.cgm)
	echo "teacher term (squared distance to the teacher's images):" \
		"$start at the start, $plain trained alone, $dist distilled"
	below "$dist" "$start"
	below "$dist" "$plain"
	# the loss is still L_D; data is L_G, the generator's other term
	cg-train-step -q -m gstudent.cgm -d all-0.cgd --steps 2 --batch 8 \
		--seed 2 --teacher gteacher.cgm --log g.log -o g.cgg
	run -0 jq -r '[.loss, .d_real + .d_fake, .data, .g, .teacher] | @tsv' g.log
	echo "$output"
	read -r loss d data g teach <<<"$output"
	awk -v l="$loss" -v d="$d" -v a="$data" -v g="$g" -v t="$teach" 'BEGIN {
		e = l - d; if (e < 0) e = -e; f = a - g; if (f < 0) f = -f
		exit !(t > 0 && e <= 1e-9 * (l < 0 ? -l : l) && f <= 1e-12) }'
	# and a sample of the distilled student draws
	cg-sample -m taught.cgm -n 2 --seed 1 -o s.png
	[ -s s.png ]
}

@test "distill-all: teacher weight 0 is plain training, byte for byte" {
	for pair in student:teacher cstudent:cteacher gstudent:gteacher; do
		s=${pair%:*}
		t=${pair#*:}
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --emit model --steps 3 \
			--batch 8 --seed 2 -o plain.cgm
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --emit model --steps 3 \
			--batch 8 --seed 2 --teacher "$t.cgm" --teacher-weight 0 \
			-o w0.cgm
		cmp plain.cgm w0.cgm
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --steps 1 --batch 8 \
			--seed 2 --teacher "$t.cgm" -o w9.cgg
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --steps 1 --batch 8 \
			--seed 2 -o p.cgg
		run -1 cg-inspect --diff -q p.cgg w9.cgg
	done
}

@test "distill-all: two workers' reduced gradient is one worker's" {
	local n0 n1 na
	n0=$(examples rr-0.cgd)
	n1=$(examples rr-1.cgd)
	na=$(examples all-0.cgd)
	[ $((n0 + n1)) -eq "$na" ]
	for pair in student:cteacher gstudent:gteacher; do
		s=${pair%:*}
		t=${pair#*:}
		for w in 0 1; do
			eval n=\$n$w
			cg-train-step -q -m "$s.cgm" -d rr-$w.cgd --order sequential \
				--batch "$n" --seed 3 --teacher "$t.cgm" \
				--teacher-weight 0.7 -o g$w.cgg
		done
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --order sequential \
			--batch "$na" --seed 3 --teacher "$t.cgm" \
			--teacher-weight 0.7 -o ga.cgg
		cg-reduce g0.cgg g1.cgg -o r.cgg
		run -0 cg-inspect --diff -q --tolerance 1e-5 r.cgg ga.cgg
	done
}

@test "distill-all: --max-memory counts the teacher, and chunks keep the gradient" {
	for pair in student:cteacher gstudent:gteacher; do
		s=${pair%:*}
		t=${pair#*:}
		rm -f plain.log t.log c.log
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --steps 1 --batch 64 \
			--seed 3 --log plain.log -o g.cgg
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --steps 1 --batch 64 \
			--seed 3 --teacher "$t.cgm" --log t.log -o g.cgg
		p=$(jq .memory_plan plain.log)
		q=$(jq .memory_plan t.log)
		echo "$s: planned $p plain, $q with the teacher"
		[ "$q" -gt "$p" ]
		# a budget a quarter of the teacher's share below its plan:
		# chunks (what the process holds besides moves by some pages
		# from call to call, under the sanitizers most)
		cg-train-step -q -m "$s.cgm" -d all-0.cgd --steps 1 --batch 64 \
			--seed 3 --teacher "$t.cgm" --max-memory \
			$(((q - (q - p) / 4) / 1024))K --log c.log -o g2.cgg
		[ "$(jq .chunk c.log)" -gt 0 ]
		run -0 cg-inspect --diff -q --tolerance 1e-5 g.cgg g2.cgg
	done
}

# lie IN FILTER OUT: model IN with its manifest changed by jq FILTER
lie() {
	mkdir -p m
	tar -xf "$1" -C m
	jq -c "$2" m/cg.json >m/cg.json.new
	mv m/cg.json.new m/cg.json
	tar --format=ustar -cf "$3" -C m $(tar -tf "$1")
	rm -r m
}

# idx14 DIR: 20 images of 14x14 and their labels 0 to 9 in turn, as
# DIR's train-images-idx3-ubyte and train-labels-idx1-ubyte
idx14() {
	mkdir -p "$1"
	{
		printf '\0\0\10\3\0\0\0\24\0\0\0\16\0\0\0\16'
		head -c $((20 * 196)) /dev/zero | tr '\0' '\200'
	} >"$1/train-images-idx3-ubyte"
	{
		printf '\0\0\10\1\0\0\0\24'
		printf '\0\1\2\3\4\5\6\7\10\11\0\1\2\3\4\5\6\7\10\11'
	} >"$1/train-labels-idx1-ubyte"
}

# refused STUDENT TEACHER TEXT [OPTION...]: one line holding TEXT, exit 1,
# nothing written
refused() {
	local s=$1 t=$2 text=$3
	shift 3
	run -1 --separate-stderr cg-train-step -m "$s" -d all-0.cgd \
		--teacher "$t" "$@" -o out.cgm
	[ "${#stderr_lines[@]}" -eq 1 ] || {
		echo "stderr: $stderr"
		return 1
	}
	stderr_has "$text"
	[ ! -e out.cgm ]
}

@test "distill-all: a teacher that cannot teach is refused in one line" {
	# another architecture, both ways
	refused student.cgm gteacher.cgm \
		"cg-train-step: gteacher.cgm: the teacher is a cgan model, not cclf"
	refused gstudent.cgm teacher.cgm \
		"cg-train-step: teacher.cgm: the teacher is a cclf model, not cgan"
	# other classes: the same images, one condition renamed
	{ echo Tee; tar xOf all-0.cgd cg.json | jq -r '.conditions[1:][]'; } >names
	cg-shard -q -n 1 --conditions names -o other \
		"$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	model cclf other-0.cgd ot.cgm --hidden 8 --layers 1
	refused student.cgm ot.cgm "cg-train-step: ot.cgm: the teacher: "
	model cgan other-0.cgd og.cgm --latent 8 --hidden 8 --layers 1
	refused gstudent.cgm og.cgm "cg-train-step: og.cgm: the teacher: "
	# other image sizes: a teacher of 14x14 images, and one whose
	# manifest says 14x56 for as many pixels
	idx14 small
	cg-shard -q -n 1 -o small small
	model cclf small-0.cgd st.cgm --hidden 8 --layers 1
	refused student.cgm st.cgm "do not fit a model of 196 inputs"
	model cgan small-0.cgd sg.cgm --latent 8 --hidden 8 --layers 1
	refused gstudent.cgm sg.cgm "do not fit a model of 196 inputs"
	lie teacher.cgm '.image.height = 14 | .image.width = 56' wide.cgm
	refused student.cgm wide.cgm \
		"the teacher reads images of 14x56x1, the model 28x28x1"
	lie gteacher.cgm '.image.height = 14 | .image.width = 56' gwide.cgm
	refused gstudent.cgm gwide.cgm \
		"the teacher draws images of 14x56x1, the model 28x28x1"
	# a GAN teacher of another noise width, and a temperature it has not
	model cgan all-0.cgd lat.cgm --latent 4 --hidden 8 --layers 1
	refused gstudent.cgm lat.cgm "noise has 4 values, the model's 8"
	refused gstudent.cgm gteacher.cgm "has no temperature" \
		--teacher-temp 2
}
