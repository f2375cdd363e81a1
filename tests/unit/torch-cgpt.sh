#!/bin/sh
# torch-cgpt.sh - cg's cgpt logits, loss and gradients against PyTorch's on
# the same weights (Debian's python3-torch); skipped (77) where it is
# missing.
[ -x /usr/bin/python3 ] || exit 77
exec /usr/bin/python3 "$CG_SRCDIR/tests/torch_cgpt_check.py" \
	"$CG_BUILDDIR/tests/unit/cgpt_dump"
