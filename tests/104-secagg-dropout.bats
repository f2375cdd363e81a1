#!/usr/bin/env bats
#
# 104-secagg-dropout.bats - a masked round of threshold 6 among 8
# workers (cg-train-step --mask-threshold) that closes without the
# workers cut off mid-round: each survivor's reveal (cg-reduce --reveal)
# and cg-reduce --unmask give the plain mean of the survivors' deltas
# within the fixed point's bound (fp.py checks it element by element and
# prints the largest difference), with 1 and 2 workers lost and with
# none; fewer updates or reveals than the threshold, a survivor's reveal
# missing, a late update of a lost worker, and hostile reveals and
# shares refused with one line, exit 1, nothing written; workers' noise
# shares counted over the updates in.  The programs
# come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	local w
	images fm -n 8
	small_cvae fm-0.cgd m.cgm --latent 2
	for w in 0 1 2 3 4 5 6 7; do
		cg-key --x25519 -C worker$w -o k$w
		cat k$w.pub >>peers
	done
	for w in 0 1 2 3 4 5 6 7; do
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps 2 \
			--batch 8 --seed $w -o d$w.cgg
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps 2 \
			--batch 8 --seed $w --mask k$w --peers peers \
			--mask-threshold 6 -o md$w.cgg
	done
	cat >fp.py <<'PY'
# fp.py F A B D...: A and B element by element within the fixed
# point's bound of the mean of the plain deltas D (each weighted by its
# manifest's "weight"): 2^-(F+1) and the f32 roundings of both means.
# Prints the largest difference; exit 1 past the bound.
import array, json, sys, tarfile

def read(path):
    with tarfile.open(path) as t:
        man = json.load(t.extractfile("cg.json"))
        out = {}
        for d in man["tensors"]:
            a = array.array("f")
            a.frombytes(t.extractfile(d["name"]).read())
            out[d["name"]] = a
    return man, out

F = int(sys.argv[1])
_, a = read(sys.argv[2])
_, b = read(sys.argv[3])
ds = [read(p) for p in sys.argv[4:]]
W = sum(m["weight"] for m, _ in ds)
n, worst, big, count = len(ds), 0.0, 0.0, 0
ulp = 2.0 ** -24
for k in ds[0][1]:
    for j in range(len(ds[0][1][k])):
        mean = sum(m["weight"] * t[k][j] for m, t in ds) / W
        mag = sum(m["weight"] * abs(t[k][j]) for m, t in ds) / W
        bound = 2.0 ** -(F + 1) + ulp * (2 * abs(mean) + (n + 2) * mag)
        d = abs(a[k][j] - b[k][j])
        worst = max(worst, d / bound)
        big = max(big, d)
        count += 1
print("largest difference %.3g over %d elements, %.3f of the bound"
      % (big, count, worst))
sys.exit(0 if worst <= 1 else 1)
PY
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR" || return 1
	export LC_ALL=C
	unset CG_TRUST
}

# survivors W...: each one's reveal rW.json of the masked updates of W...
survivors() {
	local w ins=()
	for w in "$@"; do ins+=("$D/md$w.cgg"); done
	for w in "$@"; do
		cg-reduce --reveal "$D/k$w" --peers "$D/peers" -o r$w.json "${ins[@]}"
	done
}

# closes W...: the round of W... closed with their reveals, against
# the plain mean of their deltas
closes() {
	local w ins=() plain=()
	for w in "$@"; do
		ins+=("$D/md$w.cgg")
		plain+=("$D/d$w.cgg")
	done
	run -0 cg-reduce --unmask 'r*.json' "${ins[@]}" -o mean.cgg
	run -0 sh -c "tar xOf mean.cgg cg.json | jq -c '[.masked, .inputs]'"
	assert_output "[$#,$#]"
	cg-reduce "${plain[@]}" -o plain.cgg
	run -0 python3 "$D/fp.py" 32 mean.cgg plain.cgg "${plain[@]}"
	echo "# $# of 8: $output" >&3
}

@test "--mask-threshold and --reveal: --help names them; misuse is a usage error or one line" {
	run -0 cg-train-step --help
	assert_output --partial '--mask-threshold T'
	run -0 cg-reduce --help
	assert_output --partial '--reveal KEY'
	assert_output --partial '--unmask FILES'
	local M=$D/m.cgm S=$D/fm-0.cgd
	run -2 cg-train-step -m $M -d $S --emit delta --mask-threshold 3 -o x
	run -2 cg-train-step -m $M -d $S --emit delta --mask "$D/k0" \
		--peers "$D/peers" --mask-threshold 1 -o x
	run -1 --separate-stderr cg-train-step -q -m $M -d $S --emit delta \
		--mask "$D/k0" --peers "$D/peers" --mask-threshold 9 -o x
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-train-step: --mask-threshold 9: more than the 8 peers"* ]]
	run -2 cg-reduce --reveal "$D/k0" "$D/md0.cgg" -o x
	run -2 cg-reduce --peers "$D/peers" "$D/md0.cgg" -o x
	run -2 cg-reduce --reveal "$D/k0" --peers "$D/peers" --unmask y "$D/md0.cgg" -o x
	[ ! -e x ]
}

@test "1 of 8 cut off mid-round: the survivors' reveals close it, the plain mean of the 7" {
	survivors 0 1 2 3 4 5 6
	closes 0 1 2 3 4 5 6
	# what a reveal holds: 7 shares, and one pairwise key, the lost one's
	run -0 jq -c '[(.present | length), (.shares | length), (.pairs | length)]' r0.json
	assert_output '[7,7,1]'
}

@test "2 of 8 cut off mid-round: closed by the 6 left, the plain mean of the 6" {
	survivors 0 2 3 4 6 7
	closes 0 2 3 4 6 7
}

@test "none cut off: 6 reveals take the self-masks off; the same mean as the plain round" {
	survivors 0 1 2 3 4 5 6 7
	rm r6.json r7.json
	closes 0 1 2 3 4 5 6 7
}

@test "fewer updates than the threshold: one line, exit 1, nothing written" {
	survivors 0 1 2 3 4
	run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md[0-4].cgg -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: 5 of 8 peers' updates in (missing: "*"), fewer than the threshold 6: the round cannot close" ]]
	run -1 --separate-stderr cg-reduce "$D"/md[0-4].cgg -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"fewer than the threshold 6"* ]]
	[ ! -e x.cgg ]
}

@test "reveals missing: fewer than the threshold, or a survivor's where a peer is lost: one line each" {
	survivors 0 1 2 3 4 5 6 7
	rm r[5-7].json
	run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md?.cgg -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: 5 reveals of the 8 peers in, fewer than the threshold 6"* ]]
	rm r*.json
	survivors 0 1 2 3 4 5 6
	rm r3.json
	run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md[0-6].cgg -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	local fp
	fp=$(cg-key -l "$D/k3.pub" | cut -c1-16)
	[[ ${stderr_lines[0]} == "cg-reduce: 1 peer lost ("*"), and the reveal of survivor $fp... is missing"* ]]
	[ ! -e x.cgg ]
}

@test "a lost worker's late update: the reveals made without it do not take it in" {
	survivors 0 1 2 3 4 5 6
	run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md?.cgg -o x.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: r0.json: made for another set of updates than the 8 in" ]]
	# nor does the lost worker reveal for a round it is not in
	run -1 --separate-stderr cg-reduce --reveal "$D/k7" --peers "$D/peers" \
		"$D"/md[0-6].cgg -o x.json
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: this key's own update is not among the inputs"* ]]
	[ ! -e x.cgg ] && [ ! -e x.json ]
}

@test "hostile reveals: altered, of another round, not JSON, twice, cut short: one line, exit 1, nothing written" {
	survivors 0 1 2 3 4 5 6
	mkdir keep && mv r*.json keep/
	cat >evil.py <<'PY'
import json, sys
how, src, out = sys.argv[1:4]
text = open(src).read()
j = json.loads(text)
flip = lambda h: ("1" if h[0] == "0" else "0") + h[1:]
if how == "share":
    j["shares"][2] = flip(j["shares"][2])
elif how == "pair":
    j["pairs"][0]["key"] = flip(j["pairs"][0]["key"])
elif how == "round":
    j["round_id"] = flip(j["round_id"])
elif how == "format":
    j["format"] = "cg-mask-reveal/9"
elif how == "present":
    j["present"] = j["present"][1:]
elif how == "field":
    j["shares"][0] = "ff" * 64
elif how == "short":
    open(out, "w").write(text[: len(text) // 2]); sys.exit(0)
open(out, "w").write(json.dumps(j))
PY
	local how
	for how in share pair round format present field short; do
		rm -f r*.json
		cp keep/r[1-6].json .
		python3 evil.py $how keep/r0.json r0.json
		run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md[0-6].cgg -o x.cgg
		echo "# $how: ${stderr_lines[0]}" >&3
		assert_equal "${#stderr_lines[@]}" 1
		[[ ${stderr_lines[0]} == "cg-reduce: r0.json: "* ]]
		[ ! -e x.cgg ]
	done
	# one survivor's reveal given twice
	rm -f r*.json
	cp keep/r*.json .
	cp r1.json r1b.json
	run -1 --separate-stderr cg-reduce --unmask 'r*.json' "$D"/md[0-6].cgg -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: r1b.json: a second reveal of key"* ]]
	# a reveal for a round without a threshold
	run -1 --separate-stderr cg-reduce --unmask r0.json "$D"/d[0-6].cgg -o x.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: r0.json: a reveal, but no masked inputs" ]]
	[ ! -e x.cgg ]
}

@test "hostile shares in an update: altered, or its threshold broken: one line at the survivor or the reader" {
	cat >evil.py <<'PY'
import io, json, sys, tarfile
how, src, out = sys.argv[1:4]
with tarfile.open(src) as t:
    ms = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
data = dict(ms)
man = json.loads(data["cg.json"])
m = man["mask"]
if how == "sealed":     # one byte of the share sealed for the next peer
    h = m["shares"][1]
    m["shares"][1] = ("1" if h[0] == "0" else "0") + h[1:]
elif how == "threshold":
    m["threshold"] = 99
elif how == "count":
    m["share_commits"] = m["share_commits"][:3]
elif how == "hex":
    m["round_id"] = "xyz"
data["cg.json"] = json.dumps(man).encode()
with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
    for n, _ in ms:
        ti = tarfile.TarInfo(n)
        ti.size, ti.mode = len(data[n]), 0o644
        t.addfile(ti, io.BytesIO(data[n]))
PY
	local how fp1 who
	# the peer the share at place 1 is sealed for (peers by fingerprint)
	fp1=$(for w in 0 1 2 3 4 5 6 7; do echo "$(cg-key -l "$D/k$w.pub" | cut -d' ' -f1) $w"; done | sort | sed -n 2p)
	who=${fp1##* }
	for how in sealed threshold count hex; do
		python3 evil.py $how "$D/md0.cgg" e0.cgg
		run -1 --separate-stderr cg-reduce --reveal "$D/k$who" --peers "$D/peers" \
			e0.cgg "$D"/md[1-7].cgg -o x.json
		echo "# $how: ${stderr_lines[0]}" >&3
		assert_equal "${#stderr_lines[@]}" 1
		[[ ${stderr_lines[0]} == "cg-reduce: e0.cgg: "* ]]
		[ ! -e x.json ]
	done
}

@test "noise shares under the masks: 6 of 8 in leave the mean noise of multiplier sigma sqrt(6/8), which the record counts" {
	local w ins=()
	for w in 0 1 2 3 4 5 6 7; do
		cg-train-step -q -m "$D/m.cgm" -d "$D/fm-$w.cgd" --emit delta --steps 1 \
			--batch 8 --seed $w --mask "$D/k$w" --peers "$D/peers" \
			--mask-threshold 6 --dp-clip 0.5 --dp-noise 2 -o n$w.cgg
	done
	for w in 0 1 2 3 4 5; do ins+=("n$w.cgg"); done
	for w in 0 1 2 3 4 5; do
		cg-reduce --reveal "$D/k$w" --peers "$D/peers" -o r$w.json "${ins[@]}"
	done
	run -0 cg-reduce --model "$D/m.cgm" --unmask 'r*.json' "${ins[@]}" -o mean.cgg
	run -0 jq -c '[.masked, .dp.release.clip, (.dp.release.sigma * 1e6 | round)]' \
		< <(tar xOf mean.cgg cg.json)
	assert_output '[6,0.5,1732051]'
}
