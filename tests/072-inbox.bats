#!/usr/bin/env bats
#
# 072-inbox.bats - cg-inbox, the asynchronous coordinator: a pass takes
# the complete updates of the inbox, publishes the next model and moves
# what it used; what it cannot use is set aside with its reason; a pass
# killed (SIGKILL, with every process it started) at 20 instants and run
# again applies every update exactly once, and ends on the bytes of a
# pass never cut short; two passes at once do not both run.  A pass
# that sets CG_CRASH_KILLS (tests/069's 100 kills) scales the 20 as it
# scales those (the sanitizers' pass, slower, whose own paths the
# first few reach: 4 of its 20).
#
# The instants of the kill test are drawn from a seeded sequence spread
# over the length of a pass (measured on an uninterrupted one: the clock
# sets the scale only); an instant after the pass has ended is not a kill
# and is drawn again.  The window between the model's rename and the
# moves of its updates is a few renames long, so a test of its own stops
# the pass there for certain (a cg-apply that kills the pass once it has
# published).  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	local w
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	mkdir -p start/inbox
	images fm -n 2 --strategy stratified
	small_cvae fm-0.cgd start/model.cgm
	# four workers' deltas of the model, and one of another model
	for w in 0 1 2 3; do
		cg-train-step -q -m start/model.cgm -d "fm-$((w % 2)).cgd" \
			--emit delta --steps 2 --batch 4 --seed "$w" \
			-o "start/inbox/w$w-1.cgg"
	done
	small_cvae fm-0.cgd other.cgm --seed 2
	cg-train-step -q -m other.cgm -d fm-0.cgd --emit delta --steps 2 \
		--batch 4 -o start/inbox/alien.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
}

# verify_all DIR: every file of DIR under a final name (not a dot name,
# not a .why) verifies: whole, every digest right
verify_all() {
	local f bad=0
	while read -r f; do
		cg-inspect --verify -q "$f" || bad=1
	done < <(find "$1" -type f ! -name '.*' ! -name '*.why' \
		! -name lock ! -name log ! -name journal ! -name '*err' \
		! -name models)
	return $bad
}

# where DIR NAME: each place of update NAME in DIR (inbox, used/STEP,
# rejected), one a line
where() {
	(cd "$1" && find inbox used rejected -type f -name "$2" |
		sed 's|/[^/]*$||' | sort)
}

@test "cg-inbox: --help, a bad option, no directory, a bad number" {
	run -0 cg-inbox --help
	assert_line --partial 'usage: cg-inbox [options] DIR'
	run -0 cg-inbox --version
	assert_output --regexp '^cg-inbox \(cg\) '
	run -2 --separate-stderr cg-inbox --nosuch x
	[[ ${stderr_lines[0]} == "cg-inbox: unknown option '--nosuch'" ]]
	run -2 --separate-stderr cg-inbox
	[[ ${stderr_lines[0]} == "cg-inbox: no directory" ]]
	run -2 --separate-stderr cg-inbox --min-inputs 0 x
	[[ ${stderr_lines[0]} == "cg-inbox: --min-inputs: must be at least 1" ]]
	run -2 --separate-stderr cg-inbox --min-inputs 3 --max-inputs 2 x
	[[ ${stderr_lines[0]} == *"--max-inputs 2 is below --min-inputs 3" ]]
	# no model, none given
	run -1 --separate-stderr cg-inbox empty
	[[ ${stderr_lines[0]} == "cg-inbox: empty/model.cgm: no model (give the first with -m)" ]]
}

@test "a pass: the updates of the model applied, moved to used/1, the others set aside with a reason" {
	cp -r "$D/start" run
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"alien.cgg: set aside: of another model (step 0, "* ]]
	[[ $stderr == *"step 1 published from 4 updates, loss "*": w0-1.cgg w1-1.cgg w2-1.cgg w3-1.cgg"* ]]
	# the same as cg-reduce and cg-apply by hand
	cg-reduce "$D"/start/inbox/w*.cgg -o mean.cgg
	cg-apply -m "$D/start/model.cgm" --outer nesterov mean.cgg -o want.cgm
	cmp want.cgm run/model.cgm
	[ "$(ls run/inbox)" = "" ]
	[ "$(ls run/used/1 | paste -sd' ')" = "w0-1.cgg w1-1.cgg w2-1.cgg w3-1.cgg" ]
	for f in run/used/1/*; do cmp "$f" "$D/start/inbox/${f##*/}"; done
	[ "$(ls run/rejected | paste -sd' ')" = "alien.cgg alien.cgg.why" ]
	grep -q '^of another model' run/rejected/alien.cgg.why
	[ ! -e run/journal ] && [ ! -e run/pass ]
	# a directory of any name
	cp -r "$D/start" "a dir"
	cg-inbox -q "a dir"
	cmp want.cgm "a dir/model.cgm"
	# an update of step 0 now comes late; run again, nothing is applied
	cp "$D/start/inbox/w0-1.cgg" run/inbox/late.cgg
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"late.cgg: set aside: late: of the model of step 0, 1 step behind the published one (--max-staleness 0)"* ]]
	[[ $stderr == *"run/inbox: no update: nothing published"* ]]
	cmp want.cgm run/model.cgm
	grep -q '^late: ' run/rejected/late.cgg.why
	# --max-staleness 1 takes it beside an update of the published
	# model, reduced for that model (cg-reduce --model), weighed as -R
	# says: what cg-reduce and cg-apply give by hand
	cp "$D/start/inbox/w0-1.cgg" run/inbox/a-late.cgg
	cg-train-step -q -m run/model.cgm -d "$D/fm-0.cgd" --emit delta \
		--steps 2 --batch 4 -o run/inbox/b-now.cgg
	cp run/model.cgm m1.cgm
	cp run/inbox/a-late.cgg run/inbox/b-now.cgg .
	run -0 --separate-stderr cg-inbox --max-staleness 1 \
		-R '--staleness-weight poly:0.5' run
	[[ $stderr == *"step 2 published from 2 updates, loss "*": b-now.cgg a-late.cgg"* ]]
	cg-reduce --model m1.cgm --max-staleness 1 --staleness-weight poly:0.5 \
		b-now.cgg a-late.cgg -o mean2.cgg
	cg-apply -m m1.cgm --outer nesterov mean2.cgg -o want2.cgm
	cmp want2.cgm run/model.cgm
	[ "$(ls run/used/2 | paste -sd' ')" = "a-late.cgg b-now.cgg" ]
	# an update two models back, alone, under --max-staleness 2
	cp "$D/start/inbox/w1-1.cgg" run/inbox/c-late.cgg
	run -0 --separate-stderr cg-inbox --max-staleness 2 run
	[[ $stderr == *"step 3 published from 1 update, loss "*": c-late.cgg"* ]]
	run -0 --separate-stderr cg-inbox --max-staleness 2 run
	[[ $stderr == *"run/inbox: no update: nothing published"* ]]
	verify_all run
}

@test "updates not of the inbox's kind, damaged or misnamed are set aside, the rest taken" {
	cp -r "$D/start" run
	rm run/inbox/alien.cgg
	cg-train-step -q -m run/model.cgm -d "$D/fm-0.cgd" --batch 4 \
		-o run/inbox/grad.cgg
	cp run/model.cgm run/inbox/model.cgm
	head -c 3000 run/inbox/w0-1.cgg > run/inbox/cut.cgg
	echo 'not a cg file' > run/inbox/junk.cgg
	cp run/inbox/w1-1.cgg 'run/inbox/sp ace.cgg'
	mkdir run/inbox/sub
	run -0 --separate-stderr cg-inbox run
	assert_equal "$(cat run/rejected/grad.cgg.why)" "a grad, not a delta (--mode diloco)"
	assert_equal "$(cat run/rejected/model.cgm.why)" "a model, not a delta (--mode diloco)"
	grep -q . run/rejected/cut.cgg.why
	grep -q . run/rejected/junk.cgg.why
	assert_equal "$(cat 'run/rejected/sp ace.cgg.why')" \
		"a name of other characters than A-Z a-z 0-9 . _ + -"
	assert_equal "$(cat run/rejected/sub.why)" "not a plain file"
	[ "$(ls run/used/1 | wc -l)" -eq 4 ]
	# a gradient inbox takes the gradient (the optimizer step)
	cp -r "$D/start" sync
	rm sync/inbox/*
	cg-train-step -q -m sync/model.cgm -d "$D/fm-0.cgd" --batch 4 \
		-o sync/inbox/g.cgg
	cp run/rejected/w*.cgg sync/inbox/ 2>/dev/null || true
	cp "$D/start/inbox/w0-1.cgg" sync/inbox/
	run -0 --separate-stderr cg-inbox --mode sync sync
	[ -f sync/used/1/g.cgg ]
	assert_equal "$(cat sync/rejected/w0-1.cgg.why)" "a delta, not a grad (--mode sync)"
}

@test "a half-written update (a name with a dot) is never taken; renamed, it is" {
	cp -r "$D/start" run
	rm run/inbox/alien.cgg
	# what a copy in progress and cg-train-step's temporary look like
	head -c 2000 run/inbox/w3-1.cgg > run/inbox/.tmp.w3
	mv run/inbox/w3-1.cgg run/inbox/.w3-1.cgg.Ab12Cd
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"step 1 published from 3 updates"* ]]
	[ -f run/inbox/.tmp.w3 ] && [ -f run/inbox/.w3-1.cgg.Ab12Cd ]
	[ "$(ls run/rejected)" = "" ]
	cmp run/inbox/.tmp.w3 <(head -c 2000 "$D/start/inbox/w3-1.cgg")
	# once renamed it is an update like any other (late here)
	mv run/inbox/.w3-1.cgg.Ab12Cd run/inbox/w3-1.cgg
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"w3-1.cgg: set aside: late: "* ]]
}

@test "two passes at once: the second exits saying so, or waits with --wait; each update applied once" {
	cp -r "$D/start" run
	# a pass holds the lock: a plain run exits 1 with one line
	flock run/lock sleep 3 &
	local holder=$!
	sleep 0.5
	run -1 --separate-stderr cg-inbox run
	assert_equal "$stderr" "cg-inbox: run: another pass is running (it holds run/lock): give --wait to wait for it"
	cmp run/model.cgm "$D/start/model.cgm"
	# --wait waits for it, then runs its pass
	run -0 --separate-stderr cg-inbox --wait run
	[[ $stderr == *"step 1 published from 4 updates"* ]]
	wait $holder
	# two real passes started together, both waiting: one publishes,
	# the other finds the inbox empty
	cp run/model.cgm once.cgm
	rm -rf run && cp -r "$D/start" run
	cg-inbox --wait run 2>a.err &
	local a=$!
	cg-inbox --wait run 2>b.err &
	local b=$!
	wait $a
	wait $b
	cmp once.cgm run/model.cgm
	[ "$(cat a.err b.err | grep -c 'published from 4 updates')" -eq 1 ]
	[ "$(cat a.err b.err | grep -c 'run/inbox: no update')" -eq 1 ]
	[ "$(ls run/used/1 | wc -l)" -eq 4 ]
}

@test "a pass stopped between publishing and moving its updates: the next moves them and applies nothing again" {
	cp -r "$D/start" run
	# the programs of a pass beside a copy of cg-inbox, cg-apply one
	# that kills the pass (its parent) once its model is published
	mkdir bin
	cp "$(command -v cg-inbox)" bin/
	ln -s "$(command -v cg-reduce)" bin/cg-reduce
	ln -s "$(command -v cg-inspect)" bin/cg-inspect
	cat > bin/cg-apply <<-EOF
		#!/bin/sh
		$(command -v cg-apply) "\$@" || exit
		kill -KILL \$PPID
	EOF
	chmod +x bin/cg-apply
	run -137 bin/cg-inbox run
	[ -f run/journal ]
	[ "$(ls run/inbox | wc -l)" -eq 4 ]
	cp -r "$D/start" ref
	cg-inbox -q ref
	cmp ref/model.cgm run/model.cgm
	# the next pass finishes it: the updates go to used/1, the model
	# stays
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"step 1: 4 used updates moved out of the inbox (a pass cut short)"* ]]
	[[ $stderr == *"run/inbox: no update: nothing published"* ]]
	cmp ref/model.cgm run/model.cgm
	[ "$(ls run/used/1 | paste -sd' ')" = "w0-1.cgg w1-1.cgg w2-1.cgg w3-1.cgg" ]
	[ ! -e run/journal ]
	# an update of the same name dropped since is not one of them: it
	# stays, and is taken for what it is
	rm -rf run && cp -r "$D/start" run
	rm run/inbox/alien.cgg
	run -137 bin/cg-inbox run
	cp "$D/start/inbox/alien.cgg" run/inbox/w0-1.cgg
	run -0 --separate-stderr cg-inbox run
	[[ $stderr == *"step 1: 3 used updates moved out of the inbox (a pass cut short)"* ]]
	[[ $stderr == *"w0-1.cgg: set aside: of another model"* ]]
	cmp ref/model.cgm run/model.cgm
}

@test "a pass killed at 20 instants (CG_CRASH_KILLS / 5): no torn file, each update applied once or still in the inbox, the same bytes at the end" {
	# the uninterrupted pass, and its length in microseconds
	local t0 t1 us
	cp -r "$D/start" ref
	t0=$EPOCHREALTIME
	cg-inbox -q ref
	t1=$EPOCHREALTIME
	us=$((${t1/./} - ${t0/./}))
	[ -f ref/model.cgm ] && [ "$(ls ref/used/1 | wc -l)" -eq 4 ]

	RANDOM=72
	local kills=0 tries=0 r pid f n before=0 published=0 between=0
	local want=$((${CG_CRASH_KILLS:-100} / 5))
	[ "$want" -ge 1 ] || want=1
	while [ $kills -lt "$want" ]; do
		tries=$((tries + 1))
		[ $tries -le $((5 * want)) ]
		rm -rf run
		cp -r "$D/start" run
		r=$(((RANDOM * 32768 + RANDOM) % (us + 1)))
		# its own process group, so that the kill takes every program
		# of the pass too
		setsid cg-inbox -q run 2>/dev/null &
		pid=$!
		sleep "$(printf '%d.%06d' $((r / 1000000)) $((r % 1000000)))"
		if ! kill -KILL -- -$pid 2>/dev/null; then
			wait $pid
			continue
		fi
		wait $pid || true
		group_wait $pid
		kills=$((kills + 1))
		# nothing torn under a final name
		verify_all run
		# the model is the first or the one of all four updates
		if cmp -s run/model.cgm "$D/start/model.cgm"; then
			before=$((before + 1))
			# nothing applied: every update still in the inbox
			for f in w0-1.cgg w1-1.cgg w2-1.cgg w3-1.cgg; do
				[ "$(where run "$f")" = inbox ]
			done
		else
			cmp run/model.cgm ref/model.cgm
			published=$((published + 1))
			# applied: in used/1, or in the inbox with the journal
			# naming it, never both
			for f in w0-1.cgg w1-1.cgg w2-1.cgg w3-1.cgg; do
				case $(where run "$f") in
				used/1) ;;
				inbox)
					grep -q " $f\$" run/journal
					between=$((between + 1))
					;;
				*) false ;;
				esac
			done
		fi
		# the alien update is in the inbox or set aside, not used
		n=$(where run alien.cgg)
		[ "$n" = inbox ] || [ "$n" = rejected ]
		# run again: the bytes of the uninterrupted pass
		cg-inbox -q run
		cmp ref/model.cgm run/model.cgm
		for f in ref/used/1/*; do cmp "$f" "run/used/1/${f##*/}"; done
		[ "$(ls -A run/inbox)" = "" ]
		[ "$(ls run/used)" = 1 ]
		[ "$(ls run/rejected | paste -sd' ')" = "alien.cgg alien.cgg.why" ]
		[ ! -e run/journal ] && [ ! -e run/pass ]
		# and once more: nothing is applied again
		cg-inbox -q run
		cmp ref/model.cgm run/model.cgm
	done
	echo "# $want kills in $tries instants: $before before the model's" \
		"rename, $published after it ($between updates then still in" \
		"the inbox)" >&3
}

@test "--trust sets aside an unsigned update, --sign signs the model published" {
	cg-key -C coord -o c.key
	cg-key -C worker -o w.key
	cat c.key.pub w.key.pub > trusted
	cg-init -a cvae -d "$D/fm-0.cgd" --hidden 16 --layers 1 --latent 4 \
		--seed 1 --sign c.key -o first.cgm
	# an unsigned first model is refused under the trust list
	run -1 --separate-stderr cg-inbox --trust trusted -m "$D/start/model.cgm" run
	[[ $stderr == *"unsigned (a trust list is in force)"* ]]
	[ ! -e run/model.cgm ]
	cg-inbox -q --trust trusted -m first.cgm run
	cg-train-step -q --sign w.key -m run/model.cgm -d "$D/fm-0.cgd" \
		--emit delta --steps 2 --batch 4 -o run/inbox/signed.cgg
	cg-train-step -q -m run/model.cgm -d "$D/fm-0.cgd" \
		--emit delta --steps 2 --batch 4 -o run/inbox/plain.cgg
	run -0 --separate-stderr cg-inbox --sign c.key --trust trusted run
	[[ $stderr == *"plain.cgg: set aside: run/inbox/plain.cgg: unsigned (a trust list is in force)"* ]]
	[[ $stderr == *"step 1 published from 1 update, loss "*": signed.cgg"* ]]
	run -0 env CG_TRUST=trusted cg-inspect --verify run/model.cgm
	assert_output --regexp '^run/model.cgm: OK, signed by [0-9a-f]{64} \(trusted\)$'
}
