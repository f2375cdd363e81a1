#!/usr/bin/env bats
#
# 034-writers.bats - every writer and every update codec on models of
# default size (cg-init's defaults, every architecture): the tensor
# counts and sizes users have, where a toy model of two tensors hides
# what a table of forty does (a pointer into a tensor table that grew
# under it).  Meant for the sanitizer pass above all, where any read or
# write out of bounds ends the program; in the other passes it checks
# that every file written verifies and every update reduces, on the cvae
# and the cgpt only (the sanitizer pass takes every architecture).  The
# programs come from PATH.

bats_require_minimum_version 1.5.0

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load helpers

ARCHS=$(archs | tr "\n" " ")
[ "${CG_SANITIZED:-0}" = 1 ] || ARCHS="cvae cgpt"
CODECS="f32 f16 bf16 q8 q4 q2 q2:sr topk:0.05 topk:0.03,chunk=64,val=q2_0
topk:k=7,val=f32 sign lowrank:4"

setup_file() {
	cd "$BATS_FILE_TMPDIR"
	images img -n 2 --strategy round-robin
	texts txt -n 2 --strategy round-robin
	default_models img-0.cgd txt-0.cgd $ARCHS
}

setup() {
	D=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	export LC_ALL=C
}

# the shard W of architecture A's data
shard() {
	case $1 in
	cgpt) echo "$BATS_FILE_TMPDIR/txt-$2.cgd" ;;
	*) echo "$BATS_FILE_TMPDIR/img-$2.cgd" ;;
	esac
}

# one short call of cg-train-step on arch A, shard W, the rest as given
step() {
	local a=$1 w=$2
	shift 2
	cg-train-step -q -m "$D/$a.cgm" -d "$(shard "$a" "$w")" --steps 1 \
		--batch 2 "$@"
}

@test "every codec, with and without error feedback, on every default model: encoded twice, verified, reduced" {
	local a c i
	for a in $ARCHS; do
		for c in $CODECS; do
			rm -f s0 ./*.cgu
			# twice with state: the second call adds the residual
			# and starts lowrank from its kept factors
			for i in 1 2; do
				step "$a" 0 --emit delta --codec "$c" --state s0 \
					-o "a$i.cgu" || {
					echo "$a $c: call $i"
					return 1
				}
			done
			step "$a" 1 --emit delta --codec "$c" \
				--no-error-feedback -o b.cgu
			cg-reduce a2.cgu b.cgu -o r.cgu
			cg-reduce --codec "$c" a1.cgu b.cgu -o rc.cgu
			cg-inspect --verify -q a2.cgu b.cgu r.cgu rc.cgu
		done
	done
}

@test "the downlink: every codec's change of every default model rebuilds the coordinator's model" {
	local a c want
	for a in $ARCHS; do
		cp "$D/$a.cgm" coord.cgm
		cp "$D/$a.cgm" w.cgm
		# a round a codec: each after the first publishes the
		# residual the one before kept too
		for c in $CODECS; do
			cg-train-step -q -m w.cgm -d "$(shard "$a" 0)" \
				--steps 1 --batch 2 --emit delta -o d.cgu
			cg-apply -m coord.cgm --outer nesterov d.cgu \
				--codec "$c" --change ch.cgu -o coord.cgm
			cg-apply -m w.cgm ch.cgu -o w.cgm || {
				echo "$a $c: the change"
				return 1
			}
		done
		cg-inspect --verify -q ch.cgu coord.cgm w.cgm
		want=$(cg-inspect coord.cgm | awk '/^params:/ { print $3 }')
		[ "$(cg-inspect w.cgm | awk '/^params:/ { print $3 }')" = "$want" ] || {
			echo "$a: the worker's model is not the coordinator's"
			return 1
		}
	done
}

@test "every other writer on every default model: quantize, prune, convert, model output, state" {
	local a t
	for a in $ARCHS; do
		for t in f16 bf16 q8_0 q4_1 q4_0 q2_0; do
			cg-quantize -q "$D/$a.cgm" "$t" -o q.cgm
			cg-quantize -q --all "$D/$a.cgm" "$t" -o qa.cgm
			cg-quantize -q q.cgm f32 -o back.cgm
			cg-inspect --verify -q q.cgm qa.cgm back.cgm
		done
		cg-prune -s 0.5 "$D/$a.cgm" -o p.cgm
		cg-prune --nm 2:4 "$D/$a.cgm" -o nm.cgm
		step "$a" 0 -m p.cgm --emit model -o pt.cgm --state "$a.state"
		cg-convert "$D/$a.cgm" m.safetensors
		cg-convert m.safetensors back.cgm
		cg-inspect --diff "$D/$a.cgm" back.cgm >/dev/null
		cg-inspect --verify -q p.cgm nm.cgm pt.cgm "$a.state" back.cgm
	done
}
