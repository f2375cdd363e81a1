#!/usr/bin/env bats
# 085-completion.bats - the bash completion the build makes for every
# program from its option table (scripts/bash-completion, PROGRAM
# --list-options): each file sourced by bash, its function run on a
# command line, COMPREPLY checked.  Every option of every program's
# --help is offered, so a new option cannot go without; an option's
# argument completes as a file, a directory, or the names of the
# registries (architectures, codecs, reduce operations), toys that
# register themselves included.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

PROGS="cg-apply cg-audit cg-convert cg-eval cg-init cg-inspect cg-key cg-probe
cg-plot cg-prune cg-quantize cg-reduce cg-sample cg-shard cg-train-step
cg-cluster cg-inbox"

setup() {
	C=$CG_BUILDDIR/completions
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# offered FILE PROG WORD...: what FILE's completion of PROG offers, one a
# line, for the command line "PROG WORD..." with the cursor at the end
# of the last WORD (bash splits "--x=y" into "--x" "=" "y" itself)
offered() {
	local file=$1
	shift
	bash -c '
		source "$1" || exit 1
		shift
		fn=$(complete -p "$1" | awk "{ print \$3 }")
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		"$fn"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$file" "$@"
}

@test "every program has a completion, and it offers every option of its --help" {
	local p o help all listed
	for p in $PROGS; do
		[ -f "$C/$p" ] || { echo "no completion for $p"; false; }
		run -0 offered "$C/$p" "$p" -
		all=$(sort <<<"$output")
		help=$("$p" --help)
		# the options of --help, short and long, one a line
		listed=$(grep -o '^ *\(-[a-zA-Z], \)\?--[a-z0-9-]*' <<<"$help" |
			sed 's/^ *//; s/, /\n/' | sort -u)
		[ "$(wc -l <<<"$listed")" -ge 3 ]
		# every one offered, and nothing else
		o=$(comm -3 <(echo "$listed") <(echo "$all"))
		[ -z "$o" ] || { echo "$p: offered or listed only:"; echo "$o"; false; }
	done
	# a prefix narrows it
	run -0 offered "$C/cg-train-step" cg-train-step --co
	assert_output $'--compress\n--codec'
}

@test "arguments: the registries' names, as a word or after --NAME=" {
	run -0 offered "$C/cg-init" cg-init -a ''
	assert_equal "$output" "$(archs)"
	run -0 offered "$C/cg-init" cg-init --arch c
	assert_output --regexp $'^cvae\ncgpt\n'
	run -0 offered "$C/cg-train-step" cg-train-step --codec q
	assert_output $'q8\nq4\nq2'
	run -0 offered "$C/cg-train-step" cg-train-step --codec = t
	assert_output topk
	run -0 offered "$C/cg-train-step" cg-train-step --emit ''
	assert_output $'grad\ndelta\nmodel'
	run -0 offered "$C/cg-reduce" cg-reduce --op m
	assert_output $'mean\nmedian'
	run -0 offered "$C/cg-convert" cg-convert --to ''
	assert_output --partial safetensors
	run -0 offered "$C/cg-sample" cg-sample --sampler ''
	assert_output $'ddim\nddpm'
	# the scripts' --down-codec: the codecs the programs list
	run -0 offered "$C/cg-cluster" cg-cluster --down-codec ''
	assert_equal "$output" \
		"$(offered "$C/cg-train-step" cg-train-step --codec '')"
	# a number: nothing offered
	run -0 offered "$C/cg-train-step" cg-train-step --steps ''
	assert_output ''
}

@test "arguments: files, directories, and files as operands" {
	mkdir -p 'runs/a dir'
	: >model.cgm
	: >'my shard.cgd'
	# (in the directory's order: bash sorts what it shows)
	run -0 offered "$C/cg-train-step" cg-train-step -m ''
	assert_equal "$(sort <<<"$output")" $'model.cgm\nmy shard.cgd\nruns'
	run -0 offered "$C/cg-train-step" cg-train-step --data=my
	assert_output 'my shard.cgd'
	run -0 offered "$C/cg-cluster" cg-cluster -o r
	assert_output runs
	run -0 offered "$C/cg-cluster" cg-cluster --dir runs/
	assert_output 'runs/a dir'
	run -0 offered "$C/cg-inspect" cg-inspect --json mo
	assert_output model.cgm
	run -0 offered "$C/cg-plot" cg-plot -t -o ''
	assert_equal "$(sort <<<"$output")" $'model.cgm\nmy shard.cgd\nruns'
}

@test "PROGRAM --list-options: hidden, from the table, with the registered toys' names" {
	run -0 cg-train-step --help
	refute_output --partial list-options
	run -0 --separate-stderr cg-train-step --list-options
	[ -z "$stderr" ]
	assert_line '--model -m FILE file'
	assert_line '--quiet -q - flag'
	assert_line '--steps -k K value'
	assert_line --regexp '^--codec - SPEC word f32 .* q4 .* topk '
	# alone on the line, or an unknown option as before
	run -2 --separate-stderr cg-train-step --list-options -q
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: unknown option '--list-options'"
	# the programs built with the toys: their names in the lists, and
	# in a completion made from them
	local toy=$CG_BUILDDIR/tests/toy
	[ -x "$toy/cg-init" ] || skip "no toy programs built"
	run -0 "$toy/cg-init" --list-options
	assert_line --regexp '^--arch -a NAME word cvae .* toy$'
	"$BATS_TEST_DIRNAME/../scripts/bash-completion" comp "$toy/cg-init" \
		"$toy/cg-reduce" "$toy/cg-train-step"
	run -0 offered comp/cg-init cg-init -a t
	assert_output toy
	run -0 offered comp/cg-reduce cg-reduce --op toy
	assert_output toy-max
	run -0 offered comp/cg-train-step cg-train-step --codec toy
	assert_output toy-neg
	# a program that lists nothing: no file written
	run -1 "$BATS_TEST_DIRNAME/../scripts/bash-completion" none /bin/true
	[ ! -e none/true ]
}
