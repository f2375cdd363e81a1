#!/usr/bin/env bats
#
# 095-readme.bats - every command of the README runs as written, and so do
# the examples in examples/, at small sizes.
#
# The README's commands are its indented blocks: runs of non-empty lines
# that each start with four spaces, after a blank line.  Every block is run
# as a user would type it, top to bottom, in one scratch directory, each by
# a shell of its own (bash -euo pipefail), so that a block may use the
# files of the blocks above it but none of their shell variables; the
# first block that fails is named by its line and section, with its text
# and the end of its output.  Not run is a block whose first line
#   - starts with scripts/: scripts/demo, scripts/test-all and
#     scripts/install-deps install packages as root, build cg and run this
#     very suite;
#   - starts with "==": a program's output (the sample fortunes);
#   - is a name, two spaces or more and a word: a table (the programs);
#   - is a crontab line (five time fields, then the command): it runs
#     every minute, not once.
# Any other block is run, so an output block of a new shape fails here
# rather than going unseen.  A block that runs cg-cluster reaches host0,
# host1 and host2: the test hosts of tests/hosts.sh (network namespaces,
# each with an sshd), through an ssh first on PATH that gives each of
# them a home of its own and the build's programs on its PATH.  Where
# such hosts cannot be made (not root, no sshd), those blocks are not
# run, and the test says so.  A block that runs examples/slurm/ finds
# examples/ in its directory (a link to the source tree's) and a Slurm
# cluster of this machine (tests/slurm.sh) through SLURM_CONF; where
# none can be started (not root, no slurm-wlm), it is not run either.
#
# Sizes are made small by these substitutions, and no others:
#   /usr/share/datasets/fashion-mnist  tests/fixtures/fashion-mnist-mini
#                                      (100 training and 20 test images)
#   /usr/share/games/fortunes          tests/fixtures/text/fortunes
#   --steps N, --total N, --limit N,   N = 2
#   --rounds N
#   -a cclf                            -a cclf --hidden 32 (the judge's
#                                      features: the Frechet distance's
#                                      cost goes as their width cubed)
# The examples' Makefiles take their sizes as variables, given below.
# The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

. "$BATS_TEST_DIRNAME/hosts.sh"
. "$BATS_TEST_DIRNAME/slurm.sh"

setup() {
	top=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	fx=$top/tests/fixtures
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

teardown() {
	hosts_down
	slurm_down
}

# test_slurm: a Slurm cluster of this machine up, SLURM_CONF set, and
# work/examples the source tree's; or 1 with the reason in SLURM_WHY
test_slurm() {
	SLURM_WHY=$(slurm_skip_reason)
	[ -z "$SLURM_WHY" ] || return 1
	[ -n "${SLURM_DIR:-}" ] && return 0
	slurm_up || { SLURM_WHY="no Slurm cluster could be started"; return 1; }
	ln -sfn "$top/examples" work/examples
}

# test_hosts: host0..host2 up, and BATS_TEST_TMPDIR/bin/ssh reaching them,
# each in its own home (HOSTS_DIR/hostI) with the programs of PATH; or 1
# with the reason in HOSTS_WHY.  Not in a subshell: teardown takes them
# down.
test_hosts() {
	local bin
	HOSTS_WHY=$(hosts_skip_reason)
	[ -z "$HOSTS_WHY" ] || return 1
	[ -n "${HOSTS_DIR:-}" ] && return 0
	hosts_up 3 || { HOSTS_WHY="the test hosts could not be made"; return 1; }
	bin=$(dirname "$(command -v cg-train-step)")
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	cat >"$BATS_TEST_TMPDIR/bin/ssh" <<-EOF
		#!/bin/sh
		# ssh HOST COMMAND: COMMAND on a test host, in its home
		h=\$1
		shift
		exec /usr/bin/ssh -F $HOSTS_DIR/ssh_config "\$h" \\
			"mkdir -p $HOSTS_DIR/\$h && cd $HOSTS_DIR/\$h &&
			PATH=$bin:\\\$PATH && export PATH && \$*"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/bin/ssh"
}

# blocks README DIR: write each indented block of README to DIR/N.sh
# (its lines less the indent) and print "N LINE SECTION" for each.
blocks() {
	awk -v dir="$2" '
		/^(-+|=+)$/ && prev != "" { section = prev }
		/^    / && (inblock || prev == "") {
			if (!inblock) {
				n++
				inblock = 1
				print n, NR, section
			}
			print substr($0, 5) > (dir "/" n ".sh")
			prev = $0
			next
		}
		{ inblock = 0; prev = $0 }
	' "$1"
}

# small FILE: the block with the sizes of this test (see the header)
small() {
	sed -E -e "s|/usr/share/datasets/fashion-mnist|$fx/fashion-mnist-mini|g" \
		-e "s|/usr/share/games/fortunes|$fx/text/fortunes|g" \
		-e 's/--(steps|total|limit|rounds) [0-9]+/--\1 2/g' \
		-e 's/-a cclf /-a cclf --hidden 32 /g' "$1"
}

# readme_runs README: run README's command blocks as the header says
readme_runs() {
	local n line section first ran=0 training=0
	mkdir blocks work
	blocks "$1" blocks > blocks/index
	while read -r n line section; do
		first=$(head -n 1 "blocks/$n.sh")
		case $first in
		scripts/* | ==*) continue ;;
		esac
		if grep -Eq '^[A-Za-z0-9_-]+  +[A-Za-z]' <<<"$first"; then
			continue
		fi
		if grep -Eq '^([0-9*/,-]+ +){5}[^ ]' <<<"$first"; then
			continue
		fi
		small "blocks/$n.sh" > "blocks/$n.small"
		if grep -q cg-cluster "blocks/$n.sh" && ! test_hosts; then
			echo "# README line $line ($section): not run: $HOSTS_WHY" >&3
			continue
		fi
		if grep -q examples/slurm/ "blocks/$n.sh" && ! test_slurm; then
			echo "# README line $line ($section): not run: $SLURM_WHY" >&3
			continue
		fi
		if ! (cd work && PATH=$BATS_TEST_TMPDIR/bin:$PATH \
			bash -euo pipefail "../blocks/$n.small") \
			> "blocks/$n.log" 2>&1; then
			echo "README line $line ($section): this block failed:"
			sed 's/^/    /' "blocks/$n.sh"
			echo "run as:"
			sed 's/^/    /' "blocks/$n.small"
			echo "the end of its output:"
			tail -n 20 "blocks/$n.log" | cat -v
			return 1
		fi
		ran=$((ran + 1))
		[ "$section" != "Training, three ways" ] || training=$((training + 1))
	done < blocks/index
	# a README whose blocks were not found would pass unread
	if [ "$training" -lt 4 ]; then
		echo "$ran blocks run, $training of Training, three ways (4 expected)"
		return 1
	fi
}

@test "README: every command block runs as written, in order (small sizes)" {
	readme_runs "$top/README"
	# what the blocks say they make
	for f in model.cgm samples.png sync.cgm diloco.cgm fort.cgm; do
		[ -s "work/$f" ] || { echo "no $f"; false; }
	done
	# and, where there were test hosts, cg-cluster's run on them
	if [ -n "${HOSTS_DIR:-}" ]; then
		[ -s work/cluster/model.cgm ] || { echo "no cluster/model.cgm"; false; }
		[ -s "$HOSTS_DIR/host1/cg-cluster/shard.cgd" ]
	fi
	# and under Slurm
	if [ -n "${SLURM_DIR:-}" ]; then
		[ -s work/slurm/model.cgm ] || { echo "no slurm/model.cgm"; false; }
		[ -s work/slurm/slurm/reduce-2.log ]
	fi
}

@test "README: a block that fails is named" {
	printf '%s\n' 'A title' '-------' '' '    true' '' 'Text:' '' \
		'    cg-init -a nosuch -o x.cgm' > README.bad
	run -1 readme_runs README.bad
	assert_line --index 0 "README line 8 (A title): this block failed:"
	assert_line "    cg-init -a nosuch -o x.cgm"
}

# make_small DIR LOG TARGETS... VARIABLES...: make in examples/DIR, output
# to LOG, shown when it fails
make_small() {
	local dir=$1 log=$2
	shift 2
	make -s -C "$top/examples/$dir" "$@" > "$log" 2>&1 ||
		{ cat -v "$log"; false; }
}

@test "examples/fashion-cvae: make single sync diloco judge plot (small sizes)" {
	make_small fashion-cvae log single sync diloco judge plot OUT="$PWD/out" \
		DATA="$fx/fashion-mnist-mini" STEPS=2 ROUNDS=2 OUTER=2 INNER=2 \
		HIDDEN=32 LAYERS=1 LATENT=4 JHIDDEN=16 JSTEPS=2 JSTEPS2=2 \
		JSAMPLES=4
	for w in single sync diloco; do
		[ -s "out/$w/samples.png" ] || { echo "no $w/samples.png"; false; }
		[ -s "out/$w/plot.png" ] || { echo "no $w/plot.png"; false; }
		grep -q "out/$w/model.cgm (cvae, step 2)" log
	done
	grep -q "out/judge/clf.cgm (cclf, step 4)" log
	grep -q "out/judge/clf.cgm (4 images per condition, seed 1, 16 features)" log
	grep -Eq '^all +40 ' log
}

@test "examples/fashion-cddpm: make single sync diloco judge (small sizes)" {
	make_small fashion-cddpm log single sync diloco judge OUT="$PWD/out" \
		DATA="$fx/fashion-mnist-mini" STEPS=2 ROUNDS=2 OUTER=2 INNER=2 \
		HIDDEN=32 LAYERS=1 DSTEPS=5 JHIDDEN=16 JSTEPS=2 JSTEPS2=2 \
		JSAMPLES=4 GUIDANCE_INTERVAL=0:0.5
	for w in single sync diloco; do
		[ -s "out/$w/samples.png" ] || { echo "no $w/samples.png"; false; }
		grep -q "out/$w/model.cgm (cddpm, step 2)" log
	done
	# the three runs' evals, and the single model's again beside the judge
	[ "$(grep -Ec '^ +examples +mse +data' log)" -eq 4 ]
	grep -q "out/judge/clf.cgm (4 images per condition, seed 1, 16 features; guidance 1 at t/T in \[0, 0.5\], ddim, 5 steps)" log
	grep -Eq '^all +40 ' log
}

@test "examples/fashion-cgan: make single sync diloco judge (small sizes)" {
	make_small fashion-cgan log single sync diloco judge OUT="$PWD/out" \
		DATA="$fx/fashion-mnist-mini" STEPS=2 ROUNDS=2 OUTER=2 INNER=2 \
		HIDDEN=32 LAYERS=1 LATENT=4 JHIDDEN=16 JSTEPS=2 JSTEPS2=2 \
		JSAMPLES=4
	for w in single sync diloco; do
		[ -s "out/$w/samples.png" ] || { echo "no $w/samples.png"; false; }
		grep -q "out/$w/model.cgm (cgan, step 2)" log
		grep -Eq 'examples +d_hinge +d_real +d_fake +g +data' log
	done
	grep -q "out/judge/clf.cgm (4 images per condition, seed 1, 16 features)" log
	grep -Eq '^all +40 ' log
	# the convolutional nets with the auxiliary classifier
	make_small fashion-cgan log2 single OUT="$PWD/conv" \
		DATA="$fx/fashion-mnist-mini" STEPS=2 LATENT=4 \
		INITOPTS="--conv 2 --r1 0.1 --disc-kernel 4 --aux 1"
	[ -s conv/single/samples.png ]
	grep -q "conv/single/model.cgm (cgan, step 2)" log2
	tar xOf conv/single/model.cgm cg.json |
		jq -e '.config | .conv == 2 and .aux == 1 and .["disc-kernel"] == 4'
}

@test "examples/cluster: make diloco sync on the test hosts (small sizes)" {
	test_hosts || skip "$HOSTS_WHY"
	cp "$top/examples/cluster/hosts" .
	make_small cluster log diloco sync OUT="$PWD/out" HOSTS="$PWD/hosts" \
		SSH="$HOSTS_SSH" REMOTE_DIR="$HOSTS_DIR/%h" \
		PREFIX="$(dirname "$(command -v cg-train-step)")/" \
		DATA="$fx/fashion-mnist-mini" OUTER=2 INNER=2 ROUNDS=2 \
		HIDDEN=32 LAYERS=1 LATENT=4
	for w in diloco sync; do
		[ -s "out/$w/samples.png" ] || { echo "no $w/samples.png"; false; }
		grep -q "out/$w/model.cgm (cvae, step 2)" log
	done
	[ -s "$HOSTS_DIR/host2/diloco/shard.cgd" ]
}

@test "examples/compressed-diloco: make run plot (small sizes)" {
	make_small compressed-diloco log run plot OUT="$PWD/out" \
		DATA="$fx/fashion-mnist-mini" ROUNDS=2 INNER=2 HIDDEN=32 LAYERS=1 \
		LATENT=4
	# every worker ends with the coordinator's model
	grep -Eq '^after 2 rounds: params [0-9a-f]{64} on the coordinator and all 4 workers$' log
	[ -s out/run/plot.png ]
}

@test "examples/fortunes-cgpt: make train eval sample diloco distill plot (small sizes)" {
	make_small fortunes-cgpt log train eval sample diloco distill plot \
		OUT="$PWD/out" DATA="$fx/text/fortunes" STEPS=2 OUTER=2 INNER=2 \
		CONTEXT=32 WIDTH=16 LAYERS=1 HEADS=2 CATS="computers wisdom" \
		SWIDTH=8 SSTEPS=2 SWARMUP=1
	grep -q '^== computers$' log
	grep -q '^== wisdom$' log
	grep -q "out/model.cgm (cgpt, step 2)" log
	grep -q "out/diloco/model.cgm (cgpt, step 2)" log
	grep -q "out/student/scratch.cgm (cgpt, step 2)" log
	grep -q "out/student/distilled.cgm (cgpt, step 2)" log
	[ "$(jq -r .teacher_weight out/student/distill.jsonl)" = 0.9 ]
	[ -s out/plot.png ] && [ -s out/diloco/plot.png ] &&
		[ -s out/student/plot.png ]
}

@test "examples/shard-fashion/run.sh and examples/inspect/run.sh" {
	run -0 "$top/examples/shard-fashion/run.sh" "$PWD/shards"
	assert_line "reproducible: yes"
	assert_line "shards in $PWD/shards"
	run -0 --separate-stderr "$top/examples/inspect/run.sh" "$PWD/inspect"
	assert_line "files in $PWD/inspect"
	[[ $stderr == *"damaged.cgm: tensor "*": digest mismatch"* ]]
}

@test "examples/convert/run.sh" {
	run -0 --separate-stderr "$top/examples/convert/run.sh" "$PWD/convert"
	assert_line "round trip: same bytes"
	assert_line --regexp '^dec\.out\.b	f32$'
	assert_line "files in $PWD/convert"
}

@test "examples/sign/run.sh" {
	run -0 --separate-stderr "$top/examples/sign/run.sh" "$PWD/sign"
	assert_line --regexp '^d0\.cgg: OK, signed by [0-9a-f]{64} \(trusted\)$'
	assert_line --regexp '^signer: [0-9a-f]{64}$'
	assert_line 'Signature Verified Successfully'
	assert_line "files in $PWD/sign"
	[[ $stderr == *"d2.cgg: signed by key "*", not in the trust list"* ]]
	[[ $stderr == *"altered.cgg: cg.sig: the signature does not match"* ]]
}

@test "examples/seal/run.sh" {
	run -0 --separate-stderr "$top/examples/seal/run.sh" "$PWD/seal"
	assert_line 'model.cgm: OK'
	assert_line 'CGSEAL'
	assert_line 'cg.json'
	assert_line "files in $PWD/seal"
	[[ $stderr == *"model.cgm: sealed (to key "*"): no key to open it"* ]]
	[[ $stderr == *"model.cgm: sealed to key "*", not to the key given"* ]]
	[[ $stderr == *"altered.cgg: sealed: chunk 0 fails authentication"* ]]
	head -c 6 seal/w0.state | grep -q CGSEAL
}

@test "examples/secagg/run.sh" {
	run -0 --separate-stderr "$top/examples/secagg/run.sh" "$PWD/secagg"
	assert_line --regexp '^[0-9a-f]{64} worker2$'
	assert_line '{"samples":80,"codec":"masked","peers":3}'
	assert_line --regexp '^enc\.0\.w +(differs|same) +f32 '
	assert_line "files in $PWD/secagg"
	[[ $stderr == *"cg-reduce: 1 of 3 peers missing ("*"): a masked round is unmasked only with every peer's update"* ]]
	[ -s secagg/model2.cgm ]
	# the masked round's model is the plain one's within 1e-6
	run -0 sh -c "cg-inspect --diff --json secagg/plain.cgm secagg/masked.cgm |
		jq -s '[.[] | .max_abs // empty] | max'"
	awk -v d="$output" 'BEGIN { exit !(d + 0 < 1e-6) }'
}

@test "examples/audit/run.sh" {
	run -0 --separate-stderr "$top/examples/audit/run.sh" "$PWD/audit"
	run -0 grep -c 'skipped (not drawn)$' <<<"$output"
	assert_output 2
	run -0 --separate-stderr "$top/examples/audit/run.sh" "$PWD/audit2"
	assert_line "d2.cgg: OK"
	assert_line "d2.cgg: mismatch: 1 of 18 tensors differ"
	assert_line "d3.cgg: match (18 tensors)"
	assert_line "files in $PWD/audit2"
}

@test "examples/robust/run.sh" {
	run -0 --separate-stderr "$top/examples/robust/run.sh" "$PWD/robust"
	assert_line 'big.cgg: OK'
	assert_line --regexp '^mean +[0-9]{3,}\.'
	assert_line --regexp '^median +0\.00'
	assert_line --regexp '^trimmed-mean:0\.25 +0\.00'
	assert_line --regexp '^clip-mean:0\.1 +0\.00'
	assert_line '{"inputs":3,"skipped":["nan.cgg"]}'
	assert_line "files in $PWD/robust"
	[[ $stderr == *"nan.cgg: tensor enc.0.w: element 0 is not finite; left out"* ]]
}

@test "examples/shrink/run.sh" {
	run -0 --separate-stderr "$top/examples/shrink/run.sh" "$PWD/shrink"
	assert_line --regexp '^q8_0 +[0-9]+ [0-9.]+$'
	assert_line --regexp '^q4_1 +[0-9]+ [0-9.]+$'
	assert_line --regexp '^h\.0\.attn\.qkv\.w +q4_1 '
	assert_line "$PWD/shrink/back.cgm: OK"
	assert_line "files in $PWD/shrink"
	[ "$(stat -c %s shrink/model-q4_1.cgm)" -lt "$(stat -c %s shrink/model-f32.cgm)" ]
}

@test "examples/stages/run.sh" {
	run -0 --separate-stderr "$top/examples/stages/run.sh" "$PWD/stages"
	assert_line --regexp '^round 1: loss [0-9.]+, the joined stages are the unsplit model$'
	assert_line --regexp '^round 2: loss [0-9.]+, the joined stages are the unsplit model$'
	assert_line "files in $PWD/stages"
}

@test "examples/prune/run.sh" {
	run -0 --separate-stderr "$top/examples/prune/run.sh" "$PWD/prune"
	assert_line "output in $PWD/prune"
	# fine-tuned, the pruned weights are still the zeros
	assert_line "h.0.mlp.fc.w: 2048 pruned, 2048 zeros"
	assert_line --regexp '^wanda +[0-9.]+ bits per byte$'
	assert_line --regexp '^config of the smaller model: .*"heads":1,.*"head_size":16,"ffn":64}$'
	assert_line --regexp '^small +[0-9.]+ bits per byte$'
}

@test "examples/finetune/run.sh" {
	run -0 --separate-stderr "$top/examples/finetune/run.sh" "$PWD/finetune"
	assert_line "output in $PWD/finetune"
	local m
	for m in grown lora full frozen merged; do
		assert_line --regexp "^$m +[0-9.]+ bits per byte\$"
	done
	# the merged model scores as its adapters
	[ "$(grep '^lora ' <<<"$output" | awk '{ print $2 }')" = \
		"$(grep '^merged ' <<<"$output" | awk '{ print $2 }')" ]
	# the adapters' delta is a fraction of the whole model's
	[[ $output =~ a\ round\'s\ delta:\ ([0-9]+)\ bytes\ with\ adapters,\ ([0-9]+)\ with ]]
	[ $((BASH_REMATCH[1] * 3)) -lt "${BASH_REMATCH[2]}" ]
}

@test "examples/resume/run.sh" {
	run -0 --separate-stderr "$top/examples/resume/run.sh" "$PWD/resume"
	[ "$(grep -c '^killed at step [0-9]* of 10$' <<<"$output")" -eq 3 ]
	assert_line --regexp '^the same bytes: d0\.cgg d1\.cgg .*model\.cgm w0\.state w1\.state $'
	assert_line "files in $PWD/resume"
}

@test "examples/inbox/run.sh" {
	run -0 --separate-stderr "$top/examples/inbox/run.sh" "$PWD/inbox"
	assert_line --regexp '^model: step [1-9][0-9]* from [0-9]+ updates; [0-9]+ set aside$'
	assert_line --regexp 'step 1 published from [0-9]+ updates?, loss '
	assert_line "files in $PWD/inbox"
	# every update of the 12 is used or set aside, once
	[ "$(find inbox/run/used inbox/run/rejected -name 'w*.cgg' | wc -l)" -eq 12 ]
	[ "$(ls -A inbox/run/inbox)" = "" ]
	cg-inspect --verify -q inbox/run/model.cgm
}
