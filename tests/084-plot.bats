#!/usr/bin/env bats
# 084-plot.bats - cg-plot draws a real run from its --log lines: a short
# DiLoCo run of two workers (cg-train-step --codec, cg-reduce --model,
# cg-eval --json after each round), a cg-inbox pass and a cg-cluster
# round on this machine; the PNG is checked by its own bytes (the IHDR's
# size, its pixels decoded by tests/pngstat.py), the text form by its
# words, and hostile logs give one line naming the line.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	local r w
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	images fm -n 2 --strategy stratified
	small_cvae fm-0.cgd model.cgm
	cp model.cgm init.cgm
	for r in 1 2 3; do
		for w in 0 1; do
			cg-train-step -q -m model.cgm -d "fm-$w.cgd" --emit delta \
				--steps 2 --batch 8 --codec q4 --state "w$w.state" \
				--log "w$w.log" -o "d$w.cgg" || return 1
		done
		cg-reduce -q --model model.cgm --log coord.log d0.cgg d1.cgg |
			cg-apply -m model.cgm --outer nesterov -o model.cgm ||
			return 1
		cg-eval -m model.cgm -d fm-1.cgd --json >>coord.log || return 1
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C.UTF-8 OMP_NUM_THREADS=1
}

# size PNG: "WIDTH HEIGHT" from its IHDR chunk (bytes 16 to 23, big-endian)
size() {
	od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%d %d\n",
		(($1 * 256 + $2) * 256 + $3) * 256 + $4,
		(($5 * 256 + $6) * 256 + $7) * 256 + $8 }'
}

@test "cg-plot: a run's logs drawn: the PNG's size is asked's, its pixels more than a blank page" {
	run -0 --separate-stderr cg-plot --size 320x240 --title "a run" \
		-o run.png "$D/w0.log" "$D/w1.log" "$D/coord.log"
	[ -z "$stderr" ]
	assert_equal "$(head -c 8 run.png | od -An -tx1 | tr -d ' ')" \
		89504e470d0a1a0a
	assert_equal "$(size run.png)" "320 240"
	# width height colours ink coloured: decoded from the PNG's own bytes
	read -r w h colours ink coloured < <(python3 \
		"$BATS_TEST_DIRNAME/pngstat.py" run.png)
	assert_equal "$w $h" "320 240"
	# axes, type and a line of each series: many colours, ink beyond
	# the frames, and pixels that are not grey (the series)
	[ "$colours" -gt 20 ]
	[ "$ink" -gt 2000 ]
	[ "$coloured" -gt 200 ]
	# no temporary left beside it
	[ "$(ls -A | grep -v '^separate-stderr-')" = run.png ]
}

@test "cg-plot: panels by what the logs hold, three x axes by default, fewer with -x" {
	# loss and held-out rows, and a row of bytes and staleness: 3 x 3
	run -0 cg-plot -o all.png "$D/w0.log" "$D/w1.log" "$D/coord.log"
	assert_equal "$(size all.png)" "1440 960"
	# one x: the bytes and the staleness make the bottom row two wide
	run -0 cg-plot -x step -o one.png "$D/w0.log" "$D/coord.log"
	assert_equal "$(size one.png)" "960 960"
	# a worker's log alone: loss, and its bytes
	run -0 cg-plot -x step,seconds -o w.png "$D/w0.log"
	assert_equal "$(size w.png)" "960 640"
	# to a pipe, from standard input
	cg-plot -x examples < "$D/w0.log" | head -c 8 | od -An -tx1 |
		tr -d ' ' | grep -qx 89504e470d0a1a0a
}

@test "cg-plot -t: a sparkline of each log's loss and held-out metric, first, last and min" {
	run -0 --separate-stderr cg-plot -t "$D/w0.log" "$D/coord.log"
	[ -z "$stderr" ]
	assert_equal "${#lines[@]}" 2
	local f='[-0-9.e+]+'
	[[ ${lines[0]} =~ ^w0:\ loss\ [▁▂▃▄▅▆▇█]{3}\ first\ $f\ last\ $f\ min\ $f\ at\ step\ [0-9]+\ \(3\ lines\)$ ]]
	# the coordinator's log: its evaluations; the reductions have no loss
	[[ ${lines[1]} =~ ^coord:\ held-out\ nelbo\ [▁▂▃▄▅▆▇█]{3}\ first ]]
	# min is the smallest of the figures
	local min
	min=$(jq -s 'map(.loss) | min' "$D/w0.log")
	[[ ${lines[0]} == *" min $(printf '%.6g' "$min") "* ]]
	run -0 cg-plot -t -w 2 --metric rec "$D/coord.log"
	[[ $output =~ ^coord:\ held-out\ rec\ [▁▂▃▄▅▆▇█]{2}\ first ]]
	# a log of other lines only
	echo '{"other":1}' >o.log
	run -0 cg-plot -t o.log
	assert_output "o: no loss"
}

@test "cg-plot: cg-inbox --log and cg-cluster --log lines, from real passes and rounds" {
	mkdir -p ib/inbox
	cp "$D/init.cgm" ib/model.cgm
	for w in 0 1; do
		cg-train-step -q -m ib/model.cgm -d "$D/fm-$w.cgd" --emit delta \
			--steps 1 --batch 4 --seed "$w" -o "ib/inbox/w$w.cgg"
	done
	cg-inbox -q --log ib.log ib
	cg-train-step -q -m "$D/init.cgm" -d "$D/fm-0.cgd" --emit delta \
		--steps 1 --batch 4 --seed 5 -o ib/inbox/late.cgg
	cg-train-step -q -m ib/model.cgm -d "$D/fm-1.cgd" --emit delta \
		--steps 1 --batch 4 --seed 6 -o ib/inbox/fresh.cgg
	cg-inbox -q --max-staleness 1 --log ib.log ib
	run -0 jq -c '[.published, .inputs, .samples, .staleness]' ib.log
	assert_output '[1,2,8,[0,0]]
[2,2,8,[0,1]]'
	# a cluster of two hosts that are this machine
	printf 'one\ntwo\n' >hosts
	printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >fakessh
	chmod +x fakessh
	cg-cluster -q -f hosts -m "$D/init.cgm" -o run --ssh "$PWD/fakessh" \
		--remote-dir "$PWD/h/%i" -k 1 -b 4 -r 2 --log cl.log \
		"$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	run -0 jq -c '[.round, .published, .samples, .hosts, .of,
		(.bytes_up > 0), (.bytes_down > 0), (.loss | type)]' cl.log
	assert_output '[1,1,8,2,2,true,true,"number"]
[2,2,8,2,2,true,true,"number"]'
	run -0 cg-plot -t cl.log ib.log
	[[ ${lines[0]} == "cl: loss "*" (2 lines)" ]]
	[[ ${lines[1]} == "ib: loss "*" (2 lines)" ]]
	# loss on three x, then bytes and staleness
	run -0 cg-plot -o both.png cl.log ib.log
	assert_equal "$(size both.png)" "1440 640"
}

@test "cg-plot: a bad line is one line naming it, exit 1, nothing written" {
	head -n 2 "$D/w0.log" >bad.log
	echo 'not json' >>bad.log
	tail -n 1 "$D/w0.log" >>bad.log
	run -1 --separate-stderr cg-plot -o p.png bad.log
	assert_equal "$stderr" "cg-plot: bad.log:3: not a JSON object"
	[ -z "$(ls -A | grep -v '^separate-stderr-\|^bad.log$')" ]
	run -1 --separate-stderr cg-plot -t bad.log
	assert_equal "$stderr" "cg-plot: bad.log:3: not a JSON object"
	[ -z "$output" ]
	local line want
	while IFS='|' read -r line want; do
		printf '%s\n' '{"emit":"model","step":1,"loss":2}' "$line" >h.log
		run -1 --separate-stderr cg-plot -t h.log
		assert_equal "$stderr" "cg-plot: h.log:2: $want"
	done <<-'EOF'
		[1,2]|not a JSON object
		{"emit":"delta","loss":"x"}|"loss" is not a number
		{"emit":"delta","loss":1e999}|"loss" is not a number
		{"emit":"delta","samples":-3}|"samples" is negative
		{"emit":"delta"} trailing|not a JSON object
		{"fold_seconds":0,"staleness":[]}|staleness is not an object
		{"fold_seconds":0,"staleness":{"inputs":[{"staleness":-1}]}}|staleness: not a number of steps
		{"fold_seconds":0,"staleness":{"inputs":[7]}}|staleness: an input is not an object
		{"published":3,"staleness":["a"]}|staleness: not a number
		{"round":1,"bytes_up":{}}|"bytes_up" is not a number
	EOF
	# sums past the largest double
	printf '{"emit":"model","samples":1e308}\n%.0s' 1 2 >big.log
	run -1 --separate-stderr cg-plot -t big.log
	assert_equal "$stderr" \
		"cg-plot: big.log:2: the samples or seconds so far pass the largest number"
	# a line of a megabyte and more, and a NUL
	{ printf '{"emit":"x","pad":"'; head -c 1100000 /dev/zero | tr '\0' a
	  printf '"}\n'; } >long.log
	run -1 --separate-stderr cg-plot -t long.log
	assert_equal "$stderr" "cg-plot: long.log:1: line longer than 1048576 bytes"
	printf '{"emit":"model","loss":1}\n{"emit"\0:1}\n{}\n' >nul.log
	run -1 --separate-stderr cg-plot -t nul.log
	assert_equal "$stderr" "cg-plot: nul.log:2: not a JSON object"
	# empty lines pass
	printf '\n{"emit":"model","step":1,"loss":2}\n\n' >e.log
	run -0 cg-plot -t e.log
	[[ $output == "e: loss "*" (1 line)" ]]
}

@test "cg-plot: a last line cut short (a writer's crash) is skipped with a warning" {
	cp "$D/w0.log" cut.log
	printf '{"emit":"delta","step":3,"sam' >>cut.log
	run -0 --separate-stderr cg-plot -t cut.log
	assert_equal "$stderr" \
		"cg-plot: cut.log:4: a partial last line (the writer cut short?): skipped"
	[[ $output == "cut: loss "*" (3 lines)" ]]
	run -0 --separate-stderr cg-plot -q -o p.png cut.log
	[ -z "$stderr" ] && [ -s p.png ]
	# the zeros a crash can leave past the end
	head -n 3 "$D/w0.log" >zeros.log
	head -c 100 /dev/zero >>zeros.log
	run -0 --separate-stderr cg-plot -t zeros.log
	assert_equal "$stderr" \
		"cg-plot: zeros.log:4: a partial last line (the writer cut short?): skipped"
	# a bad line with its newline is no cut: an error
	printf '\n' >>cut.log
	run -1 --separate-stderr cg-plot -t cut.log
	assert_equal "$stderr" "cg-plot: cut.log:4: not a JSON object"
}

@test "cg-plot: --help, bad options, missing logs, nothing to plot, no gnuplot" {
	run -0 cg-plot --help
	assert_line --partial "usage: cg-plot "
	run -2 --separate-stderr cg-plot --size 10x10 -o p.png "$D/w0.log"
	assert_equal "${stderr_lines[0]}" \
		"cg-plot: --size: '10x10' is not WxH, each 16 to 20000"
	run -2 --separate-stderr cg-plot -x step,wall -o p.png "$D/w0.log"
	assert_equal "${stderr_lines[0]}" \
		"cg-plot: --x: 'step,wall' is not a list of step, examples and seconds"
	run -2 --separate-stderr cg-plot -t -o p.png "$D/w0.log"
	assert_equal "${stderr_lines[0]}" \
		"cg-plot: -t writes text to standard output: no -o"
	run -1 --separate-stderr cg-plot -o p.png nosuch.log
	assert_equal "$stderr" "cg-plot: nosuch.log: No such file or directory"
	echo '{"other":1}' >o.log
	run -1 --separate-stderr cg-plot -o p.png o.log
	assert_equal "$stderr" "cg-plot: nothing to plot: no line of a log has a loss, metric, bytes or staleness"
	CG_GNUPLOT=/nonexistent/gnuplot run -1 --separate-stderr cg-plot \
		-o p.png "$D/w0.log"
	assert_equal "$stderr" "cg-plot: cannot run /nonexistent/gnuplot (install gnuplot-nox, or name one in CG_GNUPLOT)"
	# a gnuplot that fails, and one that writes no PNG
	CG_GNUPLOT=false run -1 --separate-stderr cg-plot -o p.png "$D/w0.log"
	assert_equal "$stderr" "cg-plot: false failed: no message"
	CG_GNUPLOT=cat run -1 --separate-stderr cg-plot -o p.png "$D/w0.log"
	assert_equal "$stderr" "cg-plot: cat wrote no PNG"
	[ -z "$(ls -A | grep -v '^separate-stderr-\|^o.log$')" ]
}
