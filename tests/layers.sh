#!/bin/bash
# layers.sh - check that lib/ keeps its layers (lib/LAYERS says them).
#
# usage: layers.sh SRCDIR [OBJDIR]
#
# SRCDIR is a lib/ (with its LAYERS), OBJDIR where its objects were built
# (SRCDIR's core/util.c as OBJDIR/core/util.o).  Two graphs of file uses
# are checked, each against the same rules: the includes of every .c and
# .h, and, where OBJDIR is given, the calls between objects (a symbol one
# object leaves undefined and another defines).  A file may use only
# files of its own folder and of folders listed above it in LAYERS; in a
# folder with subfolders (arch/NAME/) a subfolder may not use another;
# no two files may use each other, directly or round a longer loop; every
# file lives in a folder of LAYERS (a header at the top, such as cg.h,
# takes the highest layer it includes); every quoted include is a file of
# SRCDIR.  Prints one line per fault and exits 1 if there is any, 0 if
# none, 2 when it cannot check.
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: layers.sh SRCDIR [OBJDIR]" >&2
	exit 2
fi
src=$1
obj=${2:-}
if [ ! -f "$src/LAYERS" ]; then
	echo "layers.sh: $src/LAYERS: no such file" >&2
	exit 2
fi
if [ -n "$obj" ] && [ ! -d "$obj" ]; then
	echo "layers.sh: $obj: no such directory" >&2
	exit 2
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

awk '!/^#/ && NF { print $1, n++ }' "$src/LAYERS" >"$tmp/rank"
(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | LC_ALL=C sort) \
	>"$tmp/files"

# Include edges "FROM TO", TO relative to SRCDIR ("?NAME" unresolved).
while read -r f; do
	d=$(dirname "$f")
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
		"$src/$f" | while read -r h; do
		if [ -f "$src/$h" ]; then
			echo "$f $h"
		elif [ -f "$src/$d/$h" ]; then
			echo "$f $(realpath -m --relative-to="$src" "$src/$d/$h")"
		else
			echo "$f ?$h"
		fi
	done
done <"$tmp/files" >"$tmp/inc"

# Call edges from the objects: "D SYMBOL FILE" and "U SYMBOL FILE".
# A definition in the C library's place (cli/runtime.c's getenv, which
# the programs' libraries are bound to) is no edge: the files that call
# getenv call the C library's, by its declaration, and link as well
# without that file (libcg.so is built without it).
interposed=" getenv secure_getenv "
: >"$tmp/call"
if [ -n "$obj" ]; then
	while read -r f; do
		case $f in *.c) ;; *) continue ;; esac
		o=$obj/${f%.c}.o
		[ -f "$o" ] || continue
		nm -g --defined-only "$o" | awk -v f="$f" -v skip="$interposed" \
			'NF == 3 && index(skip, " " $3 " ") == 0 { print "D", $3, f }'
		nm -u "$o" | awk -v f="$f" '{ print "U", $NF, f }'
	done <"$tmp/files" >"$tmp/syms"
	awk '$1 == "D" { d[$2] = $3; next }
	     ($2 in d) && d[$2] != $3 { print $3, d[$2] }' \
		"$tmp/syms" "$tmp/syms" | LC_ALL=C sort -u >"$tmp/call"
fi

# The rules, for each kind of edge.
judge() { # KIND EDGES
	awk -v kind="$1" '
	arg == 1 { rank[$1] = $2; next }
	arg == 2 { files[$1] = 1; next }
	arg == 3 { # includes: a top header takes its highest
		split($1, p, "/")
		if (length(p) == 1 && $2 !~ /^\?/) {
			split($2, q, "/")
			if ((q[1] in rank) && rank[q[1]] > top[$1])
				top[$1] = rank[q[1]]
		}
		next
	}
	{ edges[++ne] = $1 " " $2 }
	function layer(f,   p, n) {
		n = split(f, p, "/")
		if (n == 1)
			return (f in top) ? top[f] : 0
		return (p[1] in rank) ? rank[p[1]] : -1
	}
	function unit(f,   p, n) {
		n = split(f, p, "/")
		return n >= 3 ? p[1] "/" p[2] : (n == 2 ? p[1] : "")
	}
	function name(r,   k) {
		for (k in rank)
			if (rank[k] == r)
				return k
		return "?"
	}
	END {
		for (f in files) {
			n = split(f, p, "/")
			if (n == 1 && f !~ /\.h$/)
				printf "%s: not in a folder of LAYERS\n", f
			else if (n > 1 && !(p[1] in rank))
				printf "%s: folder %s is not in LAYERS\n", f, p[1]
		}
		for (i = 1; i <= ne; i++) {
			split(edges[i], e, " ")
			a = e[1]; b = e[2]
			if (a == b)
				continue
			if (b ~ /^\?/) {
				printf "%s includes \"%s\", not a file of lib/\n", a, substr(b, 2)
				continue
			}
			la = layer(a); lb = layer(b)
			if (la < 0 || lb < 0)
				continue
			if (lb > la)
				printf "%s %s %s: %s may not use %s, a layer above it\n", a, kind, b, name(la), name(lb)
			else if (la == lb && unit(a) != unit(b) &&
			         split(unit(a), x, "/") == 2 && split(unit(b), y, "/") == 2)
				printf "%s %s %s: %s may not use %s, its sibling\n", a, kind, b, unit(a), unit(b)
		}
	}' arg=1 "$tmp/rank" arg=2 "$tmp/files" arg=3 "$tmp/inc" arg=4 "$2"
	# A loop: tsort names the files on it.
	grep -v ' ?' "$2" | tsort >/dev/null 2>"$tmp/loop"
	if grep -q loop "$tmp/loop"; then
		printf '%s loop: %s\n' "$1" \
			"$(sed -n 's/^tsort: \([^ ]*\)$/\1/p' "$tmp/loop" | tr '\n' ' ' | sed 's/ $//')"
	fi
}

{
	judge includes "$tmp/inc"
	[ -n "$obj" ] && judge calls "$tmp/call"
} >"$tmp/out"
if [ -s "$tmp/out" ]; then
	sed 's/^/layers: /' "$tmp/out"
	exit 1
fi
exit 0
