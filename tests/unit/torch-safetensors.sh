#!/bin/sh
# torch-safetensors.sh - a cgpt model written by cg-convert, loaded into
# bench/torch_cgpt.py's PyTorch model, gives cg's logits
# (tests/torch_safetensors.py); skipped (77) where Debian's python3-torch
# is missing.  The venv of scripts/install-deps, which sees Debian's torch,
# adds PyPI's safetensors package to read the file; without it the file is
# read by hand.
py=/usr/bin/python3
[ -x /opt/cg-test-venv/bin/python ] && py=/opt/cg-test-venv/bin/python
[ -x "$py" ] || exit 77
exec "$py" "$CG_SRCDIR/tests/torch_safetensors.py" \
	"$CG_BUILDDIR/tests/unit/model_dump" "$CG_BUILDDIR/cmd/cg-convert"
