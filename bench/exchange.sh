#!/bin/sh
# exchange.sh - compressed exchange: bytes moved up and down against the
# held-out loss, for every update codec, next to a single machine and to
# per-step synchronous averaging, all at the same number of examples.
#
# usage: bench/exchange.sh cvae|cgpt [METHOD...]
#   A METHOD is NAME=UP/DOWN[/OPTION...]: the codec of the workers'
#   deltas, the codec of the coordinator's published change, and options:
#   noef (both ends without error feedback), avg (the outer step adds the
#   mean delta: lr 1, no momentum, as SparseLoCo; default DiLoCo's
#   Nesterov step, OUTER_LR and OUTER_MOMENTUM), decay=X (the workers'
#   --feedback-decay), h=N (N local steps a round, ROUNDS * INNER / N
#   rounds: the same examples), lr=X and mu=X (this row's outer lr and
#   momentum), op=NAME (cg-reduce --op, e.g. sent-mean), gather (no
#   published change: every worker receives the other workers' coded
#   deltas and reduces and applies them itself, as the coordinator does,
#   so the down codec is unused; bytes down are, for each worker, the
#   other three files).  Default: the table's rows.
#
#   SparseLoCo (Sarfi et al., 2025) is, for example,
#   sloco=topk:k=64,chunk=4096,val=lut2/-/decay=0.95/lr=1/mu=0/op=sent-mean/gather
#
# Every run sees ROUNDS * INNER * 4 * BATCH training examples: 4 workers
# (stratified shards) run ROUNDS rounds of INNER local steps of batch
# BATCH; the single machine runs ROUNDS * INNER steps of batch 4 * BATCH.
# Each worker makes the first model itself with cg-init (same seed, same
# bytes) and checks its digest against the coordinator's: 64 bytes of hex
# counted down per worker.  Then each round every worker sends its
# encoded delta (zstd) and receives the coordinator's encoded change
# (zstd), which it applies to rebuild the coordinator's model; the script
# checks that every worker's model has the coordinator's digest at the
# end.  Per-step synchronous averaging is counted, not run: each worker
# sends an f32 gradient and receives the f32 parameters every step (the
# real sizes of one such gradient file and of the first model, which has
# no optimizer moments); its loss is the single machine's, which it
# equals (tests/061-sync-equivalence.bats).
#
# Environment: CG_BIN (programs, default build/cmd), ROUNDS, INNER,
# BATCH, WORKER_THREADS (1), OUTER_LR (0.7), OUTER_MOMENTUM (0.9), SINGLE
# (the single machine's figure, not run again: an earlier run's),
# UP_OPTS (more cg-train-step options for the workers, e.g.
# "--feedback-decay 0.95"), INIT_OPTS (more cg-init options: the model's
# size, e.g. "--hidden 256"), TRAIN_OPTS (more cg-train-step options for
# the single machine and the workers alike, e.g. "--schedule cosine
# --total 3000 --lr-min 1e-4": a worker's state counts its steps across
# rounds, so the same --total decays both over the run).
set -eu
arch=${1:?usage: bench/exchange.sh cvae|cgpt [METHOD...]}
shift
bin=${CG_BIN:-build/cmd}
wt=${WORKER_THREADS:-1}
olr=${OUTER_LR:-0.7}
omu=${OUTER_MOMENTUM:-0.9}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
size() { stat -c %s "$@" | awk '{ s += $1 } END { print s }'; }
digest() { "$bin/cg-inspect" "$1" | awk '/^params:/ { print $3 }'; }

case $arch in
cvae)
	rounds=${ROUNDS:-10}
	inner=${INNER:-100}
	batch=${BATCH:-32}
	data=${DATA:-/usr/share/datasets/fashion-mnist}
	"$bin/cg-shard" -q -n 4 --strategy stratified --seed 1 -o "$tmp/w" "$data"
	"$bin/cg-shard" -q -n 1 -o "$tmp/all" "$data"
	"$bin/cg-shard" -q -n 1 --test -o "$tmp/held" "$data"
	held=$tmp/held-0.cgd
	init="-a cvae ${INIT_OPTS:-}"
	train="--seed 1"
	metric=nelbo
	;;
cgpt)
	rounds=${ROUNDS:-10}
	inner=${INNER:-100}
	batch=${BATCH:-8}
	data=${DATA:-/usr/share/games/fortunes}
	"$bin/cg-shard" -q -n 4 --strategy stratified --holdout-fraction 0.05 \
		--holdout "$tmp/held.cgd" --seed 1 -o "$tmp/w" "$data"
	"$bin/cg-shard" -q -n 1 --holdout-fraction 0.05 \
		--holdout "$tmp/held1.cgd" --seed 1 -o "$tmp/all" "$data"
	held=$tmp/held.cgd
	init="-a cgpt --context 64 --width 128 --layers 2 --heads 4 ${INIT_OPTS:-}"
	train="--seed 1 --opt adamw --lr 1e-3 --wd 0.1"
	metric=bpb
	;;
*)
	echo "exchange.sh: no such arch '$arch' (cvae, cgpt)" >&2
	exit 2
	;;
esac
steps=$((rounds * inner))
train="$train ${TRAIN_OPTS:-}"
# shellcheck disable=SC2086
"$bin/cg-init" $init -d "$tmp/all-0.cgd" --seed 1 -o "$tmp/init.cgm"
ev() { "$bin/cg-eval" --json -m "$1" -d "$held" | jq -r ".$metric"; }

# the single machine: batch 4 x BATCH (SINGLE: its figure from an earlier
# run of the same budget, the run being deterministic)
if [ -n "${SINGLE:-}" ]; then
	single=$SINGLE
else
	# shellcheck disable=SC2086
	"$bin/cg-train-step" -q -m "$tmp/init.cgm" -d "$tmp/all-0.cgd" \
		--emit model --steps "$steps" --batch $((4 * batch)) $train \
		-o "$tmp/single.cgm"
	single=$(ev "$tmp/single.cgm")
fi

# per-step synchronous averaging, counted: 4 workers x steps x (one f32
# gradient up, the f32 parameters down)
# shellcheck disable=SC2086
"$bin/cg-train-step" -q -m "$tmp/init.cgm" -d "$tmp/w-0.cgd" --steps 1 \
	--batch "$batch" $train -o "$tmp/g.cgg"
gbytes=$(size "$tmp/g.cgg")
pbytes=$(size "$tmp/init.cgm")
sync_up=$((4 * steps * gbytes))
sync_down=$((4 * steps * pbytes))
sync=$((sync_up + sync_down))

params=$("$bin/cg-inspect" --json "$tmp/init.cgm" | jq -r "[.tensors[].count] | add")
printf '# %s, %s parameters; %d examples a run: 4 workers x %d rounds x %d steps x batch %d; single: %d steps x batch %d\n' \
	"$arch" "$params" $((steps * 4 * batch)) "$rounds" "$inner" "$batch" \
	"$steps" $((4 * batch))
printf '# held-out %s; files exchanged zstd-compressed; outer Nesterov lr %s momentum %s (avg: lr 1, momentum 0)\n' \
	"$metric" "$olr" "$omu"
printf '%-30s %14s %14s %10s %10s %8s\n' method bytes_up bytes_down ratio "$metric" gap_%
printf '%-30s %14s %14s %10s %10.4f %8s\n' "single machine" - - - "$single" -
printf '%-30s %14d %14d %10.1f %10.4f %8.2f\n' "per-step sync (f32)" \
	"$sync_up" "$sync_down" 1 "$single" 0

# one compressed DiLoCo run: NAME UP DOWN EF(1|0) LR MOMENTUM DECAY H OP
# GATHER(1|0)
run() {
	name=$1 up=$2 down=$3 ef=$4 lr=$5 mu=$6 decay=$7 h=$8 op=$9 gather=${10}
	nr=$((steps / h))
	noef= upef="--feedback-decay $decay"
	[ "$ef" = 1 ] || noef=--no-error-feedback upef=--no-error-feedback
	d=$tmp/run
	rm -rf "$d"
	mkdir "$d"
	cp "$tmp/init.cgm" "$d/coord.cgm"
	want=$(digest "$d/coord.cgm")
	bup=0
	bdown=0
	for w in 0 1 2 3; do
		# shellcheck disable=SC2086
		"$bin/cg-init" $init -d "$tmp/w-$w.cgd" --seed 1 -o "$d/m$w.cgm"
		[ "$(digest "$d/m$w.cgm")" = "$want" ] || {
			echo "exchange.sh: worker $w made another first model" >&2
			exit 1
		}
		bdown=$((bdown + 64))
	done
	r=0
	while [ "$r" -lt "$nr" ]; do
		pids=
		for w in 0 1 2 3; do
			# shellcheck disable=SC2086
			"$bin/cg-train-step" -q -m "$d/m$w.cgm" -d "$tmp/w-$w.cgd" \
				--emit delta --steps "$h" --batch "$batch" $train \
				--codec "$up" $upef ${UP_OPTS:-} --state "$d/s$w.state" -j "$wt" \
				-z zstd -o "$d/up$w.cgu" &
			pids="$pids $!"
		done
		for p in $pids; do wait "$p"; done
		sup=$(size "$d"/up?.cgu)
		bup=$((bup + sup))
		if [ "$gather" = 1 ]; then
			# every worker reduces the four deltas as the
			# coordinator does: one reduction, applied five times
			"$bin/cg-reduce" --op "$op" "$d"/up?.cgu -o "$d/mean.cgu"
			for m in coord m0 m1 m2 m3; do
				"$bin/cg-apply" -m "$d/$m.cgm" --outer nesterov \
					--outer-lr "$lr" --outer-momentum "$mu" \
					"$d/mean.cgu" -o "$d/$m.cgm"
			done
			bdown=$((bdown + 3 * sup))
		else
			"$bin/cg-reduce" --op "$op" "$d"/up?.cgu | "$bin/cg-apply" \
				-m "$d/coord.cgm" --outer nesterov --outer-lr "$lr" \
				--outer-momentum "$mu" --codec "$down" $noef \
				--change "$d/down.cgu" -z zstd -o "$d/coord.cgm"
			bdown=$((bdown + 4 * $(size "$d/down.cgu")))
			for w in 0 1 2 3; do
				"$bin/cg-apply" -m "$d/m$w.cgm" "$d/down.cgu" \
					-o "$d/m$w.cgm"
			done
		fi
		r=$((r + 1))
	done
	want=$(digest "$d/coord.cgm")
	for w in 0 1 2 3; do
		[ "$(digest "$d/m$w.cgm")" = "$want" ] || {
			echo "exchange.sh: $name: worker $w holds another model" >&2
			exit 1
		}
	done
	loss=$(ev "$d/coord.cgm")
	printf '%-30s %14d %14d %10.1f %10.4f %8.2f\n' "$name (H $h)" "$bup" "$bdown" \
		"$(echo "$sync / ($bup + $bdown)" | bc -l)" "$loss" \
		"$(echo "100 * ($loss - $single) / $single" | bc -l)"
}

if [ $# -eq 0 ]; then
	set -- diloco-f32=f32/f32 q8=q8/q8 q4=q4/q4 q2=q2/q2 q2-noef=q2/q2/noef \
		q2-sr=q2:sr/q2:sr sign=sign/sign lowrank-4=lowrank:4/lowrank:4 \
		topk-1%=topk:0.01/topk:0.01 topk-1%-noef=topk:0.01/topk:0.01/noef \
		sparse-q2=topk:0.0625,chunk=64,val=q2_0/topk:0.0625,chunk=64,val=q2_0/avg \
		sparse-q2-noef=topk:0.0625,chunk=64,val=q2_0/topk:0.0625,chunk=64,val=q2_0/avg/noef \
		q2=q2/q2/h=250 q2-sr=q2:sr/q2:sr/h=250
fi
for m in "$@"; do
	name=${m%%=*}
	spec=${m#*=}
	up=${spec%%/*}
	rest=${spec#*/}
	down=${rest%%/*}
	ef=1 lr=$olr mu=$omu decay=1 h=$inner op=mean gather=0
	case /$rest/ in */noef/*) ef=0 ;; esac
	case /$rest/ in */avg/*) lr=1 mu=0 ;; esac
	case /$rest/ in */gather/*) gather=1 ;; esac
	case /$rest/ in */lr=*) lr=${rest##*lr=} lr=${lr%%/*} ;; esac
	case /$rest/ in */mu=*) mu=${rest##*mu=} mu=${mu%%/*} ;; esac
	case /$rest/ in */op=*) op=${rest##*op=} op=${op%%/*} ;; esac
	case /$rest/ in */decay=*) decay=${rest##*decay=} decay=${decay%%/*} ;; esac
	case /$rest/ in */h=*) h=${rest##*h=} h=${h%%/*} ;; esac
	run "$name" "$up" "$down" "$ef" "$lr" "$mu" "$decay" "$h" "$op" "$gather"
done
