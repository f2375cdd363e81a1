#!/usr/bin/env bats
#
# 096-dp.bats - differential privacy at the reduction (DP-FedAvg) and
# what it spends.  cg-reduce --dp-clip bounds each worker's update to an
# L2 norm (the result of one input has exactly that norm when it was
# larger; a mean of clipped inputs, a poisoned one among them, stays
# within it); --dp-noise adds noise whose std, measured over every
# coordinate of a reduction of updates of (almost) zero, is sigma C / W
# within 3% (about ten standard errors of the estimate over 51,000
# coordinates: the figure is fixed by the seed, so the margin is for the
# stream, not for luck); the same seed gives the same bytes, another
# seed or none (the system's randomness) others.  The epsilon recorded
# grows over three rounds of reduce and apply, and is Opacus' figure for
# three releases (tests/rdp-vectors/opacus.txt) to 1e-6; --target-epsilon
# refuses the round past it in cg-reduce and cg-apply (one line, exit 1,
# nothing written); a record that lies (a negative sigma, an epsilon not
# a number or not its history's) is refused by every reader.  The
# programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

VECTORS=$BATS_TEST_DIRNAME/rdp-vectors/opacus.txt

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 4 --strategy round-robin
	small_cvae fm-0.cgd model.cgm --latent 2
	local w
	for w in 0 1 2 3; do
		cg-train-step -q -m model.cgm -d fm-$w.cgd --batch 8 \
			--emit delta -o d$w.cgg
		# an update of almost nothing, its own content
		poison scale:1e-30 d$w.cgg z$w.cgg
	done
	poison scale:1e6 d3.cgg big.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# The L2 norm of a cg file's tensors (inspect's statistics: the standard
# deviation is the population's).
norm() {
	cg-inspect --json "$1" |
		jq '[.tensors[] | .count * (.std * .std + .mean * .mean)] | add | sqrt'
}

# The root mean square of its values, and their mean, over every tensor.
rms_mean() {
	cg-inspect --json "$1" | jq -r '
		([.tensors[].count] | add) as $n |
		"\(([.tensors[] | .count * (.std * .std + .mean * .mean)] | add / $n) | sqrt) \(([.tensors[] | .count * .mean] | add) / $n) \($n)"'
}

# A copy of cg file $1 as $2 with its manifest changed by the command
# after them (from its standard input to its output).
edit_manifest() {
	local in=$1 out=$2 dir
	shift 2
	dir=$(mktemp -d)
	tar xf "$in" -C "$dir"
	"$@" <"$dir/cg.json" >"$dir/cg.new"
	mv "$dir/cg.new" "$dir/cg.json"
	tar cf "$out" --format=ustar -C "$dir" $(tar tf "$in")
	rm -r "$dir"
}

@test "cg-reduce --help and cg-apply --help name the privacy options" {
	run -0 cg-reduce --help
	assert_output --partial '--dp-clip C'
	assert_output --partial '--dp-noise SIGMA'
	assert_output --partial '--dp-rate Q'
	assert_output --partial '--dp-delta D'
	assert_output --partial '--target-epsilon E'
	assert_output --partial '--seed N'
	run -0 cg-apply --help
	assert_output --partial '--target-epsilon E'
}

@test "the privacy options: usage errors" {
	run -2 --separate-stderr cg-reduce --dp-noise 1 "$D/d0.cgg" -o r.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: --dp-noise: "*"give --dp-clip" ]]
	run -2 --separate-stderr cg-reduce --dp-clip 1 --seed 1 "$D/d0.cgg" -o r.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: --seed: "*"give --dp-noise" ]]
	# a budget for a round with no noise, here or at the workers
	run -1 --separate-stderr cg-reduce --dp-clip 1 --dp-rate 0.5 "$D/d0.cgg" -o r.cgg
	[ "$stderr" = "cg-reduce: a privacy budget, but no noise in this round (--dp-noise here, or at the workers under --mask)" ]
	run -2 --separate-stderr cg-reduce --dp-clip 1 --dp-noise 1 --target-epsilon 8 "$D/d0.cgg" -o r.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: --target-epsilon: "*"--model" ]]
	local bad
	for bad in "--dp-clip 0" "--dp-clip -1" "--dp-clip nan" "--dp-noise inf" \
		"--dp-rate 1.5" "--dp-delta 1" "--dp-delta 0" "--seed x"; do
		run -2 --separate-stderr cg-reduce --dp-clip 1 --dp-noise 1 $bad "$D/d0.cgg" -o r.cgg
		[[ ${stderr_lines[0]} == "cg-reduce: --"* ]]
	done
	run -2 --separate-stderr cg-apply --target-epsilon -1 -m "$D/model.cgm" "$D/d0.cgg"
	# a worker's share is under the masks only
	run -2 --separate-stderr cg-train-step -m "$D/model.cgm" -d "$D/fm-0.cgd" \
		--emit delta --dp-clip 1 -o r.cgg
	[[ ${stderr_lines[0]} == "cg-train-step: --dp-clip: "*"--mask"* ]]
	[ ! -e r.cgg ]
}

@test "--dp-clip bounds each worker's update to its L2 norm" {
	local n0 n
	n0=$(norm "$D/d0.cgg")
	# clipped well below its norm: the result has the clip's norm
	run -0 cg-reduce --dp-clip 0.001 "$D/d0.cgg" -o one.cgg
	n=$(norm one.cgg)
	[ "$(jq -n "$n0 > 0.002 and ($n - 0.001 | fabs) < 1e-8")" = true ]
	# a clip above its norm leaves it as it was
	run -0 cg-reduce --dp-clip 1e6 "$D/d0.cgg" -o same.cgg
	run -0 cg-inspect --diff --json "$D/d0.cgg" same.cgg
	refute_output --partial '"status":"differs"'
	# a worker a million times too large moves the mean no more than C
	run -0 cg-reduce --dp-clip 0.001 "$D/d0.cgg" "$D/d1.cgg" "$D/d2.cgg" "$D/big.cgg" -o mean.cgg
	n=$(norm mean.cgg)
	[ "$(jq -n "$n <= 0.001 * (1 + 1e-6)")" = true ]
	run -0 jq -r '.inputs, .weight' < <(tar xOf mean.cgg cg.json)
	assert_output $'4\n4'
	# the --log line says how many the clip scaled down
	run -0 cg-reduce --dp-clip 0.001 --log log.json "$D/d0.cgg" "$D/d1.cgg" -o r.cgg
	[ "$(jq .dp_clipped log.json)" = 2 ]
}

@test "--dp-noise: std sigma C / W over the coordinates, within 3%" {
	run -0 cg-reduce --dp-clip 0.5 --dp-noise 2 --seed 11 \
		"$D"/z0.cgg "$D"/z1.cgg "$D"/z2.cgg "$D"/z3.cgg -o noise.cgg
	local rms mean n
	read -r rms mean n < <(rms_mean noise.cgg)
	echo "rms $rms mean $mean over $n coordinates; want 2 * 0.5 / 4 = 0.25"
	[ "$n" -gt 25000 ]
	[ "$(jq -n "($rms / 0.25 - 1 | fabs) < 0.03")" = true ]
	# mean zero: within five standard errors
	[ "$(jq -n "($mean | fabs) < 5 * 0.25 / ($n | sqrt)")" = true ]
	run -0 jq -c '.dp.release' < <(tar xOf noise.cgg cg.json)
	assert_output '{"sigma":2,"q":1,"steps":1,"clip":0.5}'
}

@test "the same seed gives the same bytes; another, or none, others" {
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 5 "$D"/d[0-3].cgg -o a.cgg
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 5 --threads 1 "$D"/d[0-3].cgg -o b.cgg
	cmp a.cgg b.cgg
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 6 "$D"/d[0-3].cgg -o c.cgg
	! cmp -s a.cgg c.cgg
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 "$D"/d[0-3].cgg -o e.cgg
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 "$D"/d[0-3].cgg -o f.cgg
	! cmp -s e.cgg f.cgg
	# the seed is not written down: noise whose seed is known comes off
	run -0 tar xOf a.cgg cg.json
	refute_output --partial '"seed":5'
}

@test "three rounds: epsilon grows, and is Opacus' for three releases" {
	local r eps prev=0 m=$D/model.cgm w
	for r in 1 2 3; do
		for w in 0 1 2 3; do
			cg-train-step -q -m "$m" -d "$D/fm-$w.cgd" --batch 8 \
				--emit delta -o u$w.cgg
		done
		run -0 cg-reduce --dp-clip 0.01 --dp-noise 1.5 --seed $r \
			--model "$m" u[0-3].cgg -o r$r.cgg
		run -0 cg-apply -m "$m" --outer nesterov r$r.cgg -o m$r.cgm
		m=m$r.cgm
		eps=$(tar xOf m$r.cgm cg.json | jq .dp.epsilon)
		# the update said the same before it was applied
		[ "$(tar xOf r$r.cgg cg.json | jq .dp.epsilon)" = "$eps" ]
		[ "$(jq -n "$eps > $prev")" = true ]
		prev=$eps
	done
	run -0 jq -c '.dp.history' < <(tar xOf m3.cgm cg.json)
	assert_output '[{"sigma":1.5,"q":1,"steps":3}]'
	local want
	want=$(awk '$1 == "eps" && $2 == 1.0 && $3 == 1.5 && $4 == 3 && $5 == 1e-05 { print $6 }' "$VECTORS")
	echo "epsilon $eps, Opacus $want"
	[ -n "$want" ]
	[ "$(jq -n "($eps / $want - 1 | fabs) < 1e-6")" = true ]
	run -0 cg-inspect m3.cgm
	assert_line --regexp '^privacy: +epsilon [0-9.]+ at delta 1e-05, 3 releases$'
	run -0 cg-inspect r3.cgg
	assert_line '  this update: clip 0.01, sigma 1.5, q 1'
}

@test "--target-epsilon refuses the round past it, nothing written" {
	# one release at sigma 1, q 1 spends about 4.73 at 1e-5: the second passes 6
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 1 --model "$D/model.cgm" \
		--target-epsilon 6 "$D"/d[0-3].cgg -o r1.cgg
	run -0 cg-apply -m "$D/model.cgm" --target-epsilon 6 r1.cgg -o m1.cgm
	for w in 0 1; do
		cg-train-step -q -m m1.cgm -d "$D/fm-$w.cgd" --batch 8 --emit delta -o u$w.cgg
	done
	run -1 --separate-stderr cg-reduce --dp-clip 0.01 --dp-noise 1 --model m1.cgm \
		--target-epsilon 6 u0.cgg u1.cgg -o r2.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "cg-reduce: this round would spend epsilon 7.077 at delta 1e-05 in all (4.729 so far), past --target-epsilon 6" ]]
	[ ! -e r2.cgg ]
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 2 --model m1.cgm u0.cgg u1.cgg -o r2.cgg
	run -1 --separate-stderr cg-apply -m m1.cgm --target-epsilon 6 r2.cgg -o m2.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "cg-apply: r2.cgg: would bring epsilon to 7.077 at delta 1e-05 (4.729 so far), past --target-epsilon 6" ]]
	[ ! -e m2.cgm ]
	# a budget wants noise: an update without a record is refused
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" --target-epsilon 6 "$D/d0.cgg" -o m3.cgm
	[[ $stderr == *"no noise was added to it"* ]]
	[ ! -e m3.cgm ]
	# another delta than the model's budget is refused too
	run -1 --separate-stderr cg-reduce --dp-clip 0.01 --dp-noise 1 --dp-delta 1e-6 \
		--model m1.cgm u0.cgg u1.cgg -o r4.cgg
	[[ $stderr == "cg-reduce: m1.cgm: its budget is spent at delta 1e-05, not 1e-06" ]]
}

@test "a privacy record that lies is refused by every reader" {
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 1 --model "$D/model.cgm" \
		"$D"/d[0-3].cgg -o r.cgg
	run -0 cg-apply -m "$D/model.cgm" r.cgg -o m.cgm
	edit_manifest m.cgm neg.cgm jq -c '.dp.history[0].sigma = -1'
	edit_manifest m.cgm small.cgm jq -c '.dp.epsilon = 0.5'
	edit_manifest m.cgm nul.cgm jq -c '.dp.epsilon = null'
	edit_manifest r.cgg neg.cgg jq -c '.dp.release.sigma = -1'
	edit_manifest r.cgg q.cgg jq -c '.dp.history[0].q = 1.5'
	edit_manifest r.cgg half.cgg jq -c '.dp.history[0].steps = 0.5'
	edit_manifest r.cgg inf.cgg jq -c '.dp.epsilon = 1e999'
	# a nan, which JSON cannot hold: the manifest is no JSON then
	edit_manifest r.cgg nan.cgg sed 's/"epsilon":[0-9.e+-]*/"epsilon":NaN/'
	grep -q NaN <(tar xOf nan.cgg cg.json)
	local f
	for f in neg.cgm small.cgm nul.cgm; do
		run -1 --separate-stderr cg-inspect $f
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == "cg-inspect: $f: dp: "* ]]
		run -1 --separate-stderr cg-apply -m $f r.cgg -o out.cgm
		[[ $stderr == "cg-apply: $f: dp: "* ]]
		run -1 --separate-stderr cg-reduce --model $f "$D/d0.cgg" -o out.cgg
		[[ $stderr == "cg-reduce: $f: dp: "* ]]
		run -1 --separate-stderr cg-train-step -m $f -d "$D/fm-0.cgd" --emit delta -o out.cgg
		[[ $stderr == *"$f: dp: "* ]]
	done
	run -1 --separate-stderr cg-inspect small.cgm
	[[ $stderr == *"dp: epsilon 0.5 is not its history's 4.7285"* ]]
	for f in neg.cgg q.cgg half.cgg inf.cgg; do
		run -1 --separate-stderr cg-inspect $f
		[[ $stderr == "cg-inspect: $f: dp: "* ]]
		run -1 --separate-stderr cg-apply -m "$D/model.cgm" $f -o out.cgm
		[[ $stderr == "cg-apply: $f: dp: "* ]]
		run -1 --separate-stderr cg-reduce $f -o out.cgg
		[[ $stderr == "cg-reduce: $f: dp: "* ]]
	done
	run -1 --separate-stderr cg-inspect nan.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[ ! -e out.cgm ]
	[ ! -e out.cgg ]
}

@test "what DP at the reduction refuses: masked, reduced, or noised inputs" {
	run -0 cg-reduce "$D/d0.cgg" "$D/d1.cgg" -o r01.cgg
	run -1 --separate-stderr cg-reduce --dp-clip 1 r01.cgg "$D/d2.cgg" -o r.cgg
	[[ $stderr == "cg-reduce: r01.cgg: stands for 2 updates: differential privacy clips each worker's own" ]]
	run -0 cg-reduce --dp-clip 1 --dp-noise 1 --seed 1 "$D/d0.cgg" "$D/d1.cgg" -o n.cgg
	# a noised result passes a reduction of one (a recode) with its record
	run -0 cg-reduce --codec f16 n.cgg -o n16.cgg
	[ "$(tar xOf n16.cgg cg.json | jq -c .dp)" = "$(tar xOf n.cgg cg.json | jq -c .dp)" ]
	run -1 --separate-stderr cg-reduce n.cgg "$D/d2.cgg" -o r.cgg
	[[ $stderr == "cg-reduce: $D/d2.cgg: the first input was noised"* ]]
	run -1 --separate-stderr cg-reduce "$D/d2.cgg" n.cgg -o r.cgg
	[[ $stderr == "cg-reduce: n.cgg: noised for differential privacy already"* ]]
	run -1 --separate-stderr cg-reduce --op median --dp-clip 1 "$D/d0.cgg" -o r.cgg
	[ ! -e r.cgg ]
}

@test "secure aggregation: the workers' noise shares make the same release" {
	local w
	for w in 0 1 2 3; do cg-key --x25519 -C worker$w -o k$w >/dev/null; done
	cat k0.pub k1.pub k2.pub k3.pub >peers
	for w in 0 1 2 3; do
		cg-train-step -q -m "$D/model.cgm" -d "$D/fm-$w.cgd" --emit delta \
			--batch 8 --mask k$w --peers peers --dp-clip 0.5 --dp-noise 2 \
			--dp-seed $w -o s$w.cgg
	done
	run -0 jq -c '[.dp_share, .weight]' < <(tar xOf s0.cgg cg.json)
	assert_output '[{"clip":0.5,"sigma":2,"peers":4},1]'
	run -0 cg-reduce --model "$D/model.cgm" s0.cgg s1.cgg s2.cgg s3.cgg -o mean.cgg
	local rms mean n
	read -r rms mean n < <(rms_mean mean.cgg)
	echo "rms $rms over $n coordinates; want 2 * 0.5 / 4 = 0.25"
	# the clipped mean adds at most 0.5 / sqrt(n), 1.2% of it, in quadrature
	[ "$(jq -n "($rms / 0.25 - 1 | fabs) < 0.03")" = true ]
	run -0 jq -c '.dp.release, .dp.history' < <(tar xOf mean.cgg cg.json)
	assert_output $'{"sigma":2,"q":1,"steps":1,"clip":0.5}\n[{"sigma":2,"q":1,"steps":1}]'
	run -0 cg-apply -m "$D/model.cgm" --target-epsilon 3 mean.cgg -o m.cgm
	[ "$(tar xOf m.cgm cg.json | jq .dp.epsilon)" = "$(tar xOf mean.cgg cg.json | jq .dp.epsilon)" ]
	# a budget the shares would pass is refused before the sum
	run -1 --separate-stderr cg-reduce --model "$D/model.cgm" --target-epsilon 2 \
		s0.cgg s1.cgg s2.cgg s3.cgg -o r.cgg
	[[ $stderr == "cg-reduce: this round would spend epsilon 2.166 at delta 1e-05 in all (0 so far), past --target-epsilon 2" ]]
	# a share that lies about itself is refused by its readers
	edit_manifest s0.cgg neg.cgg jq -c '.dp_share.sigma = -2'
	run -1 --separate-stderr cg-inspect neg.cgg
	[ "$stderr" = "cg-inspect: neg.cgg: dp_share: sigma -2 is not in [0, 1e+06]" ]
	run -1 --separate-stderr cg-reduce neg.cgg s1.cgg s2.cgg s3.cgg -o r.cgg
	[ "$stderr" = "cg-reduce: neg.cgg: dp_share: sigma -2 is not in [0, 1e+06]" ]
	# a worker with less noise than the others is refused
	cg-train-step -q -m "$D/model.cgm" -d "$D/fm-3.cgd" --emit delta --batch 8 \
		--mask k3 --peers peers --dp-clip 0.5 --dp-noise 0.1 -o low.cgg
	run -1 --separate-stderr cg-reduce s0.cgg s1.cgg s2.cgg low.cgg -o r.cgg
	[ "$stderr" = "cg-reduce: low.cgg: its noise share (dp_share) is not the first input's" ]
	# the secret noise cannot be made again by an auditor
	run -2 --separate-stderr cg-train-step -m "$D/model.cgm" -d "$D/fm-0.cgd" \
		--emit delta --mask k0 --peers peers --dp-clip 0.5 --dp-noise 2 \
		--deterministic -o r.cgg
	[ ! -e r.cgg ]
}

@test "a published change carries the release: a worker's model records the same" {
	run -0 cg-reduce --dp-clip 0.01 --dp-noise 1 --seed 1 "$D"/d[0-3].cgg -o r.cgg
	run -0 cg-apply -m "$D/model.cgm" --change ch.cgg r.cgg -o coord.cgm
	run -0 cg-apply -m "$D/model.cgm" ch.cgg -o worker.cgm
	[ "$(tar xOf worker.cgm cg.json | jq -c .dp)" = "$(tar xOf coord.cgm cg.json | jq -c .dp)" ]
	run -0 jq -c '.dp.history' < <(tar xOf coord.cgm cg.json)
	assert_output '[{"sigma":1,"q":1,"steps":1}]'
}
