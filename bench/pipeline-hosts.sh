#!/bin/bash
# pipeline-hosts.sh - a cgpt too large for one host trains as 4 pipeline
# stages on 4 hosts: the test hosts of tests/hosts.sh (network
# namespaces with an sshd each), each host's sshd, and so all it runs,
# in a memory cgroup limited to LIMIT.  The model (context CONTEXT,
# width WIDTH, LAYERS blocks, 4 heads, AdamW) needs about 4 times LIMIT
# in one process; each quarter of its blocks fits.
#
# Rows: a process that touches twice LIMIT on host 0 (dd), which the
# kernel must kill (that the limit holds here); the unsplit call of
# STEPS steps of BATCH in MICRO micro-batches on this machine, outside
# any cgroup (the reference bytes, and the memory it needs); the same
# call on host 0, killed; the same with --max-memory LIMIT, refused;
# and the 4 stages (cg-convert -S I/4), stage I on host I-1, each
# running the next over ssh, joined and compared with the unsplit
# call's bytes.  Each row: the exit status, the peak resident set size
# of each process (GNU time), and of each host's cgroup the most it held
# (page cache included), the times it met its limit (failcnt) and the
# processes the kernel killed there (memory.oom_control's oom_kill).
#
# usage: bench/pipeline-hosts.sh (from the top of the source tree, after
# a build, as root)
#
# Environment (defaults in brackets): CG_BIN [build/cmd], LIMIT [256M],
# WIDTH [512], LAYERS [16], CONTEXT [32], BATCH [8], MICRO [4],
# STEPS [2], FORTUNES [/usr/share/games/fortunes].
set -u
cd "$(dirname "$0")/.."
. tests/hosts.sh
CG_BIN=$(cd "${CG_BIN:-build/cmd}" && pwd) || exit 1
LIMIT=${LIMIT:-256M}
WIDTH=${WIDTH:-512}
LAYERS=${LAYERS:-16}
CONTEXT=${CONTEXT:-32}
BATCH=${BATCH:-8}
MICRO=${MICRO:-4}
STEPS=${STEPS:-2}
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
export PATH=$CG_BIN:$PATH LC_ALL=C OMP_NUM_THREADS=1

for why in "$(hosts_skip_reason)" "$(hosts_memory_skip_reason)"; do
	[ -z "$why" ] || { echo "pipeline-hosts.sh: $why" >&2; exit 1; }
done
limit=$(numfmt --from=iec "$LIMIT") || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/cg-pipeline-hosts.XXXXXX") || exit 1
trap 'hosts_down; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
cd "$work"
cg-shard -q -n 1 -o f "$FORTUNES" || exit 1
cg-init -a cgpt -d f-0.cgd --seed 1 --context "$CONTEXT" --width "$WIDTH" \
	--layers "$LAYERS" --heads 4 -o m.cgm || exit 1
for i in 1 2 3 4; do
	cg-convert -S "$i/4" m.cgm -o "s$i.cgm" || exit 1
done
hosts_up 4 || exit 1
for i in 0 1 2 3; do
	hosts_memory "$i" "$limit" || exit 1
done
pre=$(hosts_prefix)
train="${pre}cg-train-step -q -e model --opt adamw --lr 1e-3 -j 1"
first="-d $work/f-0.cgd -k $STEPS -b $BATCH --micro-batches $MICRO"

mib() { echo $(($1 / 1048576)); }

# stats: each host's "failcnt kills peak", one host a line, into $1
stats() {
	for i in 0 1 2 3; do
		hosts_memory_stat "$i"
	done >"$1"
}

# row NAME WHERE RC RSS...: a line of the table, the hosts' counters
# since the last stats into before
row() {
	local name=$1 where=$2 rc=$3 c=() k=() p=() i f0 k0 p0 f1 k1 p1
	shift 3
	stats after
	for i in 0 1 2 3; do
		read -r f0 k0 p0 < <(sed -n "$((i + 1))p" before)
		read -r f1 k1 p1 < <(sed -n "$((i + 1))p" after)
		c[i]=$f1 k[i]=$((k1 - k0)) p[i]=$(mib "$p1")
	done
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$where" \
		"$rc" "$*" "${p[*]}" "${c[*]}" "${k[*]}"
}

# reset: every host's failcnt and peak back to 0, the kills read now
reset() {
	for i in 0 1 2 3; do
		hosts_memory_reset "$i"
	done
	stats before
}

echo "pipeline-hosts.sh: limit $LIMIT ($limit bytes) a host; cgpt width $WIDTH, $LAYERS blocks, context $CONTEXT" >&2
printf '| run | where | exit | peak RSS MiB | cgroup peak MiB, host 0-3 | failcnt, host 0-3 | OOM kills, host 0-3 |\n'
printf '|---|---|---:|---|---|---|---|\n'

# the limit holds: twice it touched on host 0
reset
$HOSTS_SSH host0 "dd if=/dev/zero of=/dev/null bs=$((2 * limit)) count=1 2>/dev/null; echo \$? >$work/dd.rc"
row "dd bs=2x$LIMIT" "host 0" "$(cat dd.rc)" -

# the unsplit call, outside any cgroup: the reference
reset
/usr/bin/time -f %M -o rss.whole $train -m m.cgm $first -o whole.cgm
rc=$?
row "unsplit" "this machine, no limit" "$rc" "$(($(cat rss.whole) / 1024))"
[ "$rc" = 0 ] || exit 1

# the same on host 0 alone: killed
reset
$HOSTS_SSH host0 "cd $work && /usr/bin/time -f %M -o rss.single $train -m m.cgm $first -o single.cgm 2>single.err; echo \$? >single.rc"
# (GNU time says first that the command was killed)
row "unsplit" "host 0" "$(cat single.rc)" "$(($(tail -n 1 rss.single 2>/dev/null || echo 0) / 1024))"
[ ! -e single.cgm ] || { echo "pipeline-hosts.sh: the unsplit call fit on one host" >&2; exit 1; }
dmesg 2>/dev/null | grep -a "cgm${HOSTS_PREFIX}h0" | tail -n 2 >&2

# and with --max-memory: refused
reset
$HOSTS_SSH host0 "cd $work && $train -m m.cgm -d $work/f-0.cgd -k $STEPS -b $BATCH --max-memory $limit -o single.cgm 2>refused.err; echo \$? >refused.rc"
row "unsplit --max-memory $LIMIT" "host 0" "$(cat refused.rc)" -
sed 's/^/pipeline-hosts.sh: refused: /' refused.err >&2

# four stages on four hosts
for i in 4 3 2 1; do
	next=
	[ "$i" = 4 ] || next="--next '$HOSTS_SSH host$i sh $work/stage$((i + 1)).sh'"
	args=
	[ "$i" != 1 ] || args=$first
	echo "cd $work && exec /usr/bin/time -f %M -o rss.$i $train -m s$i.cgm $args -o o$i.cgm $next" >"stage$i.sh"
done
reset
t0=$(date +%s.%N)
$HOSTS_SSH host0 sh "$work/stage1.sh"
rc=$?
t1=$(date +%s.%N)
rss=
for i in 1 2 3 4; do
	rss="$rss $(($(tail -n 1 "rss.$i" 2>/dev/null || echo 0) / 1024))"
done
row "4 stages" "hosts 0-3" "$rc" $rss
[ "$rc" = 0 ] || exit 1
cg-convert -J o1.cgm o2.cgm o3.cgm o4.cgm -o joined.cgm || exit 1
if cmp -s joined.cgm whole.cgm; then
	same=yes
else
	same=NO
fi
echo "pipeline-hosts.sh: joined stages equal the unsplit call's bytes: $same; 4 stages took $(echo "$t1 - $t0" | bc -l | cut -c1-6) s" >&2
[ "$same" = yes ]
