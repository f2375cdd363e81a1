#!/usr/bin/env bats
#
# 032-sign.bats - signed files through the programs: cg-key's keys; a
# signature that OpenSSL's own command line verifies; and the matrix:
# every program that reads cg files, given --trust, refuses with one line
# and exit status 1 a file that is unsigned, signed by a key not in the
# list, altered after signing (its manifest, a tensor, a tensor with its
# digest made again) or whose signature member is cut short or garbage,
# and accepts the file signed by a trusted key.  Also: CG_TRUST, a
# directory as a trust list, what cg-inspect --verify says of a signer,
# the signers a reduction records, and manifests of unknown kinds
# refused by every reader.  The programs come from PATH; sign.py (below)
# makes the altered files.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	cg-key -C good -o good
	cg-key -C evil -o evil
	images fm -n 1 --sign good
	images fm-evil -n 1 --sign evil
	images fm-u -n 1
	for k in good evil; do
		small_cvae fm-0.cgd m-$k.cgm --latent 2 --sign $k
		cg-train-step -q -m m-good.cgm -d fm-0.cgd --emit delta --steps 2 \
			--batch 8 --seed 1 --sign $k -o d-$k.cgg
		cg-train-step -q -m m-good.cgm -d fm-0.cgd --batch 8 --seed 1 \
			--sign $k -o g-$k.cgg
	done
	small_cvae fm-0.cgd m-u.cgm --latent 2
	cg-train-step -q -m m-good.cgm -d fm-0.cgd --emit delta --steps 2 \
		--batch 8 --seed 1 -o d-u.cgg
	cg-train-step -q -m m-good.cgm -d fm-0.cgd --batch 8 --seed 1 -o g-u.cgg
	cat >sign.py <<'EOF'
# sign.py HOW IN OUT: IN with one thing changed after signing.
import hashlib, json, sys, tarfile

how, src, out = sys.argv[1:4]
with tarfile.open(src) as t:
    ms = [(m, t.extractfile(m).read()) for m in t.getmembers()]
names = [m.name for m, _ in ms]
data = dict((m.name, d) for m, d in ms)
man = json.loads(data["cg.json"])
first = man["tensors"][0]["name"]
if how == "manifest":       # the JSON means something else now
    man["step"] = man.get("step", 0) + 1
    data["cg.json"] = json.dumps(man, indent="\t").encode()
elif how == "tensor":       # the digest check must catch it
    b = bytearray(data[first]); b[0] ^= 1; data[first] = bytes(b)
elif how == "tensor-digest":  # the digest made again: only the signature
    b = bytearray(data[first]); b[0] ^= 1; data[first] = bytes(b)
    man["tensors"][0]["sha256"] = hashlib.sha256(b).hexdigest()
    data["cg.json"] = json.dumps(man, indent="\t").encode()
elif how == "sig-short":
    data["cg.sig"] = data["cg.sig"][:len(data["cg.sig"]) // 2]
elif how == "sig-garbage":
    data["cg.sig"] = bytes(range(256)) * 2
elif how == "sig-empty":
    data["cg.sig"] = b""
else:
    sys.exit("sign.py: unknown HOW " + how)
with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
    for n in names:
        ti = tarfile.TarInfo(n)
        ti.size, ti.mode, ti.mtime = len(data[n]), 0o644, 0
        import io
        t.addfile(ti, io.BytesIO(data[n]))
EOF
	for how in manifest tensor tensor-digest sig-short sig-garbage sig-empty; do
		for f in m-good.cgm d-good.cgg g-good.cgg fm-0.cgd; do
			python3 sign.py $how $f $how-$f
		done
	done
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR" || return 1
	export LC_ALL=C
	unset CG_TRUST
}

# The cases of the matrix, and what the one line of each says.
CASES="unsigned untrusted manifest tensor tensor-digest sig-short sig-garbage sig-empty"
declare -A WANT=(
	[unsigned]='unsigned \(a trust list is in force\)'
	[untrusted]='signed by key [0-9a-f]{64}, not in the trust list'
	[manifest]='altered after signing'
	[tensor]='digest mismatch'
	[tensor-digest]='altered after signing'
	[sig-short]='cg\.sig: malformed'
	[sig-garbage]='cg\.sig: malformed'
	[sig-empty]='cg\.sig: malformed'
)

# file ROLE CASE: the file of role model, update (a delta), grad or
# shard for CASE.
file() {
	local m=m-good.cgm u=d-good.cgg g=g-good.cgg s=fm-0.cgd
	case $2 in
	good) ;;
	unsigned) m=m-u.cgm u=d-u.cgg g=g-u.cgg s=fm-u-0.cgd ;;
	untrusted) m=m-evil.cgm u=d-evil.cgg g=g-evil.cgg s=fm-evil-0.cgd ;;
	*) m=$2-$m u=$2-$u g=$2-$g s=$2-$s ;;
	esac
	case $1 in
	model) echo "$D/$m" ;;
	update) echo "$D/$u" ;;
	grad) echo "$D/$g" ;;
	shard) echo "$D/$s" ;;
	esac
}

# run_prog PROG CASE: PROG with --trust good.pub on the file of CASE
# in the role it reads (the other inputs signed and trusted).
run_prog() {
	local p=$1 c=$2 T=$D/good.pub M=$D/m-good.cgm S=$D/fm-0.cgd
	local m u g s
	m=$(file model "$c") u=$(file update "$c") g=$(file grad "$c")
	s=$(file shard "$c")
	case $p in
	cg-inspect) run --separate-stderr cg-inspect --trust "$T" "$m" ;;
	cg-inspect--verify) run --separate-stderr cg-inspect --verify --trust "$T" "$m" ;;
	cg-train-step) run --separate-stderr cg-train-step -q --trust "$T" -m "$m" -d "$S" \
		--steps 1 --batch 8 -o out.cgg ;;
	cg-train-step-shard) run --separate-stderr cg-train-step -q --trust "$T" -m "$M" \
		-d "$s" --steps 1 --batch 8 -o out.cgg ;;
	# (the good case is d-good twice: --allow-duplicates)
	cg-reduce) run --separate-stderr cg-reduce --allow-duplicates --trust "$T" \
		"$D/d-good.cgg" "$u" -o out.cgg ;;
	cg-apply) run --separate-stderr cg-apply --trust "$T" -m "$M" "$u" -o out.cgm ;;
	cg-apply-model) run --separate-stderr cg-apply --trust "$T" -m "$m" "$D/d-good.cgg" -o out.cgm ;;
	cg-eval) run --separate-stderr cg-eval -q --trust "$T" -m "$m" -d "$S" ;;
	cg-eval-shard) run --separate-stderr cg-eval -q --trust "$T" -m "$M" -d "$s" ;;
	cg-sample) run --separate-stderr cg-sample --trust "$T" -m "$m" -o out.png ;;
	cg-quantize) run --separate-stderr cg-quantize --trust "$T" -o out.cgm "$m" f16 ;;
	cg-prune) run --separate-stderr cg-prune --trust "$T" -s 0.5 -o out.cgm "$m" ;;
	cg-prune-grad) run --separate-stderr cg-prune --trust "$T" -s 0.5 -i grad -o out.cgm "$M" "$g" ;;
	cg-convert) run --separate-stderr cg-convert --trust "$T" "$m" out.safetensors ;;
	cg-init) run --separate-stderr cg-init --trust "$T" -a cvae -d "$s" --hidden 8 \
		--layers 1 --latent 2 -o out.cgm ;;
	esac
	PROG=${p%%--*}
	case $PROG in
	cg-train-step-shard) PROG=cg-train-step ;;
	cg-apply-model) PROG=cg-apply ;;
	cg-eval-shard) PROG=cg-eval ;;
	cg-prune-grad) PROG=cg-prune ;;
	esac
}

READERS="cg-inspect cg-inspect--verify cg-train-step cg-train-step-shard cg-reduce
cg-apply cg-apply-model cg-eval cg-eval-shard cg-sample cg-quantize cg-prune
cg-prune-grad cg-convert cg-init"

# matrix PROG: every bad case refused with one line, exit 1, nothing
# written; the good case accepted.
matrix() {
	local p=$1 c bad=0
	for c in $CASES; do
		rm -f out.*
		run_prog "$p" "$c"
		if [ "$status" -ne 1 ] || [ "${#stderr_lines[@]}" -ne 1 ] ||
			[[ ! ${stderr_lines[0]} =~ ${WANT[$c]} ]] ||
			[[ ${stderr_lines[0]} != "$PROG: "* ]] ||
			compgen -G 'out.*' >/dev/null; then
			echo "$p $c: status $status, stderr: $stderr" >&2
			bad=$((bad + 1))
		fi
	done
	rm -f out.*
	run_prog "$p" good
	if [ "$status" -ne 0 ]; then
		echo "$p good: status $status, stderr: $stderr" >&2
		bad=$((bad + 1))
	fi
	return $bad
}

# one test per reader: bats names each in its report
@test "matrix: cg-inspect" { matrix cg-inspect; }
@test "matrix: cg-inspect --verify" { matrix cg-inspect--verify; }
@test "matrix: cg-train-step, the model" { matrix cg-train-step; }
@test "matrix: cg-train-step, the shard" { matrix cg-train-step-shard; }
@test "matrix: cg-reduce" { matrix cg-reduce; }
@test "matrix: cg-apply, the update" { matrix cg-apply; }
@test "matrix: cg-apply, the model" { matrix cg-apply-model; }
@test "matrix: cg-eval, the model" { matrix cg-eval; }
@test "matrix: cg-eval, the shard" { matrix cg-eval-shard; }
@test "matrix: cg-sample" { matrix cg-sample; }
@test "matrix: cg-quantize" { matrix cg-quantize; }
@test "matrix: cg-prune, the model" { matrix cg-prune; }
@test "matrix: cg-prune, the gradient" { matrix cg-prune-grad; }
@test "matrix: cg-convert" { matrix cg-convert; }
@test "matrix: cg-init, the shard" { matrix cg-init; }

@test "without --trust, a broken signature is still refused; the rest read" {
	for c in manifest tensor-digest sig-short sig-garbage; do
		run -1 --separate-stderr cg-inspect --verify "$(file model $c)"
		[ "${#stderr_lines[@]}" -eq 1 ]
	done
	run -0 cg-inspect --verify "$D/m-u.cgm" "$D/m-evil.cgm"
	assert_line "$D/m-u.cgm: OK"
}

@test "OpenSSL's command line verifies a signature cg made" {
	tar xOf "$D/d-good.cgg" cg.json >m.json
	tar xOf "$D/d-good.cgg" cg.sig | jq -r .sig | xxd -r -p >m.sig
	[ "$(stat -c %s m.sig)" -eq 64 ]
	openssl pkey -in "$D/good" -pubout -out good.pem
	run -0 openssl pkeyutl -verify -pubin -inkey good.pem -rawin \
		-in m.json -sigfile m.sig
	assert_output --partial 'Signature Verified Successfully'
	# the key in the member is the one of good.pub
	assert_equal "$(tar xOf "$D/d-good.cgg" cg.sig | jq -r .key)" \
		"$(cut -d' ' -f2 "$D/good.pub")"
	# and a changed manifest does not verify
	printf ' ' >>m.json
	run ! openssl pkeyutl -verify -pubin -inkey good.pem -rawin \
		-in m.json -sigfile m.sig
}

@test "Python's cryptography verifies it too, where installed" {
	python3 -c 'import cryptography' 2>/dev/null || skip "no cryptography"
	run -0 python3 - "$D/m-good.cgm" "$D/good.pub" <<'EOF'
import json, sys, tarfile
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
t = tarfile.open(sys.argv[1])
m = t.extractfile("cg.json").read()
s = json.loads(t.extractfile("cg.sig").read())
pub = bytes.fromhex(open(sys.argv[2]).read().split()[1])
Ed25519PublicKey.from_public_bytes(pub).verify(bytes.fromhex(s["sig"]), m)
print("verified")
EOF
	assert_output verified
}

@test "cg-key: a private key of mode 0600, a .pub line, a fingerprint" {
	run -0 cg-key -C 'worker 3' -o k
	[ "$(stat -c %a k)" = 600 ]
	head -n1 k | grep -qx -- '-----BEGIN PRIVATE KEY-----'
	run -0 cat k.pub
	assert_output --regexp '^ed25519 [0-9a-f]{64} worker 3$'
	local hex fp
	hex=$(cut -d' ' -f2 k.pub)
	fp=$(xxd -r -p <<<"$hex" | sha256sum | cut -d' ' -f1)
	run -0 cg-key -l k.pub k
	assert_line --index 0 "$fp worker 3"
	assert_line --index 1 "$fp k"
	# a trust list: every key, in order, comments and blank lines skipped
	{ echo '# two'; echo; cat "$D/evil.pub" k.pub; } >list.pub
	run -0 cg-key -l list.pub
	assert_equal "${#lines[@]}" 2
	assert_line --index 0 --regexp '^[0-9a-f]{64} evil$'
	assert_line --index 1 "$fp worker 3"
	# OpenSSL reads the private key and finds the same public key
	openssl pkey -in k -pubout -outform DER | tail -c 32 | xxd -p -c 64 >pub.hex
	assert_equal "$(cat pub.hex)" "$hex"
	# never replaced without -f
	cp k k.before
	run -1 --separate-stderr cg-key -o k
	assert_equal "$stderr" "cg-key: k: exists (-f replaces it)"
	cmp k k.before
	run -0 cg-key -f -o k
	! cmp -s k k.before
	run -2 --separate-stderr cg-key
	run -2 --separate-stderr cg-key -o k -l k.pub
	run -2 --separate-stderr cg-key -o -
	run -1 --separate-stderr cg-key -l nothing.pub
	assert_equal "$stderr" "cg-key: nothing.pub: No such file or directory"
	printf 'not a key\n' >bad.pub
	run -1 --separate-stderr cg-key -l bad.pub
	[ "${#stderr_lines[@]}" -eq 1 ]
	run -0 cg-key --help
	assert_line --index 0 --regexp '^usage: cg-key '
}

@test "--sign and --trust: bad key files are one line, exit 1; usage first" {
	run -1 --separate-stderr cg-init -a cvae -d "$D/fm-0.cgd" --sign "$D/good.pub" -o x.cgm
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == 'cg-init: --sign: '* ]]
	[ ! -e x.cgm ]
	run -1 --separate-stderr cg-eval --trust nothing -m "$D/m-good.cgm" -d "$D/fm-0.cgd"
	assert_equal "$stderr" "cg-eval: --trust: nothing: No such file or directory"
	printf '# keys\ned25519 1234 short\n' >bad.pub
	run -1 --separate-stderr cg-reduce --trust bad.pub "$D/d-good.cgg"
	assert_equal "$stderr" "cg-reduce: --trust: bad.pub:2: public key is not 64 hex digits"
	# a usage error is said as one, whatever the keys
	run -2 --separate-stderr cg-reduce --trust nothing --bogus "$D/d-good.cgg"
	[[ ${stderr_lines[0]} == *"unknown option '--bogus'" ]]
}

@test "CG_TRUST: the default list, a file or a directory" {
	mkdir keys
	cp "$D/good.pub" keys/
	printf 'not a key\n' >keys/README
	for t in "$D/good.pub" keys; do
		CG_TRUST=$t run -1 --separate-stderr cg-eval -q -m "$D/m-u.cgm" -d "$D/fm-0.cgd"
		assert_equal "$stderr" "cg-eval: $D/m-u.cgm: unsigned (a trust list is in force)"
		CG_TRUST=$t run -0 cg-eval -q -m "$D/m-good.cgm" -d "$D/fm-0.cgd"
	done
	# --trust replaces it
	CG_TRUST=$D/good.pub run -0 cg-inspect --verify --trust "$D/evil.pub" "$D/m-evil.cgm"
	# an empty one is none
	CG_TRUST= run -0 cg-inspect --verify "$D/m-u.cgm"
	CG_TRUST=nothing run -1 --separate-stderr cg-inspect --verify "$D/m-good.cgm"
	assert_equal "$stderr" "cg-inspect: $D/m-good.cgm: CG_TRUST: nothing: No such file or directory"
}

@test "cg-inspect --verify and the summary say who signed" {
	local fp
	fp=$(cg-key -l "$D/good.pub" | cut -d' ' -f1)
	run -0 cg-inspect --verify --trust "$D/good.pub" "$D/m-good.cgm" "$D/fm-0.cgd"
	assert_line "$D/m-good.cgm: OK, signed by $fp (trusted)"
	assert_line "$D/fm-0.cgd: OK, signed by $fp (trusted)"
	run -0 cg-inspect --verify "$D/m-good.cgm" "$D/m-u.cgm"
	assert_line "$D/m-good.cgm: OK, signed by $fp (not in the trust list)"
	assert_line "$D/m-u.cgm: OK"
	run -1 --separate-stderr cg-inspect --verify --trust "$D/evil.pub" "$D/m-good.cgm"
	assert_equal "$stderr" "cg-inspect: $D/m-good.cgm: signed by key $fp, not in the trust list"
	run -0 cg-inspect --verify -q --trust "$D/good.pub" "$D/m-good.cgm"
	assert_output ''
	# the summary too, as a line and a key of --json; none where unsigned
	run -0 cg-inspect --no-stats "$D/m-good.cgm"
	assert_line --regexp "^signer: +$fp\$"
	run -0 bash -c "cg-inspect --json --no-stats '$D/m-good.cgm' | jq -r .signer"
	assert_output "$fp"
	run -0 cg-inspect --no-stats "$D/m-u.cgm"
	refute_line --regexp '^signer:'
	run -0 bash -c "cg-inspect --json --no-stats '$D/m-u.cgm' | jq 'has(\"signer\")'"
	assert_output false
}

@test "a reduction records its inputs' signers, sorted, once each" {
	local g e
	g=$(cg-key -l "$D/good.pub" | cut -d' ' -f1)
	e=$(cg-key -l "$D/evil.pub" | cut -d' ' -f1)
	# one delta, signed and not: the same update, taken on purpose
	cg-reduce --allow-duplicates "$D/d-evil.cgg" "$D/d-good.cgg" \
		"$D/d-good.cgg" "$D/d-u.cgg" -o r.cgg
	run -0 bash -c "tar xOf r.cgg cg.json | jq -c .signers"
	assert_output "$(printf '%s\n' "$g" "$e" | sort | jq -R . | jq -sc .)"
	# unsigned inputs: no such field, and the reduction is unsigned
	cg-reduce --allow-duplicates "$D/d-u.cgg" "$D/d-u.cgg" -o u.cgg
	run -0 bash -c "tar xOf u.cgg cg.json | jq 'has(\"signers\")'"
	assert_output false
	! tar tf u.cgg | grep -qx cg.sig
	# a reduction of reductions lists its own inputs' signers
	cg-reduce --allow-duplicates --sign "$D/evil" "$D/d-good.cgg" \
		"$D/d-good.cgg" -o rs.cgg
	cg-reduce rs.cgg -o rr.cgg
	run -0 bash -c "tar xOf rr.cgg cg.json | jq -c .signers"
	assert_output "[\"$e\"]"
}

@test "a signed round through pipes: train, reduce, apply, all trusted" {
	local T=trusted K=$D/good
	# a key a worker: a key is one worker to cg-reduce (tests/077)
	cp "$D/good.pub" trusted
	for w in 0 1; do
		cg-key -C worker$w -o w$w >/dev/null
		cat w$w.pub >>trusted
		cg-train-step -q --trust "$T" --sign w$w -m "$D/m-good.cgm" -d "$D/fm-0.cgd" \
			--emit delta --steps 2 --batch 8 --seed $w -o - >d$w.cgg
	done
	cg-reduce --trust "$T" --sign "$K" d0.cgg d1.cgg -o - |
		cg-apply --trust "$T" --sign "$K" -m "$D/m-good.cgm" -o new.cgm
	run -0 cg-inspect --verify --trust "$T" new.cgm
	assert_output --regexp '^new\.cgm: OK, signed by [0-9a-f]{64} \(trusted\)$'
	# the same round unsigned gives the same model, less the signature
	for w in 0 1; do
		cg-train-step -q -m "$D/m-good.cgm" -d "$D/fm-0.cgd" \
			--emit delta --steps 2 --batch 8 --seed $w -o u$w.cgg
	done
	cg-reduce u0.cgg u1.cgg | cg-apply -m "$D/m-good.cgm" -o unew.cgm
	assert_equal "$(cg-inspect new.cgm | grep '^params:')" \
		"$(cg-inspect unew.cgm | grep '^params:')"
}

@test "an unknown kind is refused by every reader, --verify included" {
	mkcg -x kind "$D/m-u.cgm" frob.cgm
	mkcg -x kind:Model "$D/d-u.cgg" frob.cgg
	mkcg -x kind "$D/fm-u-0.cgd" frob.cgd
	local want="cg\.json: unknown kind 'frob'"
	for cmd in "cg-inspect --verify frob.cgm" "cg-inspect frob.cgm" \
		"cg-train-step -m frob.cgm -d $D/fm-u-0.cgd --steps 1 -o o.cgg" \
		"cg-eval -m frob.cgm -d $D/fm-u-0.cgd" "cg-sample -m frob.cgm -o o.png" \
		"cg-quantize -o o.cgm frob.cgm f16" "cg-prune -s 0.5 -o o.cgm frob.cgm" \
		"cg-convert frob.cgm o.safetensors" "cg-apply -m frob.cgm $D/d-u.cgg -o o.cgm" \
		"cg-init -a cvae -d frob.cgd -o o.cgm" \
		"cg-eval -m $D/m-u.cgm -d frob.cgd"; do
		run -1 --separate-stderr $cmd
		[ "${#stderr_lines[@]}" -eq 1 ] || { echo "$cmd: $stderr"; false; }
		[[ $stderr =~ unknown\ kind\ \'frob\' ]] || { echo "$cmd: $stderr"; false; }
	done
	run -1 --separate-stderr cg-reduce frob.cgg
	assert_equal "$stderr" "cg-reduce: frob.cgg: cg.json: unknown kind 'Model' (not model, grad, delta, data or state)"
	run -1 --separate-stderr cg-apply -m "$D/m-u.cgm" frob.cgg -o o.cgm
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ ! -e o.cgm ]
}

@test "every writer signs every file it writes" {
	local K=$D/good T=$D/good.pub fm=$BATS_TEST_DIRNAME/fixtures/fashion-mnist-mini
	cg-shard -q -n 2 --holdout-fraction 0.2 --holdout held.cgd --sign "$K" -o s "$fm"
	cg-init --trust "$T" -a cvae -d s-0.cgd --hidden 16 --layers 1 --latent 2 \
		--seed 1 --sign "$K" -o m.cgm
	cg-train-step -q --trust "$T" --sign "$K" -m m.cgm -d s-0.cgd --batch 8 -o g.cgg
	cg-train-step -q --trust "$T" --sign "$K" -m m.cgm -d s-0.cgd --emit model \
		--steps 2 --batch 8 -o t.cgm
	# a state file is read back under the trust list, so it is signed too
	for i in 1 2; do
		cg-train-step -q --trust "$T" --sign "$K" -m m.cgm -d s-1.cgd --emit delta \
			--steps 2 --batch 8 --codec q4 --state w.state -o u$i.cgu
	done
	# (one worker's two calls from one model: --allow-duplicates)
	cg-reduce --allow-duplicates --trust "$T" --sign "$K" u1.cgu u2.cgu \
		-o r.cgg
	cg-apply --trust "$T" --sign "$K" -m m.cgm --codec q8 --change down.cgu r.cgg -o a.cgm
	cg-prune --trust "$T" --sign "$K" -s 0.5 -o p.cgm a.cgm
	cg-quantize --trust "$T" --sign "$K" -o q.cgm a.cgm q8_0
	cg-convert --trust "$T" a.cgm a.safetensors
	cg-convert --sign "$K" a.safetensors back.cgm
	local f
	for f in s-0.cgd s-1.cgd held.cgd m.cgm g.cgg t.cgm w.state u1.cgu u2.cgu \
		r.cgg a.cgm down.cgu p.cgm q.cgm back.cgm; do
		run -0 cg-inspect --verify --trust "$T" "$f"
		assert_output --regexp "^$f: OK, signed by [0-9a-f]{64} \\(trusted\\)\$"
	done
	# converted back unsigned, the model is what it was less its signature
	cg-convert a.safetensors back-u.cgm
	run -0 cg-inspect --verify back-u.cgm
	assert_output "back-u.cgm: OK"
	cmp <(tar xOf a.cgm cg.json) <(tar xOf back-u.cgm cg.json)
	# the worker applies the signed downlink under the trust list
	cg-apply --trust "$T" -m m.cgm down.cgu -o w.cgm
	assert_equal "$(cg-inspect w.cgm | grep '^params:')" \
		"$(cg-inspect a.cgm | grep '^params:')"
}
