#!/usr/bin/env bats
# 056-cgan.bats - the cgan conditional GAN through the programs: cg-init's
# options and the two parameter groups in the model file, a training call
# that steps both, cg-eval's figures (L_D and its parts, L_G, no bits/dim)
# and --judge, cg-sample's grid, and the distributed forms: gradients of
# two workers that reduce to one worker's, and a DiLoCo round of deltas
# through cg-reduce | cg-apply that moves both nets.
#
# One shard pair and a small model are made once per file from the
# Fashion-MNIST fixture (90 training examples, 10 held out).  Every
# gradient against finite differences is tests/unit/test_cgan's;
# PyTorch's agreement is torch_check.py's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	images rr -n 2 --strategy round-robin
	model cgan train-0.cgd gan.cgm --latent 8 --hidden 32 --layers 2
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# manifest FILE FILTER: jq -c FILTER over FILE's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -c "$2"
}

# png_size FILE: "WIDTH HEIGHT DEPTH COLOUR" from the IHDR chunk.
png_size() {
	python3 - "$1" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n', 'no PNG signature'
w, h, depth, colour = struct.unpack('>IIBB', d[16:26])
print(w, h, depth, colour)
EOF
}

# max_rel A B: the largest over tensors of max|A-B| / max|B|
max_rel() {
	local t
	for t in $(manifest "$2" '.tensors[].name' | tr -d '"'); do
		paste <(cg-inspect --tensor "$t" "$1") \
			<(cg-inspect --tensor "$t" "$2") | awk '
			NF != 2 { print "inf"; exit }
			{ d = $1 - $2; if (d < 0) d = -d
			  m = $2 < 0 ? -$2 : $2
			  if (d > dd) dd = d; if (m > mm) mm = m }
			END { printf "%.3g\n", dd / (mm > 0 ? mm : 1) }'
	done | sort -g | tail -n 1
}

# changed A B: the names of the tensors that differ between models A and B
changed() {
	local t
	for t in $(manifest "$1" '.tensors[].name' | tr -d '"'); do
		cmp -s <(cg-inspect --tensor "$t" "$1") \
			<(cg-inspect --tensor "$t" "$2") || echo "$t"
	done
}

# --------------------------------------------------------------- cg-init

@test "cg-init -a cgan --help lists its options" {
	run -0 cg-init -a cgan --help
	assert_output --partial '-a cgan: conditional GAN (MLP or CNN, projection discriminator'
	assert_output --partial '--latent N'
	assert_output --partial '--sn-iters N'
	assert_output --partial '--conv N'
	assert_output --partial '--r1 X'
	refute_output --partial '--timesteps'
}

@test "cg-init -a cgan: the config, the tensors and two parameter groups" {
	run -0 manifest "$D/gan.cgm" '[.arch, .config, [.tensors[].name]]'
	assert_output '["cgan",{"in_dim":784,"ncond":10,"latent":8,"hidden":32,"layers":2,"sn-iters":5,"conv":0,"r1":0},["gen.emb","gen.0.w","gen.0.b","gen.1.w","gen.1.b","gen.out.w","gen.out.b","disc.0.w","disc.0.b","disc.1.w","disc.1.b","disc.psi.w","disc.psi.b","disc.emb"]]'
	run -0 manifest "$D/gan.cgm" '[.groups[] | [.name, .offset, .size]]'
	# gen: 10*32 + 32*9 + 32*33 + 784*33; disc: 32*785 + 32*33 + 33 + 320
	assert_output '[["gen",0,27536],["disc",27536,26529]]'
}

@test "cg-init -a cgan --conv: convolutional nets, two groups; they train and draw" {
	cg-init -a cgan -d "$D/train-0.cgd" --conv 4 --latent 8 --seed 1 \
		-o conv.cgm
	run -0 manifest conv.cgm '[.tensors[] | .name + ":" + (.shape | map(tostring) | join("x"))] | join(" ")'
	assert_output '"gen.emb:10x392 gen.0.w:392x8 gen.0.b:392 gen.n0.g:8 gen.n0.b:8 gen.c1.w:4x8x3x3 gen.c1.b:4 gen.n1.g:4 gen.n1.b:4 gen.c2.w:4x4x3x3 gen.c2.b:4 gen.n2.g:4 gen.n2.b:4 gen.out.w:1x4x3x3 gen.out.b:1 disc.c1.w:4x1x3x3 disc.c1.b:4 disc.c2.w:8x4x3x3 disc.c2.b:8 disc.psi.w:1x392 disc.psi.b:1 disc.emb:10x392"'
	# gen: 3920 + 3136 + 392 + 16 + 288 + 4 + 8 + 144 + 4 + 8 + 36 + 1;
	# disc: 36 + 4 + 288 + 8 + 392 + 1 + 3920
	run -0 manifest conv.cgm '[.groups[] | [.name, .offset, .size]]'
	assert_output '[["gen",0,7957],["disc",7957,4649]]'
	cg-train-step -q -m conv.cgm -d "$D/train-0.cgd" --emit model \
		--steps 5 --batch 10 --seed 1 -o conv5.cgm
	run -0 cg-eval --json -m conv5.cgm -d "$D/test.cgd"
	jq -e '.arch == "cgan" and .step == 5 and (.d_hinge | isfinite)' \
		<<<"$output"
	cg-sample -m conv5.cgm -n 2 --seed 1 -o grid.png
	[ "$(head -c 8 grid.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
}

@test "cg-init -a cgan: bad options are refused, nothing written" {
	run -2 --separate-stderr cg-init -a cgan -d "$D/train-0.cgd" \
		--sn-iters 0 -o m.cgm
	[[ $stderr == *"--sn-iters"* ]]
	run -2 cg-init -a cgan -d "$D/train-0.cgd" --layers 65 -o m.cgm
	run -2 cg-init -a cgan -d "$D/train-0.cgd" --timesteps 50 -o m.cgm
	cg-shard -q -o tx "$BATS_TEST_DIRNAME/fixtures/text/cond.jsonl"
	run -1 --separate-stderr cg-init -a cgan -d tx-0.cgd -o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-init: '*'cgan needs image data' ]]
	[ ! -e m.cgm ]
}

@test "cg-init -a cgan: same seed, same bytes" {
	cg-init -a cgan -d "$D/train-0.cgd" --latent 8 --hidden 32 \
		--layers 2 --seed 1 -o again.cgm
	cmp again.cgm "$D/gan.cgm"
}

# ------------------------------------------------------ training and eval

@test "cgan: one call steps both groups; D learns to tell held-out reals from fakes" {
	cg-train-step -q -m "$D/gan.cgm" -d "$D/train-0.cgd" -e model -k 30 \
		--batch 30 --lr 1e-3 --beta1 0.5 --seed 1 -o trained.cgm
	run -0 manifest trained.cgm '[.step, [.groups[].opt_t]]'
	assert_output '[30,[30,30]]'
	run -0 changed "$D/gan.cgm" trained.cgm
	[ "${#lines[@]}" -eq 14 ]
	run -0 cg-eval --json -m "$D/gan.cgm" -d "$D/test.cgd" --seed 1
	before=$output
	run -0 cg-eval --json -m trained.cgm -d "$D/test.cgd" --seed 1
	# Untrained, D scores everything near 0: L_D near 2.  Trained, it
	# puts reals and fakes on their sides of the margin.
	jq -e --argjson b "$before" \
		'.arch == "cgan" and .step == 30 and
		 ($b.d_hinge | . > 1.8 and . < 2.2) and .d_hinge < 1.5 and
		 ((.d_real + .d_fake - .d_hinge) | fabs < 1e-9) and
		 has("g") and (has("bits_per_dim") | not)' <<<"$output"
	run -0 cg-eval -m trained.cgm -d "$D/test.cgd"
	assert_line --index 1 --regexp '^ +examples +d_hinge +d_real +d_fake +g +data$'
}

@test "cgan: the same seed trains the same bytes; eval's noise follows the seed, not the batch" {
	for s in 1 1 2; do
		cg-train-step -q -m "$D/gan.cgm" -d "$D/train-0.cgd" -e model \
			-k 3 --batch 10 --seed $s -o s$s-$RANDOM.cgm
	done
	run -0 bash -c 'sha256sum s1-*.cgm | cut -d" " -f1 | sort -u | wc -l'
	assert_output 1
	run -1 cmp -s "$(ls s1-*.cgm | head -n 1)" s2-*.cgm
	run -0 cg-eval --json -m "$D/gan.cgm" -d "$D/test.cgd" --seed 1
	a=$output
	run -0 cg-eval --json -m "$D/gan.cgm" -d "$D/test.cgd" --seed 1 \
		--batch 3
	jq -e --argjson a "$a" '(.g - $a.g) | fabs < 1e-6' <<<"$output"
	run -0 cg-eval --json -m "$D/gan.cgm" -d "$D/test.cgd" --seed 2
	jq -e --argjson a "$a" '(.g - $a.g) | fabs > 1e-6' <<<"$output"
}

@test "cgan: two workers' gradients reduce to one worker's on their union" {
	cg-init -a cgan -d "$D/rr-0.cgd" --latent 8 --hidden 32 --layers 2 \
		--seed 1 -o m.cgm
	for w in 0 1; do
		cg-train-step -q -m m.cgm -d "$D/rr-$w.cgd" -e grad -k 1 \
			--batch 8 --order sequential --seed 3 -o g$w.cgg
	done
	cg-shard -q -n 1 --strategy round-robin -o one \
		"$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	cg-train-step -q -m m.cgm -d one-0.cgd -e grad -k 1 --batch 16 \
		--order sequential --seed 3 -o whole.cgg
	cg-reduce g0.cgg g1.cgg -o mean.cgg
	run -0 max_rel mean.cgg whole.cgg
	awk -v r="$output" 'BEGIN { exit !(r < 1e-5) }'
	# cg-apply steps both groups on it.
	cg-apply -m m.cgm --opt adam --lr 1e-3 mean.cgg -o stepped.cgm
	run -0 manifest stepped.cgm '[.groups[].opt_t]'
	assert_output '[1,1]'
}

@test "cgan: a DiLoCo round: deltas through cg-reduce | cg-apply --outer nesterov move both nets" {
	for w in 0 1; do
		cg-train-step -q -m "$D/gan.cgm" -d "$D/rr-$w.cgd" -e delta -k 3 \
			--batch 10 --lr 1e-3 --beta1 0.5 --seed 1 \
			--state w$w.state -o d$w.cgg
	done
	run -0 manifest d0.cgg '.kind'
	assert_output '"delta"'
	cg-reduce d0.cgg d1.cgg | cg-apply -m "$D/gan.cgm" --outer nesterov \
		-o round.cgm
	run -0 changed "$D/gan.cgm" round.cgm
	assert_line 'gen.0.w'
	assert_line 'disc.emb'
	[ "${#lines[@]}" -eq 14 ]
	# The averaged step: the outer step with lr 1 and no momentum is the
	# mean delta added (cg-apply --outer avg).
	cg-reduce d0.cgg d1.cgg | cg-apply -m "$D/gan.cgm" --outer avg \
		-o avg.cgm
	run -0 cg-eval --json -m avg.cgm -d "$D/test.cgd" --seed 1
	jq -e '.arch == "cgan" and (.d_hinge | isnormal)' <<<"$output"
}

# ------------------------------------------------------------ cg-sample

@test "cg-sample: a cgan draws a PNG grid of one row per condition" {
	run -0 cg-sample -m "$D/gan.cgm" -n 3 -o grid.png
	run -0 png_size grid.png
	assert_output '92 302 8 0'
	run -0 cg-sample -m "$D/gan.cgm" -c Bag -c 0 -n 2 -o two.png
	run -0 png_size two.png
	assert_output '62 62 8 0'
	cg-sample -m "$D/gan.cgm" -c 3 -n 4 --seed 5 -o a.pgm
	cg-sample -m "$D/gan.cgm" -c 3 -n 4 --seed 5 -o b.pgm
	cmp a.pgm b.pgm
	cg-sample -m "$D/gan.cgm" -c 3 -n 4 --seed 6 -o c.pgm
	! cmp -s a.pgm c.pgm
	run -2 --separate-stderr cg-sample -m "$D/gan.cgm" --guidance 1 \
		-o x.png
	[[ ${stderr_lines[0]} == *"--guidance is for diffusion models (cgan is not one)" ]]
}

@test "cg-eval --judge scores a cgan's draws" {
	cg-init -a cclf -d "$D/train-0.cgd" --hidden 32 --layers 1 --seed 1 \
		-o clf0.cgm
	cg-train-step -q -m clf0.cgm -d "$D/train-0.cgd" --emit model \
		--steps 30 --batch 20 --seed 1 -o clf.cgm
	run -0 cg-eval --json -m "$D/gan.cgm" -d "$D/test.cgd" --judge clf.cgm \
		--judge-samples 5 --seed 1
	jq -e '.arch == "cgan" and (.cond_acc | . >= 0 and . <= 1) and
	       (.frechet | isnormal)' <<<"$output"
}

@test "pipeline: init | train | sample, through pipes" {
	cg-init -a cgan -d "$D/train-0.cgd" --hidden 16 --layers 1 -o - |
		cg-train-step -q -m - -d "$D/train-0.cgd" -e model -k 5 \
			--batch 10 -o - |
		cg-sample -m - -n 2 -f pgm >grid.pgm
	run -0 head -c 2 grid.pgm
	assert_output 'P5'
}
