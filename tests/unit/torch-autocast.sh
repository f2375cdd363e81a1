#!/bin/sh
# torch-autocast.sh - cg's losses and gradients with bf16 products
# (--precision bf16) against PyTorch's autocast on the same weights, for
# every architecture tests/torch_check.py knows (Debian's python3-torch);
# skipped (77) where it is missing.
[ -x /usr/bin/python3 ] || exit 77
exec /usr/bin/python3 "$CG_SRCDIR/tests/torch_check.py" --autocast \
	"$CG_BUILDDIR/tests/unit/model_dump"
