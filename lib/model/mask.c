/*
 * model/mask.c - a pruned model's mask: which weights are pruned, in memory and
 * in files, and the one loop that keeps them at zero.
 *
 * In memory the mask is one bitset over the flat parameter buffer (a bit
 * a parameter, set where it is kept), so that masking a gradient, a
 * moment or a delta is a flat loop that skips whole bytes of kept
 * weights.  In a file it is one u8 tensor "mask.VIEW" per view that has a
 * pruned weight, the view's own bits from bit 0 of byte 0, so that a
 * reader sees at once which tensors are pruned and a hostile mask is
 * named by the tensor it claims.  A view without a mask tensor has
 * nothing pruned; a mask of all ones is accepted and not written back.
 *
 * Which views may be pruned is one rule (cg_model_prunable): the matrices
 * that take weight decay, i.e. the Linear layers' weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define PREFIX "mask."

int
cg_model_prunable(const struct cg_model *m, int i)
{
	const struct cg_view *v = &m->views[i];

	return v->ndim == 2 && v->decay != 0;
}

size_t
cg_model_input_cols(const struct cg_model *m, size_t *off)
{
	size_t n = 0;

	for (int i = 0; i < m->nviews; i++) {
		off[i] = SIZE_MAX;
		if (cg_model_prunable(m, i)) {
			off[i] = n;
			n += m->views[i].shape[1];
		}
	}
	return n;
}

static size_t
mask_bytes(size_t n)
{
	return (n + 7) / 8;
}

int
cg_model_ensure_mask(struct cg_model *m)
{
	if (m->mask)
		return 0;
	if ((m->mask = cg_alloc(mask_bytes(m->nparams))) == NULL)
		return -1;
	memset(m->mask, 0xff, mask_bytes(m->nparams));
	return 0;
}

int
cg_model_pruned_at(const struct cg_model *m, size_t i)
{
	return m->mask && !(m->mask[i / 8] >> (i % 8) & 1);
}

uint64_t
cg_model_pruned(const struct cg_model *m, int i)
{
	size_t lo = i < 0 ? 0 : m->views[i].off;
	size_t hi = i < 0 ? m->nparams : lo + m->views[i].n;
	uint64_t n = 0;

	if (m->mask == NULL)
		return 0;
	for (size_t j = lo; j < hi; j++)
		n += cg_model_pruned_at(m, j);
	return n;
}

void
cg_model_mask(const struct cg_model *m, float *x)
{
	const size_t nb = mask_bytes(m->nparams);

	if (m->mask == NULL || x == NULL)
		return;
	for (size_t k = 0; k < nb; k++) {
		unsigned b = m->mask[k];
		if (b == 0xff)
			continue;
		/* the bits past nparams are set: j stays in range */
		for (unsigned j = 0; j < 8; j++)
			if (!(b >> j & 1))
				x[8 * k + j] = 0.0f;
	}
}

void
cg_model_mask_all(struct cg_model *m)
{
	cg_model_mask(m, m->params);
	cg_model_mask(m, m->opt_m);
	cg_model_mask(m, m->opt_v);
	cg_model_mask(m, m->outer_mom);
	cg_model_mask(m, m->ef_down);
}

/* The view called name, or -1. */
static int
find_view(const struct cg_model *m, const char *name)
{
	for (int i = 0; i < m->nviews; i++)
		if (strcmp(m->views[i].name, name) == 0)
			return i;
	return -1;
}

/* Mask tensor t (named "mask.VIEW") into m->mask, checked. */
static int
load_one(struct cg_model *m, const struct cg_tensor *t)
{
	const char *vname = t->name + strlen(PREFIX);
	int i = find_view(m, vname);

	if (i < 0)
		return cg_seterr("tensor %s: a mask of %s, which is no tensor "
		                 "of the model",
		                 t->name, vname);
	if (!cg_model_prunable(m, i))
		return cg_seterr("tensor %s: a mask of %s, which cannot be "
		                 "pruned (not a Linear layer's weight)",
		                 t->name, vname);
	const struct cg_view *v = &m->views[i];
	const size_t nb = mask_bytes(v->n);
	if (t->dtype != CG_U8 || t->ndim != 1 || t->shape[0] != nb ||
	    t->nbytes != nb || t->data == NULL)
		return cg_seterr("tensor %s: %s of %llu elements, expected u8 "
		                 "[%zu] (a bit for each of the %zu weights of "
		                 "%s)",
		                 t->name, cg_dtype_name(t->dtype),
		                 (unsigned long long)t->nelem, nb, v->n, vname);
	const uint8_t *b = t->data;
	if (v->n % 8 && (b[nb - 1] >> (v->n % 8)) != 0)
		return cg_seterr("tensor %s: bits set past the %zu weights of "
		                 "%s",
		                 t->name, v->n, vname);
	for (size_t j = 0; j < v->n; j++) {
		size_t p = v->off + j;
		if (!(b[j / 8] >> (j % 8) & 1))
			m->mask[p / 8] &= (uint8_t) ~(1u << (p % 8));
	}
	return 0;
}

int
cg_model_load_mask(struct cg_model *m, const struct cg_file *f)
{
	if (cg_model_read_mask(m, f) != 0)
		return -1;
	cg_model_mask_all(m);
	return 0;
}

int
cg_model_read_mask(struct cg_model *m, const struct cg_file *f)
{
	int any = 0;

	free(m->mask);
	m->mask = NULL;
	for (size_t k = 0; k < f->ntensors; k++) {
		const struct cg_tensor *t = f->tensors[k];
		if (strncmp(t->name, PREFIX, strlen(PREFIX)) != 0)
			continue;
		if (!any && cg_model_ensure_mask(m) != 0)
			return -1;
		any = 1;
		if (load_one(m, t) != 0) {
			free(m->mask);
			m->mask = NULL;
			return -1;
		}
	}
	return 0;
}

int
cg_model_put_mask(const struct cg_model *m, struct cg_file *f)
{
	char name[CG_MAX_NAME];

	if (m->mask == NULL)
		return 0;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		uint64_t shape[1] = {mask_bytes(v->n)};
		struct cg_tensor *t;

		if (cg_model_pruned(m, i) == 0)
			continue;
		snprintf(name, sizeof(name), PREFIX "%s", v->name);
		if ((t = cg_file_add_zero(f, name, CG_U8, 1, shape)) == NULL)
			return -1;
		uint8_t *b = t->data;
		for (size_t j = 0; j < v->n; j++)
			if (!cg_model_pruned_at(m, v->off + j))
				b[j / 8] |= (uint8_t)(1u << (j % 8));
	}
	return 0;
}
