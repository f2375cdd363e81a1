#!/bin/bash
# cluster.sh - four hosts on 10 Mbit/s links: PyTorch DDP (gloo) against
# cg-cluster, wall time to a target test-set negative ELBO.
#
#   bench/cluster.sh            (as root, after a build; 20 to 40 minutes)
#
# The hosts are those of the tests (tests/hosts.sh): four network
# namespaces on a bridge, each with its own sshd, each link capped both
# ways by a token bucket (tc tbf, RATE).  This kernel has no netem: with
# RTT (milliseconds) or LOSS (a share of the frames) each link goes
# through tests/unit/linkrelay (made by make check), which delays every
# frame RTT/4 each way, so that a round trip between two hosts takes
# RTT, and loses LOSS of them; without, the links have a rate and no
# added delay or loss.  Every row trains the
# same conditional VAE (HIDDEN x LAYERS, LATENT: small, so that per-step
# exchanges finish in the time of a bench) on Fashion-MNIST, each host a
# quarter of the training set and a batch of BATCH a step, until the
# test-set negative ELBO (one noise sample an image, as cg-eval and
# bench/torch_cvae.py score it) is at most TARGET, or MAX_SECONDS of
# training have passed.
#
# Rows:
#   ddp             DistributedDataParallel, gloo, f32 all-reduce every
#                   step (bench/torch_ddp.py), one process a host
#   ddp-fp16        the same with DDP's fp16 compression hook
#   ddp-psgd1/4     the same with its PowerSGD hook, rank 1 and 4 (error
#                   feedback, warm start, 10 plain steps first)
#   ddp-localsgd50/200  PyTorch's post-local SGD: 10 steps of DDP's
#                   all-reduce, then each rank's Adam alone and the
#                   parameters averaged every 50 or 200 steps
#                   (PostLocalSGDOptimizer, PeriodicModelAverager),
#                   scored right after an averaging
#   cg-sync         cg-cluster --mode sync: a gradient of each host every
#                   step, the model sent to each host every step
#   cg-diloco       cg-cluster (DiLoCo): DILOCO_STEPS local Adam steps a
#                   round, the mean delta through the outer Nesterov step
#   cg-diloco-q2    the same, each host's delta sent 2-bit (-T --codec q2,
#                   error feedback in its state)
#   cg-diloco-q2-h100  the same, 100 local steps a round
#   cg-diloco-q2-h100-q4down  the same, the model's change sent down 4-bit
#                   (cg-cluster --down-codec q4: each host keeps its copy)
#   cg-diloco-q2-h200-q4down  the same, 200 local steps a round
#   cg-diloco-q2-h200  cg-diloco-q2 with 200 local steps a round
#   cg-diloco-q2-h200-slow  the same, the outer step at OVERLAP_APPLY
#   cg-diloco-q2-h200-overlap  the same, overlapped (cg-cluster
#                   --overlap: each host computes a round while the
#                   round before goes up and its model down; the
#                   update one round stale, so the outer step at
#                   OVERLAP_APPLY)
#   cg-diloco-q2-h100-overlap  the same, 100 local steps a round
#   cg-diloco-slow, cg-diloco-overlap  cg-diloco (50 local steps, f32
#                   deltas: more bytes a step) at OVERLAP_APPLY, without
#                   and with --overlap
#   cg-diloco-grow  cg-diloco with rounds of 25 local steps, then 50,
#                   then 100 (--steps 25x4,50x4,100)
#   cg-sync50-diloco  50 synchronous rounds (one step each, the
#                   coordinator's Adam at LR), then cg-diloco's rounds
#                   (--sync-rounds 50)
#
# DDP's process group is rank 0 in the first host; cg-cluster's
# coordinator runs in the first host too (ip netns exec), and that host is
# also a worker: neither side has a machine or a link the other lacks.
# cg-cluster's ssh shares one connection a host between rounds
# (ControlMaster, ControlPersist: what cg-cluster(1) advises; SSH_MUX=0
# opens one a round), as DDP's process group keeps its connections.
# Time counts the training and its exchanges: for DDP the steps from the
# first to the last (not the start-up of Python and the process group, nor
# the evaluations, for which every rank's clock stops); for cg the wall
# time of the cg-cluster calls, one call a round (DiLoCo) or a call of
# SYNC_CHUNK rounds (sync), each call's start-up included, the shards sent
# beforehand (--push-only: DDP's ranks read the data set from the shared
# disk) and the evaluations between calls not counted.  Bytes are those
# every host sent on its link (the veth counters: ssh, TCP and all), the
# shards' push not included.
#
# Prints a Markdown table on stdout, progress on stderr.  Knobs
# (environment): CG_BIN (build/cmd), RATE (10mbit), RTT (0), LOSS (0),
# HOSTS_RELAY (CG_BIN/../tests/unit/linkrelay), TARGET (270),
# HIDDEN (64), LAYERS (1), LATENT (16), BATCH (32), LR (1e-3), SEED (1),
# DILOCO_STEPS (50), SYNC_CHUNK (25), OVERLAP_APPLY (--outer-lr 0.5
# --outer-momentum 0), SSH_MUX (1), EVAL_EVERY (25, DDP's steps between
# evaluations), MAX_SECONDS (600), SYNC_MAX_SECONDS (MAX_SECONDS, the
# cg-sync row's), ROWS (all of the above), FMNIST.
# Needs root, iproute2, openssh-server, /usr/bin/python3 with Debian's
# python3-torch (DEB_PYTHON: another python3 with torch, as
# /opt/cg-bench-venv/bin/python).
set -u
cd "$(dirname "$0")/.."
top=$PWD
. tests/hosts.sh

CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd) || exit 1
RATE=${RATE:-10mbit}
RTT=${RTT:-0}
LOSS=${LOSS:-0}
export HOSTS_RELAY=${HOSTS_RELAY:-$CG_BIN/../tests/unit/linkrelay}
TARGET=${TARGET:-270}
HIDDEN=${HIDDEN:-64}
LAYERS=${LAYERS:-1}
LATENT=${LATENT:-16}
BATCH=${BATCH:-32}
LR=${LR:-1e-3}
SEED=${SEED:-1}
DILOCO_STEPS=${DILOCO_STEPS:-50}
SYNC_CHUNK=${SYNC_CHUNK:-25}
EVAL_EVERY=${EVAL_EVERY:-25}
MAX_SECONDS=${MAX_SECONDS:-600}
SYNC_MAX_SECONDS=${SYNC_MAX_SECONDS:-$MAX_SECONDS}
SSH_MUX=${SSH_MUX:-1}
OVERLAP_APPLY=${OVERLAP_APPLY:---outer-lr 0.5 --outer-momentum 0}
ROWS=${ROWS:-ddp ddp-fp16 ddp-psgd1 ddp-psgd4 ddp-localsgd50 ddp-localsgd200 cg-sync cg-diloco cg-diloco-q2 cg-diloco-q2-h100 cg-diloco-q2-h100-q4down cg-diloco-q2-h200-q4down cg-diloco-q2-h200 cg-diloco-q2-h200-slow cg-diloco-q2-h200-overlap cg-diloco-q2-h100-overlap cg-diloco-slow cg-diloco-overlap cg-diloco-grow cg-sync50-diloco}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
PY=${DEB_PYTHON:-/usr/bin/python3}
N=4

why=$(hosts_skip_reason)
[ -z "$why" ] || { echo "cluster.sh: $why" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cg-cluster-bench.XXXXXX") || exit 1
trap 'hosts_down; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
hosts_up "$N" "$RATE" "$RTT" "$LOSS" || exit 1
export LC_ALL=C OMP_NUM_THREADS=1
echo "cluster.sh: $N hosts at $RATE, RTT $RTT ms, loss $LOSS, work in $work" >&2

ns() { echo "cgn${HOSTS_PREFIX}h$1"; }

# the ssh command of the cg rows
cg_ssh=$HOSTS_SSH
[ "$SSH_MUX" = 0 ] ||
	cg_ssh="$HOSTS_SSH -o ControlMaster=auto -o ControlPersist=600 -o ControlPath=$work/mux-%h"

# sent: the bytes all hosts have sent on their links so far
sent() {
	local i rx tx t=0
	for ((i = 0; i < N; i++)); do
		read -r rx tx < <(hosts_bytes "$i")
		t=$((t + rx))
	done
	echo $t
}

now() { date +%s.%N; }

# The coordinator's test shard and first model (cg-eval scores on it).
cd "$work"
"$CG_BIN/cg-shard" -q -n 1 --test -o test "$FMNIST" || exit 1
"$CG_BIN/cg-init" -a cvae -d test-0.cgd --hidden "$HIDDEN" --layers "$LAYERS" \
	--latent "$LATENT" --seed "$SEED" -o init.cgm || exit 1
params=$("$CG_BIN/cg-inspect" --json init.cgm |
	jq '[.tensors[] | select(.name | startswith("opt.") | not) | .shape | reduce .[] as $d (1; . * $d)] | add')
for ((i = 0; i < N; i++)); do echo "host$i"; done >hosts

# ROW RESULT: one JSON line a row into rows.jsonl
row() {
	echo "$1" >>rows.jsonl
	echo "cluster.sh: $1" >&2
}

# ddp NAME HOOK [PSGD-RANK [PERIOD]]
ddp() {
	local name=$1 hook=$2 prank=${3:-2} period=${4:-50} i b0 b1
	local port=$((29500 + RANDOM % 1000))
	local pids=()
	b0=$(sent)
	for ((i = 0; i < N; i++)); do
		ip netns exec "$(ns $i)" env GLOO_SOCKET_IFNAME="cgp${HOSTS_PREFIX}h$i" \
			"$PY" "$top/bench/torch_ddp.py" --rank $i --world $N \
			--master "$HOSTS_NET.1" --port $port --data "$FMNIST" \
			--seed "$SEED" --hidden "$HIDDEN" --layers "$LAYERS" \
			--latent "$LATENT" --batch "$BATCH" --lr "$LR" --hook "$hook" \
			--psgd-rank "$prank" --period "$period" --target "$TARGET" \
			--eval-every "$EVAL_EVERY" --max-seconds "$MAX_SECONDS" \
			>"ddp.$name.$i" 2>"ddp.$name.$i.err" &
		pids+=($!)
	done
	# (not a bare wait: the hosts' sshds are this shell's jobs too)
	wait "${pids[@]}"
	b1=$(sent)
	if ! jq -e . "ddp.$name.0" >/dev/null 2>&1; then
		echo "cluster.sh: $name: $(tail -n 1 "ddp.$name.0.err")" >&2
		return 1
	fi
	row "$(jq -c --arg n "$name" --argjson b $((b1 - b0)) \
		'{row: $n, seconds: .train_s, steps: .steps, examples: .examples,
		  nelbo: .nelbo, reached: .reached, bytes: $b}' "ddp.$name.0")"
}

# nth SPEC I: the I-th (from 1) number of the schedule SPEC, K[xN],...
# (K for N times, the last K ever after), as cg-cluster's --steps reads
nth() {
	echo "$1" | awk -F, -v r="$2" '{
		for (i = 1; i <= NF; i++) {
			n = split($i, p, "x"); k = p[1]
			if (r <= (n == 2 ? p[2] : 1)) { print k; exit }
			r -= (n == 2 ? p[2] : 1)
		}
		print k }'
}

# cg NAME MODE STEPS CHUNK [TRAIN-OPTS [CLUSTER-OPT...]]: cg-cluster
# with the coordinator in the first host, CHUNK rounds a call (the
# calls' counts a schedule as STEPS may be), scored after each; the
# steps and examples are those its --log counts
cg() {
	local name=$1 mode=$2 steps=$3 chunk=$4 topts=${5:-}
	shift 4
	shift $(($# > 0))
	local copts=("$@")
	local d r=0 c=0 t=0 t0 t1 max=$MAX_SECONDS
	local b0 b1 nelbo=nan reached=false
	d=$work/$name
	# Adam at LR: the coordinator's (sync) or each host's inner one
	local apply=() train="--threads 1 $topts"
	if [ "$mode" = sync ]; then
		apply=(-A "--lr $LR")
		max=$SYNC_MAX_SECONDS
	else
		train="$train --lr $LR"
	fi
	rm -rf "$HOSTS_DIR"/host[0-9]*/*
	set -- -f hosts -m init.cgm -o "$d" --mode "$mode" -k "$steps" \
		-b "$BATCH" --seed "$SEED" --ssh "$cg_ssh" \
		--remote-dir "$HOSTS_DIR/%h" --remote-prefix "$CG_BIN/" -q \
		-T "$train" "${apply[@]}" "${copts[@]}"
	ip netns exec "$(ns 0)" "$CG_BIN/cg-cluster" "$@" --push-only "$FMNIST" ||
		return 1
	b0=$(sent)
	while :; do
		c=$((c + 1))
		r=$((r + $(nth "$chunk" $c)))
		t0=$(now)
		ip netns exec "$(ns 0)" "$CG_BIN/cg-cluster" "$@" -r $r \
			--log "$d.log" "$FMNIST" || return 1
		t1=$(now)
		t=$(echo "$t + $t1 - $t0" | bc)
		nelbo=$("$CG_BIN/cg-eval" -q -m "$d/model.cgm" -d test-0.cgd \
			--seed "$SEED" --json | jq .nelbo)
		echo "cluster.sh: $name: round $r, $t s, nelbo $nelbo" >&2
		if [ "$(echo "$nelbo <= $TARGET" | bc)" = 1 ]; then
			reached=true
			break
		fi
		[ "$(echo "$t >= $max" | bc)" = 1 ] && break
	done
	b1=$(sent)
	row "$(jq -sc --arg n "$name" --argjson s "$t" \
		--argjson l "$nelbo" --argjson ok $reached --argjson b $((b1 - b0)) \
		'{row: $n, seconds: $s, steps: (map(.steps) | add),
		  examples: (map(.samples) | add), nelbo: $l, reached: $ok,
		  bytes: $b}' "$d.log")"
}

: >rows.jsonl
for r in $ROWS; do
	case $r in
	ddp) ddp ddp none ;;
	ddp-fp16) ddp ddp-fp16 fp16 ;;
	ddp-psgd1) ddp ddp-psgd1 powersgd 1 ;;
	ddp-psgd4) ddp ddp-psgd4 powersgd 4 ;;
	ddp-localsgd50) ddp ddp-localsgd50 localsgd 2 50 ;;
	ddp-localsgd200) ddp ddp-localsgd200 localsgd 2 200 ;;
	cg-sync) cg cg-sync sync 1 "$SYNC_CHUNK" ;;
	cg-diloco) cg cg-diloco diloco "$DILOCO_STEPS" 1 ;;
	cg-diloco-q2) cg cg-diloco-q2 diloco "$DILOCO_STEPS" 1 "--codec q2" ;;
	# when to synchronise: rounds of 25 steps growing to 100; 50
	# synchronous rounds (scored every 25), then DiLoCo
	cg-diloco-grow) cg cg-diloco-grow diloco 25x4,50x4,100 1 ;;
	cg-sync50-diloco)
		cg cg-sync50-diloco diloco 1x50,"$DILOCO_STEPS" 25x2,1 "" \
			--sync-rounds 50 --sync-apply-opts "--lr $LR" ;;
	cg-diloco-q2-h100) cg cg-diloco-q2-h100 diloco 100 1 "--codec q2" ;;
	cg-diloco-q2-h100-q4down)
		cg cg-diloco-q2-h100-q4down diloco 100 1 "--codec q2" \
			--down-codec q4 ;;
	cg-diloco-q2-h200-q4down)
		cg cg-diloco-q2-h200-q4down diloco 200 1 "--codec q2" \
			--down-codec q4 ;;
	cg-diloco-q2-h200) cg cg-diloco-q2-h200 diloco 200 1 "--codec q2" ;;
	cg-diloco-q2-h200-slow)
		cg cg-diloco-q2-h200-slow diloco 200 1 "--codec q2" \
			-A "$OVERLAP_APPLY" ;;
	cg-diloco-q2-h200-overlap)
		cg cg-diloco-q2-h200-overlap diloco 200 1 "--codec q2" --overlap \
			-A "$OVERLAP_APPLY" ;;
	cg-diloco-slow)
		cg cg-diloco-slow diloco "$DILOCO_STEPS" 1 "" -A "$OVERLAP_APPLY" ;;
	cg-diloco-overlap)
		cg cg-diloco-overlap diloco "$DILOCO_STEPS" 1 "" --overlap \
			-A "$OVERLAP_APPLY" ;;
	cg-diloco-q2-h100-overlap)
		cg cg-diloco-q2-h100-overlap diloco 100 1 "--codec q2" --overlap \
			-A "$OVERLAP_APPLY" ;;
	*) echo "cluster.sh: unknown row '$r'" >&2; exit 2 ;;
	esac || echo "cluster.sh: $r failed" >&2
done

# The table: time and bytes against plain DDP's and the best DDP row's
# (the least time among the DDP rows that reached the target).
echo "cvae ${HIDDEN}x${LAYERS}, latent $LATENT ($params parameters), $N hosts" \
	"at $RATE, RTT $RTT ms, loss $LOSS, batch $BATCH a host," \
	"target test nelbo $TARGET," \
	"at most $MAX_SECONDS s a row"
echo
jq -rs '
  (map(select(.row == "ddp" and .reached)) | .[0].seconds) as $plain |
  (map(select((.row | startswith("ddp")) and .reached)) | min_by(.seconds) | .seconds) as $best |
  "| row | seconds | steps | examples | test nelbo | reached | MB sent | plain DDP / this | best DDP / this |",
  "|---|---:|---:|---:|---:|---|---:|---:|---:|",
  (.[] | "| \(.row) | \(.seconds * 10 | round / 10) | \(.steps) | \(.examples) | \(.nelbo * 100 | round / 100) | \(if .reached then "yes" else "no" end) | \(.bytes / 1e4 | round / 100) | \(if .reached and $plain then ($plain / .seconds * 100 | round / 100 | tostring) + "x" else "-" end) | \(if .reached and $best then ($best / .seconds * 100 | round / 100 | tostring) + "x" else "-" end) |")
' rows.jsonl
