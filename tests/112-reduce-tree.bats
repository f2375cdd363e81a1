#!/usr/bin/env bats
#
# 112-reduce-tree.bats - many workers: reductions of reductions, and
# several coordinators each reducing a slice of the tensors.  A tree of
# mean (or sum) reductions gives the flat reduction's manifest and its
# values within the bound of the float roundings each level adds (the
# order of summation differs, so not bit for bit: cg-reduce(1) says
# the bound, checked here element by element); the other operations
# refuse reductions beside other inputs.  cg-reduce --slice I/N
# reduces slice I of N of the tensors, and --join lays the N slices
# side by side into the bytes the whole reduction writes, for trees of
# slices too.  The programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	export OMP_NUM_THREADS=1
	images fm -n 8 --strategy round-robin
	small_cvae fm-0.cgd model.cgm
	local w
	for w in 0 1 2 3 4 5 6 7; do
		cg-train-step -q -m model.cgm -d fm-$w.cgd --emit delta \
			--steps 2 --batch 8 -o d$w.cgg
	done
	# one worker of another batch size, so the weights differ
	cg-train-step -q -m model.cgm -d fm-7.cgd --emit delta --steps 2 \
		--batch 5 --seed 3 -o d8.cgg
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C OMP_NUM_THREADS=1
}

manifest() { tar xOf "$1" cg.json; }

# near OP DEPTH FLAT TREE INPUT...: every element of TREE, a tree of
# DEPTH levels, within the bound of cg-reduce(1), (2n + 3d + 3) 2^-24 S
# of FLAT, S = sum w_i |x_i| / sum w_i for the mean (sum |x_i| for the
# sum) over the n INPUTs; prints the largest difference over its
# bound, fails past 1
near() {
	python3 - "$@" <<'EOF'
import json, struct, sys, tarfile
op, d, flat, tree, ins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def load(path):
    with tarfile.open(path) as t:
        m = json.loads(t.extractfile("cg.json").read())
        v = {}
        for d in m["tensors"]:
            assert d["dtype"] == "f32", d
            b = t.extractfile(d["name"]).read()
            v[d["name"]] = struct.unpack("<%df" % (len(b) // 4), b)
    return m, v
_, f = load(flat)
_, r = load(tree)
S, wsum = {}, 0.0
for p in ins:
    m, x = load(p)
    w = 1.0 if op == "sum" else m.get("weight", m["samples"])
    wsum += w
    for k, a in x.items():
        s = S.setdefault(k, [0.0] * len(a))
        for j, y in enumerate(a):
            s[j] += w * abs(y)
n, worst, where = len(ins), 0.0, None
for k, a in f.items():
    for j, y in enumerate(a):
        bound = (2 * n + 3 * d + 3) * 2.0**-24 * S[k][j] / (1 if op == "sum" else wsum) + 1e-45
        q = abs(r[k][j] - y) / bound
        if q > worst:
            worst, where = q, (k, j, y, r[k][j])
print("largest difference: %.3g of the bound at %s" % (worst, where))
sys.exit(worst > 1)
EOF
}

# rewrite IN OUT JQ: IN with its manifest passed through the jq filter
# JQ, the tensors as they were (their digests still right)
rewrite() {
	python3 - "$1" "$2" "$(manifest "$1" | jq -c "$3")" <<'EOF'
import io, sys, tarfile
src, dst, man = sys.argv[1:4]
with tarfile.open(src) as t, \
        tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as o:
    for m in t.getmembers():
        b = man.encode() if m.name == "cg.json" else t.extractfile(m).read()
        ti = tarfile.TarInfo(m.name)
        ti.size, ti.mode = len(b), 0o644
        o.addfile(ti, io.BytesIO(b))
EOF
}

# same A B: the manifests' figures a tree keeps from its leaves
same_figures() {
	local f='{kind, base, samples, weight, inputs, reduce, contributors}'
	[ "$(manifest "$1" | jq -cS "$f")" = "$(manifest "$2" | jq -cS "$f")" ]
}

@test "cg-reduce: a tree of means is the flat mean, within its roundings" {
	cg-reduce "$D"/d?.cgg -o flat.cgg
	# fan-in 3: three partial means, unevenly sized, then the root
	cg-reduce "$D"/d0.cgg "$D"/d1.cgg "$D"/d2.cgg -o p0.cgg
	cg-reduce "$D"/d3.cgg "$D"/d4.cgg "$D"/d5.cgg -o p1.cgg
	cg-reduce "$D"/d6.cgg "$D"/d7.cgg "$D"/d8.cgg -o p2.cgg
	cg-reduce p0.cgg p1.cgg p2.cgg -o tree.cgg
	same_figures flat.cgg tree.cgg
	run -0 near mean 2 flat.cgg tree.cgg "$D"/d?.cgg
	echo "$output"
	# three levels, a worker beside a partial at each
	cg-reduce "$D"/d0.cgg "$D"/d1.cgg | cg-reduce - "$D"/d2.cgg -o q0.cgg
	cg-reduce q0.cgg p1.cgg "$D"/d6.cgg -o q1.cgg
	cg-reduce "$D"/d7.cgg q1.cgg "$D"/d8.cgg -o deep.cgg
	same_figures flat.cgg deep.cgg
	run -0 near mean 4 flat.cgg deep.cgg "$D"/d?.cgg
	echo "$output"
	# and the bound is tight enough to see a worker left out
	cg-reduce "$D"/d[0-7].cgg -o less.cgg
	run -1 near mean 1 flat.cgg less.cgg "$D"/d?.cgg
}

@test "cg-reduce: a tree of sums is the flat sum, within its roundings" {
	cg-reduce --op sum "$D"/d?.cgg -o flat.cgg
	cg-reduce --op sum "$D"/d[0-4].cgg -o p0.cgg
	cg-reduce --op sum "$D"/d[5-8].cgg -o p1.cgg
	cg-reduce --op sum p1.cgg p0.cgg -o tree.cgg
	same_figures flat.cgg tree.cgg
	run -0 near sum 2 flat.cgg tree.cgg "$D"/d?.cgg
	echo "$output"
}

@test "cg-reduce: a reduction is reduced again only by its own operation, mean or sum" {
	cg-reduce "$D"/d0.cgg "$D"/d1.cgg -o mean.cgg
	cg-reduce --op median "$D"/d2.cgg "$D"/d3.cgg "$D"/d4.cgg -o med.cgg
	cg-reduce --op sum "$D"/d5.cgg "$D"/d6.cgg -o sum.cgg
	local op
	for op in median trimmed-mean:0.2 clip-mean:1 sent-mean; do
		run -1 --separate-stderr cg-reduce --op $op "$D"/d7.cgg mean.cgg -o out.cgg
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == "cg-reduce: mean.cgg: a reduction by mean: --op ${op%%:*} of reductions is not the ${op%%:*} of their inputs (only mean and sum reduce in a tree)" ]]
		[ ! -e out.cgg ]
	done
	run -1 --separate-stderr cg-reduce --op median med.cgg "$D"/d7.cgg -o out.cgg
	assert_equal "$stderr" "cg-reduce: $D/d7.cgg: the first input is a reduction by median: --op median of reductions is not the median of their inputs (only mean and sum reduce in a tree)"
	run -1 --separate-stderr cg-reduce med.cgg "$D"/d7.cgg -o out.cgg
	assert_equal "$stderr" "cg-reduce: $D/d7.cgg: the first input is a reduction by median: --op mean does not reduce it further (a tree reduces by one operation)"
	run -1 --separate-stderr cg-reduce "$D"/d7.cgg sum.cgg -o out.cgg
	assert_equal "$stderr" "cg-reduce: sum.cgg: a reduction by sum: --op mean does not reduce it further (a tree reduces by one operation)"
	run -1 --separate-stderr cg-reduce --op sum mean.cgg sum.cgg -o out.cgg
	assert_equal "$stderr" "cg-reduce: sum.cgg: the first input is a reduction by mean: --op sum does not reduce it further (a tree reduces by one operation)"
	[ ! -e out.cgg ]
	# alone, a result is still coded again
	run -0 cg-reduce --codec q8 med.cgg -o med.cgu
	# and a worker counted in two partials is refused by its identity
	cg-reduce "$D"/d1.cgg "$D"/d2.cgg -o other.cgg
	run -1 --separate-stderr cg-reduce mean.cgg other.cgg -o out.cgg
	[[ $stderr == "cg-reduce: other.cgg: the same worker "*" as mean.cgg" ]]
	[ ! -e out.cgg ]
}

@test "cg-reduce --slice: the slices are runs of whole tensors, none empty, in order" {
	local all n k
	all=$(manifest "$D/d0.cgg" | jq -c '[.tensors[].name]')
	for n in 1 2 5 12; do
		for ((k = 1; k <= n; k++)); do
			cg-reduce --slice $k/$n "$D"/d?.cgg -o s$k.cgg
			run -0 jq -c .slice <(manifest s$k.cgg)
			assert_output "{\"index\":$((k - 1)),\"of\":$n}"
			run -0 jq '.tensors | length' <(manifest s$k.cgg)
			[ "$output" -ge 1 ]
		done
		run -0 bash -c 'for f in "$@"; do tar xOf $f cg.json; done |
			jq -sc "[.[].tensors[].name]"' _ $(for ((k = 1; k <= n; k++)); do echo s$k.cgg; done)
		assert_output "$all"
		rm s*.cgg
	done
	# two of the cvae's twelve tensors hold nearly all its values: each
	# slice of two holds one, the boundary nearest the half
	cg-reduce --slice 1/2 "$D"/d?.cgg -o s1.cgg
	run -0 jq -c '[.tensors[].name] | [first, last]' <(manifest s1.cgg)
	assert_output '["enc.0.w","dec.0.b"]'
}

@test "cg-reduce --join: the slices make the whole reduction's bytes, of any operation" {
	local op n i
	for op in mean sum median trimmed-mean:0.2 sent-mean; do
		cg-reduce --op $op "$D"/d?.cgg -o whole.cgg
		for n in 1 3 12; do
			for ((i = 1; i <= n; i++)); do
				cg-reduce --op $op --slice $i/$n "$D"/d?.cgg -o s$i.cgg
			done
			# in any order
			cg-reduce --join $(ls s*.cgg | sort -r) -o joined.cgg
			cmp whole.cgg joined.cgg
			rm s*.cgg joined.cgg
		done
	done
	# through pipes, compressed
	cg-reduce "$D"/d?.cgg -o whole.cgg
	cg-reduce --slice 2/2 "$D"/d?.cgg -z zstd -o s2.cgg
	cg-reduce --slice 1/2 "$D"/d?.cgg | cg-reduce --join - s2.cgg >joined.cgg
	cmp whole.cgg joined.cgg
}

@test "cg-reduce --slice: a tree of slices joins to the tree's bytes" {
	cg-reduce "$D"/d[0-3].cgg -o r0.cgg
	cg-reduce "$D"/d[4-8].cgg -o r1.cgg
	cg-reduce r0.cgg r1.cgg -o tree.cgg
	local i
	for i in 1 2 3; do
		# each rack sends each coordinator its slice
		cg-reduce --slice $i/3 "$D"/d[0-3].cgg -o r0-$i.cgg
		cg-reduce --slice $i/3 "$D"/d[4-8].cgg -o r1-$i.cgg
	done
	# coordinator 1 told its slice, 2 and 3 not (their inputs say it)
	cg-reduce --slice 1/3 r0-1.cgg r1-1.cgg -o c1.cgg
	cg-reduce r0-2.cgg r1-2.cgg -o c2.cgg
	cg-reduce r0-3.cgg r1-3.cgg -o c3.cgg
	cg-reduce --join c3.cgg c1.cgg c2.cgg -o joined.cgg
	cmp tree.cgg joined.cgg
	# a joined update applies as the whole one does
	cg-apply -m "$D/model.cgm" --outer nesterov tree.cgg -o a.cgm
	cg-apply -m "$D/model.cgm" --outer nesterov joined.cgg -o b.cgm
	cmp a.cgm b.cgm
}

@test "cg-reduce --slice, --join: what does not make the whole reduction is refused" {
	for i in 1 2 3; do
		cg-reduce --slice $i/3 "$D"/d[0-3].cgg -o s$i.cgg
	done
	cg-reduce --slice 2/3 "$D"/d[4-8].cgg -o t2.cgg
	cg-reduce --slice 2/2 "$D"/d[0-3].cgg -o h2.cgg
	cg-reduce --codec q8 s3.cgg -o s3.cgu
	refused() {
		run -1 --separate-stderr "$@" -o out.cgg
		assert_equal "${#stderr_lines[@]}" 1
		assert_equal "$stderr" "$expect"
		[ ! -e out.cgg ]
	}
	expect="cg-reduce: $D/d4.cgg: whole, the first input slice 1 of 3"
	refused cg-reduce s1.cgg "$D"/d4.cgg
	expect="cg-reduce: s2.cgg: slice 2 of 3, the first input slice 1 of 3"
	refused cg-reduce s1.cgg s2.cgg
	expect="cg-reduce: s2.cgg: slice 2 of 3, not the slice 1 of 3 reduced"
	refused cg-reduce --slice 1/3 s2.cgg
	expect="cg-reduce: s2.cgg: slice 2 of 3, not the slice 2 of 2 reduced"
	refused cg-reduce --slice 2/2 s2.cgg
	expect="cg-reduce: $D/d0.cgg: 13 slices of 12 tensors: a slice is one tensor at least"
	refused cg-reduce --slice 13/13 "$D"/d0.cgg
	expect="cg-reduce: --op clip-mean measures each input over the whole update: it is not sliced"
	refused cg-reduce --op clip-mean:1 --slice 1/2 "$D"/d0.cgg "$D"/d1.cgg
	expect="cg-reduce: differential privacy clips each input over the whole update: it is not sliced"
	refused cg-reduce --dp-clip 1 --slice 1/2 "$D"/d0.cgg "$D"/d1.cgg
	expect="cg-reduce: s1.cgg: slice 1 of 3, but 2 slices given"
	refused cg-reduce --join s1.cgg s3.cgg
	expect="cg-reduce: s1.cgg: slice 1 of 3, as s1.cgg is"
	refused cg-reduce --join s1.cgg s1.cgg s2.cgg
	expect="cg-reduce: h2.cgg: slice 2 of 2, but 3 slices given"
	refused cg-reduce --join s1.cgg h2.cgg s3.cgg
	expect="cg-reduce: t2.cgg: not a slice of the reduction s1.cgg is a slice of (its manifest differs)"
	refused cg-reduce --join s1.cgg t2.cgg s3.cgg
	run -0 jq -r '.tensors[0].name' <(manifest s3.cgg)
	expect="cg-reduce: s3.cgu: tensor $output: not dense f32 (only the slices as reduced join)"
	refused cg-reduce --join s1.cgg s2.cgg s3.cgu
	expect="cg-reduce: $D/d0.cgg: a whole update, not a slice"
	refused cg-reduce --join "$D"/d0.cgg
	# a file whose "slice" lies about its tensors, or is no slice
	rewrite "$D/d0.cgg" l1.cgg '.slice = {index: 0, of: 3}'
	cg-reduce --slice 2/3 "$D"/d0.cgg -o l2.cgg
	cg-reduce --slice 3/3 "$D"/d0.cgg -o l3.cgg
	expect="cg-reduce: l2.cgg: not a slice of the reduction l1.cgg is a slice of (its manifest differs)"
	refused cg-reduce --join l1.cgg l2.cgg l3.cgg
	rewrite l2.cgg l1.cgg '.slice = {index: 0, of: 3}'
	expect="cg-reduce: l1.cgg: slice 1 of 3 does not hold the tensors of that slice"
	refused cg-reduce --join l1.cgg l2.cgg l3.cgg
	local bad
	for bad in '"x"' '{index: 2, of: 2}' '{index: 0, of: 1e300}' \
		'{index: 0.5, of: 2}' '{of: 2}' '{index: -1, of: 2}'; do
		rewrite "$D/d0.cgg" b.cgg ".slice = $bad"
		expect="cg-reduce: b.cgg: manifest: \"slice\" is not {\"index\": I, \"of\": N} with 0 <= I < N <= 4096"
		refused cg-reduce b.cgg
	done
	# cg-apply takes only the whole update
	run -1 --separate-stderr cg-apply -m "$D/model.cgm" s1.cgg -o out.cgm
	assert_equal "$stderr" "cg-apply: s1.cgg: slice 1 of 3 of a reduction: join the 3 slices first (cg-reduce --join)"
	[ ! -e out.cgm ]
}

@test "cg-reduce --slice, --join: usage errors" {
	local bad
	for bad in 0/3 4/3 -1/2 1 1/ /2 0/0 1/4097 1/2x x/2; do
		run -2 --separate-stderr cg-reduce --slice "$bad" "$D"/d0.cgg
		assert_equal "${stderr_lines[0]}" "cg-reduce: --slice: '$bad' is not I/N with 1 <= I <= N <= 4096"
	done
	for bad in "--slice 1/2" "--op sum" "--codec q8" "--model $D/model.cgm"; do
		run -2 --separate-stderr cg-reduce --join $bad "$D"/d0.cgg
		[[ ${stderr_lines[0]} == "cg-reduce: --join lays slices side by side: no --slice, "* ]]
	done
	run -0 cg-reduce --help
	assert_line --partial "--slice I/N"
	assert_line --partial "--join"
}
