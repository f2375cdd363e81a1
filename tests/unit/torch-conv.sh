#!/bin/sh
# torch-conv.sh - the convolutional kernels against PyTorch's conv2d,
# group_norm, nearest up-sampling and silu on the same inputs
# (tests/torch_conv.py, Debian's python3-torch); skipped (77) where it is
# missing.
[ -x /usr/bin/python3 ] || exit 77
exec /usr/bin/python3 "$CG_SRCDIR/tests/torch_conv.py" \
	"$CG_BUILDDIR/tests/unit/conv_dump"
