#!/bin/sh
# torch-check.sh - cg's losses, gradients (and cgpt's logits) against
# PyTorch's on the same weights, for every architecture tests/torch_check.py
# knows, with and without low-rank adapters (Debian's python3-torch);
# skipped (77) where it is missing.
[ -x /usr/bin/python3 ] || exit 77
exec /usr/bin/python3 "$CG_SRCDIR/tests/torch_check.py" \
	"$CG_BUILDDIR/tests/unit/model_dump"
