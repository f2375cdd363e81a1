#!/usr/bin/env bats
#
# 033-secagg.bats - secure aggregation through the programs: cg-key's
# X25519 keys; cg-train-step --mask's options, refused as usage errors
# or, for a key or peer list that cannot be read, with one line; a
# DiLoCo round of three masked workers reduced and applied, giving the
# model of the same round unmasked within the fixed point's bound
# (sagg.py checks it element by element and prints the largest
# difference); a masked delta of the full-size cvae uncorrelated with
# its true delta; a missing peer, another round, another peer list and
# hostile masked files refused with one line; cg-apply, the median and
# cg-inspect's statistics refusing or leaving alone the masked words;
# masked updates signed, reduced under --trust.  The programs come from
# PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	local w
	images fm -n 3
	small_cvae fm-0.cgd m.cgm --latent 2
	for w in 0 1 2; do cg-key --x25519 -C worker$w -o w$w; done
	cat w0.pub w1.pub w2.pub >peers
	mkdir peerdir && cp w0.pub w1.pub w2.pub peerdir/
	for w in 0 1 2; do
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps 3 \
			--batch 8 --seed $w -o d$w.cgg
		cg-train-step -q -m m.cgm -d fm-$w.cgd --emit delta --steps 3 \
			--batch 8 --seed $w --mask w$w --peers peers -o md$w.cgg
	done
	cat >sagg.py <<'EOF'
# sagg.py check F A B D...: A and B (models or updates), element by
# element, within the fixed point's bound of the mean of the plain
# deltas D (each weighted by its manifest's "weight"): 2^-(F+1) from
# the fixed point, the f32 roundings of both means (n + 2 for the plain
# fold) and, for models, one more rounding of each sum.  Prints the
# largest difference and its share of the bound; exit 1 past it.
# sagg.py corr MASKED PLAIN: Pearson's correlation of the masked words
# (as signed 64-bit) with the true values; exit 1 unless below 0.01.
import array, json, math, sys, tarfile

def read(path):
    with tarfile.open(path) as t:
        man = json.load(t.extractfile("cg.json"))
        out = {}
        for d in man["tensors"]:
            raw = t.extractfile(d["name"]).read()
            code = {"f32": "f", "u64": "Q"}.get(d["dtype"])
            if code:
                a = array.array(code)
                a.frombytes(raw)
                out[d["name"]] = a
    return man, out

if sys.argv[1] == "corr":
    _, m = read(sys.argv[2])
    _, p = read(sys.argv[3])
    xs, ys = [], []
    for k in p:
        xs.extend(p[k])
        ys.extend(v - (1 << 64) if v >= 1 << 63 else v for v in m[k])
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    r = sxy / math.sqrt(sxx * syy)
    print("correlation %.5f over %d values" % (r, n))
    sys.exit(0 if abs(r) < 0.01 else 1)

F = int(sys.argv[2])
_, a = read(sys.argv[3])
_, b = read(sys.argv[4])
ds = [read(p) for p in sys.argv[5:]]
W = sum(m["weight"] for m, _ in ds)
n, worst, big, count = len(ds), 0.0, 0.0, 0
ulp = 2.0 ** -24
for k in ds[0][1]:
    for j in range(len(ds[0][1][k])):
        mean = sum(m["weight"] * t[k][j] for m, t in ds) / W
        mag = sum(m["weight"] * abs(t[k][j]) for m, t in ds) / W
        bound = 2.0 ** -(F + 1) + ulp * (2 * abs(mean) + (n + 2) * mag)
        bound += 2 * ulp * max(abs(a[k][j]), abs(b[k][j]))
        d = abs(a[k][j] - b[k][j])
        worst = max(worst, d / bound)
        big = max(big, d)
        count += 1
print("largest difference %.3g over %d elements, %.3f of the bound"
      % (big, count, worst))
sys.exit(0 if worst <= 1 else 1)
EOF
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR" || return 1
	export LC_ALL=C
	unset CG_TRUST
}

@test "cg-key --x25519: an x25519 .pub line, a private key of mode 0600, listed with its fingerprint" {
	run -0 cg-key --x25519 -C peer -o k
	run -0 cat k.pub
	assert_output --regexp '^x25519 [0-9a-f]{64} peer$'
	run -0 stat -c %a k
	assert_output 600
	run -0 cg-key -l k
	local fp=$output
	[[ $fp =~ ^[0-9a-f]{64}\ peer$ ]] || [[ $fp =~ ^[0-9a-f]{64}\ k$ ]]
	run -0 cg-key -l k.pub
	[ "${output%% *}" = "${fp%% *}" ]
	# the fingerprint is the SHA-256 of the 32 bytes of the key
	local hex
	hex=$(cut -d' ' -f2 k.pub)
	run -0 sh -c "printf '%s' $hex | xxd -r -p | sha256sum"
	[ "${output%% *}" = "${fp%% *}" ]
	# a masking key signs nothing, and a signing key masks nothing
	run -1 --separate-stderr cg-init -a cvae -d "$D/fm-0.cgd" --sign k -o x.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"not an Ed25519 key"* ]]
	[ ! -e x.cgm ]
	cg-key -o ed
	run -1 --separate-stderr cg-train-step -q -m "$D/m.cgm" -d "$D/fm-0.cgd" \
		--emit delta --mask ed --peers "$D/peers" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-train-step: "*"not an X25519 key"* ]]
	[ ! -e x.cgg ]
	run -2 cg-key -l --x25519 k
}

@test "cg-train-step --mask: --help names it; its options without it, or with --codec, are usage errors" {
	run -0 cg-train-step --help
	assert_output --partial '--mask KEY'
	assert_output --partial '--peers FILE'
	assert_output --partial '--mask-round TEXT'
	run -0 cg-key --help
	assert_output --partial '--x25519'
	local M=$D/m.cgm S=$D/fm-0.cgd
	run -2 --separate-stderr cg-train-step -m $M -d $S --emit delta --mask-bogus 1 -o x
	[[ ${stderr_lines[0]} == "cg-train-step: "*"mask-bogus"* ]]
	run -2 --separate-stderr cg-train-step -m $M -d $S --emit delta --mask "$D/w0" -o x
	[[ ${stderr_lines[0]} == *"--mask needs --peers"* ]]
	run -2 --separate-stderr cg-train-step -m $M -d $S --emit delta --peers "$D/peers" -o x
	[[ ${stderr_lines[0]} == *"--peers needs --mask"* ]]
	run -2 cg-train-step -m $M -d $S --emit delta --mask "$D/w0" --peers "$D/peers" \
		--codec q8 --no-error-feedback -o x
	run -2 cg-train-step -m $M -d $S --emit model --mask "$D/w0" --peers "$D/peers" -o x
	run -2 --separate-stderr cg-train-step -m $M -d $S --emit delta --codec masked -o x
	[[ ${stderr_lines[0]} == *"--codec masked: give --mask KEY --peers FILE"* ]]
	run -2 cg-train-step -m $M -d $S --emit delta --mask "$D/w0" --peers "$D/peers" \
		--mask-bits 60 -o x
	run -2 cg-train-step -m $M -d $S --emit delta --mask "$D/w0" --peers "$D/peers" \
		--mask-round "$(printf '%0300d' 0)" -o x
	[ ! -e x ]
}

@test "cg-train-step --mask: a missing key or peer list, or a key not among the peers, is one line, nothing written" {
	local M=$D/m.cgm S=$D/fm-0.cgd
	run -1 --separate-stderr cg-train-step -q -m $M -d $S --emit delta \
		--mask nokey --peers "$D/peers" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-train-step: nokey: "* ]]
	run -1 --separate-stderr cg-train-step -q -m $M -d $S --emit delta \
		--mask "$D/w0" --peers nopeers -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-train-step: nopeers: "* ]]
	cg-key --x25519 -o stranger
	run -1 --separate-stderr cg-train-step -q -m $M -d $S --emit delta \
		--mask stranger --peers "$D/peers" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"not among the peers"* ]]
	# a peer list with a signing key in it
	cg-key -o ed
	cat "$D/peers" ed.pub >mixed
	run -1 --separate-stderr cg-train-step -q -m $M -d $S --emit delta \
		--mask "$D/w0" --peers mixed -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == *"mixed:4: key algorithm 'ed25519', not x25519"* ]]
	[ ! -e x.cgg ]
}

@test "a masked round: reduced and applied, the unmasked round's model within the fixed point's bound" {
	cd "$D"
	run -0 cg-reduce md0.cgg md1.cgg md2.cgg -o "$BATS_TEST_TMPDIR/mmean.cgg"
	run -0 cg-reduce d0.cgg d1.cgg d2.cgg -o "$BATS_TEST_TMPDIR/mean.cgg"
	cd "$BATS_TEST_TMPDIR"
	run -0 python3 "$D/sagg.py" check 32 mmean.cgg mean.cgg "$D"/d0.cgg "$D"/d1.cgg "$D"/d2.cgg
	echo "# deltas: $output" >&3
	# samples and weight stay in the clear, and add up
	run -0 sh -c "tar xOf mmean.cgg cg.json | jq -c '[.samples, .weight, .masked, .mask]'"
	local want
	want=$(tar xOf mean.cgg cg.json | jq -c '[.samples, .weight]')
	assert_output "${want%]},3,null]"
	# an input on standard input: the same bytes
	cat "$D/md0.cgg" | cg-reduce - "$D/md1.cgg" "$D/md2.cgg" -o mmean2.cgg
	cmp mmean.cgg mmean2.cgg
	cg-apply -m "$D/m.cgm" --outer avg mmean.cgg -o masked.cgm
	cg-apply -m "$D/m.cgm" --outer avg mean.cgg -o plain.cgm
	run -0 python3 "$D/sagg.py" check 32 masked.cgm plain.cgm "$D"/d0.cgg "$D"/d1.cgg "$D"/d2.cgg
	echo "# models: $output" >&3
}

@test "a peer directory and --mask-round: the same round's masks cancel; another round's do not meet" {
	local M=$D/m.cgm w
	for w in 0 1 2; do
		cg-train-step -q -m $M -d "$D/fm-$w.cgd" --emit delta --steps 3 \
			--batch 8 --seed $w --mask "$D/w$w" --peers "$D/peerdir" \
			--mask-round r7 -o r$w.cgg
	done
	# other masks (the round text is in their seed), the same mean
	! cmp -s r0.cgg "$D/md0.cgg"
	cg-reduce r0.cgg r1.cgg r2.cgg -o a.cgg
	cg-reduce "$D"/md?.cgg -o b.cgg
	cmp a.cgg b.cgg
	run -1 --separate-stderr cg-reduce r0.cgg r1.cgg "$D/md2.cgg" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: $D/md2.cgg: "*"round ''; the first input"*"'r7'"* ]]
	[ ! -e x.cgg ]
}

@test "a missing peer: one line naming it, exit 1, nothing written" {
	run -1 --separate-stderr cg-reduce "$D/md0.cgg" "$D/md2.cgg" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	local fp
	fp=$(cg-key -l "$D/w1.pub" | cut -c1-16)
	[[ ${stderr_lines[0]} == "cg-reduce: 1 of 3 peers missing ($fp...): "* ]]
	[ ! -e x.cgg ]
	# twice the same worker is not two peers
	run -1 --separate-stderr cg-reduce "$D/md0.cgg" "$D/md0.cgg" "$D/md2.cgg" -o x.cgg
	[[ ${stderr_lines[0]} == *"a second masked update of key"* ]]
	[ ! -e x.cgg ]
}

@test "a worker with another peer list: refused by its manifest, or by masks that do not cancel" {
	local M=$D/m.cgm
	cg-key --x25519 -C impostor -o imp
	cat "$D/w0.pub" "$D/w1.pub" imp.pub >other
	cg-train-step -q -m $M -d "$D/fm-1.cgd" --emit delta --steps 3 --batch 8 \
		--seed 1 --mask "$D/w1" --peers other -o o1.cgg
	run -1 --separate-stderr cg-reduce "$D/md0.cgg" o1.cgg "$D/md2.cgg" -o x.cgg
	[[ ${stderr_lines[0]} == "cg-reduce: o1.cgg: masked among other peers"* ]]
	# the same file lying about its peers: its words give it away
	python3 - o1.cgg "$D/md1.cgg" liar.cgg <<'EOF'
import io, json, sys, tarfile
src, honest, out = sys.argv[1:4]
with tarfile.open(honest) as t:
    good = json.load(t.extractfile("cg.json"))["mask"]["peers"]
with tarfile.open(src) as t:
    ms = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
man = json.loads(dict(ms)["cg.json"])
man["mask"]["peers"] = good
with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
    for n, d in ms:
        if n == "cg.json":
            d = json.dumps(man).encode()
        ti = tarfile.TarInfo(n)
        ti.size, ti.mode = len(d), 0o644
        t.addfile(ti, io.BytesIO(d))
EOF
	run -1 --separate-stderr cg-reduce "$D/md0.cgg" liar.cgg "$D/md2.cgg" -o x.cgg
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-reduce: tensor "*"the masks do not cancel"* ]]
	[ ! -e x.cgg ]
}

@test "hostile masked files: a tensor cut short, of another dtype, a mask object broken: one line each, exit 1" {
	cat >evil.py <<'EOF'
import hashlib, io, json, sys, tarfile
how, src, out = sys.argv[1:4]
with tarfile.open(src) as t:
    ms = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
data = dict(ms)
man = json.loads(data["cg.json"])
t0 = man["tensors"][1]
if how == "short":      # 8 bytes less, digest and length made again
    data[t0["name"]] = data[t0["name"]][:-8]
    t0["bytes"] = len(data[t0["name"]])
    t0["sha256"] = hashlib.sha256(data[t0["name"]]).hexdigest()
elif how == "shape":    # a shape that matches its bytes, not the layout
    t0["shape"] = [t0["shape"][0] // 2, 2] if t0["shape"][0] % 2 == 0 else [1, t0["shape"][0]]
elif how == "dtype":    # the same bytes called f32, twice as many
    t0["dtype"] = "f32"; t0["shape"] = [t0["shape"][0] * 2] + t0["shape"][1:]
elif how == "peers":
    man["mask"]["peers"] = man["mask"]["peers"][:1]
elif how == "nomask":
    del man["mask"]
elif how == "codec":    # told it is plain u64 values
    del man["codec"]; del man["layout"]; del man["mask"]
data["cg.json"] = json.dumps(man).encode()
with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
    for n, _ in ms:
        ti = tarfile.TarInfo(n)
        ti.size, ti.mode = len(data[n]), 0o644
        t.addfile(ti, io.BytesIO(data[n]))
EOF
	local how
	for how in short shape dtype peers nomask codec; do
		python3 evil.py $how "$D/md1.cgg" e-$how.cgg
		run -1 --separate-stderr cg-reduce "$D/md0.cgg" e-$how.cgg "$D/md2.cgg" -o x.cgg
		echo "# $how: ${stderr_lines[0]}" >&3
		assert_equal "${#stderr_lines[@]}" 1
		[[ ${stderr_lines[0]} == "cg-reduce: "* ]]
		[ ! -e x.cgg ]
	done
}

@test "no reader takes masked words for values: cg-apply and the median refuse, cg-inspect shows no statistics" {
	run -1 --separate-stderr cg-apply -m "$D/m.cgm" "$D/md0.cgg" -o x.cgm
	assert_equal "${#stderr_lines[@]}" 1
	[[ ${stderr_lines[0]} == "cg-apply: $D/md0.cgg: masked (secure aggregation)"* ]]
	[ ! -e x.cgm ]
	run -1 --separate-stderr cg-reduce --op median "$D"/md?.cgg -o x.cgg
	[[ ${stderr_lines[0]} == *"--op median cannot read masked values"* ]]
	[ ! -e x.cgg ]
	run -1 --separate-stderr cg-reduce "$D/md0.cgg" "$D/d1.cgg" "$D/md2.cgg" -o x.cgg
	[[ ${stderr_lines[0]} == *"a plain input among masked ones"* ]]
	run -0 cg-inspect "$D/md0.cgg"
	assert_output --partial '"name":"masked"'
	refute_output --partial 'HISTOGRAM'
	run -0 sh -c "cg-inspect --json '$D/md0.cgg' | jq '[.tensors[] | has(\"mean\")] | any'"
	assert_output false
	# nor cg-reduce --codec: a masked update is made by a worker only
	run -1 --separate-stderr cg-reduce --codec masked "$D"/d?.cgg -o x.cgg
	[[ ${stderr_lines[0]} == *"no masking key"* ]]
}

@test "a masked delta of the full-size cvae: correlation with its true delta below 0.01" {
	cg-init -a cvae -d "$D/fm-0.cgd" --seed 1 -o big.cgm
	cg-train-step -q -m big.cgm -d "$D/fm-0.cgd" --emit delta --steps 2 \
		--batch 16 --seed 1 -o plain.cgg
	cg-train-step -q -m big.cgm -d "$D/fm-0.cgd" --emit delta --steps 2 \
		--batch 16 --seed 1 --mask "$D/w0" --peers "$D/peers" -o masked.cgg
	run -0 python3 "$D/sagg.py" corr masked.cgg plain.cgg
	echo "# $output" >&3
}

@test "signed and masked: the signature covers the mask; --trust reads the round as any other" {
	local M=$D/m.cgm w
	for w in 0 1 2; do cg-key -C s$w -o s$w; done
	cat s0.pub s1.pub s2.pub >trusted
	for w in 0 1 2; do
		cg-train-step -q -m $M -d "$D/fm-$w.cgd" --emit delta --steps 3 \
			--batch 8 --seed $w --mask "$D/w$w" --peers "$D/peers" \
			--sign s$w -o sm$w.cgg
	done
	run -0 cg-reduce --trust trusted sm0.cgg sm1.cgg sm2.cgg -o mean.cgg
	run -0 sh -c "tar xOf mean.cgg cg.json | jq '.signers | length'"
	assert_output 3
	cg-reduce "$D"/md?.cgg -o plain.cgg
	run -0 cg-inspect --diff mean.cgg plain.cgg
	assert_output --partial 'tensors:    12 in A, 12 in B: 12 identical'
	# unsigned masked updates are refused under the trust list
	run -1 --separate-stderr cg-reduce --trust trusted "$D"/md?.cgg -o x.cgg
	[[ ${stderr_lines[0]} == *"unsigned"* ]]
	[ ! -e x.cgg ]
}
