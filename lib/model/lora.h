/*
 * model/lora.h - low-rank adapters: a matrix W of a model run as
 * W + (alpha / r) B A, where only A and B train.
 *
 * A model whose manifest holds "lora", {"r": R, "alpha": ALPHA,
 * "targets": [NAME, ...]}, has after its arch's views, for each target
 * NAME (a matrix view [out, in] of the arch), the views "NAME.lora_a"
 * [R, in] and "NAME.lora_b" [out, R], in the targets' order.  The arch
 * never learns of them: around its forward pass W is replaced by the
 * merged W' = W + s B A (s = ALPHA / R) in place, W kept aside
 * (cg_lora_merge), the gradient its backward pass leaves in W's place is
 * turned into the adapters' (cg_lora_grad: dA = s B^T dW', dB = s dW'
 * A^T), and W is put back (cg_lora_unmerge).  A model read to run
 * (cg_model_read_infer) is merged once, for good.  The flat buffer stays
 * one buffer: reduce, apply, codecs and --freeze see the adapters as
 * views like any other, and cg-train-step trains them alone.
 */
#ifndef CG_LORA_H
#define CG_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"

struct cg_model;
struct cJSON;

/* Targets of one model, at most. */
#define CG_LORA_MAX_TARGETS 1024
/* The suffixes of the adapters' view names. */
#define CG_LORA_A ".lora_a"
#define CG_LORA_B ".lora_b"

struct cg_lora {
	int r;
	double alpha, scale; /* scale = alpha / r */
	int n;               /* targets */
	int *w, *a, *b;      /* [n]: view indices of each target's W, A, B */
	float *saved;        /* the targets' W while merged, else NULL */
	int merged;          /* 1 while merged; 2 merged for good */
};

/*
 * Read m's manifest "lora" (none: m->lora stays NULL) and add the
 * adapters' views after the arch's, growing m->nparams: called by the
 * model module after the arch's layout, before the groups.  Returns 0,
 * or -1 with a message when "lora" is malformed, names a view that is
 * no matrix of the arch, or the arch declares parameter groups.
 */
int cg_lora_layout(struct cg_model *m);
/* The adapters' first values: A [r, in] uniform in +-1/sqrt(in) (as a
 * linear layer starts), B zero, so that W' = W at the start. */
void cg_lora_init(struct cg_model *m, struct cg_rng *r);
/*
 * W' in place of each target's W, W kept (0, or -1 with a message when
 * out of memory); nothing when m has no adapters or is merged already.
 * for_good: W is not kept, and m stays merged (cg_lora_unmerge does
 * nothing).
 */
int cg_lora_merge(struct cg_model *m, int for_good);
/* g [nparams], a gradient a merged m's arch left (dW' in W's place):
 * the adapters' part added to their views, W's places zeroed. */
void cg_lora_grad(const struct cg_model *m, float *g);
/* Each target's W back in place (nothing if not merged, or for good). */
void cg_lora_unmerge(struct cg_model *m);
/* Whether view i of m is an adapter's. */
int cg_lora_is_adapter(const struct cg_model *m, int i);
void cg_lora_free(struct cg_lora *l);

#endif
