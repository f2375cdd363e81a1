#!/usr/bin/env bats
#
# 115-dp-diloco.bats - example-level DP-SGD inside DiLoCo rounds: cg-reduce
# takes the DP-SGD deltas of workers on disjoint shards of one split
# together (parallel composition, model/privacy.h).  Four workers on four
# shards of one cut, one round reduced and applied (outer Nesterov): the
# record's epsilon is each worker's, Opacus' figure for their steps
# (tests/rdp-vectors/opacus.txt), and two rounds compose as one worker's
# steps would; a worker of a higher rate makes the record its own; runs
# whose curves cross leave a max item; a tree of reductions gives the
# record of one.  Refused in one line, exit 1, nothing written: the same
# shard twice, a shard of another split, a DP-SGD delta beside one
# without privacy (either order), another delta, records that lie (an
# epsilon, a release that is not the history's end, a shard digest), and
# --dp-clip over DP-SGD deltas.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

VECTORS=$BATS_TEST_DIRNAME/rdp-vectors/opacus.txt

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	# five shards of 20 examples: a batch of 2 samples at rate 0.1
	images fm -n 5 --strategy contiguous
	images other -n 4 --strategy contiguous
	small_cvae fm-0.cgd vae.cgm --class-prior=0 --cond-every=0
	local w
	for w in 0 1 2 3; do
		cg-train-step -q -m vae.cgm -d "fm-$w.cgd" --emit delta \
			--batch 2 --steps 3 --example-clip 1 --example-noise 1.0 \
			--dp-seed "$w" --seed 1 -o "d$w.cgg"
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# Opacus' epsilon for rate $1, noise $2, steps $3 at delta $4.
opacus() {
	awk -v q="$1" -v s="$2" -v t="$3" -v d="$4" \
		'$1 == "eps" && $2 == q && $3 == s && $4 == t && $5 == d {print $6}' \
		"$VECTORS"
}

# The manifest's dp record of $1, field $2 (jq path).
dp() {
	tar xOf "$1" cg.json | jq -c -r ".dp$2"
}

# |$1 - $2| <= 1e-6 |$2|
near() {
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d;
		exit !(d <= 1e-6 * (b < 0 ? -b : b)) }'
}

# A copy of cg file $1 as $2 with its manifest changed by jq filter $3.
edit_manifest() {
	local dir
	dir=$(mktemp -d)
	tar xf "$1" -C "$dir"
	jq -c "$3" <"$dir/cg.json" >"$dir/cg.new"
	mv "$dir/cg.new" "$dir/cg.json"
	tar cf "$2" --format=ustar -C "$dir" $(tar tf "$1")
	rm -r "$dir"
}

# cg-reduce ARGS... must fail: exit 1, one line on stderr starting with
# the program's name and holding $1, nothing written to out.cgg.
refused() {
	local want=$1
	shift
	run -1 --separate-stderr cg-reduce "$@" -o out.cgg
	echo "$stderr"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cg-reduce: "*"$want"* ]]
	[ ! -e out.cgg ]
}

@test "four workers on disjoint shards: the round spends one worker's epsilon" {
	local want w
	want=$(opacus 0.1 1.0 3 1e-05)
	[ -n "$want" ]
	for w in 0 1 2 3; do
		near "$(dp "$D/d$w.cgg" .epsilon)" "$want"
		[ "$(dp "$D/d$w.cgg" .release.shard.index)" = "$w" ]
	done
	# four shards, one split
	[ "$(for w in 0 1 2 3; do dp "$D/d$w.cgg" .release.shard.split; done |
		sort -u | wc -l)" = 1 ]
	cg-reduce --model "$D/vae.cgm" "$D"/d[0-3].cgg -o mean.cgg
	near "$(dp mean.cgg .epsilon)" "$want"
	[ "$(dp mean.cgg .history)" = '[{"sigma":1,"q":0.1,"steps":3}]' ]
	[ "$(dp mean.cgg '.release.max | length')" = 4 ]
	[ "$(dp mean.cgg '.release.max | map(.shard.index) | sort')" = '[0,1,2,3]' ]
	# each worker weighs one, whatever its Poisson samples held
	[ "$(tar xOf mean.cgg cg.json | jq .weight)" = 4 ]
	# the outer step is post-processing: no spend of its own
	cg-apply -m "$D/vae.cgm" --outer nesterov mean.cgg -o m1.cgm
	near "$(dp m1.cgm .epsilon)" "$want"
	run -0 cg-inspect m1.cgm
	assert_line --regexp '^privacy: +epsilon 2\.60?7 at delta 1e-05, 3 releases'
}

@test "two rounds compose as one worker's steps: Opacus' epsilon of 3 + 7" {
	local w
	cg-reduce --model "$D/vae.cgm" "$D"/d[0-3].cgg |
		cg-apply -m "$D/vae.cgm" --outer nesterov -o m1.cgm
	for w in 0 1 2 3; do
		cg-train-step -q -m m1.cgm -d "$D/fm-$w.cgd" --emit delta \
			--batch 2 --steps 7 --example-clip 1 --example-noise 1.0 \
			--dp-seed "$((w + 10))" --seed 2 -o "e$w.cgg"
	done
	cg-reduce --model m1.cgm e[0-3].cgg -o mean2.cgg
	# told no model, the inputs' common record is the base: the same
	cg-reduce e[0-3].cgg -o mean2b.cgg
	[ "$(dp mean2.cgg '')" = "$(dp mean2b.cgg '')" ]
	cg-apply -m m1.cgm --outer nesterov mean2.cgg -o m2.cgm
	near "$(dp m2.cgm .epsilon)" "$(opacus 0.1 1.0 10 1e-05)"
	[ "$(dp m2.cgm .history)" = '[{"sigma":1,"q":0.1,"steps":10}]' ]
	# and the model trains: its parameters moved in both rounds
	run -1 cg-inspect --diff -q m1.cgm m2.cgm
}

@test "a worker of a higher rate: the round spends its epsilon" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-3.cgd" --emit delta \
		--batch 4 --steps 3 --example-clip 1 --example-noise 1.0 \
		--dp-seed 9 -o big.cgg
	cg-reduce "$D"/d[0-2].cgg big.cgg -o mean.cgg
	near "$(dp mean.cgg .epsilon)" "$(dp big.cgg .epsilon)"
	[ "$(dp mean.cgg .history)" = '[{"sigma":1,"q":0.2,"steps":3}]' ]
	[ "$(jq -n "$(dp big.cgg .epsilon) > $(dp "$D/d0.cgg" .epsilon)")" = true ]
}

@test "curves that cross: a max item, at least each worker's epsilon" {
	# one step of the whole shard against ten sampled at rate 0.1: the
	# first spends more at low orders, the second at high ones
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --emit delta \
		--batch 20 --steps 1 --example-clip 1 --example-noise 1.0 \
		--dp-seed 1 -o a.cgg
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-1.cgd" --emit delta \
		--batch 2 --steps 10 --example-clip 1 --example-noise 1.0 \
		--dp-seed 2 -o b.cgg
	near "$(dp a.cgg .epsilon)" "$(opacus 1.0 1.0 1 1e-05)"
	near "$(dp b.cgg .epsilon)" "$(opacus 0.1 1.0 10 1e-05)"
	cg-reduce a.cgg b.cgg -o ab.cgg
	[ "$(dp ab.cgg .history)" = '[{"max":[{"sigma":1,"q":0.1,"steps":10},{"sigma":1,"q":1,"steps":1}]}]' ]
	local e
	e=$(dp ab.cgg .epsilon)
	[ "$(jq -n "$e >= $(dp a.cgg .epsilon) and $e >= $(dp b.cgg .epsilon)")" = true ]
	# in either order
	cg-reduce b.cgg a.cgg -o ba.cgg
	[ "$(dp ab.cgg .history)" = "$(dp ba.cgg .history)" ]
	[ "$(dp ab.cgg .epsilon)" = "$(dp ba.cgg .epsilon)" ]
	# the model carries the item, and the next worker's steps after it
	cg-apply -m "$D/vae.cgm" --outer nesterov ab.cgg -o m.cgm
	[ "$(dp m.cgm .epsilon)" = "$e" ]
	run -0 cg-inspect m.cgm
	assert_line '  | 1 x sigma 1, q 1'
	cg-train-step -q -m m.cgm -d "$D/fm-0.cgd" --emit delta --batch 2 \
		--steps 1 --example-clip 1 --example-noise 1.0 --dp-seed 3 -o c.cgg
	[ "$(dp c.cgg '.history | length')" = 2 ]
	[ "$(jq -n "$(dp c.cgg .epsilon) > $e")" = true ]
	cg-reduce --model m.cgm c.cgg -o c1.cgg
	[ "$(dp c1.cgg .epsilon)" = "$(dp c.cgg .epsilon)" ]
}

@test "a tree of reductions records what one reduction does" {
	cg-reduce "$D/d0.cgg" "$D/d1.cgg" -o r01.cgg
	cg-reduce "$D/d2.cgg" "$D/d3.cgg" -o r23.cgg
	cg-reduce r01.cgg r23.cgg -o tree.cgg
	cg-reduce "$D"/d[0-3].cgg -o flat.cgg
	[ "$(dp tree.cgg .epsilon)" = "$(dp flat.cgg .epsilon)" ]
	[ "$(dp tree.cgg .history)" = "$(dp flat.cgg .history)" ]
	[ "$(dp tree.cgg '.release.max | map(.shard.index) | sort')" = '[0,1,2,3]' ]
	# a partial holds shard 1 already: another call on it is refused
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-1.cgd" --emit delta \
		--batch 2 --steps 3 --example-clip 1 --example-noise 1.0 \
		--dp-seed 7 -o again1.cgg
	refused "again1.cgg: dp: trained on a shard (shard 1 of split" \
		r01.cgg again1.cgg
}

@test "the same shard twice, or a shard of another split: refused" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-0.cgd" --emit delta \
		--batch 2 --steps 3 --example-clip 1 --example-noise 1.0 \
		--dp-seed 5 --seed 5 -o twice.cgg
	refused "twice.cgg: dp: trained on a shard (shard 0 of split" \
		"$D/d0.cgg" "$D/d1.cgg" twice.cgg
	# shard 1 of a cut in four may share examples with shard 0 of five
	cg-train-step -q -m "$D/vae.cgm" -d "$D/other-1.cgd" --emit delta \
		--batch 2 --steps 3 --example-clip 1 --example-noise 1.0 \
		--dp-seed 6 -o other.cgg
	refused "other.cgg: dp: trained on a shard of another split than" \
		"$D/d0.cgg" other.cgg
}

@test "a DP-SGD delta beside one without privacy: refused, either order" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-4.cgd" --emit delta \
		--batch 2 --steps 3 --seed 1 -o plain.cgg
	refused "d0.cgg: noised by DP-SGD, among inputs without differential privacy" \
		plain.cgg "$D/d0.cgg"
	refused "plain.cgg: no differential privacy, among inputs noised by DP-SGD" \
		"$D/d0.cgg" plain.cgg
	# noised once is enough: no DP-FedAvg over them
	refused "d0.cgg: noised by DP-SGD already" --dp-clip 1 "$D/d0.cgg"
}

@test "another delta, or records that lie: refused in one line" {
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-4.cgd" --emit delta \
		--batch 2 --steps 3 --example-clip 1 --example-noise 1.0 \
		--example-delta 1e-6 --dp-seed 4 -o d6.cgg
	near "$(dp d6.cgg .epsilon)" "$(opacus 0.1 1.0 3 1e-06)"
	refused "d6.cgg: dp: spent at delta 1e-06, the first input at 1e-05" \
		"$D/d0.cgg" d6.cgg
	refused "d6.cgg: dp: spent at delta 1e-06, the first input at 1e-05" \
		--model "$D/vae.cgm" "$D/d0.cgg" "$D/d1.cgg" d6.cgg
	# a model whose record is at another delta than the inputs'
	cg-reduce d6.cgg | cg-apply -m "$D/vae.cgm" -o m6.cgm
	refused "d0.cgg: dp: spent at delta 1e-05, the model" \
		--model m6.cgm "$D/d0.cgg"
	# an epsilon under its history's
	edit_manifest "$D/d1.cgg" small.cgg '.dp.epsilon = 0.5'
	refused "small.cgg: dp: epsilon 0.5 is not its history's" \
		"$D/d0.cgg" small.cgg
	# a delta that is not the one its epsilon was figured at
	edit_manifest "$D/d1.cgg" delta.cgg '.dp.delta = 1e-3'
	refused "delta.cgg: dp: epsilon" "$D/d0.cgg" delta.cgg
	# a release of more noise than its history holds
	edit_manifest "$D/d1.cgg" sigma.cgg '.dp.release.sigma = 5'
	refused "sigma.cgg: dp: the history does not end with the release" \
		"$D/d0.cgg" sigma.cgg
	# a release of fewer steps than it took: its record before it is
	# then of a model that had spent some, which the others' had not
	cg-train-step -q -m "$D/vae.cgm" -d "$D/fm-1.cgd" --emit delta \
		--batch 2 --steps 10 --example-clip 1 --example-noise 1.0 \
		--dp-seed 8 -o ten.cgg
	edit_manifest ten.cgg steps.cgg '.dp.release.steps = 3'
	refused "steps.cgg: dp: its record before its release is not the first input's" \
		"$D/d0.cgg" steps.cgg
	refused "steps.cgg: dp: computed from a model that had spent epsilon" \
		--model "$D/vae.cgm" "$D/d0.cgg" steps.cgg
	edit_manifest "$D/d1.cgg" hex.cgg '.dp.release.shard.split = "zz"'
	refused "hex.cgg: dp: a release's shard split is not 64 hex digits" \
		"$D/d0.cgg" hex.cgg
	edit_manifest "$D/d1.cgg" idx.cgg '.dp.release.shard.index = 0.5'
	refused "idx.cgg: dp: a shard index 0.5 is not a whole number" \
		"$D/d0.cgg" idx.cgg
	# the same shard under another index is still the same shard
	edit_manifest "$D/d1.cgg" same.cgg \
		".dp.release.shard = $(dp "$D/d0.cgg" .release.shard | jq -c '.index = 1')"
	refused "same.cgg: dp: trained on a shard (shard 1 of split" \
		"$D/d0.cgg" same.cgg
	# a max item of one run is no record cg writes
	edit_manifest "$D/d1.cgg" one.cgg '.dp.history = [{"max": .dp.history}]'
	refused "one.cgg: dp: a max item is not a list of 2 runs or more" \
		"$D/d0.cgg" one.cgg
	# cg-apply reads the same records
	run -1 --separate-stderr cg-apply -m "$D/vae.cgm" small.cgg -o m.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ ! -e m.cgm ]
}
