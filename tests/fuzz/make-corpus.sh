#!/bin/sh
# make-corpus.sh - make the seed corpora of the fuzz targets
# (tests/fuzz/corpus/NAME/) from the test fixtures, with the programs
# of a build (default build-fuzz).  Seeds are real files the programs
# write, kept small (a 16-example shard, a model of a few thousand
# weights), and a few cut short or altered.  The shard and update
# targets take a manifest, a NUL and the tensors' bytes (fuzz.h), so
# their seeds are cg files unpacked to that form.  Usage: make-corpus.sh
# [BUILD-DIR]
set -eu
cd "$(dirname "$0")/../.."
top=$PWD
build=$(cd "${1:-build-fuzz}" && pwd)
PATH=$build/cmd:$PATH
export ASAN_OPTIONS=detect_leaks=0
fx=$top/tests/fixtures
out=$top/tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
rm -rf "$out"
for t in codec container encode fortune frame idx jsonl reveal runlog safetensors seal shard tsv update; do
	mkdir -p "$out/$t"
done

# unpack CGFILE OUT: cg.json, a NUL, then every other member's bytes
unpack() {
	{
		tar xOf "$1" cg.json
		printf '\000'
		for m in $(tar tf "$1" | grep -v -e '^cg.json$' -e '^cg.sig$'); do
			tar xOf "$1" "$m"
		done
	} >"$2"
}

# cut FILE N OUT: the first N bytes; flip FILE AT OUT: one byte changed
cut_to() { head -c "$2" "$1" >"$3"; }
flip() {
	cp "$1" "$3"
	printf '\377' | dd of="$3" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# data: image shards, text shards of each format
cg-shard -q -n 2 --limit 16 -o img "$fx/fashion-mnist-mini"
cg-shard -q -o fort "$fx/text/fortunes"
cg-shard -q -o jl "$fx/text/prompt.jsonl"
cg-shard -q -o ts "$fx/text/escapes.tsv"
# a model of a few thousand weights, its updates in several codecs, a
# state file
cg-init -a cvae -d img-0.cgd --hidden 2 --layers 1 --latent 1 -o m.cgm
for c in f32 f16 q8 q4 q2 topk:0.1 topk:k=3,chunk=64 topk:k=3,chunk=64,val=lut2 \
	topk:k=3,chunk=64,val=lut2,idx=gap \
	sign lowrank:1; do
	n=$(echo "$c" | tr -c 'a-z0-9\n' _)
	cg-train-step -q -m m.cgm -d img-0.cgd --batch 4 --codec "$c" \
		--no-error-feedback -o "u-$n.cgg"
done
cg-train-step -q -m m.cgm -d img-0.cgd --batch 4 --emit delta --steps 2 \
	--state w.state -o d.cgg
# a partial delta (--freeze) and a model with adapters (cg-init --lora)
cg-train-step -q -m m.cgm -d img-0.cgd --batch 4 --emit delta \
	--freeze 'enc.*' -o dp.cgg
cg-init --from m.cgm --lora 1 --lora-on 'dec.*.w' -o ml.cgm
cg-quantize -q --all -o mq.cgm m.cgm q4_0
cg-convert -o m.safetensors m.cgm

c=$out/container
cp img-0.cgd fort-0.cgd jl-0.cgd m.cgm mq.cgm w.state d.cgg u-q4.cgg \
	u-topk_0_1.cgg u-lowrank_1.cgg "$c/"
gzip -9nc u-sign.cgg >"$c/u-sign.cgg.gz"
zstd -q -19 -c ts-0.cgd >"$c/ts-0.cgd.zst"
cg-key -o k >/dev/null
cg-shard -q --sign k -o sig "$fx/text/escapes.tsv"
cp sig-0.cgd "$c/ts-signed.cgd"
cut_to m.cgm 1500 "$c/m-cut.cgm"
flip img-0.cgd 600 "$c/img-flip.cgd"

for f in img-0 img-1 fort-0 jl-0 ts-0; do
	unpack "$f.cgd" "$out/shard/$f"
done
for f in u-*.cgg d.cgg; do
	unpack "$f" "$out/update/${f%.cgg}"
done
unpack m.cgm "$out/update/model"
unpack dp.cgg "$out/update/partial"
unpack ml.cgm "$out/update/lora"
unpack w.state "$out/update/state"

s=$out/safetensors
cp m.safetensors "$top/tests/safetensors-vectors/vectors.safetensors" "$s/"
cut_to m.safetensors 100 "$s/m-cut.safetensors"

# IDX: 4 bytes (little-endian) of the images file's length, then the
# images, then the labels, plain and gzip
idx() { # IMAGES LABELS OUT
	n=$(wc -c <"$1")
	printf "\\$(printf %03o $((n & 255)))\\$(printf %03o $((n >> 8 & 255)))\\$(printf %03o $((n >> 16 & 255)))\\$(printf %03o $((n >> 24 & 255)))" >"$3"
	cat "$1" "$2" >>"$3"
}
gzip -dc "$fx/fashion-mnist-mini/t10k-images-idx3-ubyte.gz" | head -c $((16 + 3 * 784)) >im
printf '\000\000\010\003\000\000\000\003\000\000\000\034\000\000\000\034' |
	dd of=im conv=notrunc 2>/dev/null
printf '\000\000\010\001\000\000\000\003\001\002\003' >lb
idx im lb "$out/idx/plain3"
gzip -9nc im >im.gz
gzip -9nc lb >lb.gz
idx im.gz lb.gz "$out/idx/gzip3"
printf '\000\000\010\003\000\000\000\002\000\000\000\002\000\000\000\002\001\002\003\004\005\006\007\010' >im2
printf '\000\000\010\001\000\000\000\002\000\011' >lb2
idx im2 lb2 "$out/idx/tiny2"
cut_to im2 20 im2c
idx im2c lb2 "$out/idx/tiny2-cut"

# text: the fixtures, and the fortune files as the target takes them
cp "$fx/text/cond.jsonl" "$fx/text/prompt.jsonl" "$out/jsonl/"
gzip -9nc "$fx/text/cond.jsonl" >"$out/jsonl/cond.jsonl.gz"
printf '{"cond":"a\\u0000b","text":"x"}\n{"prompt":"\\ud83d\\ude00","text":""}\n' \
	>"$out/jsonl/escapes.jsonl"
cp "$fx/text/escapes.tsv" "$out/tsv/"
gzip -9nc "$fx/text/escapes.tsv" >"$out/tsv/escapes.tsv.gz"
printf 'a\tone\\ttwo\nb\t\\\\\n\n\xef\xbb\xbfc\tx\\q\n' >"$out/tsv/bad-escape.tsv"
{
	first=1
	for f in animals computers wisdom; do
		[ $first -eq 1 ] || printf '\000'
		first=0
		printf '%s\n' "$f"
		cat "$fx/text/fortunes/$f"
	done
} >"$out/fortune/three"
{ printf 'one\n'; cat "$fx/text/fortunes/animals"; } >"$out/fortune/one"
printf 'a b\nx\n%%\ny\n\000.hidden\nz\n' >"$out/fortune/names"

# codec: a row byte, the claimed count, the first element and the count
# to decode (little-endian), then bytes from real tensors
codec() { # ROW COUNT FIRST N FILE OUT
	{
		printf "\\$(printf %03o "$1")"
		for v in "$2" "$3"; do
			i=0
			while [ $i -lt 8 ]; do
				printf "\\$(printf %03o $((v >> (8 * i) & 255)))"
				i=$((i + 1))
			done
		done
		printf "\\$(printf %03o $(($4 & 255)))\\$(printf %03o $(($4 >> 8 & 255)))"
		head -c 1024 "$5"
	} >"$6"
}
tar xOf mq.cgm "$(tar tf mq.cgm | sed -n 2p)" >q4
tar xOf m.cgm "$(tar tf m.cgm | sed -n 2p)" >f32
row=0
for name in f32 f16 bf16 i8 u8 u16 u32 u64 q8_0 q4_0 q2_0 q4_1; do
	src=f32
	case $name in q*) src=q4 ;; esac
	codec $row 64 3 40 $src "$out/codec/$name"
	row=$((row + 1))
done
codec 9 1000000000000 999999999990 20 q4 "$out/codec/q4_0-claims"

# run logs: the lines cg-train-step (with and without a codec),
# cg-reduce --model and cg-eval --json append, those of cg-cluster and
# cg-inbox, and a log cut short
cg-train-step -q -m m.cgm -d img-0.cgd --batch 4 --emit delta --steps 2 \
	--codec q4 --no-error-feedback --log "$out/runlog/worker" -o lg.cgg
cg-train-step -q -m m.cgm -d img-0.cgd --batch 4 --emit model --steps 2 \
	--log "$out/runlog/worker" -o lg.cgm
cg-reduce -q --model m.cgm --log "$out/runlog/coord" lg.cgg -o lg.cgu
cg-eval -m lg.cgm -d img-1.cgd --json >>"$out/runlog/coord"
printf '%s\n' \
	'{"round":1,"published":1,"samples":8,"loss":548.8,"bytes_down":24064,"bytes_up":6144,"seconds":1,"hosts":2,"of":2}' \
	'{"published":2,"inputs":2,"samples":8,"loss":548.6,"staleness":[0,1],"seconds":1}' \
	>"$out/runlog/coordinators"
{
	head -n 1 "$out/runlog/worker"
	sed -n 2p "$out/runlog/worker" | cut -c 1-40 | tr -d '\n'
} >"$out/runlog/worker-cut"

# encode: a codec byte (0-15, fuzz_encode.c's table), its parameter,
# flags, the view count, then 200 bytes of a real tensor for dimensions
# and values
w=0
while [ $w -lt 16 ]; do
	{
		printf "\\$(printf %03o $w)\\$(printf %03o $((w * 37 % 256)))"
		printf "\\$(printf %03o $((w % 4)))\\$(printf %03o $((w + 3)))"
		tail -c 200 f32
	} >"$out/encode/seed-$(printf %02d $w)"
	w=$((w + 1))
done
# seal: 0, then a file sealed to fuzz_seal.c's key (its raw bytes made
# into a PEM here), whole and cut short; 1, then a plaintext, with and
# without edits after it
printf '302e020100300506032b656e04220420%s' \
	77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a |
	xxd -r -p | openssl pkey -inform DER -out seal.key
for f in m.cgm fort-0.cgd; do
	cg-convert -t cg --encrypt-to seal.key "$f" -o "s-$f"
	{ printf '\000'; cat "s-$f"; } >"$out/seal/sealed-$f"
done
{ printf '\000'; head -c 200 s-m.cgm; } >"$out/seal/sealed-cut"
{ printf '\001'; head -c 3000 m.cgm; } >"$out/seal/plain"
{
	printf '\001'
	head -c 9000 fort-0.cgd
	printf '\020\001\000\200\000\001\002'
} >"$out/seal/plain-edits"
# frame: the first bytes a pipeline's second stage reads, whole frames
# and cut inside one
cg-init -a cgpt -d fort-0.cgd --seed 1 --context 8 --width 8 --layers 2 \
	--heads 2 -o p.cgm
cg-convert -S 1/2 p.cgm -o p1.cgm
cg-convert -S 2/2 p.cgm -o p2.cgm
cg-train-step -q -m p1.cgm -d fort-0.cgd -e model -k 1 -b 2 \
	--micro-batches 2 -o p1-out.cgm --next "head -c 600 >'$out/frame/stream'" ||
	true
head -c 109 "$out/frame/stream" >"$out/frame/head"
head -c 300 "$out/frame/stream" >"$out/frame/cut"
# reveal: the round fuzz_reveal.c makes with its fixed keys, so the
# target writes them: its two reveals (alone, together, one twice) and
# the manifest of its second update
CG_FUZZ_SEEDS=$out/reveal "$build/tests/fuzz/fuzz_reveal" -runs=1 \
	>/dev/null 2>&1
du -sh "$out"
