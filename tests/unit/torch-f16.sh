#!/bin/sh
# torch-f16.sh - cg's losses and gradients with f16 products and the
# trainer's loss scaling (--precision f16) against PyTorch's float64 on
# the same weights, for every architecture tests/torch_check.py knows
# (Debian's python3-torch); skipped (77) where it is missing.
[ -x /usr/bin/python3 ] || exit 77
exec /usr/bin/python3 "$CG_SRCDIR/tests/torch_check.py" --f16 \
	"$CG_BUILDDIR/tests/unit/model_dump"
