#!/usr/bin/env bats
# 055-cddpm.bats - the cddpm diffusion architecture through the programs:
# cg-init's options, training that lowers the held-out mse, cg-eval's
# figures, and cg-sample's --guidance, --steps and --sampler, with what
# they refuse; the U-Net (--unet) through the same programs.
#
# One shard pair and a small model (T = 100) are made once per file from
# the Fashion-MNIST fixture (90 training examples, 10 held out).  That
# the samplers compute what cddpm.h says, and every gradient, is
# tests/unit/test_cddpm's; PyTorch's agreement is torch_check.py's.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images train --holdout test.cgd
	model cddpm train-0.cgd dm.cgm --hidden 48 --layers 2 --embed 16 \
		--timesteps 100
	small_cvae train-0.cgd vae.cgm
	model cddpm train-0.cgd unet.cgm --unet 4 --hidden 16 --embed 8 \
		--timesteps 100
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# manifest FILE FILTER: jq -c FILTER of FILE's manifest
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

# --------------------------------------------------------------- cg-init

@test "cg-init -a cddpm --help lists its options" {
	run -0 cg-init -a cddpm --help
	assert_output --partial '-a cddpm: conditional diffusion (MLP'
	assert_output --partial '--timesteps N'
	assert_output --partial '--cond-drop X'
	assert_output --partial '--embed N'
	assert_output --partial '--snr-clip X'
	assert_output --partial '--predict-x0'
	assert_output --partial '--unet N'
	assert_output --partial '--attn'
	assert_output --partial '--film'
	assert_output --partial '--cosine'
	refute_output --partial '--latent'
}

@test "cg-init -a cddpm: the config and the tensors" {
	run -0 bash -c "tar xOf '$D/dm.cgm' cg.json | jq -c '[.arch, .config, [.tensors[].name]]'"
	assert_output '["cddpm",{"in_dim":784,"ncond":10,"hidden":48,"layers":2,"embed":16,"timesteps":100,"cond-drop":0.1,"snr-clip":5,"predict-x0":1,"unet":0,"attn":0,"film":1,"cosine":0},["time.w","time.b","cond.emb","hid.0.w","hid.0.b","hid.1.w","hid.1.b","out.w","out.b"]]'
	run -0 bash -c "tar xOf '$D/dm.cgm' cg.json | jq -c '.tensors[2].shape'"
	assert_output '[11,48]'
}

@test "cg-init -a cddpm: bad options are refused, nothing written" {
	run -2 --separate-stderr cg-init -a cddpm -d "$D/train-0.cgd" \
		--timesteps 49 -o m.cgm
	[[ $stderr == *"--timesteps"* ]]
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --cond-drop 1.5 -o m.cgm
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --cond-drop nan -o m.cgm
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --latent 4 -o m.cgm
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --snr-clip -1 -o m.cgm
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --snr-clip 2e6 -o m.cgm
	run -1 --separate-stderr cg-init -a cddpm -d "$D/train-0.cgd" \
		--embed 15 -o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-init: "*"embed = 15: not even"* ]]
	[ ! -e m.cgm ]
}

@test "cg-init -a cddpm: same seed, same bytes" {
	cg-init -a cddpm -d "$D/train-0.cgd" --hidden 48 --layers 2 \
		--embed 16 --timesteps 100 --seed 1 -o again.cgm
	cmp again.cgm "$D/dm.cgm"
}

# with_config FILTER: dm.cgm with its config changed by jq FILTER, as
# odd.cgm (the manifest's digests cover the tensors, not the config)
with_config() {
	mkdir -p m
	tar -xf "$D/dm.cgm" -C m
	jq -c ".config |= ($1)" m/cg.json >m/cg.json.new
	mv m/cg.json.new m/cg.json
	tar --format=ustar -cf odd.cgm -C m $(tar -tf "$D/dm.cgm")
}

@test "cddpm: a model made before snr-clip and predict-x0 loads and keeps its objective" {
	with_config 'del(."snr-clip", ."predict-x0")'
	run -0 cg-eval --json -m odd.cgm -d "$D/test.cgd" --seed 1
	old=$output
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd" --seed 1
	# the same weights and draws, another loss (0.32 on eps, 0.75 on v)
	jq -e --argjson o "$old" '(.mse - $o.mse) | fabs > 0.2' <<<"$output"
	cg-train-step -q -m odd.cgm -d "$D/train-0.cgd" -e model -k 2 \
		--batch 10 --seed 1 -o old2.cgm
	run -0 bash -c "tar xOf old2.cgm cg.json | jq -c '.config | [has(\"snr-clip\"), has(\"predict-x0\")]'"
	assert_output '[false,false]'
	run -0 cg-sample -m odd.cgm -n 1 --steps 5 -o x.png
}

@test "cddpm: a bad snr-clip or predict-x0 in a model is one line, exit 1" {
	for bad in '"snr-clip" = -1' '"snr-clip" = "5"' '"snr-clip" = 1e7' \
		'"snr-clip" = null' '"predict-x0" = 2' '"predict-x0" = 0.5' \
		'"predict-x0" = true'; do
		with_config ".$bad"
		run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-eval: odd.cgm: "*"${bad%% =*}"* ]]
	done
}

@test "cg-init -a cddpm --unet: the U-Net's config and tensors" {
	run -0 manifest "$D/unet.cgm" '[.config.unet, (.tensors | length), .image]'
	assert_output '[4,91,{"height":28,"width":28,"channels":1}]'
	run -0 manifest "$D/unet.cgm" '[.tensors[] | select(.name | test("^(time|in|ds[.][12]|out)[.]w$|^cond|skip[.]w$|^up[.]0[.]|^out")) | .name + ":" + (.shape | map(tostring) | join("x"))] | join(" ")'
	assert_output '"time.w:16x8 cond.emb:11x16 in.w:4x1x3x3 ds.1.w:4x4x3x3 down.1.skip.w:8x4x1x1 ds.2.w:8x8x3x3 up.2.skip.w:8x16x1x1 up.1.skip.w:8x16x1x1 up.0.n1.g:12 up.0.n1.b:12 up.0.c1.w:4x12x3x3 up.0.c1.b:4 up.0.emb.w:8x16 up.0.emb.b:8 up.0.n2.g:4 up.0.n2.b:4 up.0.c2.w:4x4x3x3 up.0.c2.b:4 up.0.skip.w:4x12x1x1 up.0.skip.b:4 out.n.g:4 out.n.b:4 out.w:1x4x3x3 out.b:1"'
	# the embeddings' 320; in 40, ds.1 148, ds.2 584; the blocks without
	# film: down.0 380, down.1 1080, down.2 and mid 1336 each, up.2 and
	# up.1 2064 each, up.0 736; out.n and out 45; film (the default)
	# doubles each block's emb, 17 floats a channel: 48 channels, 816
	run -0 manifest "$D/unet.cgm" '[.tensors[].shape | reduce .[] as $d (1; . * $d)] | add'
	assert_output 10949
	cg-init -a cddpm -d "$D/train-0.cgd" --unet 4 --hidden 16 --embed 8 \
		--timesteps 100 --seed 1 --film=0 -o nofilm.cgm
	run -0 manifest nofilm.cgm '[.config.film, ([.tensors[].shape | reduce .[] as $d (1; . * $d)] | add), (.tensors[] | select(.name == "up.0.emb.w") | .shape)]'
	assert_output '[0,10133,[4,16]]'
	cg-init -a cddpm -d "$D/train-0.cgd" --unet 4 --hidden 16 --embed 8 \
		--timesteps 100 --seed 1 -o again.cgm
	cmp again.cgm "$D/unet.cgm"
}

@test "cg-init -a cddpm --unet: bad values are refused, nothing written" {
	run -2 --separate-stderr cg-init -a cddpm -d "$D/train-0.cgd" \
		--unet -1 -o m.cgm
	[[ $stderr == *"--unet"* ]]
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --unet 4097 -o m.cgm
	run -2 cg-init -a cddpm -d "$D/train-0.cgd" --unet 1.5 -o m.cgm
	run -1 --separate-stderr cg-init -a cddpm -d "$D/train-0.cgd" --attn \
		-o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-init: "*"attn without a U-Net"* ]]
	[ ! -e m.cgm ]
}

@test "cddpm --unet --attn: self-attention's tensors; it trains and draws" {
	cg-init -a cddpm -d "$D/train-0.cgd" --unet 4 --attn --hidden 16 \
		--embed 8 --timesteps 100 --seed 1 -o ua.cgm
	run -0 manifest ua.cgm '[.config.attn, (.tensors | length), ([.tensors[] | select(.name | test("^attn")) | .name + ":" + (.shape | map(tostring) | join("x"))] | join(" ")), .tensors[57].name]'
	assert_output '[1,97,"attn.n.g:8 attn.n.b:8 attn.qkv.w:24x8 attn.qkv.b:24 attn.proj.w:8x8 attn.proj.b:8","up.2.n1.g"]'
	cg-train-step -q -m ua.cgm -d "$D/train-0.cgd" -e model -k 10 \
		--batch 20 --lr 2e-3 --seed 1 -o ua10.cgm
	run -0 cg-eval --json -m ua.cgm -d "$D/test.cgd"
	before=$output
	run -0 cg-eval --json -m ua10.cgm -d "$D/test.cgd"
	jq -e --argjson b "$before" '.step == 10 and .mse < $b.mse - 0.2' \
		<<<"$output"
	run -0 cg-sample -m ua10.cgm -n 2 --steps 5 --guidance 1 -o g.png
	run -0 png_size g.png
	assert_output '62 302 8 0'
}

@test "cddpm: a model without the unet key is the MLP, as before" {
	with_config 'del(.unet)'
	run -0 cg-eval --json -m odd.cgm -d "$D/test.cgd" --seed 1
	old=$output
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd" --seed 1
	jq -e --argjson o "$old" '.mse == $o.mse' <<<"$output"
	cg-sample -m odd.cgm -n 2 --steps 5 --seed 2 -f pgm -o a.pgm
	cg-sample -m "$D/dm.cgm" -n 2 --steps 5 --seed 2 -f pgm -o b.pgm
	cmp a.pgm b.pgm
	# and a bad one is one line, exit 1
	for bad in '.unet = 0.5' '.unet = 4097' '.unet = "4"' '.attn = 2'; do
		with_config "$bad"
		run -1 --separate-stderr cg-eval -m odd.cgm -d "$D/test.cgd"
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "cg-eval: odd.cgm: "*'"'"${bad:1:4}"* ]]
	done
}

# ------------------------------------------------------ training and eval

@test "cddpm: training lowers the held-out mse; cg-eval reports mse alone" {
	cg-train-step -q -m "$D/dm.cgm" -d "$D/train-0.cgd" -e model -k 40 \
		--batch 30 --lr 1e-3 --seed 1 -o trained.cgm
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd"
	before=$output
	run -0 cg-eval --json -m trained.cgm -d "$D/test.cgd"
	jq -e --argjson b "$before" \
		'.arch == "cddpm" and .step == 40 and .mse < $b.mse - 0.02 and
		 (has("bits_per_dim") | not)' <<<"$output"
	run -0 cg-eval -m trained.cgm -d "$D/test.cgd"
	assert_output --partial 'mse'
	refute_output --partial 'bits/dim'
}

@test "cddpm: the same seed trains the same bytes; the draws follow it" {
	for s in 1 1 2; do
		cg-train-step -q -m "$D/dm.cgm" -d "$D/train-0.cgd" -e model \
			-k 3 --batch 10 --seed $s -o s$s-$RANDOM.cgm
	done
	run -0 bash -c 'sha256sum s1-*.cgm | cut -d" " -f1 | sort -u | wc -l'
	assert_output 1
	run -1 cmp -s "$(ls s1-*.cgm | head -n 1)" s2-*.cgm
	# Each example's draws follow the seed and its index, not the batch
	# (the means differ by rounding alone).
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd" --seed 1
	a=$output
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd" --seed 1 --batch 3
	jq -e --argjson a "$a" '(.mse - $a.mse) | fabs < 1e-7' <<<"$output"
	run -0 cg-eval --json -m "$D/dm.cgm" -d "$D/test.cgd" --seed 2
	jq -e --argjson a "$a" '(.mse - $a.mse) | fabs > 1e-4' <<<"$output"

}

@test "cddpm --unet: training lowers the held-out mse; the same seed, the same bytes" {
	for s in 1 1; do
		cg-train-step -q -m "$D/unet.cgm" -d "$D/train-0.cgd" -e model \
			-k 20 --batch 20 --lr 2e-3 --seed 1 -o u$s-$RANDOM.cgm
	done
	run -0 bash -c 'sha256sum u1-*.cgm | cut -d" " -f1 | sort -u | wc -l'
	assert_output 1
	mv "$(ls u1-*.cgm | head -n 1)" trained.cgm
	run -0 cg-eval --json -m "$D/unet.cgm" -d "$D/test.cgd"
	before=$output
	run -0 cg-eval --json -m trained.cgm -d "$D/test.cgd"
	jq -e --argjson b "$before" \
		'.arch == "cddpm" and .step == 20 and .mse < $b.mse - 0.2' \
		<<<"$output"
}

# ------------------------------------------------------------ cg-sample

@test "cg-sample --help lists the diffusion options" {
	run -0 cg-sample --help
	assert_output --partial '--guidance W'
	assert_output --partial '--steps N'
	assert_output --partial '--sampler NAME'
}

@test "cg-sample: a cddpm draws a PNG grid of one row per condition" {
	run -0 cg-sample -m "$D/dm.cgm" -n 3 --steps 10 -o grid.png
	run -0 png_size grid.png
	assert_output '92 302 8 0'
	run -0 cg-sample -m "$D/dm.cgm" -c Bag -c 0 -n 2 --guidance 1.5 \
		--steps 20 --sampler ddpm -o two.png
	run -0 png_size two.png
	assert_output '62 62 8 0'
}

@test "cg-sample: a U-Net cddpm draws a grid, guided or not" {
	run -0 cg-sample -m "$D/unet.cgm" -n 2 --steps 5 --guidance 1.5 \
		-o grid.png
	run -0 png_size grid.png
	assert_output '62 302 8 0'
	cg-sample -m "$D/unet.cgm" -c 3 -n 2 --steps 5 --seed 5 -o a.pgm
	cg-sample -m "$D/unet.cgm" -c 3 -n 2 --steps 5 --seed 5 -o b.pgm
	cmp a.pgm b.pgm
	cg-sample -m "$D/unet.cgm" -c 3 -n 2 --steps 5 --seed 5 \
		--sampler ddpm -o c.pgm
	! cmp -s a.pgm c.pgm
}

@test "cg-sample: DDIM draws a function of the seed; DDPM and guidance change it" {
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 -o a.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--sampler ddim -o b.pgm
	cmp a.pgm b.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 6 -o c.pgm
	! cmp -s a.pgm c.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--sampler ddpm -o d.pgm
	! cmp -s a.pgm d.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--guidance 2 -o e.pgm
	! cmp -s a.pgm e.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--guidance 0 -o f.pgm
	cmp a.pgm f.pgm
	# guidance over the whole schedule is guidance; over a part of it,
	# neither guided nor unguided images
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--guidance 2 --guidance-interval 0:1 -o g.pgm
	cmp e.pgm g.pgm
	cg-sample -m "$D/dm.cgm" -c 3 -n 4 --steps 10 --seed 5 \
		--guidance 2 --guidance-interval 0.3:0.7 -o h.pgm
	! cmp -s a.pgm h.pgm
	! cmp -s e.pgm h.pgm
}

@test "cg-sample: bad diffusion options are usage errors" {
	for bad in "--guidance -1" "--guidance nan" "--guidance 1e9" \
		"--steps 0" "--steps 1.5" "--steps 100001" "--sampler ddpm2" \
		"--sampler" "--guidance-interval 0.5" \
		"--guidance-interval 0:1.5" "--guidance-interval -0.1:1" \
		"--guidance-interval 0:" "--guidance-interval a:b" \
		"--guidance-interval 0:1:1" "--guidance-interval nan:1"; do
		run -2 --separate-stderr cg-sample -m "$D/dm.cgm" $bad -o x.png
		[[ ${stderr_lines[0]} == cg-sample:* ]]
	done
	run -2 --separate-stderr cg-sample -m "$D/dm.cgm" \
		--guidance-interval 0.7:0.3 -o x.png
	[[ ${stderr_lines[0]} == "cg-sample: --guidance-interval: 0.7:0.3: LO above HI"* ]]
	run -2 --separate-stderr cg-sample -m "$D/dm.cgm" \
		--guidance-interval 0.5 -o x.png
	[[ ${stderr_lines[0]} == "cg-sample: --guidance-interval: '0.5': not LO:HI, each in [0, 1]"* ]]
	[ ! -e x.png ]
}

@test "cg-sample: more steps than the model's T is one line, exit 1" {
	run -1 --separate-stderr cg-sample -m "$D/dm.cgm" --steps 101 -o x.png
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-sample: "*"101 steps: not in [1, 100]"* ]]
	[ ! -e x.png ]
}

@test "cg-sample: the diffusion options are refused for other archs" {
	for opt in "--guidance 1" "--steps 5" "--sampler ddim" \
		"--guidance-interval 0:1"; do
		run -2 --separate-stderr cg-sample -m "$D/vae.cgm" $opt -o x.png
		[[ ${stderr_lines[0]} == "cg-sample: $D/vae.cgm: ${opt%% *} is for diffusion models (cvae is not one)" ]]
	done
	[ ! -e x.png ]
}

@test "pipeline: init | train | sample, through pipes" {
	cg-init -a cddpm -d "$D/train-0.cgd" --hidden 32 --layers 1 \
		--embed 8 --timesteps 50 -o - |
		cg-train-step -q -m - -d "$D/train-0.cgd" -e model -k 5 \
			--batch 10 -o - |
		cg-sample -m - -n 2 --steps 5 --guidance 0.5 -f pgm >grid.pgm
	run -0 head -c 2 grid.pgm
	assert_output 'P5'
}
