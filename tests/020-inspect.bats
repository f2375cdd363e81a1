#!/usr/bin/env bats
# 020-inspect.bats - cg-inspect: the table, --json, --verify and --tensor.
#
# Files come from mkcg (tests/unit/mkcg.c), whose tensors hold values
# chosen to be checked by hand: enc.0.w is (i - 8) / 4 for i < 32, q4 is
# -8..7 then 7..-8, odd is nan, inf, -inf, 1; its model is of an arch
# "demo" no build has, so --verify checks it as a cg file only.  The
# committed fixture tiny.cgm is mkcg's model output ("mkcg
# tests/fixtures/tiny.cgm" remakes it), kept to catch a reader that stops
# understanding files already written and a writer whose bytes drift.

bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	mkcg m.cgm
	mkcg -k data d.cgd
	export LC_ALL=C
}

# ----------------------------------------------------------- conventions

@test "--help prints the usage to stdout and exits 0" {
	run -0 --separate-stderr cg-inspect --help
	assert_line --index 0 --partial 'usage: cg-inspect'
	assert_output --partial '--verify'
	assert_output --partial '--tensor NAME'
	assert_equal "$stderr" ''
}

@test "--version names the program and the package" {
	run -0 cg-inspect --version
	assert_output 'cg-inspect (cg) 0.1.0'
	run -0 cg-inspect -V
	assert_output 'cg-inspect (cg) 0.1.0'
}

@test "a bad option is a usage error: exit 2, synopsis on stderr" {
	run -2 --separate-stderr cg-inspect --bogus m.cgm
	assert_output ''
	assert_equal "${stderr_lines[0]}" \
		"cg-inspect: unknown option '--bogus'"
	assert_equal "${stderr_lines[1]%% *}" 'usage:'
	run -2 --separate-stderr cg-inspect -qZ m.cgm
	assert_equal "${stderr_lines[0]}" "cg-inspect: unknown option '-Z'"
	run -2 --separate-stderr cg-inspect --json=3 m.cgm
	assert_equal "${stderr_lines[0]}" \
		"cg-inspect: option '--json' takes no argument"
	run -2 --separate-stderr cg-inspect --tensor
	assert_equal "${stderr_lines[0]}" \
		"cg-inspect: option '--tensor' needs an argument"
}

@test "conflicting options are usage errors, each with its own message" {
	run -2 --separate-stderr cg-inspect --json --verify m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: --json and --verify cannot be combined'
	run -2 --separate-stderr cg-inspect --tensor enc.0.w --json m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: --tensor cannot be combined with --json'
	run -2 --separate-stderr cg-inspect --rows m.cgm
	assert_equal "${stderr_lines[0]}" 'cg-inspect: --rows needs --tensor'
	run -2 --separate-stderr cg-inspect -t enc.0.w m.cgm m.cgm
	assert_equal "${stderr_lines[0]}" 'cg-inspect: --tensor reads one file'
	run -2 --separate-stderr cg-inspect - m.cgm - <m.cgm
	assert_equal "${stderr_lines[0]}" \
		'cg-inspect: standard input named twice'
}

@test "a missing file fails with one line naming it" {
	run -1 --separate-stderr cg-inspect nope.cgm
	assert_output ''
	assert_equal "$stderr" \
		'cg-inspect: nope.cgm: No such file or directory'
	run -1 --separate-stderr cg-inspect --verify nope.cgm
	assert_equal "$stderr" \
		'cg-inspect: nope.cgm: No such file or directory'
}

@test "with several files each failure is reported, the rest still shown" {
	run -1 --separate-stderr cg-inspect --verify m.cgm nope.cgm d.cgd
	assert_equal "$output" "$(printf 'm.cgm: OK\nd.cgd: OK')"
	assert_equal "$stderr" \
		'cg-inspect: nope.cgm: No such file or directory'
	run -1 --separate-stderr cg-inspect --json nope.cgm m.cgm
	assert_equal "$(jq -r .path <<<"$output")" m.cgm
}

@test "no file and - both read standard input, plain or compressed" {
	run -0 cg-inspect <m.cgm
	assert_line 'file:       (stdin)'
	assert_line 'arch:       demo'
	run -0 cg-inspect - <m.cgm
	assert_line 'file:       (stdin)'
	mkcg z.cgm gzip
	run -0 cg-inspect --verify - <z.cgm
	assert_output '(stdin): OK'
	mkcg y.cgm zstd
	run -0 cg-inspect --verify <y.cgm
	assert_output '(stdin): OK'
}

@test "standard input from a terminal is refused, not waited for" {
	script -qec true /dev/null >/dev/null 2>&1 ||
		skip 'script(1) cannot make a pseudo-terminal here'
	run -0 script -qec 'cg-inspect; echo "status $?"' /dev/null
	assert_output --partial 'cg-inspect: standard input is a terminal'
	assert_output --partial 'status 2'
}

@test "a write error on stdout is a failure" {
	[ -w /dev/full ] || skip '/dev/full is missing'
	run -1 --separate-stderr bash -c 'cg-inspect m.cgm >/dev/full'
	assert_equal "$stderr" 'cg-inspect: standard output: write error'
}

# ----------------------------------------------------------------- table

@test "the table shows the manifest and one row per tensor" {
	run -0 --separate-stderr cg-inspect m.cgm
	assert_equal "$stderr" ''
	assert_line 'file:       m.cgm'
	assert_line 'kind:       model'
	assert_line 'format:     cg/1'
	assert_line 'config:     {"in":32,"hidden":8,"latent":4}'
	assert_line 'step:       1200'
	assert_line 'seed:       42'
	assert_line 'samples:    64'
	assert_line 'loss:       0.5'
	assert_line 'tensors:    14, 354 B'
	assert_line --regexp '^NAME +DTYPE +SHAPE +SIZE +MIN +MAX +MEAN +STD +ZERO% +HISTOGRAM$'
	assert_line --regexp '^enc\.0\.w +f32 +4x8 +128 B +-2 +5\.75 +1\.875 +2\.308 +3\.1  @{16}$'
	assert_line --regexp '^enc\.0\.b +f32 +8 +32 B +0 +0 +0 +0 +100\.0  @ {15}$'
	assert_line --regexp '^q4 +q4_0 +32 +18 B +-8 +7 +-0\.5 '
	assert_line --regexp '^scalar +f32 +scalar +4 B +3\.5 '
	assert_line --regexp '^odd +f32 +4 .* nan 1 inf 2$'
	assert_line --regexp '^empty +f32 +0 +0 B +- +- +- +- +-'
}

@test "the histogram uses block characters on a UTF-8 terminal" {
	LC_ALL=C.UTF-8 run -0 cg-inspect m.cgm
	assert_line --regexp '^enc\.0\.w .*  ████████████████$'
	assert_line --regexp '^dec\.w .*  █              ▂$'
}

@test "--no-stats leaves out the statistics columns" {
	run -0 cg-inspect --no-stats m.cgm
	assert_line --regexp '^NAME +DTYPE +SHAPE +SIZE$'
	assert_line --regexp '^enc\.0\.w +f32 +4x8 +128 B$'
	refute_output --partial 'HISTOGRAM'
}

@test "a data shard shows its examples and each condition's count" {
	run -0 cg-inspect d.cgd
	assert_line 'kind:       data'
	assert_line 'examples:   10'
	assert_line 'payload:    image'
	assert_line 'conditions: 3'
	assert_line --regexp '^  zero +5$'
	assert_line --regexp '^  one +3$'
	assert_line --regexp '^  two +2$'
	assert_line --regexp '^cond +u32 +10 +40 B '
}

# ------------------------------------------------------------------ json

@test "--json prints one object per file that jq parses" {
	run -0 --separate-stderr cg-inspect --json m.cgm d.cgd
	assert_equal "${#lines[@]}" 2
	run -0 jq -e -s 'length == 2 and .[0].path == "m.cgm" and
		.[0].kind == "model" and .[0].arch == "demo" and
		.[0].config.hidden == 8 and .[0].step == 1200 and
		.[1].kind == "data" and .[1].examples == 10' \
		<<<"$(cg-inspect --json m.cgm d.cgd)"
}

@test "--json carries per-tensor statistics" {
	cg-inspect --json m.cgm >m.json
	t() { jq -c ".tensors[] | select(.name == \"$1\") | $2" m.json; }
	assert_equal "$(t enc.0.w '[.dtype, .shape, .bytes]')" '["f32",[4,8],128]'
	assert_equal "$(t enc.0.w '[.count, .min, .max, .mean, .zeros]')" \
		'[32,-2,5.75,1.875,1]'
	assert_equal "$(t enc.0.w '.hist')" \
		'[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2]'
	assert_equal "$(t q8 '[.min, .max]')" '[-8,7.75]'
	assert_equal "$(t q4 '[.min, .max, .mean]')" '[-8,7,-0.5]'
	assert_equal "$(t dec.w '[.min, .max]')" '[-1.5,65504]'
	assert_equal "$(t u64 '.max')" '18446744073709552000'
	assert_equal "$(t odd '[.nan, .inf, .min, .max, .std]')" '[1,2,1,1,0]'
	assert_equal "$(t empty '[.count, .min, .mean]')" '[0,null,null]'
	assert_equal "$(t enc.0.b '.zero_frac')" '1'
	sha=$(tar xOf m.cgm enc.0.w | sha256sum | cut -d' ' -f1)
	assert_equal "$(t enc.0.w '.sha256')" "\"$sha\""
}

@test "--json of a data shard counts the conditions" {
	run -0 jq -c '.cond_counts' <<<"$(cg-inspect --json d.cgd)"
	assert_output '[{"cond":0,"name":"zero","count":5},{"cond":1,"name":"one","count":3},{"cond":2,"name":"two","count":2}]'
}

@test "--json --no-stats lists the tensors without statistics" {
	run -0 jq -c '.tensors[0] | keys' <<<"$(cg-inspect --json --no-stats m.cgm)"
	assert_output '["bytes","dtype","name","sha256","shape"]'
}

# ---------------------------------------------------------------- tensor

@test "--tensor prints one value per line" {
	run -0 cg-inspect --tensor enc.0.w m.cgm
	assert_equal "${#lines[@]}" 32
	assert_equal "${lines[0]}" -2
	assert_equal "${lines[31]}" 5.75
	run -0 cg-inspect -t odd m.cgm
	assert_output "$(printf 'nan\ninf\n-inf\n1')"
	run -0 cg-inspect -t dec.w m.cgm
	assert_output "$(printf -- '-1.5\n0\n0.5\n1\n2\n65504')"
}

@test "--tensor --rows prints the last dimension on one line" {
	run -0 cg-inspect --tensor enc.0.w --rows m.cgm
	assert_equal "${#lines[@]}" 4
	assert_equal "${lines[1]}" '0 0.25 0.5 0.75 1 1.25 1.5 1.75'
	run -0 cg-inspect -t q4 --rows m.cgm
	assert_output '-8 -7 -6 -5 -4 -3 -2 -1 0 1 2 3 4 5 6 7 7 6 5 4 3 2 1 0 -1 -2 -3 -4 -5 -6 -7 -8'
	run -0 cg-inspect -t scalar --rows m.cgm
	assert_output '3.5'
}

@test "--tensor prints integers exactly and decodes q8_0" {
	run -0 cg-inspect -t u64 m.cgm
	assert_output "$(printf '0\n18446744073709551615')"
	run -0 cg-inspect -t i8 --rows m.cgm
	assert_output '-128 -1 0 127'
	run -0 cg-inspect -t idx --rows m.cgm
	assert_output '0 1000003 2000006 3000009 4000012 5000015 6000018'
	# block 0: scale 0.5, q = j - 16; block 1: scale 0.25, q = j
	run -0 cg-inspect -t q8 m.cgm
	assert_equal "${lines[0]}" -8
	assert_equal "${lines[31]}" 7.5
	assert_equal "${lines[33]}" 0.25
	assert_equal "${lines[63]}" 7.75
}

@test "--tensor of an empty tensor prints nothing" {
	run -0 --separate-stderr cg-inspect -t empty m.cgm
	assert_output ''
	assert_equal "$stderr" ''
}

@test "--tensor of a missing tensor fails with one line" {
	run -1 --separate-stderr cg-inspect -t nope m.cgm
	assert_output ''
	assert_equal "$stderr" 'cg-inspect: m.cgm: tensor nope: missing'
}

# ---------------------------------------------------------------- verify

@test "--verify prints FILE: OK for each good file" {
	mkcg z.cgm gzip
	run -0 --separate-stderr cg-inspect --verify m.cgm d.cgd z.cgm
	assert_equal "$output" "$(printf 'm.cgm: OK\nd.cgd: OK\nz.cgm: OK')"
	assert_equal "$stderr" ''
}

@test "--verify -q prints nothing, only the exit status speaks" {
	run -0 --separate-stderr cg-inspect --verify -q m.cgm d.cgd
	assert_output ''
	assert_equal "$stderr" ''
}

@test "--verify catches one flipped bit in a tensor" {
	# enc.0.w's data is the block after its header; its first float is
	# -2.0 (00 00 00 c0), and a 1 in the low byte makes it -2.0000002
	blk=$(tar -tRf m.cgm | sed -n 's/^block \([0-9]*\): enc\.0\.w$/\1/p')
	[ -n "$blk" ]
	cp m.cgm bad.cgm
	printf '\001' | dd of=bad.cgm bs=1 seek=$(((blk + 1) * 512)) \
		conv=notrunc status=none
	run -1 --separate-stderr cg-inspect --verify -q m.cgm bad.cgm
	assert_output ''
	assert_equal "$stderr" \
		'cg-inspect: bad.cgm: tensor enc.0.w: digest mismatch (file truncated or altered)'
}

@test "the committed fixture still reads" {
	run -0 cg-inspect --verify "$BATS_TEST_DIRNAME/fixtures/tiny.cgm"
	run -0 cg-inspect -t enc.0.w --rows "$BATS_TEST_DIRNAME/fixtures/tiny.cgm"
	assert_equal "${lines[3]}" '4 4.25 4.5 4.75 5 5.25 5.5 5.75'
	# the writer is deterministic: today's mkcg writes the same bytes
	cmp m.cgm "$BATS_TEST_DIRNAME/fixtures/tiny.cgm"
}

# ------------------------------------------------------------- pipelines

@test "pipelines: tar and jq read what cg-inspect describes" {
	run -0 bash -c 'tar xOf d.cgd cg.json | jq .examples'
	assert_output 10
	run -0 bash -c "cg-inspect --json m.cgm | jq -r '.tensors[] | select(.zero_frac > 0.5) | .name'"
	assert_output enc.0.b
	run -0 bash -c 'mkcg - zstd | cg-inspect --verify'
	assert_output '(stdin): OK'
	run -0 bash -c 'cg-inspect -t enc.0.w m.cgm | sort -g | tail -1'
	assert_output 5.75
}
