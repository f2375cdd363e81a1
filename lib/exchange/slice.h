/*
 * exchange/slice.h - a reduction cut into slices of its tensors, one for
 * each of several coordinators, and the slices joined again.
 *
 * With N coordinators (parameter servers), coordinator I reduces only
 * slice I of N of the tensors: the views [lo, hi) that cg_slice_bounds
 * gives, a run of whole tensors in the update's order, each slice about
 * 1/N of the elements and none empty.  Its result is an update of
 * those views only, whose manifest says "slice": {"index": I, "of": N}
 * (update.h reads it); reductions of slice I reduce again into slice I,
 * as whole updates do (a tree of each slice).  The N results, joined,
 * are the whole reduction byte for byte: every element is folded by
 * the same operations in the same order whether or not its tensor is
 * in a slice, and the manifest is the one the whole reduction writes,
 * less "slice".  Only dense f32 slices join (a slice coded again is for
 * sending, not joining), and an update of slices cannot be applied to
 * a model before it is joined (cg_update_get refuses it).
 */
#ifndef CG_SLICE_H
#define CG_SLICE_H

#include "exchange/update.h"

/*
 * The views [*lo, *hi) of slice i of n over v [nv]: slice s begins at
 * the start of a view nearest s/n of the elements, moved on so that no
 * slice is empty.  0, or -1 with a message
 * when n is not in 1 .. nv (a slice is whole tensors) or i not in 0 ..
 * n - 1.
 */
int cg_slice_bounds(const struct cg_uview *v, int nv, int i, int n, int *lo,
                    int *hi);

/*
 * Cut the whole update u to slice i of n of its views (u keeps its file;
 * its views are those of the slice).  0, or -1 with a message starting
 * with u's name: u is a slice already or masked (its masks cancel only
 * in the whole sum), or cg_slice_bounds refuses.
 */
int cg_update_cut(struct cg_update *u, int i, int n);

/*
 * The whole update of the n slices s [n] (any order; borrowed: the file
 * points at their values, so they must outlive it): every slice of one
 * N once, each dense f32, their manifests the same less "slice" and
 * "tensors".  A new file the caller frees, or NULL with a message
 * naming the slice at fault.
 */
struct cg_file *cg_slice_join(struct cg_update *const *s, int n);

#endif
