#!/usr/bin/env bats
# 071-cli.bats - what the programs share: --version and -V, usage errors
# worded alike, a bool option's value as the next word where no operand
# can be meant, --help made from the option table, the runtimes' settings
# taken at load without a second start, and the progress line on a terminal of 50
# columns (in tmux), redrawn in place rather than scrolled.
#
# Made once per file: a cvae model and shard from the Fashion-MNIST
# fixture, and a cgpt model and shard from the fortunes fixture.  The
# programs under test come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

PROGS="cg-apply cg-audit cg-convert cg-eval cg-init cg-inspect cg-key cg-probe
cg-plot cg-prune cg-quantize cg-reduce cg-sample cg-shard cg-train-step cg-cluster
cg-inbox"
# every program's --help comes from a cg_cli option table (cg-cluster's
# and cg-inbox's, shell scripts', are written to the same shape)
TABLED=$PROGS

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm
	model cvae fm-0.cgd cvae.cgm --hidden 8 --layers 1 --latent 2
	texts fort
	small_cgpt fort-0.cgd cgpt.cgm
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

teardown() {
	[ -S "$BATS_TEST_TMPDIR/tmux" ] &&
		tmux -S "$BATS_TEST_TMPDIR/tmux" kill-server 2>/dev/null
	[ -n "${PID:-}" ] && kill "$PID" 2>/dev/null
	true
}

@test "every program: --version and -V print 'PROG (cg) VERSION'" {
	for p in $PROGS; do
		run -0 --separate-stderr "$p" --version
		assert_output --regexp "^$p \\(cg\\) [0-9]+\\.[0-9]+\\.[0-9]+\$"
		local v=$output
		run -0 --separate-stderr "$p" -V
		assert_equal "$output" "$v"
		[ -z "$stderr" ]
	done
}

@test "bad options are worded alike, then the synopsis and a pointer to --help" {
	for p in $TABLED; do
		run -2 --separate-stderr "$p" --bogus
		assert_equal "${stderr_lines[0]}" "$p: unknown option '--bogus'"
		[[ ${stderr_lines[1]} == "usage: $p "* ]]
		assert_equal "${stderr_lines[-1]}" \
			"Try '$p --help' for more information."
		[ -z "$output" ]
		run -2 --separate-stderr "$p" -Z
		assert_equal "${stderr_lines[0]}" "$p: unknown option '-Z'"
		run -2 --separate-stderr "$p" --help=1
		assert_equal "${stderr_lines[0]}" \
			"$p: option '--help' takes no argument"
		run -2 --separate-stderr "$p" --version=1
		assert_equal "${stderr_lines[0]}" \
			"$p: option '--version' takes no argument"
	done
	run -2 --separate-stderr cg-eval --seed
	assert_equal "${stderr_lines[0]}" "cg-eval: option '--seed' needs an argument"
	run -2 --separate-stderr cg-shard -o
	assert_equal "${stderr_lines[0]}" "cg-shard: option '-o' needs an argument"
	run -2 --separate-stderr cg-inspect --t x
	assert_equal "${stderr_lines[0]}" "cg-inspect: option '--t' is ambiguous"
	run -2 --separate-stderr cg-train-step --max-memory
	assert_equal "${stderr_lines[0]}" \
		"cg-train-step: option '--max-memory' needs an argument"
	run -2 --separate-stderr cg-sample -c
	assert_equal "${stderr_lines[0]}" "cg-sample: option '-c' needs an argument"
	# the architectures' options are in cg-init's table too
	run -2 --separate-stderr cg-init --hidden
	assert_equal "${stderr_lines[0]}" "cg-init: option '--hidden' needs an argument"
	run -2 --separate-stderr cg-init --tied 1 x
	assert_equal "${stderr_lines[0]}" "cg-init: unexpected argument"
}

@test "cg-init: a bool option's value as the next word, --film 0 as --film=0" {
	local o="-a cddpm -d $D/fm-0.cgd --hidden 8 --layers 1 --embed 8
		--timesteps 100 --unet 2"
	cg-init $o --film=0 -o eq0.cgm
	cg-init $o --film 0 -o sp0.cgm
	cmp eq0.cgm sp0.cgm
	run -0 bash -c "tar xOf sp0.cgm cg.json | jq -c .config.film"
	assert_output 0
	cg-init $o --film 1 -o sp1.cgm
	cg-init $o --film -o alone.cgm
	cmp sp1.cgm alone.cgm
	! cmp -s sp0.cgm sp1.cgm
	# a word that is no value is the option's error, not a stray one
	run -2 --separate-stderr cg-init $o --film yes -o x.cgm
	assert_equal "${stderr_lines[0]}" \
		"cg-init: --film: 'yes' is not a whole number in [0, 1]"
	run -2 --separate-stderr cg-init $o --film 0 1 -o x.cgm
	assert_equal "${stderr_lines[0]}" "cg-init: unexpected argument"
	[ ! -e x.cgm ]
}

# help_col PROGRAM: the column the help of PROGRAM's options starts at
help_col() {
	"$1" --help | awk '/^  (-[a-zA-Z], |    )--/ {
		if (match($0, /[^ ]  +[^ ]/)) { print RSTART + RLENGTH - 2; exit } }'
}

@test "--help: every option of the table, aligned, filled, within 79 columns" {
	for p in $TABLED; do
		run -0 --separate-stderr "$p" --help
		[ -z "$stderr" ]
		assert_line --index 0 --regexp "^usage: $p "
		assert_line --regexp '^  -h, --help +show this help and exit$'
		assert_line --regexp '^  -V, --version +show the version and exit$'
		assert_output --partial 'Exit status'
		# every long option getopt knows is listed
		for o in $(grep -o '^ *\(-[a-zA-Z], \)\?--[a-z0-9-]*' <<<"$output" |
			sed 's/.*--//'); do
			run -2 --separate-stderr "$p" "--$o=x" "--$o"
			[[ ${stderr_lines[0]} != *"unknown option"* ]]
		done
		run -0 "$p" --help
		local wide
		wide=$(awk 'length > 79' <<<"$output")
		assert_equal "$wide" ''
		# an option's help is filled: a line of it is broken only where
		# the next word would not fit in 79 columns (no word left alone
		# on a line by a break the source kept); an architecture
		# option's "(default D; A to B)" goes whole on a line of its own
		local short=
		# (the shell scripts' help is laid out by hand)
		[[ $p == cg-cluster || $p == cg-inbox ]] ||
		short=$(awk -v col="$(help_col "$p")" '
			function cont(l) { return match(l, /^ +/) && RLENGTH == col }
			NR > 1 && cont(prev) && cont($0) {
				w = substr($0, col + 1); sub(/ .*/, "", w)
				if (length(prev) + 1 + length(w) <= 79 &&
				    w != "(default")
					print prev " <- " w
			}
			{ prev = $0 }' <<<"$output")
		assert_equal "$short" ''
		# each option's help starts in one column
		run -0 bash -c "$p --help | awk '/^  (-[a-zA-Z], |    )--/ {
			if (match(\$0, /[^ ]  +[^ ]/)) print RSTART + RLENGTH }' |
			sort -u | wc -l"
		assert_output 1
	done
}

@test "every program's main reads in one screen: 60 lines at most" {
	# parse, validate, run, report (STYLE.md); the rest in functions
	local f n bad=
	for f in "$CG_SRCDIR"/cmd/*.c; do
		n=$(awk '/^main\(/ { s = NR } s && /^}/ { print NR - s + 2; exit }' "$f")
		[ -n "$n" ] || { bad="$bad ${f##*/}:none"; continue; }
		[ "$n" -le 60 ] || bad="$bad ${f##*/}:$n"
	done
	assert_equal "$bad" ''
}

@test "cg-eval --help: the quiet option now says what it silences" {
	run -0 cg-eval --help
	assert_line --regexp '^  -q, --quiet +no progress bar'
	refute_output --partial 'draws none yet'
}

# lib/cli/runtime.c answers OpenMP's and OpenBLAS's reads of their
# settings at load (its getenv) instead of writing them into the
# environment and starting the program again.  Each library says what it
# took: libgomp's OMP_DISPLAY_ENV=VERBOSE lists GOMP_SPINCOUNT on stderr,
# OpenBLAS's OPENBLAS_VERBOSE=2 its kernel set ("Core: ...").
# (An array, not a function: a command started with & is then the
# program itself, and $! its PID.)
clean_env=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OPENBLAS_NUM_THREADS
	-u OPENBLAS_CORETYPE -u CG_NO_REEXEC -u CG_NO_RUNTIME_DEFAULTS)

@test "the runtimes' settings reach OpenMP where unset, the user's where set" {
	ldd "$(command -v cg-inspect)" | grep -q 'libgomp\.so' ||
		skip "not built with GNU OpenMP"
	spin() { grep -o "GOMP_SPINCOUNT = '[0-9]*'" err; }
	"${clean_env[@]}" OMP_DISPLAY_ENV=VERBOSE cg-inspect --version 2>err
	assert_equal "$(spin)" "GOMP_SPINCOUNT = '1000'"
	"${clean_env[@]}" OMP_DISPLAY_ENV=VERBOSE GOMP_SPINCOUNT=7 cg-inspect --version 2>err
	assert_equal "$(spin)" "GOMP_SPINCOUNT = '7'"
	# OMP_WAIT_POLICY set: the policy's own spin, not ours
	"${clean_env[@]}" OMP_DISPLAY_ENV=VERBOSE OMP_WAIT_POLICY=passive \
		cg-inspect --version 2>err
	assert_equal "$(spin)" "GOMP_SPINCOUNT = '0'"
	for off in CG_NO_RUNTIME_DEFAULTS CG_NO_REEXEC; do
		"${clean_env[@]}" OMP_DISPLAY_ENV=VERBOSE $off=1 cg-inspect --version 2>err
		[ "$(spin)" != "GOMP_SPINCOUNT = '1000'" ]
	done
}

@test "the runtimes' settings reach OpenBLAS: its kernels and its threads" {
	ldd "$(command -v cg-inspect)" | grep -q 'libopenblas' ||
		skip "built without OpenBLAS"
	core() { grep -o 'Core: [A-Za-z0-9]*' out; }
	"${clean_env[@]}" OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=Haswell \
		cg-inspect --version >out 2>&1
	assert_equal "$(core)" "Core: Haswell"
	"${clean_env[@]}" OPENBLAS_VERBOSE=2 cg-inspect --version >out 2>&1
	if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
		grep -qw avx512vl /proc/cpuinfo; then
		assert_equal "$(core)" "Core: SkylakeX"
	else
		[ "$(core)" != "Core: SkylakeX" ]
	fi
	# OPENBLAS_NUM_THREADS=1: OpenBLAS starts no threads of its own at
	# load.  cg-inspect held by a FIFO it opens has only its own thread;
	# without the defaults, OpenBLAS starts one a core but one.
	[ "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" -gt 1 ] ||
		skip "one core: OpenBLAS starts no threads"
	local n fd
	for want in 1 many; do
		mkfifo m.fifo
		if [ "$want" = 1 ]; then
			"${clean_env[@]}" cg-inspect m.fifo >/dev/null 2>&1 &
		else
			"${clean_env[@]}" -u OMP_NUM_THREADS -u GOTO_NUM_THREADS \
				CG_NO_RUNTIME_DEFAULTS=1 cg-inspect m.fifo \
				>/dev/null 2>&1 &
		fi
		PID=$!
		exec {fd}>m.fifo # returns once cg-inspect has opened it
		n=$(ls /proc/$PID/task | wc -l)
		exec {fd}>&-
		wait $PID || true
		PID=
		rm m.fifo
		if [ "$want" = 1 ]; then
			assert_equal "$n" 1
		else
			[ "$n" -gt 1 ]
		fi
	done
}

# The process is held inside main by a FIFO it opens (open blocks until
# a writer comes).  It is the program first started: its name, and an
# environment with none of the settings written into it.
@test "a program starts once: its name (ps, pgrep -x), its environment untouched" {
	mkfifo m.fifo
	"${clean_env[@]}" cg-train-step -m m.fifo -d "$D/fm-0.cgd" -o g.cgg 2>err &
	PID=$!
	local fd
	exec {fd}>m.fifo # returns once cg-train-step has opened it
	tr '\0' '\n' </proc/$PID/environ >env.txt
	run -1 grep -E '^(GOMP_SPINCOUNT|OMP_WAIT_POLICY|OPENBLAS_[A-Z_]*|CG_NO_REEXEC)=' env.txt
	assert_equal "$(cat /proc/$PID/comm)" cg-train-step
	assert_equal "$(ps -o comm= -p $PID)" cg-train-step
	run pgrep -x cg-train-step
	assert_line "$PID"
	exec {fd}>&-
	# an empty model: one line, exit 1 (wait here, not in run's subshell,
	# of which the process is no child)
	local st=0
	wait $PID || st=$?
	PID=
	assert_equal "$st" 1
	[[ $(cat err) == 'cg-train-step: m.fifo: '* ]]
}

# Run a command in a tmux window of 50 columns; the window's rows, with
# what scrolled off, are in $pane after.
# Each run has a server of its own: a new session on the socket of one
# just killed can meet it still exiting ("server exited unexpectedly").
run_in_tmux() {
	local sock i
	TMUX_RUNS=$((${TMUX_RUNS:-0} + 1))
	sock=$BATS_TEST_TMPDIR/tmux.$TMUX_RUNS
	tmux -S "$sock" -f /dev/null new-session -d -x 50 -y 40 \
		"cd '$PWD' && $1; echo EXIT=\$?; sleep 600"
	for ((i = 0; i < 600; i++)); do
		tmux -S "$sock" capture-pane -p -S - | grep -q '^EXIT=' && break
		sleep 0.2
	done
	pane=$(tmux -S "$sock" capture-pane -p -S -)
	tmux -S "$sock" kill-server
	printf '%s\n' "$pane" # shown when a test fails
}

@test "cg-train-step on a 50-column terminal: one progress line, redrawn" {
	command -v tmux >/dev/null || skip 'tmux is missing (scripts/install-deps)'
	run_in_tmux "cg-train-step -m '$D/cvae.cgm' -d '$D/fm-0.cgd' \
		--steps 300 --batch 2 -o g.cgg"
	output=$pane
	mapfile -t lines <<<"$pane"
	assert_line 'EXIT=0'
	# the bar's line is one row: loss (the running mean), h:mm:ss left
	assert_line --regexp '^cg-train-step +100% .*loss [0-9.]+ eta 0:00:00 *$'
	run -0 grep -c 'eta ' <<<"$pane"
	assert_output 1
	local wide
	wide=$(grep 'eta ' <<<"$pane" | awk 'length > 49')
	assert_equal "$wide" ''
	# no lines between the bar and the summary
	run -0 grep -A1 'eta ' <<<"$pane"
	assert_line --index 1 --regexp '^cg-train-step: '
	# the figure at the end is the summary's mean
	local bar sum
	bar=$(grep -o 'loss [0-9.]*' <<<"${lines[0]}")
	sum=$(grep -o 'loss [0-9.]*' <<<"${lines[1]}")
	assert_equal "$bar" "$sum"
}

@test "cg-eval --generate on a 50-column terminal: a progress line; -q: none" {
	command -v tmux >/dev/null || skip 'tmux is missing (scripts/install-deps)'
	run_in_tmux "cg-eval --generate -m '$D/cgpt.cgm' -d '$D/fort-0.cgd' \
		>out.txt"
	output=$pane
	mapfile -t lines <<<"$pane"
	assert_line 'EXIT=0'
	assert_line --regexp '^cg-eval +100% 12/12 .*eta 0:00:00 *$'
	refute_output --partial 'loss'
	run -0 grep -c 'eta ' <<<"$pane"
	assert_output 1
	grep -q 'bleu' out.txt
	run_in_tmux "cg-eval -q --generate -m '$D/cgpt.cgm' -d '$D/fort-0.cgd' \
		>out.txt"
	output=$pane
	mapfile -t lines <<<"$pane"
	assert_line 'EXIT=0'
	refute_output --partial 'eta '
}

@test "cg-eval scoring on a 50-column terminal: a progress line; -q: none" {
	command -v tmux >/dev/null || skip 'tmux is missing (scripts/install-deps)'
	run_in_tmux "cg-eval -m '$D/cvae.cgm' -d '$D/fm-0.cgd' >out.txt"
	output=$pane
	mapfile -t lines <<<"$pane"
	assert_line 'EXIT=0'
	assert_line --regexp '^cg-eval +100% .*eta 0:00:00 *$'
	run -0 grep -c 'eta ' <<<"$pane"
	assert_output 1
	grep -q 'bits/dim' out.txt
	run_in_tmux "cg-eval -q -m '$D/cvae.cgm' -d '$D/fm-0.cgd' >out.txt"
	output=$pane
	mapfile -t lines <<<"$pane"
	assert_line 'EXIT=0'
	refute_output --partial 'eta '
}

@test "not a terminal: no progress line, and stdout is the same" {
	run -0 --separate-stderr cg-eval --generate -m "$D/cgpt.cgm" \
		-d "$D/fort-0.cgd"
	[ -z "$stderr" ]
	local a=$output
	run -0 --separate-stderr cg-eval -q --generate -m "$D/cgpt.cgm" \
		-d "$D/fort-0.cgd"
	assert_equal "$output" "$a"
	run -0 --separate-stderr cg-train-step -m "$D/cvae.cgm" \
		-d "$D/fm-0.cgd" --steps 3 --batch 2 -o g.cgg
	refute_output --partial 'eta'
	[[ $stderr != *eta* ]]
}
