#!/bin/sh
# run.sh - a model out to safetensors and back with cg-convert, and a look
# at the safetensors file with cg-inspect.
#
# Shards the 100-example Fashion-MNIST test fixture and creates a small
# conditional VAE, so it runs anywhere in a second.  Where a python3 with
# the safetensors package and numpy is found, it reads the file too.  The
# programs are taken from PATH, or from a build in the source tree (cmd/
# or build/cmd/).  Output goes to a fresh directory, printed at the end;
# pass one as $1 to choose it.  Needs jq and cmp.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
PATH="$PATH:$top/build/cmd:$top/cmd"
out=${1:-$(mktemp -d)}
mkdir -p "$out"

cg-shard -n 1 -o "$out/fm" "$top/tests/fixtures/fashion-mnist-mini"
cg-init -a cvae -d "$out/fm-0.cgd" --hidden 64 --latent 8 --seed 3 \
	-o "$out/model.cgm"

# Out, and back to the very same bytes: the manifest travels in the
# safetensors metadata, under "cg.json".
cg-convert "$out/model.cgm" "$out/model.safetensors"
cg-convert "$out/model.safetensors" "$out/back.cgm"
cmp "$out/model.cgm" "$out/back.cgm" && echo "round trip: same bytes"

# cg-inspect reads safetensors files as it reads cg files.
cg-inspect --no-stats "$out/model.safetensors"
cg-inspect --json --no-stats "$out/model.safetensors" |
	jq -r '.tensors[] | "\(.name)\t\(.dtype)"'

# Another safetensors reader, where there is one.
for py in /opt/cg-test-venv/bin/python python3; do
	if "$py" -c 'import numpy, safetensors' 2>/dev/null; then
		"$py" - "$out/model.safetensors" <<'PY'
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    m = json.loads(f.metadata()["cg.json"])
    w = f.get_tensor("dec.out.b")
print("safetensors package: arch %s, dec.out.b max %.6g" % (m["arch"], w.max()))
PY
		break
	fi
done
echo "files in $out"
