#!/bin/sh
# speed.sh - cg against PyTorch on training throughput, same models, same
# hyper-parameters, same thread count, PyTorch in its fastest configuration
# (the cvae, the cgpt, and cg-init's default cddpm and cgan; on request
# the convolutional cclf, cgan and cddpm U-Net), each in f32 and with
# bf16 matrix products (cg-train-step --precision bf16, PyTorch's CPU
# autocast); and cg-reduce against cat on the same bytes.  One command,
# one report.
#
# usage: bench/speed.sh (from the top of the source tree, after a build)
#
# Environment (defaults in brackets):
#   CG_BIN       cg programs [build/cmd]
#   VENV         virtual environment for PyPI's newest torch, made and
#                filled with `pip install torch numpy` on first use
#                [/opt/cg-bench-venv]
#   DEB_PYTHON   interpreter with Debian's python3-torch [/usr/bin/python3]
#   TORCH_IMPLS  the PyTorch builds timed, some of "pypi debian" [both]
#   THREADS      threads for everything [2]
#   MODELS       the models timed, some of "cvae cgpt cddpm cgan
#                cclf-conv cgan-conv cddpm-unet", or "all" (the seven)
#                ["cvae cgpt cddpm cgan"]; the convolutional three:
#                MODELS="cclf-conv cgan-conv cddpm-unet"
#   PRECISIONS   "f32" or "f32 bf16": cg-train-step --precision of cg's
#                calls, and PyTorch in float32 or under autocast bf16,
#                both tuned and timed ["f32 bf16"]
#   CVAE_STEPS, CGPT_STEPS, CDDPM_STEPS, CGAN_STEPS
#                steps of a timed call [100, 20, 100, 100]
#   CVAE_RUNS, CGPT_RUNS, CDDPM_RUNS, CGAN_RUNS
#                timed calls of each program [5, 3, 5, 5]
#   CCLF_CONV_STEPS, CGAN_CONV_STEPS, CDDPM_UNET_STEPS [10, 10, 10],
#   CCLF_CONV_RUNS, CGAN_CONV_RUNS, CDDPM_UNET_RUNS [3, 3, 3]
#                the same for the convolutional models
#   CGAN_CONV_OPTS more cg-init options of cgan-conv, key=value words
#                ("r1=0.1 disc-kernel=4 aux=1": the quality table's
#                model; PyTorch's takes the same) [none]
#   REDUCE_RUNS  runs of each cg-reduce and cat line; 0 leaves cg-reduce
#                out [5]
#   TUNE_CVAE_STEPS, TUNE_CGPT_STEPS, TUNE_CDDPM_STEPS, TUNE_CGAN_STEPS
#                steps of each tuning run [30, 4, 30, 30]
#   TUNE_CCLF_CONV_STEPS, TUNE_CGAN_CONV_STEPS, TUNE_CDDPM_UNET_STEPS
#                the same for the convolutional models [5, 5, 5]
#   TUNE_MAX_SECONDS  time box of one tuning candidate [10]
#   TORCH_MAX_SECONDS time box of one timed PyTorch run, rated on the
#                steps it timed (bf16 without bf16 instructions) [30]
#   RESULTS      also keep the raw JSON lines in this file
#   GEMM_EXTRA_CORETYPE, CG_BENCH_EXTRA_ENV   one more GEMM kernel set,
#                one more PyTorch environment ("NAME=VALUE ..."), to try
#                one; a run killed by a signal is reported as skipped
#
# OpenBLAS kernel sets are forced only where /proc/cpuinfo shows their
# instructions (torch_speed.py cores).
#
# Wall times are medians of the runs, with min-max.  cg, PyTorch (PyPI)
# and PyTorch (Debian) take turns in each round so that load from other
# jobs falls on all of them alike.  bench/README says what is measured and
# how FLOPs are counted.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${CG_BIN:-build/cmd}
venv=${VENV:-/opt/cg-bench-venv}
deb_py=${DEB_PYTHON:-/usr/bin/python3}
threads=${THREADS:-2}
all_models="cvae cgpt cddpm cgan cclf-conv cgan-conv cddpm-unet"
models=${MODELS:-cvae cgpt cddpm cgan}
[ "$models" = all ] && models=$all_models
precisions=${PRECISIONS:-f32 bf16}
impls=${TORCH_IMPLS:-pypi debian}
cvae_steps=${CVAE_STEPS:-100}
cgpt_steps=${CGPT_STEPS:-20}
cddpm_steps=${CDDPM_STEPS:-100}
cgan_steps=${CGAN_STEPS:-100}
cvae_runs=${CVAE_RUNS:-5}
cgpt_runs=${CGPT_RUNS:-3}
cddpm_runs=${CDDPM_RUNS:-5}
cgan_runs=${CGAN_RUNS:-5}
reduce_runs=${REDUCE_RUNS:-5}
tune_cvae=${TUNE_CVAE_STEPS:-30}
tune_cgpt=${TUNE_CGPT_STEPS:-4}
tune_cddpm=${TUNE_CDDPM_STEPS:-30}
tune_cgan=${TUNE_CGAN_STEPS:-30}
cclf_conv_steps=${CCLF_CONV_STEPS:-10}
cgan_conv_steps=${CGAN_CONV_STEPS:-10}
cddpm_unet_steps=${CDDPM_UNET_STEPS:-10}
cclf_conv_runs=${CCLF_CONV_RUNS:-3}
cgan_conv_runs=${CGAN_CONV_RUNS:-3}
cddpm_unet_runs=${CDDPM_UNET_RUNS:-3}
tune_cclf_conv=${TUNE_CCLF_CONV_STEPS:-5}
tune_cgan_conv=${TUNE_CGAN_CONV_STEPS:-5}
tune_cddpm_unet=${TUNE_CDDPM_UNET_STEPS:-5}
tune_max=${TUNE_MAX_SECONDS:-10}
torch_max=${TORCH_MAX_SECONDS:-30}
fmnist=${FMNIST:-/usr/share/datasets/fashion-mnist}
fortunes=${FORTUNES:-/usr/share/games/fortunes}
# the PyTorch interpreters are started from a clean slate (torch_speed.py
# removes these too); cg programs set their own (lib/cli/runtime.c)
unset OMP_WAIT_POLICY OMP_NUM_THREADS OPENBLAS_CORETYPE OPENBLAS_L2_SIZE \
	OPENBLAS_NUM_THREADS MKL_NUM_THREADS GOMP_SPINCOUNT || :

say() { echo "speed.sh: $(date +%T): $*" >&2; }

# the models, checked, and with commas for torch_speed.py
mlist=
for m in $models; do
	case $m in
	cvae | cgpt | cddpm | cgan | cclf-conv | cgan-conv | cddpm-unet)
		mlist=${mlist:+$mlist,}$m ;;
	*) say "MODELS: $m: not one of $all_models (or all)"; exit 2 ;;
	esac
done
[ -n "$mlist" ] || { say "MODELS: empty"; exit 2; }
# f32 is the baseline every ratio, the MFU and the per-call overhead use
plist=
for p in $precisions; do
	case $p in
	f32 | bf16) plist=${plist:+$plist,}$p ;;
	*) say "PRECISIONS: $p: not one of f32 bf16"; exit 2 ;;
	esac
done
case " $precisions " in
*" f32 "*) ;;
*) say "PRECISIONS: f32 missing (the baseline)"; exit 2 ;;
esac
for i in $impls; do
	case $i in
	pypi | debian) ;;
	*) say "TORCH_IMPLS: $i: not one of pypi debian"; exit 2 ;;
	esac
done
[ -n "$impls" ] || { say "TORCH_IMPLS: empty"; exit 2; }

for p in cg-shard cg-init cg-train-step cg-reduce cg-inspect; do
	[ -x "$bin/$p" ] || { say "$bin/$p missing: build first, or set CG_BIN"; exit 1; }
done
if [ ! -x /usr/bin/time ]; then
	say "installing GNU time (for peak RSS)"
	apt-get install -y -q time >/dev/null
fi
for t in cc pkg-config jq bc; do
	command -v "$t" >/dev/null || { say "$t missing"; exit 1; }
done
case " $impls " in
*" pypi "*) ;;
*) venv= ;;
esac
if [ -n "$venv" ] && { [ ! -x "$venv/bin/python" ] ||
	! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; }; then
	say "making $venv: python3 -m venv, pip install torch numpy (PyPI)"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q torch numpy >&2
fi
pypi_py=$venv/bin/python

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/results.jsonl
: >"$res"

meta() { jq -nc --arg k "$1" --arg v "$2" '{type: "meta", key: $k, value: $v}' >>"$res"; }
# now: seconds since the epoch, to the nanosecond
now() { date +%s.%N; }
warming=0 # 1: cg_call runs its call untimed

meta threads "$threads"
meta cg_version "$("$bin/cg-train-step" --version | awk '{ print $NF }')"
meta load_before "$(uptime | sed 's/.*load average: //')"
say "load average before: $(uptime | sed 's/.*load average: //')"
# cg's rows run in this environment: OpenBLAS settings in it are cg's
# kernels too (a machine that set OPENBLAS_CORETYPE=Haswell and
# OPENBLAS_L2_SIZE=512 halved cg's f32 products on an AVX-512 CPU)
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_VERBOSE; do
	eval "val=\${$v:-}"
	if [ -n "$val" ]; then
		say "warning: $v=$val is set: cg's OpenBLAS runs with it"
		meta "env_$v" "$val"
	fi
done

# ------------------------------------------------------------ data, models
# the fortunes' shard also makes cg-reduce's gradient, and torch_speed.py
# asks for it whatever it runs
"$bin/cg-shard" -q -n 1 -o "$tmp/fm" "$fmnist"
"$bin/cg-shard" -q -n 1 -o "$tmp/ft" "$fortunes"
for m in $models; do
	case $m in
	cvae) "$bin/cg-init" -a cvae -d "$tmp/fm-0.cgd" --hidden 512 \
		--layers 2 --latent 32 --class-prior=0 --cond-every=0 --seed 1 \
		-o "$tmp/cvae.cgm" ;;
	cgpt)
		"$bin/cg-init" -a cgpt -d "$tmp/ft-0.cgd" --context 128 \
			--width 256 --layers 4 --heads 4 --seed 1 -o "$tmp/cgpt.cgm"
		ncond=$("$bin/cg-inspect" --json "$tmp/cgpt.cgm" | jq .config.ncond)
		meta cgpt_vocab $((256 + ncond + 1))
		;;
	# bench/judge.sh's CNN judge (CONV=32), bench/cgan.sh's CONV=32, and
	# the U-Net of RESULTS's "The cddpm U-Net" (--film on by default)
	cclf-conv) "$bin/cg-init" -a cclf -d "$tmp/fm-0.cgd" --conv 32 \
		--hidden 256 --layers 1 --seed 1 -o "$tmp/$m.cgm" ;;
	cgan-conv) "$bin/cg-init" -a cgan -d "$tmp/fm-0.cgd" --conv 32 \
		$(for kv in ${CGAN_CONV_OPTS:-}; do
			printf -- '--%s %s ' "${kv%%=*}" "${kv#*=}"
		done) --seed 1 -o "$tmp/$m.cgm" ;;
	cddpm-unet) "$bin/cg-init" -a cddpm -d "$tmp/fm-0.cgd" --unet 16 \
		--hidden 128 --embed 64 --seed 1 -o "$tmp/$m.cgm" ;;
	# cg-init's defaults, as bench/cddpm.sh and bench/cgan.sh train them
	*) "$bin/cg-init" -a "$m" -d "$tmp/fm-0.cgd" --seed 1 -o "$tmp/$m.cgm" ;;
	esac
done

# -------------------------------------------------------------- GEMM peak
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -O2 -o "$tmp/gemm-peak" "$here/gemm-peak.c" \
	$(pkg-config --cflags --libs openblas)
# OpenBLAS's own choice, then each kernel set the benches force that this
# CPU can run (torch_speed.py cores: from /proc/cpuinfo's flags).  A run
# killed all the same (SIGILL: an instruction the CPU lacks) is reported
# as skipped, and the bench goes on.
for ct in unset $("$deb_py" "$here/torch_speed.py" cores) ${GEMM_EXTRA_CORETYPE:-}; do
	say "GEMM peak, OPENBLAS_CORETYPE=$ct"
	rc=0
	if [ "$ct" = unset ]; then
		env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$tmp/gemm-peak" 2048 "$threads" 5
	else
		env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE="$ct" "$tmp/gemm-peak" 2048 "$threads" 5
	fi >"$tmp/gemm.json" || rc=$?
	if [ "$rc" -eq 0 ]; then
		jq -c --arg l "$ct" '. + {type: "gemm", label: $l}' "$tmp/gemm.json" >>"$res"
		continue
	fi
	why="exit status $rc"
	[ "$rc" -gt 128 ] && why="killed by SIG$(kill -l "$rc")"
	say "GEMM peak, OPENBLAS_CORETYPE=$ct: skipped: $why"
	jq -nc --arg l "$ct" --arg e "skipped: $why" \
		'{type: "gemm", label: $l, error: $e}' >>"$res"
done

# ------------------------------------------------------- PyTorch: tune
for impl in $impls; do
	py=$pypi_py
	[ "$impl" = debian ] && py=$deb_py
	/usr/bin/time -f %M -o "$tmp/rss" "$py" -c 'import torch' 2>/dev/null
	jq -nc --arg i "$impl" --argjson r "$(tail -n 1 "$tmp/rss")" \
		'{type: "torch-import", impl: $i, rss_kb: $r}' >>"$res"
	say "tuning PyTorch ($impl: $("$py" -c 'import torch; print(torch.__version__)'))"
	"$deb_py" "$here/torch_speed.py" tune --python "$py" --impl "$impl" \
		--threads "$threads" --data "$fmnist" --shard "$tmp/ft-0.cgd" \
		--models "$mlist" --precisions "$plist" \
		--cvae-steps "$tune_cvae" --cgpt-steps "$tune_cgpt" \
		--cddpm-steps "$tune_cddpm" --cgan-steps "$tune_cgan" \
		--cclf-conv-steps "$tune_cclf_conv" \
		--cgan-conv-steps "$tune_cgan_conv" \
		--cddpm-unet-steps "$tune_cddpm_unet" \
		--max-seconds "$tune_max" \
		>>"$tmp/tune.jsonl"
done
cat "$tmp/tune.jsonl" >>"$res"

# ------------------------------------------------------ training rounds
# cg_call MODEL STEPS PRECISION: one timed cg-train-step call
cg_call() {
	case $1 in
	cvae) set -- "$@" -m "$tmp/cvae.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 1e-3 ;;
	cgpt) set -- "$@" -m "$tmp/cgpt.cgm" -d "$tmp/ft-0.cgd" --batch 16 \
		--opt adamw --lr 3e-4 --wd 0.1 ;;
	cddpm) set -- "$@" -m "$tmp/cddpm.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 1e-3 ;;
	cgan) set -- "$@" -m "$tmp/cgan.cgm" -d "$tmp/fm-0.cgd" --batch 128 \
		--opt adam --lr 4e-4 --beta1 0.5 --beta2 0.999 ;;
	cclf-conv) set -- "$@" -m "$tmp/cclf-conv.cgm" -d "$tmp/fm-0.cgd" \
		--batch 128 --opt adam --lr 1e-3 ;;
	cgan-conv) set -- "$@" -m "$tmp/cgan-conv.cgm" -d "$tmp/fm-0.cgd" \
		--batch 128 --opt adam --lr 4e-4 --beta1 0.5 --beta2 0.999 ;;
	cddpm-unet) set -- "$@" -m "$tmp/cddpm-unet.cgm" -d "$tmp/fm-0.cgd" \
		--batch 64 --opt adam --lr 1e-3 ;;
	esac
	m=$1 k=$2 p=$3
	shift 3
	# f32 is the default: no flag, so that a build older than
	# --precision still runs the f32 rows
	[ "$p" = f32 ] || set -- "$@" --precision "$p"
	t0=$(now)
	/usr/bin/time -f %M -o "$tmp/rss" "$bin/cg-train-step" -q "$@" \
		--emit model --steps "$k" --seed 1 --threads "$threads" \
		-o "$tmp/out.cgm"
	t1=$(now)
	[ "$warming" = 0 ] || return 0
	jq -nc --arg m "$m" --argjson k "$k" --arg p "$p" \
		--argjson w "$(echo "$t1 - $t0" | bc -l | sed 's/^\./0./')" \
		--argjson r "$(tail -n 1 "$tmp/rss")" \
		'{type: "cg", model: $m, steps: $k, precision: $p, wall: $w, rss_kb: $r}' >>"$res"
}
# torch_call IMPL MODEL STEPS PRECISION: one timed PyTorch run (a fresh
# process) of the configuration tuned for that precision
torch_call() {
	"$deb_py" "$here/torch_speed.py" measure --tuned "$tmp/tune.jsonl" \
		--impl "$1" --model "$2" --steps "$3" --precision "$4" \
		--threads "$threads" --max-seconds "$torch_max" \
		--data "$fmnist" --shard "$tmp/ft-0.cgd" >>"$res"
}
# steps_of MODEL, runs_of MODEL: its STEPS and RUNS
steps_of() {
	case $1 in
	cvae) echo "$cvae_steps" ;;
	cgpt) echo "$cgpt_steps" ;;
	cddpm) echo "$cddpm_steps" ;;
	cgan) echo "$cgan_steps" ;;
	cclf-conv) echo "$cclf_conv_steps" ;;
	cgan-conv) echo "$cgan_conv_steps" ;;
	cddpm-unet) echo "$cddpm_unet_steps" ;;
	esac
}
runs_of() {
	case $1 in
	cvae) echo "$cvae_runs" ;;
	cgpt) echo "$cgpt_runs" ;;
	cddpm) echo "$cddpm_runs" ;;
	cgan) echo "$cgan_runs" ;;
	cclf-conv) echo "$cclf_conv_runs" ;;
	cgan-conv) echo "$cgan_conv_runs" ;;
	cddpm-unet) echo "$cddpm_unet_runs" ;;
	esac
}
runs=0
for m in $models; do
	[ "$(runs_of "$m")" -gt "$runs" ] && runs=$(runs_of "$m")
done
r=1
while [ "$r" -le "$runs" ]; do
	say "round $r of $runs"
	# (cg_call sets m, k and p)
	for model in $models; do
		[ "$r" -le "$(runs_of "$model")" ] || continue
		steps=$(steps_of "$model")
		# each precision its own t(1): its throughput is (t(N) - t(1))
		# / (N - 1).  An untimed call first: on a virtual machine the
		# first process to touch memory after a pause waits while the
		# host backs it (a 1-step cgpt call took 0.63-0.90 s after 2 s
		# idle against 0.19-0.23 s right after another call: 64% of
		# its time zeroing pages), which went to t(1) of whichever
		# precision came first and made its steps look faster.
		for prec in $precisions; do
			warming=1
			cg_call "$model" 1 "$prec"
			warming=0
			cg_call "$model" 1 "$prec"
			cg_call "$model" "$steps" "$prec"
		done
		for prec in $precisions; do
			for impl in $impls; do
				torch_call "$impl" "$model" "$steps" "$prec"
			done
		done
	done
	r=$((r + 1))
done

# ------------------------------------------------------ cg-reduce vs cat
# A ~10M-parameter cgpt (width 448, 4 blocks: 9,984,128 parameters) and one
# gradient of it, copied to 8 files; 32 inputs are the 8 files hard-linked
# 4 times over (one update many times: --allow-duplicates).  Output to
# /dev/null; the inputs are in the page cache.
# REDUCE_RUNS=0 leaves the section out.
if [ "$reduce_runs" -gt 0 ]; then
	say "cg-reduce"
	"$bin/cg-init" -a cgpt -d "$tmp/ft-0.cgd" --width 448 --layers 4 --heads 7 \
		--seed 1 -o "$tmp/big.cgm"
	"$bin/cg-train-step" -q -m "$tmp/big.cgm" -d "$tmp/ft-0.cgd" --emit grad \
		--steps 1 --batch 2 --threads "$threads" -o "$tmp/g.cgg"
	meta reduce_params "$("$bin/cg-inspect" --json "$tmp/g.cgg" |
		jq '[.tensors[].count] | add')"
	rm "$tmp/out.cgm" "$tmp/big.cgm"
	mkdir "$tmp/g"
	i=0
	while [ "$i" -lt 32 ]; do
		if [ "$i" -lt 8 ]; then
			cp "$tmp/g.cgg" "$tmp/g/$i.cgg"
		else
			ln "$tmp/g/$((i % 8)).cgg" "$tmp/g/$i.cgg"
		fi
		i=$((i + 1))
	done
	cat "$tmp"/g/*.cgg >/dev/null
	# $files is split on purpose: mktemp's names have no blanks
	# shellcheck disable=SC2086
	for n in 2 8 32; do
		files=$(i=0; while [ "$i" -lt "$n" ]; do echo "$tmp/g/$i.cgg"; i=$((i + 1)); done)
		bytes=$(cat $files | wc -c)
		for prog in cat cg-reduce; do
			j=0
			while [ "$j" -lt "$reduce_runs" ]; do
				t0=$(now)
				if [ "$prog" = cat ]; then
					/usr/bin/time -f %M -o "$tmp/rss" cat $files >/dev/null
				else
					/usr/bin/time -f %M -o "$tmp/rss" "$bin/cg-reduce" -q \
						--allow-duplicates --threads "$threads" -o - \
						$files >/dev/null
				fi
				t1=$(now)
				jq -nc --arg p "$prog" --argjson n "$n" --argjson b "$bytes" \
					--argjson w "$(echo "$t1 - $t0" | bc -l | sed 's/^\./0./')" \
					--argjson r "$(tail -n 1 "$tmp/rss")" \
					'{type: "reduce", prog: $p, inputs: $n, bytes: $b, wall: $w, rss_kb: $r}' >>"$res"
				j=$((j + 1))
			done
		done
	done
fi

meta load_after "$(uptime | sed 's/.*load average: //')"
say "load average after: $(uptime | sed 's/.*load average: //')"
[ -n "${RESULTS:-}" ] && cp "$res" "$RESULTS"
echo "# $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average before: $(jq -r 'select(.key == "load_before") | .value' "$res"), after: $(jq -r 'select(.key == "load_after") | .value' "$res")"
echo
"$deb_py" "$here/torch_speed.py" report "$res"
