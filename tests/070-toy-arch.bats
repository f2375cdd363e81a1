#!/usr/bin/env bats
#
# 070-toy-arch.bats - a new architecture touches only its own file: the
# test-only "toy" (tests/unit/arch_toy.c, logistic pixels per condition)
# registers itself, and the programs built again with it (tests/toy/, not
# installed) init, train (grad, delta, model), apply, eval and sample it
# with no line of cmd/ naming it.  cg-reduce, which never reads a model,
# is the installed one.
#
# Two round-robin shards and a test shard of the Fashion-MNIST fixture
# and one toy model are made once per file.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	local toy="$CG_BUILDDIR/tests/toy"
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2 --strategy round-robin
	images fmtest -n 1 --test
	texts fort -n 1
	"$toy/cg-init" -a toy -d fm-0.cgd --spread 0.2 --shared --seed 3 \
		-o toy.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	TOY=$CG_BUILDDIR/tests/toy
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# manifest FILE FILTER: jq -r FILTER over FILE's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

@test "toy: no file in cmd/ names it, and lib/'s table does not hold it" {
	run -1 grep -rlw -i toy "$CG_SRCDIR/cmd"
	[ -z "$output" ]
	run -1 grep -rlw -e toy -e cg_arch_toy "$CG_SRCDIR/lib"
	# while the programs handle three architectures in all
	run -0 "$TOY/cg-init" --help
	assert_output --partial '-a toy:'
	assert_output --partial '-a cvae:'
	assert_output --partial '-a cgpt:'
}

@test "toy: the installed programs do not know it" {
	run -2 --separate-stderr cg-init -a toy -d "$D/fm-0.cgd" -o m.cgm
	[[ ${stderr_lines[0]} == "cg-init: unknown architecture 'toy'" ]]
	run -1 --separate-stderr cg-eval -m "$D/toy.cgm" -d "$D/fmtest-0.cgd"
	[[ $stderr == *"unknown architecture 'toy'"* ]]
	[ ! -e m.cgm ]
}

@test "toy: cg-init -a toy --help lists its options from its table only" {
	run -0 --separate-stderr "$TOY/cg-init" -a toy --help
	assert_output --partial '-a toy: independent logistic pixels'
	assert_output --regexp '--spread X +standard deviation of the initial logits'
	assert_output --partial '(default 0.5; 0 to 10)'
	assert_output --partial '--shared[=0|1]'
	refute_output --partial '--hidden'
	refute_output --partial '-a cvae:'
	[ -z "$stderr" ]
}

@test "toy: cg-init writes its options into the config, after the data's keys" {
	run -0 manifest "$D/toy.cgm" '.arch, (.config | keys_unsorted | join(",")), (.config | tojson), .image.height, (.tensors | map(.name) | join(","))'
	assert_output "toy
in_dim,ncond,spread,shared
{\"in_dim\":784,\"ncond\":10,\"spread\":0.2,\"shared\":1}
28
cond.logit,shared.logit"
	"$TOY/cg-init" -a toy -d "$D/fm-0.cgd" --seed 3 -o dflt.cgm
	run -0 manifest dflt.cgm '.config | tojson'
	assert_output '{"in_dim":784,"ncond":10,"spread":0.5,"shared":0}'
	# same command, same bytes
	"$TOY/cg-init" -a toy -d "$D/fm-0.cgd" --spread 0.2 --shared --seed 3 \
		-o again.cgm
	cmp again.cgm "$D/toy.cgm"
}

@test "toy: options it lacks or bad values are usage errors naming it" {
	run -2 --separate-stderr "$TOY/cg-init" -a toy -d "$D/fm-0.cgd" \
		--hidden 8 -o m.cgm
	[[ ${stderr_lines[0]} == 'cg-init: --hidden is not an option of toy (see cg-init -a toy --help)' ]]
	run -2 --separate-stderr "$TOY/cg-init" -a toy -d "$D/fm-0.cgd" \
		--spread 11 -o m.cgm
	[[ ${stderr_lines[0]} == "cg-init: --spread: "* ]]
	run -2 "$TOY/cg-init" -a toy -d "$D/fm-0.cgd" --shared=2 -o m.cgm
	run -2 "$TOY/cg-init" -a toy -d "$D/fm-0.cgd" --spread -o m.cgm
	# and the table's architectures refuse the toy's options
	run -2 --separate-stderr "$TOY/cg-init" -a cvae -d "$D/fm-0.cgd" \
		--spread 1 -o m.cgm
	[[ ${stderr_lines[0]} == 'cg-init: --spread is not an option of cvae'* ]]
	run -1 --separate-stderr "$TOY/cg-init" -a toy -d "$D/fort-0.cgd" \
		-o m.cgm
	[ "$stderr" = "cg-init: $D/fort-0.cgd: toy needs image data" ]
	[ ! -e m.cgm ]
}

@test "toy: a round of train-step (grad, delta), reduce and apply" {
	local w
	for w in 0 1; do
		"$TOY/cg-train-step" -q -m "$D/toy.cgm" -d "$D/fm-$w.cgd" \
			--steps 2 --batch 8 --seed 5 -o g$w.cgg
		"$TOY/cg-train-step" -q -m "$D/toy.cgm" -d "$D/fm-$w.cgd" \
			--emit delta --steps 3 --batch 8 --seed 5 \
			--state w$w.state -o d$w.cgg
	done
	run -0 manifest g0.cgg '.kind, .arch, (.tensors | map(.name) | join(","))'
	assert_output "grad
toy
cond.logit,shared.logit"
	[ "$(manifest d1.cgg .kind)" = delta ]
	[ "$(manifest w1.state .kind)" = state ]
	cg-reduce -q -o g.cgg g0.cgg g1.cgg
	"$TOY/cg-apply" -m "$D/toy.cgm" --opt sgd --lr 0.1 -o sync.cgm g.cgg
	cg-reduce -q d0.cgg d1.cgg |
		"$TOY/cg-apply" -m "$D/toy.cgm" --outer nesterov -o diloco.cgm -
	[ "$(manifest sync.cgm .step)" = 1 ]
	[ "$(manifest diloco.cgm '.arch')" = toy ]
	! cmp -s sync.cgm "$D/toy.cgm"
	! cmp -s diloco.cgm "$D/toy.cgm"
	# the installed cg-apply cannot read the model
	run -1 cg-apply -m "$D/toy.cgm" -o x.cgm g.cgg
}

@test "toy: training lowers its held-out loss; eval reports its objective" {
	"$TOY/cg-train-step" -q -m "$D/toy.cgm" -d "$D/fm-0.cgd" --emit model \
		--steps 30 --batch 10 --opt adamw --lr 0.1 --seed 5 \
		-o trained.cgm
	run -0 "$TOY/cg-eval" -m "$D/toy.cgm" -d "$D/fmtest-0.cgd" --json
	before=$(jq -r .nll <<<"$output")
	run -0 jq -r '.arch, (has("bits_per_dim"))' <<<"$output"
	assert_output "toy
true"
	run -0 "$TOY/cg-eval" -m trained.cgm -d "$D/fmtest-0.cgd" --json
	after=$(jq -r .nll <<<"$output")
	echo "nll before $before, after $after"
	awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < 0.9 * b) }'
	run -0 "$TOY/cg-eval" -m trained.cgm -d "$D/fmtest-0.cgd"
	assert_output --regexp 'examples +nll +bits/dim'
}

@test "toy: no activation checkpointing, said as for any arch" {
	run -1 --separate-stderr "$TOY/cg-train-step" -q -m "$D/toy.cgm" \
		-d "$D/fm-0.cgd" --checkpoint-activations -o g.cgg
	[[ $stderr == *'toy has no activation checkpointing'* ]]
	[ ! -e g.cgg ]
}

@test "toy: cg-sample draws its grid, the same bytes for the same seed" {
	"$TOY/cg-sample" -m "$D/toy.cgm" -n 3 --seed 7 -o a.png
	"$TOY/cg-sample" -m "$D/toy.cgm" -n 3 --seed 7 -o b.png
	"$TOY/cg-sample" -m "$D/toy.cgm" -n 3 --seed 8 -o c.png
	[ "$(head -c 8 a.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
	cmp a.png b.png
	! cmp -s a.png c.png
	"$TOY/cg-sample" -m "$D/toy.cgm" -n 2 -c 1 --seed 7 -o one.pgm
	[ "$(head -c 2 one.pgm)" = P5 ]
	run -2 --separate-stderr "$TOY/cg-sample" -m "$D/toy.cgm" -c 99 \
		-o x.png
	[[ ${stderr_lines[0]} == "cg-sample: unknown condition '99'"* ]]
}

@test "cg-init(1) documents every option cg-init --help lists" {
	local opt n=0
	run -0 cg-init --help
	for opt in $(grep -o -- '--[a-z][a-z0-9-]*' <<<"$output" | sort -u); do
		grep -Eq -- "^\.It .*Fl -${opt#--}( |$)" \
			"$CG_SRCDIR/man/cg-init.1" ||
			{ echo "cg-init.1 lacks $opt"; return 1; }
		n=$((n + 1))
	done
	echo "$n options"
	[ "$n" -ge 14 ]
}
