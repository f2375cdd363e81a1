#!/usr/bin/env bats
#
# 073-probe.bats - cg-probe: its options and output, its weight taken by
# cg-shard --weights, and a host slowed 4x for real.
#
# The slowed host is cg-probe in a CPU cgroup capped at a quarter of one
# CPU: cgroup v2's cpu.max "25000 100000" where /sys/fs/cgroup is a
# writable cgroup v2 tree with the cpu controller, else cgroup v1's
# cpu.cfs_quota_us 25000 of cpu.cfs_period_us 100000 (the same CFS
# bandwidth limit); without either (not root, a read-only cgroupfs) the
# test is skipped, saying why.  The free probe runs in a cgroup of its
# own with no cap.  Both groups have the largest weight (v1 cpu.shares
# 262144, v2 cpu.weight 10000): the machine's other work (other
# sessions, each an autogroup of weight 1024, where nice does not reach)
# would otherwise slow the free probe and not the capped one, which a
# quarter of a CPU still fits beside it.  Probes of one thread, the
# capped and the free alternated three times each (and three more where
# those fall outside, the machine's other work having pushed them), their
# medians compared: the capped one's weight must be within 25% of a
# quarter of the free one's.  The test says its figures.  The programs come from
# PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images fm -n 2
	model cvae fm-0.cgd model.cgm --hidden 64 --layers 1 --latent 8
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
	CGROUPS=
}

teardown() {
	# a group goes once its processes have
	local g
	for g in $CGROUPS; do
		rmdir "$g" 2>/dev/null || true
	done
}

@test "cg-probe: --help, a bad option, no model, a missing file, a bad number" {
	run -0 cg-probe --help
	assert_line --index 0 'usage: cg-probe -m MODEL -d SHARD [options]'
	run -2 --separate-stderr cg-probe -m "$D/model.cgm"
	assert_equal "${stderr_lines[0]}" "cg-probe: no data shard (-d)"
	run -2 --separate-stderr cg-probe -d "$D/fm-0.cgd"
	assert_equal "${stderr_lines[0]}" "cg-probe: no model (-m)"
	run -2 --separate-stderr cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" --seconds 0
	assert_equal "${stderr_lines[0]}" "cg-probe: --seconds: must be positive"
	run -2 --separate-stderr cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" --windows 65
	[[ ${stderr_lines[0]} == "cg-probe: --windows: "* ]]
	run -1 --separate-stderr cg-probe -m nosuch.cgm -d "$D/fm-0.cgd"
	[[ ${stderr_lines[0]} == "cg-probe: nosuch.cgm: "* ]]
	[ -z "$output" ]
	# a shard of another kind than the model
	cg-shard -q -o fort "$BATS_TEST_DIRNAME/fixtures/text/fortunes"
	run -1 --separate-stderr cg-probe -m "$D/model.cgm" -d fort-0.cgd \
		--seconds 0.1 --warmup 0
	[[ ${stderr_lines[0]} == "cg-probe: fort-0.cgd: "* ]]
	[ -z "$output" ]
}

@test "cg-probe: the table, --json, the model from stdin, and the weights cg-shard takes" {
	run -0 cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" --seconds 0.5 \
		--warmup 0.1 -j 1
	assert_line 'threads:    1'
	assert_line 'batch:      32'
	assert_line --regexp '^examples/s: [0-9.]+ \(median of 5 windows; [0-9.]+ to [0-9.]+\)$'
	assert_line --regexp '^weight:     [0-9.]+$'
	run -0 cg-probe -m - -d "$D/fm-1.cgd" --seconds 0.5 --warmup 0.1 \
		--windows 3 -b 8 --reference 1000 -j 1 --json < "$D/model.cgm"
	local rate weight
	rate=$(jq -r .examples_per_s <<<"$output")
	weight=$(jq -r .weight <<<"$output")
	[ "$(jq -r '[.arch, .batch, .threads, .reference, (.windows | length)] | @tsv' <<<"$output")" = \
		"$(printf 'cvae\t8\t1\t1000\t3')" ]
	# the weight is the rate over the reference, to the rounding of a
	# double printed and read again (not always bit for bit)
	awk -v r="$rate" -v w="$weight" 'BEGIN { d = w * 1000 - r
		exit !(r > 0 && d * d <= (r * 1e-12) ^ 2) }'
	# two hosts' weights, as they are, to cg-shard
	cg-shard -q -n 2 --weights "$weight,$(awk -v w="$weight" 'BEGIN { print w / 2 }')" \
		-o w "$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini"
	local n0 n1
	n0=$(cg-inspect --no-stats w-0.cgd | sed -n 's/^examples: *//p')
	n1=$(cg-inspect --no-stats w-1.cgd | sed -n 's/^examples: *//p')
	[ $((n0 - 2 * n1)) -ge -2 ] && [ $((n0 - 2 * n1)) -le 2 ]
}

# cpu_groups: two CPU cgroups of the largest weight, CAPPED capped at a
# quarter of a CPU and FREE not; or 1 with the reason in CGROUP_WHY
cpu_groups() {
	local root=/sys/fs/cgroup
	if [ -f "$root/cgroup.controllers" ]; then
		grep -qw cpu "$root/cgroup.controllers" || {
			CGROUP_WHY="cgroup v2 without the cpu controller"
			return 1
		}
		root=$root
	elif [ -f "$root/cpu/cpu.cfs_quota_us" ]; then
		root=$root/cpu
	else
		CGROUP_WHY="no CPU cgroup: neither cgroup v2 nor v1's cpu controller under $root"
		return 1
	fi
	FREE=$root/cg-probe-free.$$
	CAPPED=$root/cg-probe-capped.$$
	if ! mkdir "$FREE" "$CAPPED" 2>/dev/null; then
		CGROUP_WHY="$root is not writable (not root?)"
		return 1
	fi
	CGROUPS="$FREE $CAPPED"
	if [ -f "$root/cgroup.controllers" ]; then
		echo 10000 >"$FREE/cpu.weight" &&
			echo 10000 >"$CAPPED/cpu.weight" &&
			echo "25000 100000" >"$CAPPED/cpu.max"
	else
		echo 262144 >"$FREE/cpu.shares" &&
			echo 262144 >"$CAPPED/cpu.shares" &&
			echo 100000 >"$CAPPED/cpu.cfs_period_us" &&
			echo 25000 >"$CAPPED/cpu.cfs_quota_us"
	fi || {
		CGROUP_WHY="$root: cannot set the weight or the cap"
		return 1
	}
}

# probe GROUP: one thread's examples/s and the share of a CPU it used,
# in cgroup GROUP
probe() {
	sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$1" \
		cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" -j 1 --seconds 4 \
		--warmup 1 --windows 8 --json |
		jq -r '"\(.examples_per_s) \(.cpu_seconds / .seconds * 1000 | round / 1000)"'
}

# probe_json GROUP: cg-probe --json of one thread in cgroup GROUP
probe_json() {
	sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$1" \
		cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" -j 1 --seconds 2 \
		--warmup 0.5 --windows 4 --json
}

# median VALUE...: the middle one, or the mean of the middle two
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

@test "cg-probe: the CPU its cgroup allows, and a capped host held to it" {
	cpu_groups || skip "$CGROUP_WHY"
	local out cap
	out=$(probe_json "$CAPPED")
	echo "# capped: $(jq -c '{cpu_cap, cpu_seconds, seconds, examples, examples_per_s}' <<<"$out")" >&3
	[ "$(jq .cpu_cap <<<"$out")" = 0.25 ]
	# the median window's rate is no more than the examples over the
	# CPU time the cap allows for them (a tenth over, for the median
	# against the whole)
	jq -e '.examples_per_s <= 1.1 * .examples / (.cpu_seconds / 0.25)' \
		<<<"$out" >/dev/null
	# the free group allows what the affinity does: this machine's CPUs
	# (nproc's count without OMP_NUM_THREADS, which it would print)
	local cpus
	cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
	out=$(probe_json "$FREE")
	cap=$(jq .cpu_cap <<<"$out")
	[ "$cap" = "$cpus" ] || {
		echo "free group: cpu_cap $cap, nproc $cpus"
		return 1
	}
	run -0 cg-probe -m "$D/model.cgm" -d "$D/fm-0.cgd" -j 1 --seconds 0.2 \
		--warmup 0.1 --windows 2
	assert_line --regexp '^cpu: +[0-9.]+ s \([0-9.]+ of a CPU(; allowed [0-9.]+)?\)$'
}

@test "cg-probe: a host capped at a quarter of a CPU weighs a quarter of a free one, within 25%" {
	cpu_groups || skip "$CGROUP_WHY"
	local free=() capped=() fcpu=() ccpu=() i f c ratio try r
	# three pairs; where the machine's other work has pushed their
	# medians out of the range, three more and the medians of all six
	for try in 1 2; do
		for i in 1 2 3; do
			r=$(probe "$FREE")
			free+=("${r% *}")
			fcpu+=("${r#* }")
			r=$(probe "$CAPPED")
			capped+=("${r% *}")
			ccpu+=("${r#* }")
		done
		f=$(median "${free[@]}")
		c=$(median "${capped[@]}")
		ratio=$(awk -v f="$f" -v c="$c" 'BEGIN { printf "%.3f", c / f }')
		echo "# free ${free[*]}; capped ${capped[*]} examples/s:" \
			"medians $f and $c, ratio $ratio (1/4 within 25%: 0.1875 to 0.3125);" \
			"CPU used: free ${fcpu[*]}, capped ${ccpu[*]}" >&3
		! awk -v r="$ratio" 'BEGIN { exit !(r >= 0.1875 && r <= 0.3125) }' ||
			return 0
	done
	false
}
