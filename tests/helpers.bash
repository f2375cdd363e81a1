# helpers.bash - the fixtures the bats files share: shards of the data in
# tests/fixtures and models made from them, by the programs on PATH, in
# the current directory (a setup_file's $BATS_FILE_TMPDIR).
#
#   load helpers          after bats-support and bats-assert
#
#   images PREFIX [CG-SHARD OPTION...]
#       shards PREFIX-N.cgd of the Fashion-MNIST fixture
#       (fashion-mnist-mini), as cg-shard -q OPTION... -o PREFIX makes them
#   texts PREFIX [CG-SHARD OPTION...]
#       the same of the fortunes (text/fortunes, one category per file)
#   model ARCH SHARD OUT [CG-INIT OPTION...]
#       a model of ARCH for SHARD: cg-init with seed 1 (an option given
#       later wins) and cg-init's defaults for what the options leave
#   small_cvae SHARD OUT [CG-INIT OPTION...]
#   small_cgpt SHARD OUT [CG-INIT OPTION...]
#       model with the sizes most files test on: a cvae 16 wide, one
#       layer, 4 latents; a cgpt of context 32, 16 wide, one layer, two
#       heads
#   default_models IMAGES TEXTS [ARCH...]
#       ARCH.cgm for each ARCH (default: every one cg-init lists), of
#       cg-init's default sizes (the tensor counts users have), on shard
#       TEXTS for the archs cg-init says are for text, IMAGES for the
#       others
#   archs
#       the architectures cg-init lists, one per line
#   group_wait PGID
#       returns once no process of group PGID is alive: one killed is
#       gone when it has exited, as a zombie (it runs and writes nothing
#       more) as well; kill -0 counts a zombie until init reaps it,
#       which some inits (a micro-VM's) do about every 2 s
#
# Each function fails (status 1, with cg-shard's or cg-init's message) as
# the program it runs does.  Fixtures are made per file: each takes under
# 0.1 s, no more than a cache shared by the files would cost to lock and
# copy, and a file's fixtures then never depend on another file's run.

FIXTURES=$BATS_TEST_DIRNAME/fixtures

images() {
	local prefix=$1
	shift
	cg-shard -q "$@" -o "$prefix" "$FIXTURES/fashion-mnist-mini"
}

texts() {
	local prefix=$1
	shift
	cg-shard -q "$@" -o "$prefix" "$FIXTURES/text/fortunes"
}

model() {
	local arch=$1 shard=$2 out=$3
	shift 3
	cg-init -a "$arch" -d "$shard" --seed 1 "$@" -o "$out"
}

small_cvae() {
	local shard=$1 out=$2
	shift 2
	model cvae "$shard" "$out" --hidden 16 --layers 1 --latent 4 "$@"
}

small_cgpt() {
	local shard=$1 out=$2
	shift 2
	model cgpt "$shard" "$out" --context 32 --width 16 --layers 1 \
		--heads 2 "$@"
}

# stages MODEL N...: MODEL cut into N pipeline stages for each N, stage
# I of N in sI-N.cgm
stages() {
	local m=$1 n i
	shift
	for n in "$@"; do
		for i in $(seq 1 "$n"); do
			cg-convert -S "$i/$n" "$m" -o "s$i-$n.cgm" || return 1
		done
	done
}

archs() {
	cg-init --help | sed -n 's/^ *-a, --arch NAME *architecture: //p' |
		tr -s ', ' '\n\n'
}

# arch_shard ARCH: the shard of images fm-0.cgd, or of texts fort-0.cgd
# for the cgpt, that ARCH trains on (as setup_file's `images fm -n 1;
# texts fort -n 1; default_models fm-0.cgd fort-0.cgd` makes them)
arch_shard() {
	if [ "$1" = cgpt ]; then echo fort-0.cgd; else echo fm-0.cgd; fi
}

# within_pct F B: F and B, two numbers, within 1% of F of each other
within_pct() {
	awk -v f="$1" -v b="$2" 'BEGIN { d = f - b; if (d < 0) d = -d
		exit !(d <= 0.01 * (f < 0 ? -f : f)) }'
}

default_models() {
	local img=$1 txt=$2 a help
	shift 2
	help=$(cg-init --help) || return 1
	for a in ${@:-$(archs)}; do
		if grep -q "^-a $a: .* for text\$" <<<"$help"; then
			model "$a" "$txt" "$a.cgm" || return 1
		else
			model "$a" "$img" "$a.cgm" || return 1
		fi
	done
}

group_wait() {
	local g=$1 s l alive
	while :; do
		alive=
		for s in /proc/[0-9]*/stat; do
			{ read -r l <"$s"; } 2>/dev/null || continue
			# pid (comm) state ppid pgrp ...: comm may hold anything
			l=${l##*) }
			set -- $l
			case $1 in Z | X) continue ;; esac
			[ "$3" = "$g" ] && { alive=1; break; }
		done
		[ -n "$alive" ] || return 0
		sleep 0.01
	done
}

# with_config MODEL FILTER: MODEL with its config changed by jq FILTER,
# as odd.cgm in the current directory (the manifest's digests cover the
# tensors, not the config: a model whose config lies)
with_config() {
	rm -rf m && mkdir m
	tar -xf "$1" -C m
	jq -c ".config |= ($2)" m/cg.json >m/cg.json.new
	mv m/cg.json.new m/cg.json
	tar --format=ustar -cf odd.cgm -C m $(tar -tf "$1")
}
