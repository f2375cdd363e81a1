/*
 * exchange/slice.c - a reduction cut into slices of its tensors, and the
 * slices joined again (slice.h).
 *
 * A slice is a run of whole tensors: cutting inside a tensor would make
 * the slices more even for a model of one huge matrix, but a slice of
 * whole tensors is an update like any other, read, checked and reduced
 * by the same code.  Nothing here adds a number: the join only lays the
 * slices' tensors side by side.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/slice.h"

int
cg_slice_bounds(const struct cg_uview *v, int nv, int i, int n, int *lo,
                int *hi)
{
	uint64_t total = 0, start = 0;
	int bound = 0, raw = 0; /* boundary s - 1; the view at start */

	if (n < 1 || n > nv)
		return cg_seterr("%d slices of %d tensors: a slice is one "
		                 "tensor at least",
		                 n, nv);
	if (i < 0 || i >= n)
		return cg_seterr("slice %d of %d: not one of 1 to %d", i + 1, n,
		                 n);
	for (int t = 0; t < nv; t++)
		total += v[t].n;
	*lo = 0;
	/* boundary s: the start of a view nearest s/n of the elements, at
	 * least one past boundary s - 1, and leaving a view for each
	 * slice after it */
	for (int s = 1; s <= i + 1; s++) {
		int next = nv;
		if (s < n) {
			const uint64_t at = (uint64_t)s * total;
			while (raw < nv && start * (uint64_t)n < at)
				start += v[raw++].n;
			/* raw starts at s/n or past; raw - 1 before it */
			next = raw;
			if (raw > 0 &&
			    at - (start - v[raw - 1].n) * (uint64_t)n <
			        start * (uint64_t)n - at)
				next = raw - 1;
			next = next > bound + 1 ? next : bound + 1;
			if (next > nv - (n - s))
				next = nv - (n - s);
		}
		if (s == i)
			*lo = next;
		bound = next;
	}
	*hi = bound;
	return 0;
}

int
cg_update_cut(struct cg_update *u, int i, int n)
{
	int lo, hi;

	if (u->slice_n)
		return cg_seterr("%s: slice %d of %d already, not whole",
		                 u->name, u->slice_i + 1, u->slice_n);
	if (u->mask)
		return cg_seterr("%s: masked: its masks cancel only in the "
		                 "whole sum, which is not sliced",
		                 u->name);
	if (cg_slice_bounds(u->views, u->nviews, i, n, &lo, &hi) != 0)
		return cg_errprefix(u->name), -1;
	memmove(u->views, u->views + lo, (size_t)(hi - lo) * sizeof(*u->views));
	u->nviews = hi - lo;
	u->slice_i = i;
	u->slice_n = n;
	return 0;
}

/* f's manifest less "slice" and "tensors", to compare; NULL when out of
 * memory. */
static cJSON *
bare_manifest(const struct cg_file *f)
{
	cJSON *m = cJSON_Duplicate(f->manifest, 1);

	if (m == NULL)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(m, "slice");
	cJSON_DeleteItemFromObjectCaseSensitive(m, "tensors");
	return m;
}

/* The slices s [n] in the order of their index into o [n]; 0, or -1
 * with a message. */
static int
order(struct cg_update *const *s, int n, const struct cg_update **o)
{
	memset(o, 0, (size_t)n * sizeof(*o));
	for (int k = 0; k < n; k++) {
		const struct cg_update *u = s[k];
		if (u->slice_n == 0)
			return cg_seterr("%s: a whole update, not a slice",
			                 u->name);
		if (u->slice_n != n)
			return cg_seterr("%s: slice %d of %d, but %d slices "
			                 "given",
			                 u->name, u->slice_i + 1, u->slice_n, n);
		if (o[u->slice_i] != NULL)
			return cg_seterr("%s: slice %d of %d, as %s is",
			                 u->name, u->slice_i + 1, n,
			                 o[u->slice_i]->name);
		o[u->slice_i] = u;
	}
	return 0;
}

/* 0 when every view of u is stored dense f32 and its manifest is
 * first's (bare: first's bare manifest); else -1 with a message. */
static int
check_slice(const struct cg_update *u, const cJSON *bare,
            const struct cg_update *first)
{
	cJSON *m;
	int same;

	for (int t = 0; t < u->nviews; t++)
		if (u->mask || cg_update_view_f32(u, t) == NULL)
			return cg_seterr("%s: tensor %s: not dense f32 (only "
			                 "the slices as reduced join)",
			                 u->name, u->views[t].name);
	if ((m = bare_manifest(u->file)) == NULL)
		return cg_seterr("out of memory");
	same = cJSON_Compare(m, bare, 1);
	cJSON_Delete(m);
	if (!same)
		return cg_seterr("%s: not a slice of the reduction %s is a "
		                 "slice of (its manifest differs)",
		                 u->name, first->name);
	return 0;
}

/*
 * 0 when the slices o [n] are the slices of their views laid side by
 * side, each where cg_slice_bounds puts it, and no two views share a
 * name; else -1 with a message naming the slice (a file whose "slice"
 * lies about its tensors).
 */
static int
check_layout(const struct cg_update **o, int n)
{
	struct cg_uview *all;
	int nv = 0, at = 0, rc = 0;

	for (int k = 0; k < n; k++)
		nv += o[k]->nviews;
	if ((all = calloc((size_t)nv, sizeof(*all))) == NULL)
		return cg_seterr("out of memory");
	for (int k = 0; k < n; k++) {
		memcpy(all + at, o[k]->views,
		       (size_t)o[k]->nviews * sizeof(*all));
		at += o[k]->nviews;
	}
	at = 0;
	for (int k = 0; k < n && rc == 0; k++) {
		int lo, hi;
		if (cg_slice_bounds(all, nv, k, n, &lo, &hi) != 0 || lo != at ||
		    hi != at + o[k]->nviews)
			rc = cg_seterr("%s: slice %d of %d does not hold the "
			               "tensors of that slice",
			               o[k]->name, k + 1, n);
		at += o[k]->nviews;
	}
	for (int a = 0; a < nv && rc == 0; a++)
		for (int b = a + 1; b < nv && rc == 0; b++)
			if (strcmp(all[a].name, all[b].name) == 0)
				rc = cg_seterr("tensor %s: twice in the slices",
				               all[a].name);
	free(all);
	return rc;
}

struct cg_file *
cg_slice_join(struct cg_update *const *s, int n)
{
	const struct cg_update **o =
	    n > 0 ? calloc((size_t)n, sizeof(*o)) : NULL;
	struct cg_file *f = NULL;
	cJSON *bare = NULL;

	if (n < 1) {
		cg_seterr("no slices to join");
		return NULL;
	}
	if (o == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	if (order(s, n, o) != 0)
		goto fail;
	if ((bare = bare_manifest(o[0]->file)) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	for (int k = 0; k < n; k++)
		if (check_slice(o[k], bare, o[0]) != 0)
			goto fail;
	if (check_layout(o, n) != 0)
		goto fail;
	if ((f = cg_file_new(cg_update_kind_name(o[0]->kind))) == NULL)
		goto fail;
	cJSON_Delete(f->manifest);
	f->manifest = bare;
	bare = NULL;
	for (int k = 0; k < n; k++)
		for (int t = 0; t < o[k]->nviews; t++) {
			const struct cg_uview *v = &o[k]->views[t];
			if (cg_file_add_ref(
			        f, v->name, CG_F32, v->ndim, v->shape,
			        cg_update_view_f32(o[k], t)) == NULL)
				goto fail;
		}
	free(o);
	return f;
fail:
	cJSON_Delete(bare);
	cg_file_free(f);
	free(o);
	return NULL;
}
