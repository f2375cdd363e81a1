#!/usr/bin/env bats
#
# 060-train-cli.bats - cg-init, cg-train-step, cg-reduce and cg-apply as
# command-line programs: options, failures, streams, interrupted writes,
# reproducible bytes, and the pipelines of a training round.
#
# Four round-robin shards of the Fashion-MNIST fixture (25 examples each)
# and one small cvae are made once per file; each test works in its own
# directory.  Manifests are read with tar and jq, tensors with cg-inspect
# where it is built and with tar and od otherwise.  The programs come from
# PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	local w
	cd "$BATS_FILE_TMPDIR"
	images fm -n 4 --strategy round-robin
	model cvae fm-0.cgd model.cgm --hidden 32 --layers 1 --latent 4
	# one step on: a model whose updates belong to no one else
	cg-train-step -q -m model.cgm -d fm-0.cgd --emit model --batch 8 \
		-o other.cgm
	for w in 0 1 2 3; do
		cg-train-step -q -m model.cgm -d fm-$w.cgd --steps 2 \
			--batch 8 -o g$w.cgg
		cg-train-step -q -m model.cgm -d fm-$w.cgd --steps 2 \
			--batch 8 --emit delta -o d$w.cgg
	done
	cg-train-step -q -m other.cgm -d fm-1.cgd --batch 8 -o other.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# manifest FILE FILTER: jq -r FILTER over FILE's cg.json
manifest() {
	tar xOf "$1" cg.json | jq -r "$2"
}

# u64 FILE TENSOR: the one value of a u64[1] tensor (a state's cursor)
u64() {
	tar xOf "$1" "$2" | od -An -tu8 | tr -d ' '
}

# values FILE TENSOR: the tensor's values, one per line
values() {
	if command -v cg-inspect >/dev/null; then
		cg-inspect --tensor "$2" "$1"
	else
		tar xOf "$1" "$2" | od -An -v -tf4 -w4
	fi
}

# close_tensors A B [RTOL]: every tensor of A equals B's within
# RTOL (1e-6) times the largest magnitude in B's tensor; prints the
# largest such relative difference, fails past RTOL.
close_tensors() {
	local a=$1 b=$2 rtol=${3:-1e-6} t worst=0 r
	for t in $(manifest "$b" '.tensors[].name'); do
		r=$(paste <(values "$a" "$t") <(values "$b" "$t") | awk '
			NF != 2 { print "shape"; exit }
			{ d = $1 - $2; if (d < 0) d = -d
			  m = $2 < 0 ? -$2 : $2
			  if (d > dd) dd = d; if (m > mm) mm = m }
			END { if (NR == 0) print "empty"
			      else printf "%.3g\n", dd / (mm > 0 ? mm : 1) }')
		case $r in shape | empty)
			echo "tensor $t: $r"
			return 1
			;;
		esac
		worst=$(awk -v a="$worst" -v b="$r" 'BEGIN { print (b > a ? b : a) }')
	done
	echo "largest relative difference: $worst"
	awk -v w="$worst" -v t="$rtol" 'BEGIN { exit !(w <= t) }'
}

# no_output NAME: neither NAME nor a temporary of it exists here
no_output() {
	[ ! -e "$1" ] || { echo "$1 exists"; return 1; }
	local left
	left=$(ls -A | grep -F ".$1." || true)
	[ -z "$left" ] || { echo "temporaries left: $left"; return 1; }
}

need_script() {
	script -qec true /dev/null >/dev/null 2>&1 ||
		skip 'script(1) cannot make a pseudo-terminal here'
}

# start CMD...: run CMD in the background, its standard input from the
# file named by $STDIN (default /dev/null, opened by the job itself, so a
# FIFO does not block the test), with SIGINT at its default (a shell
# without job control starts background jobs with SIGINT ignored); sets
# PID.
start() {
	local in=${STDIN:-/dev/null}
	if env --default-signal=INT true 2>/dev/null; then
		env --default-signal=INT "$@" <"$in" >bg.out 2>bg.err 3>&- &
	else
		set -m
		"$@" <"$in" >bg.out 2>bg.err 3>&- &
		set +m
	fi
	PID=$!
}

# running NAME: wait until $PID runs program NAME with SIGINT no longer
# ignored (where /proc tells), so that a signal sent now reaches it
running() {
	local n mask
	[ -d /proc/self ] || { sleep 0.2; return 0; }
	for n in $(seq 1 500); do
		mask=$(awk '$1 == "SigIgn:" { print $2 }' "/proc/$PID/status" 2>/dev/null) || true
		if [ "$(basename "$(readlink "/proc/$PID/exe" 2>/dev/null)")" = "$1" ] &&
			[ -n "$mask" ] && (((0x$mask & 2) == 0)); then
			return 0
		fi
		sleep 0.01
	done
	echo "$1 did not start"
	return 1
}

# stopped SIG STATUS: wait for $PID and check it died of SIG
stopped() {
	local st=0
	wait "$PID" || st=$?
	[ "$st" -eq "$2" ] || {
		echo "status $st, not $2 (killed by $1)"
		cat bg.err
		return 1
	}
}

# interrupt_write SIG STATUS OUT CMD...: start CMD, which writes OUT
# slowly enough (a big model, compressed) that its temporary can be seen;
# send SIG once the temporary exists; nothing may be left.
interrupt_write() {
	local sig=$1 st=$2 out=$3 i
	shift 3
	start "$@"
	for i in $(seq 1 2000); do
		ls -A | grep -qF ".$out." && break
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.01
	done
	if ! ls -A | grep -qF ".$out."; then
		kill -KILL "$PID" 2>/dev/null || true
		wait "$PID" || true
		skip "the write finished before it could be interrupted"
	fi
	kill -"$sig" "$PID"
	local got=0
	wait "$PID" || got=$?
	# finished between the look and the kill: not what is tested here
	[ "$got" -ne 0 ] || skip "the write finished before it could be interrupted"
	[ "$got" -eq "$st" ] || {
		echo "status $got, not $st (killed by $sig)"
		cat bg.err
		return 1
	}
	no_output "$out"
}

# big: a model of some 3.7 million parameters and a gradient of it, made
# once, so that a compressed write takes long enough to be interrupted.
big() {
	[ -e "$D/big.cgg" ] && return 0
	cg-init -a cvae -d "$D/fm-0.cgd" --hidden 1024 --layers 2 \
		--latent 4 -o "$D/big.cgm"
	cg-train-step -q -m "$D/big.cgm" -d "$D/fm-0.cgd" --batch 2 \
		-o "$D/big.cgg"
}

# ============================================================== cg-init

@test "cg-init --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-init --help
	assert_output --partial 'usage: cg-init -a ARCH -d SHARD'
	assert_output --partial '--hidden N'
	assert_output --partial '--compress'
	[ -z "$stderr" ]
}

@test "cg-init --version" {
	run -0 --separate-stderr cg-init --version
	assert_output --regexp '^cg-init \(cg\) [0-9]+\.[0-9]+'
	run -0 cg-init -V
	assert_output --regexp '^cg-init \(cg\) '
}

@test "cg-init: a bad option is a usage error on stderr, exit 2" {
	run -2 --separate-stderr cg-init --bogus -a cvae -d "$D/fm-0.cgd" -o m.cgm
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == cg-init:*--bogus* ]]
	[[ $stderr == *'usage: cg-init'* ]]
	[ ! -e m.cgm ]
}

@test "cg-init: bad numbers and missing options, exit 2" {
	local a=(-a cvae -d "$D/fm-0.cgd" -o m.cgm)
	run -2 --separate-stderr cg-init "${a[@]}" --hidden 12abc
	[[ ${stderr_lines[0]} == "cg-init: --hidden: '12abc'"* ]]
	[[ $stderr == *usage:* ]]
	run -2 cg-init "${a[@]}" --latent 0
	run -2 cg-init "${a[@]}" --layers 65
	run -2 cg-init "${a[@]}" --seed -1
	run -2 cg-init "${a[@]}" --seed ''
	run -2 cg-init "${a[@]}" -z lzma
	run -2 cg-init -a nope -d "$D/fm-0.cgd" -o m.cgm
	run -2 --separate-stderr cg-init -d "$D/fm-0.cgd" -o m.cgm
	[[ ${stderr_lines[0]} == 'cg-init: no architecture (-a)' ]]
	run -2 --separate-stderr cg-init -a cvae -o m.cgm
	[[ ${stderr_lines[0]} == 'cg-init: no data shard (-d)' ]]
	run -2 cg-init "${a[@]}" extra
	[ ! -e m.cgm ]
}

@test "cg-init: a missing shard is one line naming it, exit 1" {
	run -1 --separate-stderr cg-init -a cvae -d nope.cgd -o m.cgm
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-init: nope.cgd: '* ]]
	no_output m.cgm
}

@test "cg-init: the shard from stdin, the model to a pipe" {
	local a=(-a cvae --hidden 32 --layers 1 --latent 4 --seed 1)
	cg-init "${a[@]}" -d - -o m.cgm <"$D/fm-0.cgd"
	cmp m.cgm "$D/model.cgm"
	cg-init "${a[@]}" -d "$D/fm-0.cgd" | cat >piped.cgm
	cmp piped.cgm "$D/model.cgm"
	cg-init "${a[@]}" -d "$D/fm-0.cgd" -o - | cat >dash.cgm
	cmp dash.cgm "$D/model.cgm"
	[ "$(manifest m.cgm .kind)" = model ]
	[ "$(manifest m.cgm .step)" = 0 ]
	[ "$(manifest m.cgm .seed)" = 1 ]
}

@test "cg-init refuses to write a model to a terminal" {
	need_script
	run -1 script -qec "cg-init -a cvae -d '$D/fm-0.cgd' --hidden 8 --layers 1 --latent 2" /dev/null
	assert_output --partial 'cg-init: refusing to write binary data to a terminal'
	[ "${#lines[@]}" -eq 1 ]
}

@test "cg-init: an interrupted write leaves nothing (SIGTERM, SIGINT)" {
	local a=(-a cvae -d "$D/fm-0.cgd" --hidden 1024 --layers 2 --latent 4 -z gzip)
	interrupt_write TERM 143 out.cgm cg-init "${a[@]}" -o out.cgm
	interrupt_write INT 130 out.cgm cg-init "${a[@]}" -o out.cgm
}

@test "cg-init: the same command gives the same bytes; the seed matters" {
	local a=(-a cvae -d "$D/fm-2.cgd" --hidden 16 --layers 2 --latent 3)
	cg-init "${a[@]}" --seed 9 -o a.cgm
	cg-init "${a[@]}" --seed 9 -o b.cgm
	cmp a.cgm b.cgm
	cg-init "${a[@]}" --seed 9 -z gzip -o az.cgm
	cg-init "${a[@]}" --seed 9 -z gzip -o bz.cgm
	cmp az.cgm bz.cgm
	cg-init "${a[@]}" --seed 10 -o c.cgm
	run ! cmp -s a.cgm c.cgm
}

# ========================================================= cg-train-step

@test "cg-train-step --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-train-step --help
	assert_output --partial 'usage: cg-train-step -m MODEL -d SHARD'
	assert_output --partial '--emit WHAT'
	assert_output --partial '--state FILE'
	assert_output --partial '--opt NAME'
	[ -z "$stderr" ]
}

@test "cg-train-step --version" {
	run -0 --separate-stderr cg-train-step --version
	assert_output --regexp '^cg-train-step \(cg\) [0-9]+\.[0-9]+'
}

@test "cg-train-step: a bad option is a usage error on stderr, exit 2" {
	run -2 --separate-stderr cg-train-step --bogus -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" -o g.cgg
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == cg-train-step:*--bogus* ]]
	[[ $stderr == *'usage: cg-train-step'* ]]
	[ ! -e g.cgg ]
}

@test "cg-train-step: bad numbers and names are usage errors, exit 2" {
	local a=(-m "$D/model.cgm" -d "$D/fm-0.cgd" -o g.cgg)
	run -2 --separate-stderr cg-train-step "${a[@]}" --steps 12abc
	[[ ${stderr_lines[0]} == "cg-train-step: --steps: '12abc'"* ]]
	[[ $stderr == *usage:* ]]
	run -2 cg-train-step "${a[@]}" --steps 0
	run -2 cg-train-step "${a[@]}" --batch 0
	run -2 cg-train-step "${a[@]}" --batch 1e3
	run -2 cg-train-step "${a[@]}" --lr abc
	run -2 cg-train-step "${a[@]}" --clip -1
	run -2 cg-train-step "${a[@]}" --seed 12abc
	run -2 cg-train-step "${a[@]}" --threads many
	run -2 cg-train-step "${a[@]}" --emit weights
	run -2 cg-train-step "${a[@]}" --order random
	run -2 cg-train-step "${a[@]}" --opt lion
	run -2 cg-train-step "${a[@]}" --schedule linear
	run -2 --separate-stderr cg-train-step "${a[@]}" --time-limit 0
	[[ ${stderr_lines[0]} == 'cg-train-step: --time-limit: must be positive' ]]
	run -2 cg-train-step "${a[@]}" --time-limit -1
	run -2 cg-train-step "${a[@]}" --time-limit 1s
	run -2 --separate-stderr cg-train-step -d "$D/fm-0.cgd" -o g.cgg
	[[ ${stderr_lines[0]} == 'cg-train-step: no model (-m)' ]]
	run -2 --separate-stderr cg-train-step -m "$D/model.cgm" -o g.cgg
	[[ ${stderr_lines[0]} == 'cg-train-step: no data shard (-d)' ]]
	[ ! -e g.cgg ]
}

@test "cg-train-step: a missing model or shard is one line naming it, exit 1" {
	run -1 --separate-stderr cg-train-step -m nope.cgm -d "$D/fm-0.cgd" -o g.cgg
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: nope.cgm: '* ]]
	run -1 --separate-stderr cg-train-step -m "$D/model.cgm" -d nope.cgd -o g.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: nope.cgd: '* ]]
	no_output g.cgg
}

@test "cg-train-step: a shard whose payload was altered is one line, exit 1, nothing written" {
	# one byte of the payload flipped: only its digest tells, which a
	# thread verifies while the call trains (cg_shard_open_late)
	python3 - "$D/fm-0.cgd" bad.cgd <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    m = t.getmember("payload")
b = bytearray(open(sys.argv[1], "rb").read())
b[m.offset_data + m.size // 2] ^= 1
open(sys.argv[2], "wb").write(b)
EOF
	local want='cg-train-step: bad.cgd: tensor payload: digest mismatch (file truncated or altered)'
	for emit in grad delta model; do
		run -1 --separate-stderr cg-train-step -m "$D/model.cgm" \
			-d bad.cgd --batch 8 --steps 3 --emit $emit -o out.cgm
		assert_equal "$stderr" "$want"
		no_output out.cgm
	done
	run -1 --separate-stderr cg-train-step -m "$D/model.cgm" -d bad.cgd \
		--batch 8 --emit delta --state w.state -o out.cgm
	assert_equal "$stderr" "$want"
	no_output out.cgm
	no_output w.state
	# a stream gets no byte
	run -1 --separate-stderr cg-train-step -m "$D/model.cgm" -d bad.cgd \
		--batch 8 -o -
	assert_equal "$stderr" "$want"
	[ -z "$output" ]
	run -1 --separate-stderr cg-train-step -m "$D/model.cgm" -d - \
		--batch 8 -o out.cgm <bad.cgd
	assert_equal "$stderr" "${want/bad.cgd/(stdin)}"
	no_output out.cgm
}

@test "a model whose config lays out more than its tensors hold is refused before allocating" {
	# hidden 1048576: 6.7 GB of parameters, in a file of 100 KB
	mkdir x
	tar xf "$D/model.cgm" -C x
	jq '.config.hidden = 1048576' x/cg.json >cg.json
	mv cg.json x/cg.json
	# shellcheck disable=SC2046
	tar cf big.cgm -C x cg.json $(jq -r '.tensors[].name' x/cg.json)
	local cap= p
	[ "${CG_SANITIZED:-0}" = 1 ] || cap='ulimit -v 1000000;'
	for p in "cg-train-step -q -d $D/fm-0.cgd -o g.cgg" \
		"cg-eval -d $D/fm-0.cgd" "cg-sample -c 1 -o s.pgm"; do
		run -1 --separate-stderr sh -c "$cap exec $p -m big.cgm"
		[ -z "$output" ]
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr =~ ^cg-[a-z-]+:\ big\.cgm:\ config:\ [0-9]+\ parameters,\ more\ than\ the\ file.s\ tensors\ hold\ \([0-9]+\)$ ]] ||
			fail "$p: $stderr"
	done
	no_output g.cgg
	no_output s.pgm
}

@test "cg-train-step: model or shard from stdin, output to a pipe" {
	local a=(--steps 2 --batch 8)
	cg-train-step -m - -d "$D/fm-0.cgd" "${a[@]}" -o g.cgg <"$D/model.cgm"
	cmp g.cgg "$D/g0.cgg"
	cg-train-step -m "$D/model.cgm" -d - "${a[@]}" -o g.cgg <"$D/fm-0.cgd"
	cmp g.cgg "$D/g0.cgg"
	cg-train-step -m "$D/model.cgm" -d "$D/fm-0.cgd" "${a[@]}" | cat >p.cgg
	cmp p.cgg "$D/g0.cgg"
	cg-train-step -m "$D/model.cgm" -d "$D/fm-0.cgd" "${a[@]}" -o - |
		cat >p.cgg
	cmp p.cgg "$D/g0.cgg"
	run -2 --separate-stderr cg-train-step -m - -d - <"$D/model.cgm"
	[[ ${stderr_lines[0]} == *'cannot both be standard input'* ]]
	# a state is read and written back: no stream will do
	run -2 --separate-stderr cg-train-step -m "$D/model.cgm" \
		-d "$D/fm-0.cgd" --emit delta --state -
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == "cg-train-step: --state: '-' is not a file" ]]
}

@test "cg-train-step refuses to write to a terminal" {
	need_script
	run -1 script -qec "cg-train-step -q -m '$D/model.cgm' -d '$D/fm-0.cgd' --batch 4" /dev/null
	assert_output --partial 'cg-train-step: refusing to write binary data to a terminal'
	[ "${#lines[@]}" -eq 1 ]
}

@test "cg-train-step: a killed training run leaves nothing (SIGTERM, SIGINT)" {
	local a=(-q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit model --steps 100000)
	start cg-train-step "${a[@]}" -o out.cgm
	running cg-train-step
	kill -TERM "$PID"
	stopped TERM 143
	no_output out.cgm
	start cg-train-step "${a[@]}" -o out.cgm
	running cg-train-step
	kill -INT "$PID"
	stopped INT 130
	no_output out.cgm
	[ -z "$(ls -A | grep -v '^bg\.')" ]
}

@test "cg-train-step: a write interrupted half-way leaves nothing" {
	big
	interrupt_write TERM 143 out.cgm cg-train-step -q -m "$D/big.cgm" \
		-d "$D/fm-0.cgd" --emit model --batch 2 -z gzip -o out.cgm
	interrupt_write INT 130 out.cgm cg-train-step -q -m "$D/big.cgm" \
		-d "$D/fm-0.cgd" --emit model --batch 2 -z gzip -o out.cgm
}

@test "cg-train-step: the same command gives the same bytes (grad, delta, model)" {
	local e a=(-m "$D/model.cgm" -d "$D/fm-1.cgd" --steps 3 --batch 8 --seed 5)
	for e in grad delta model; do
		cg-train-step -q "${a[@]}" --emit $e -o a.$e
		cg-train-step -q "${a[@]}" --emit $e -o b.$e
		cmp a.$e b.$e
		cg-train-step -q "${a[@]}" --emit $e --threads 1 -o c.$e
		cmp a.$e c.$e
		# with a fresh state each time too (a state names its
		# output's path: the same names, in two directories)
		mkdir -p sa sb
		(cd sa && cg-train-step -q "${a[@]}" --emit $e --state s.$e -o out.$e)
		(cd sb && cg-train-step -q "${a[@]}" --emit $e --state s.$e -o out.$e)
		cmp sa/out.$e sb/out.$e
		cmp sa/s.$e sb/s.$e
	done
	[ "$(manifest a.grad .kind)" = grad ]
	[ "$(manifest a.delta .kind)" = delta ]
	[ "$(manifest a.model .kind)" = model ]
	# another seed, another result
	cg-train-step -q "${a[@]}" --seed 6 -o s6.grad
	run ! cmp -s a.grad s6.grad
}

@test "cg-train-step: a grad or delta names its base model and its weight" {
	run -0 manifest "$D/g0.cgg" '[.kind, .arch, .base.step, .samples, .inputs] | @tsv'
	assert_output $'grad\tcvae\t0\t16\t1'
	run -0 manifest "$D/d0.cgg" '[.kind, .base.step, .samples] | @tsv'
	assert_output $'delta\t0\t16'
	[ "$(manifest "$D/g0.cgg" .base.sha256)" = "$(manifest "$D/d3.cgg" .base.sha256)" ]
	[ "$(manifest "$D/g0.cgg" .base.sha256)" != "$(manifest "$D/other.cgg" .base.sha256)" ]
	[[ $(manifest "$D/g0.cgg" .loss) =~ ^[0-9.]+(e[-+]?[0-9]+)?$ ]]
	# the model's tensors, in the model's order
	diff <(manifest "$D/g0.cgg" '.tensors[] | [.name, .dtype, (.shape | tostring)] | @tsv') \
		<(manifest "$D/model.cgm" '.tensors[] | [.name, .dtype, (.shape | tostring)] | @tsv')
}

@test "cg-train-step --state keeps a cursor: calls with a state move on" {
	local a=(-q -m "$D/model.cgm" -d "$D/fm-2.cgd" --steps 2 --batch 8)
	# without a state the same call gives the same gradient
	cg-train-step "${a[@]}" -o n1.cgg
	cg-train-step "${a[@]}" -o n2.cgg
	cmp n1.cgg n2.cgg
	# with one, the second call reads the next examples
	cg-train-step "${a[@]}" --state st.cgs -o s1.cgg
	[ "$(manifest st.cgs .kind)" = state ]
	[ "$(u64 st.cgs cursor)" = 16 ]
	cg-train-step "${a[@]}" --state st.cgs -o s2.cgg
	[ "$(u64 st.cgs cursor)" = 32 ]
	cmp s1.cgg n1.cgg
	run ! cmp -s s1.cgg s2.cgg
	run ! cmp -s n2.cgg s2.cgg
	[ "$(manifest s1.cgg .loss)" != "$(manifest s2.cgg .loss)" ]
	# a grad keeps no optimizer state
	[ "$(manifest st.cgs '.tensors[].name')" = cursor ]
}

@test "cg-train-step --state keeps the inner optimizer of a delta" {
	local a=(-q -m "$D/model.cgm" -d "$D/fm-3.cgd" --steps 3 --batch 8 --emit delta)
	cg-train-step "${a[@]}" --state st.cgs -o d1.cgg
	[ "$(manifest st.cgs .kind)" = state ]
	[ "$(u64 st.cgs cursor) $(u64 st.cgs opt.t)" = "24 3" ]
	run -0 manifest st.cgs '[.tensors[].name] | join(" ")'
	assert_output 'cursor opt.t opt.m opt.v'
	cg-train-step "${a[@]}" --state st.cgs -o d2.cgg
	[ "$(u64 st.cgs cursor) $(u64 st.cgs opt.t)" = "48 6" ]
	run ! cmp -s d1.cgg d2.cgg
	# a state file of the wrong kind is refused, and nothing written
	cp "$D/g0.cgg" notstate.cgg
	run -1 --separate-stderr cg-train-step "${a[@]}" --state notstate.cgg -o d3.cgg
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-train-step: notstate.cgg: a grad file, not a state file' ]]
	no_output d3.cgg
	cmp notstate.cgg "$D/g0.cgg"
}

@test "cg-train-step: a diverged run is one line, exit 1, nothing written" {
	# SGD at a learning rate of 10^4 sends the loss to NaN at once (a
	# grad call takes no step, so it cannot diverge)
	local a=(-q -m "$D/model.cgm" -d "$D/fm-2.cgd" --steps 10 --batch 8 --opt sgd --lr 1e4)
	for e in model delta; do
		cp "$D/model.cgm" m.cgm
		run -1 --separate-stderr cg-train-step "${a[@]}" --emit $e \
			--state st.cgs -o out
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr =~ ^cg-train-step:\ .*fm-2.cgd:\ step\ [0-9]+\ of\ 10:\ the\ loss\ is\ (NaN|infinite):\ training\ diverged ]]
		no_output out
		no_output st.cgs
	done
	# a model written over in place is left as it was
	run -1 cg-train-step "${a[@]}" -m m.cgm --emit model -o m.cgm
	cmp m.cgm "$D/model.cgm"
	# the same call at a sane rate goes through
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-2.cgd" --steps 10 --batch 8 --opt sgd --lr 1e-2 --emit model -o ok.cgm
}

@test "cg-train-step and cg-apply: a step past the floats at a finite loss is refused, the state as it was" {
	# weights of 1e30 give a finite loss, and one SGD step at 10^6 sends
	# dec.0.w past the largest float: the loss check cannot see it
	mkcg -x huge:dec.out.w "$D/model.cgm" huge.cgm
	local a=(-q -m huge.cgm -d "$D/fm-2.cgd" --steps 1 --batch 8 --opt sgd)
	# (which element overflows first may differ with the kernels)
	local want='tensor [a-z0-9.]+: element [0-9]+ is (-?inf|nan) \(the model diverged\? lower --lr\)$'
	# a state written by a sane call, which the refused one must leave
	cg-train-step "${a[@]}" --lr 1e-3 --emit delta --state st.cgs -o d.cgg
	cp st.cgs st.was
	cp d.cgg d.was
	for e in delta model; do
		run -1 --separate-stderr cg-train-step "${a[@]}" --lr 1e6 \
			--emit $e -o out
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr =~ ^cg-train-step:\ the\ $e\ is\ not\ finite:\ $want ]]
		no_output out
	done
	run -1 --separate-stderr cg-train-step "${a[@]}" --lr 1e6 --emit delta \
		--codec q8 --state st.cgs -o d.cgg
	[[ $stderr =~ ^cg-train-step:\ the\ delta\ is\ not\ finite:\ $want ]]
	cmp st.cgs st.was
	cmp d.cgg d.was
	run -0 ls -A
	refute_output --partial '.st.cgs.'
	refute_output --partial '.d.cgg.'
	# a grad takes no step: finite, written
	cg-train-step "${a[@]}" --lr 1e6 -o g.cgg
	cg-inspect --verify -q g.cgg
	# cg-apply takes the step instead: refused there, nothing written,
	# with --change as without
	local w='^cg-apply: the new model is not finite: tensor [a-z0-9.]+: element [0-9]+ is (-?inf|nan) \(the update or the learning rate too large\?\)$'
	run -1 --separate-stderr cg-apply -m huge.cgm --opt sgd --lr 1e6 g.cgg \
		-o new.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr =~ $w ]]
	no_output new.cgm
	run -1 --separate-stderr cg-apply -m huge.cgm --opt sgd --lr 1e6 g.cgg \
		--codec q8 --change ch.cgu -o new.cgm
	[[ $stderr =~ $w ]]
	no_output new.cgm
	no_output ch.cgu
	# the same step at a sane rate is taken
	cg-apply -m huge.cgm --opt sgd --lr 1e-3 g.cgg -o new.cgm
}

@test "cg-train-step --emit model adds K to step and records samples" {
	local a=(-q -d "$D/fm-0.cgd" --emit model --batch 8)
	cg-train-step "${a[@]}" -m "$D/model.cgm" --steps 5 -o m1.cgm
	run -0 manifest m1.cgm '[.kind, .step, .samples, .opt_t] | @tsv'
	assert_output $'model\t5\t40\t5'
	[[ $(manifest m1.cgm .loss) =~ ^[0-9.]+(e[-+]?[0-9]+)?$ ]]
	tar tf m1.cgm | grep -qx opt.m
	tar tf m1.cgm | grep -qx opt.v
	# in place, continuing
	cp m1.cgm m.cgm
	cg-train-step "${a[@]}" -m m.cgm --steps 3 -o m.cgm
	run -0 manifest m.cgm '[.step, .samples, .opt_t] | @tsv'
	assert_output $'8\t64\t8'
	# the weights moved
	run ! cmp -s <(tar xOf "$D/model.cgm" dec.out.w) <(tar xOf m1.cgm dec.out.w)
}

@test "cg-train-step --time-limit cuts a long call short and emits what it did" {
	local a=(-q -d "$D/fm-0.cgd" --batch 8 --steps 1000000 --time-limit 0.3)
	local n steps samples
	# a delta with its state: the steps done, in the manifest's samples,
	# the log and the state's cursor
	run -0 cg-train-step "${a[@]}" -m "$D/model.cgm" --emit delta \
		--state s --log log.jsonl -o d.cgg
	run -0 cg-inspect --verify d.cgg s
	read -r steps samples < <(jq -r '[.steps, .samples] | @tsv' log.jsonl)
	echo "$steps steps of 1000000 in 0.3 s"
	[ "$steps" -ge 1 ] && [ "$steps" -lt 1000000 ]
	[ "$samples" -eq $((8 * steps)) ]
	[ "$(manifest d.cgg .samples)" -eq "$samples" ]
	[ "$(manifest d.cgg .weight)" -eq "$samples" ]
	[ "$(cg-inspect --tensor cursor s)" -eq "$samples" ]
	# a gradient is the mean over the micro-batches done
	run -0 cg-train-step "${a[@]}" -m "$D/model.cgm" -o g.cgg
	run -0 cg-inspect --verify g.cgg
	n=$(manifest g.cgg .samples)
	[ "$n" -ge 8 ] && [ "$n" -lt 8000000 ] && [ $((n % 8)) -eq 0 ]
	# a model: its step counts the steps done, and it is the model of
	# a call asked for that many steps
	run -0 cg-train-step "${a[@]}" -m "$D/model.cgm" --emit model -o m.cgm
	run -0 cg-inspect --verify m.cgm
	n=$(manifest m.cgm .step)
	[ "$n" -ge 1 ] && [ "$n" -lt 1000000 ]
	[ "$(manifest m.cgm .samples)" -eq $((8 * n)) ]
	cg-train-step -q -d "$D/fm-0.cgd" --batch 8 --steps "$n" \
		-m "$D/model.cgm" --emit model -o m2.cgm
	cmp m.cgm m2.cgm
	# a limit not reached changes nothing
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --steps 2 \
		--batch 8 --time-limit 1000 -o g2.cgg
	cmp g2.cgg "$D/g0.cgg"
}

@test "cg-train-step: a DiLoCo round of four workers with states" {
	local w
	for w in 0 1 2 3; do
		cg-train-step -q -m "$D/model.cgm" -d "$D/fm-$w.cgd" \
			--emit delta --steps 3 --batch 8 --state w$w.cgs \
			-o d$w.cgg
		[ "$(manifest w$w.cgs .kind)" = state ]
	done
	cg-reduce d*.cgg | cg-apply --outer nesterov -m "$D/model.cgm" -o m1.cgm
	run -0 manifest m1.cgm '[.kind, .step, .samples] | @tsv'
	assert_output $'model\t1\t96'
	tar tf m1.cgm | grep -qx outer.mom
	# round two: the workers start from the new model and their states
	for w in 0 1 2 3; do
		cg-train-step -q -m m1.cgm -d "$D/fm-$w.cgd" --emit delta \
			--steps 3 --batch 8 --state w$w.cgs -o e$w.cgg
		[ "$(manifest e$w.cgg .base.step)" = 1 ]
		[ "$(u64 w$w.cgs cursor) $(u64 w$w.cgs opt.t)" = "48 6" ]
	done
	cg-reduce e*.cgg | cg-apply --outer nesterov -m m1.cgm -o m2.cgm
	[ "$(manifest m2.cgm .step)" = 2 ]
	# the round's deltas do not fit the new model
	run -1 --separate-stderr cg-apply --outer nesterov -m m2.cgm d0.cgg -o x.cgm
	[[ $stderr == *'another model'* ]]
}

# ============================================================ cg-reduce

@test "cg-reduce --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-reduce --help
	assert_output --partial 'usage: cg-reduce [options] [FILE...]'
	assert_output --partial '--op NAME'
	[ -z "$stderr" ]
}

@test "cg-reduce --version" {
	run -0 --separate-stderr cg-reduce --version
	assert_output --regexp '^cg-reduce \(cg\) [0-9]+\.[0-9]+'
}

@test "cg-reduce: a bad option or number is a usage error, exit 2" {
	run -2 --separate-stderr cg-reduce --bogus "$D/g0.cgg" -o r.cgg
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == cg-reduce:*--bogus* ]]
	[[ $stderr == *'usage: cg-reduce'* ]]
	run -2 --separate-stderr cg-reduce --threads 12abc "$D/g0.cgg" -o r.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: --threads: '12abc'"* ]]
	run -2 cg-reduce --op mode "$D/g0.cgg" -o r.cgg
	run -2 cg-reduce -z rar "$D/g0.cgg" -o r.cgg
	[ ! -e r.cgg ]
}

@test "cg-reduce: a missing input is one line naming it, exit 1" {
	run -1 --separate-stderr cg-reduce "$D/g0.cgg" nope.cgg -o r.cgg
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-reduce: nope.cgg: '* ]]
	no_output r.cgg
}

@test "cg-reduce: inputs from stdin, output to a pipe" {
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" -o flat.cgg
	cg-reduce - "$D/g1.cgg" -o r.cgg <"$D/g0.cgg"
	cmp r.cgg flat.cgg
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" | cat >p.cgg
	cmp p.cgg flat.cgg
	cg-reduce -o - "$D/g0.cgg" "$D/g1.cgg" | cat >p.cgg
	cmp p.cgg flat.cgg
	# no file at all: standard input
	cg-reduce <"$D/g2.cgg" >one.cgg
	run -0 manifest one.cgg '[.kind, .samples, .inputs, .reduce] | @tsv'
	assert_output $'grad\t16\t1\tmean'
	# a pattern the shell did not expand
	cg-reduce "$D/g[01].cgg" -o globbed.cgg
	cmp globbed.cgg flat.cgg
	run -1 --separate-stderr cg-reduce - - <"$D/g0.cgg"
	[[ $stderr == *'standard input named twice'* ]]
}

@test "-o to a FIFO or a device writes into it; -o a directory fails" {
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" -o flat.cgg
	mkfifo fifo
	cat fifo >got.cgg &
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" -o fifo
	wait
	[ -p fifo ]
	cmp got.cgg flat.cgg
	cat fifo >got2.cgg &
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --batch 16 -o fifo
	wait
	[ -p fifo ]
	run -0 cg-inspect --verify -q got2.cgg
	# a device stays a device
	cg-reduce "$D/g0.cgg" -o /dev/null
	[ -c /dev/null ]
	run -1 --separate-stderr cg-reduce "$D/g0.cgg" -o .
	[[ $stderr == *'is a directory'* ]]
}

@test "cg-reduce refuses to write to a terminal" {
	need_script
	run -1 script -qec "cg-reduce '$D/g0.cgg' '$D/g1.cgg'" /dev/null
	assert_output --partial 'cg-reduce: refusing to write binary data to a terminal'
	[ "${#lines[@]}" -eq 1 ]
}

@test "cg-reduce: an interrupted run leaves nothing" {
	# half an input on a pipe that stays open: cg-reduce cannot finish
	mkfifo in
	STDIN=in start cg-reduce "$D/g0.cgg" - -o out.cgg
	exec 4>in
	head -c 3000 "$D/g1.cgg" >&4
	kill -TERM "$PID"
	exec 4>&-
	stopped TERM 143
	no_output out.cgg
	# and a big write, interrupted half-way
	big
	interrupt_write TERM 143 out.cgg cg-reduce -z gzip -o out.cgg "$D/big.cgg"
	interrupt_write INT 130 out.cgg cg-reduce -z gzip -o out.cgg "$D/big.cgg"
}

@test "cg-reduce: the same inputs give the same bytes" {
	cg-reduce "$D"/g?.cgg -o a.cgg
	cg-reduce "$D"/g?.cgg -o b.cgg
	cmp a.cgg b.cgg
	cg-reduce --threads 1 "$D"/g?.cgg -o c.cgg
	cmp a.cgg c.cgg
	cg-reduce --op sum "$D"/d?.cgg -o s1.cgg
	cg-reduce --op sum "$D"/d?.cgg -o s2.cgg
	cmp s1.cgg s2.cgg
}

@test "cg-reduce: a weighted mean, with samples, inputs and loss" {
	cg-reduce "$D"/g?.cgg -o r.cgg
	run -0 manifest r.cgg '[.kind, .samples, .inputs, .reduce, .base.step] | @tsv'
	assert_output $'grad\t64\t4\tmean\t0'
	[ "$(manifest r.cgg .base.sha256)" = "$(manifest "$D/g0.cgg" .base.sha256)" ]
	# equal weights: the loss is the plain mean of the four
	local want got
	want=$(for g in "$D"/g?.cgg; do manifest "$g" .loss; done |
		awk '{ s += $1 } END { printf "%.17g", s / NR }')
	got=$(manifest r.cgg .loss)
	awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d
		exit !(d <= 1e-9 * (a < 0 ? -a : a)) }'
	# a sum counts the same samples
	cg-reduce --op sum "$D"/g0.cgg "$D"/g1.cgg -o s.cgg
	run -0 manifest s.cgg '[.samples, .inputs, .reduce] | @tsv'
	assert_output $'32\t2\tsum'
}

@test "cg-reduce refuses mixed kinds and mixed bases, each on its own line" {
	run -1 --separate-stderr cg-reduce "$D/g0.cgg" "$D/d1.cgg" "$D/g2.cgg" \
		"$D/other.cgg" -o r.cgg
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 2 ]
	[[ ${stderr_lines[0]} == "cg-reduce: $D/d1.cgg: a delta among grads" ]]
	[[ ${stderr_lines[1]} == "cg-reduce: $D/other.cgg: computed from another model"* ]]
	no_output r.cgg
	# one bad input is enough to write nothing
	run -1 --separate-stderr cg-reduce -o r.cgg "$D/d0.cgg" "$D/g1.cgg"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-reduce: $D/g1.cgg: a grad among deltas" ]]
	no_output r.cgg
	# a model is not an update
	run -1 --separate-stderr cg-reduce -o r.cgg "$D/g0.cgg" "$D/model.cgm"
	[[ $stderr == "cg-reduce: $D/model.cgm: a model file, not a grad or delta" ]]
	no_output r.cgg
}

@test "cg-reduce a b | cg-reduce - c equals cg-reduce a b c" {
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" "$D/g2.cgg" -o flat.cgg
	cg-reduce "$D/g0.cgg" "$D/g1.cgg" | cg-reduce - "$D/g2.cgg" -o tree.cgg
	run -0 manifest tree.cgg '[.samples, .inputs] | @tsv'
	assert_output $'48\t3'
	run -0 close_tensors tree.cgg flat.cgg 1e-6
	echo "# grad tree: $output" >&3
	# a deeper tree of deltas, with a sum
	cg-reduce "$D"/d?.cgg -o dflat.cgg
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" |
		cg-reduce - "$D/d2.cgg" |
		cg-reduce - "$D/d3.cgg" -o dtree.cgg
	run -0 close_tensors dtree.cgg dflat.cgg 1e-6
	echo "# delta tree: $output" >&3
	[ "$(manifest dtree.cgg .inputs)" = 4 ]
	cg-reduce --op sum "$D"/d?.cgg -o sflat.cgg
	cg-reduce --op sum "$D/d0.cgg" "$D/d1.cgg" |
		cg-reduce --op sum - "$D/d2.cgg" "$D/d3.cgg" -o stree.cgg
	run -0 close_tensors stree.cgg sflat.cgg 1e-6
	echo "# sum tree: $output" >&3
}

# ============================================================= cg-apply

@test "cg-apply --help goes to stdout, exit 0" {
	run -0 --separate-stderr cg-apply --help
	assert_output --partial 'usage: cg-apply -m MODEL'
	assert_output --partial '--outer NAME'
	assert_output --partial '--opt NAME'
	[ -z "$stderr" ]
}

@test "cg-apply --version" {
	run -0 --separate-stderr cg-apply --version
	assert_output --regexp '^cg-apply \(cg\) [0-9]+\.[0-9]+'
}

@test "cg-apply: a bad option is a usage error on stderr, exit 2" {
	run -2 --separate-stderr cg-apply --bogus -m "$D/model.cgm" "$D/g0.cgg" -o m.cgm
	[ -z "$output" ]
	[[ ${stderr_lines[0]} == cg-apply:*--bogus* ]]
	[[ $stderr == *'usage: cg-apply'* ]]
	[ ! -e m.cgm ]
}

@test "cg-apply: bad numbers and names are usage errors, exit 2" {
	local a=(-m "$D/model.cgm" -o m.cgm "$D/g0.cgg")
	run -2 --separate-stderr cg-apply --lr 12abc "${a[@]}"
	[[ ${stderr_lines[0]} == "cg-apply: --lr: '12abc'"* ]]
	[[ $stderr == *usage:* ]]
	run -2 cg-apply --outer-lr 12abc "${a[@]}"
	run -2 cg-apply --outer-momentum 2 "${a[@]}"
	run -2 cg-apply --clip x "${a[@]}"
	run -2 cg-apply --warmup -3 "${a[@]}"
	run -2 cg-apply --threads 12abc "${a[@]}"
	run -2 cg-apply --outer lookahead "${a[@]}"
	run -2 cg-apply --opt adagrad "${a[@]}"
	run -2 --separate-stderr cg-apply -o m.cgm "$D/g0.cgg"
	[[ ${stderr_lines[0]} == 'cg-apply: no model (-m)' ]]
	run -2 --separate-stderr cg-apply -m "$D/model.cgm" "$D/g0.cgg" "$D/g1.cgg"
	[[ ${stderr_lines[0]} == *'more than one update'* ]]
	run -2 cg-apply -m - - <"$D/g0.cgg"
	[ ! -e m.cgm ]
}

@test "cg-apply: a missing model or update is one line naming it, exit 1" {
	run -1 --separate-stderr cg-apply -m nope.cgm "$D/g0.cgg" -o m.cgm
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-apply: nope.cgm: '* ]]
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" nope.cgg -o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-apply: nope.cgg: '* ]]
	no_output m.cgm
}

@test "cg-apply: update or model from stdin, the model to a pipe" {
	cg-apply -m "$D/model.cgm" "$D/g0.cgg" -o want.cgm
	cg-apply -m "$D/model.cgm" -o m.cgm <"$D/g0.cgg"
	cmp m.cgm want.cgm
	cg-apply -m "$D/model.cgm" -o m.cgm - <"$D/g0.cgg"
	cmp m.cgm want.cgm
	cg-apply -m - "$D/g0.cgg" -o m.cgm <"$D/model.cgm"
	cmp m.cgm want.cgm
	cg-apply -m "$D/model.cgm" "$D/g0.cgg" | cat >p.cgm
	cmp p.cgm want.cgm
	cg-reduce "$D/g0.cgg" | cg-apply -m "$D/model.cgm" -o - | cat >pp.cgm
	cmp pp.cgm want.cgm
}

@test "cg-apply refuses to write a model to a terminal" {
	need_script
	run -1 script -qec "cg-apply -m '$D/model.cgm' '$D/g0.cgg'" /dev/null
	assert_output --partial 'cg-apply: refusing to write binary data to a terminal'
	[ "${#lines[@]}" -eq 1 ]
}

@test "cg-apply: an interrupted run leaves nothing, the old model intact" {
	cp "$D/model.cgm" m.cgm
	# the update arrives half: cg-apply cannot finish
	mkfifo in
	STDIN=in start cg-apply -m m.cgm -o m.cgm
	exec 4>in
	head -c 3000 "$D/g0.cgg" >&4
	kill -TERM "$PID"
	exec 4>&-
	stopped TERM 143
	cmp m.cgm "$D/model.cgm"
	[ -z "$(ls -A | grep -F .m.cgm.)" ]
	# a big model, interrupted while it is written
	big
	interrupt_write TERM 143 out.cgm cg-apply -z gzip -m "$D/big.cgm" \
		"$D/big.cgg" -o out.cgm
	interrupt_write INT 130 out.cgm cg-apply -z gzip -m "$D/big.cgm" \
		"$D/big.cgg" -o out.cgm
}

@test "cg-apply: the same inputs give the same bytes" {
	local o
	for o in "" "--opt sgd" "--opt momentum" "--opt adamw --warmup 3"; do
		# shellcheck disable=SC2086
		cg-apply $o -m "$D/model.cgm" "$D/g0.cgg" -o a.cgm
		# shellcheck disable=SC2086
		cg-apply $o -m "$D/model.cgm" "$D/g0.cgg" -o b.cgm
		cmp a.cgm b.cgm
	done
	for o in avg nesterov; do
		cg-reduce "$D"/d?.cgg | cg-apply --outer $o -m "$D/model.cgm" -o a.cgm
		cg-reduce "$D"/d?.cgg | cg-apply --outer $o -m "$D/model.cgm" -o b.cgm
		cmp a.cgm b.cgm
	done
}

@test "cg-apply refuses an update computed from another model" {
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" "$D/other.cgg" -o m.cgm
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-apply: $D/other.cgg: computed from another model"* ]]
	no_output m.cgm
	run -1 --separate-stderr cg-apply -m "$D/other.cgm" "$D/g0.cgg" -o m.cgm
	[[ $stderr == *'another model'* ]]
	no_output m.cgm
	# nor anything that is not an update
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" "$D/fm-0.cgd" -o m.cgm
	[[ $stderr == "cg-apply: $D/fm-0.cgd: a data file, not a grad or delta" ]]
	no_output m.cgm
}

@test "cg-apply: a gradient steps the optimizer, a delta is added" {
	cg-apply -m "$D/model.cgm" "$D/g0.cgg" -o a.cgm
	run -0 manifest a.cgm '[.kind, .step, .samples, .opt_t] | @tsv'
	assert_output $'model\t1\t16\t1'
	[ "$(manifest a.cgm .loss)" = "$(manifest "$D/g0.cgg" .loss)" ]
	run -0 bash -c "tar tf a.cgm | grep '^opt\.' | tr '\n' ' '"
	assert_output 'opt.m opt.v '
	# a second round continues the optimizer
	cg-train-step -q -m a.cgm -d "$D/fm-1.cgd" --batch 8 -o g.cgg
	cg-apply -m a.cgm g.cgg -o a.cgm
	run -0 manifest a.cgm '[.step, .samples, .opt_t] | @tsv'
	assert_output $'2\t24\t2'
	# model averaging adds the mean delta: the weights move, no optimizer
	cg-reduce "$D"/d?.cgg | cg-apply -m "$D/model.cgm" -o avg.cgm
	run -0 manifest avg.cgm '[.step, .samples] | @tsv'
	assert_output $'1\t64'
	run ! bash -c "tar tf avg.cgm | grep -q -e '^opt\.' -e '^outer\.'"
	run ! cmp -s <(tar xOf avg.cgm dec.out.w) <(tar xOf "$D/model.cgm" dec.out.w)
}

@test "cg-apply: plain SGD keeps its step count for the schedule" {
	# SGD has no moments, but a warm-up must still see step 1, 2, 3
	cp "$D/model.cgm" m.cgm
	local n
	# (not i: bats' run uses that name)
	for n in 1 2 3; do
		cg-train-step -q -m m.cgm -d "$D/fm-0.cgd" --batch 8 -o g.cgg
		cg-apply --opt sgd --warmup 10 -m m.cgm g.cgg -o m.cgm
		run -0 manifest m.cgm '[.step, .opt_t] | @tsv'
		assert_output "$n"$'\t'"$n"
	done
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-0.cgd" --emit model \
		--opt sgd --steps 2 --batch 8 -o t.cgm
	cg-train-step -q -m t.cgm -d "$D/fm-0.cgd" --emit model \
		--opt sgd --steps 2 --batch 8 -o t.cgm
	run -0 manifest t.cgm '[.step, .opt_t] | @tsv'
	assert_output $'4\t4'
}
