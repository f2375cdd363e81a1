/*
 * eval/quantize.h - a model's views stored in another dtype of the codec
 * table, by stated rules (what cg-quantize does).
 *
 * The rule, as llama.cpp's: the weight matrices (the views weight decay
 * applies to: every linear layer's weights, a separate output head
 * included) take the type; one-dimensional views (norms, biases) and
 * the embeddings (token, position) stay f32.  A view whose size is not a
 * whole number of the type's blocks stays f32 too.  Blocks run over a
 * view's elements in order, so where a matrix's rows are not whole
 * blocks (cvae's first layer: 784 pixels and the conditions) a block
 * spans two rows; such a matrix is still stored in the type, but a
 * kernel that multiplies stored blocks row by row cannot take it.  With type
 * f32 every view goes back to f32.  Other tensors (optimizer moments,
 * residuals, masks) are copied byte for byte.
 */
#ifndef CG_QUANTIZE_H
#define CG_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "model/model.h"

struct cg_quant_rule {
	enum cg_dtype type; /* a float dtype of the codec table */
	int all;	    /* every view whose rows fit, not only matrices */
	/* a view already in a block type may be taken to another one */
	int allow_requantize;
	const char *const *keep; /* fnmatch(3) patterns: these stay f32 */
	int nkeep;
	/* drop the optimizer's state (opt.m, opt.v, outer.mom, ef.down)
	 * and set its step counts (opt_t) to 0, so that training resumed
	 * from the file starts its moments afresh */
	int strip;
	/* the reference rule (ggml's quantize_row_*_reference) where the
	 * type has a fitted encoder (encode_fit) too */
	int reference;
	/* NULL, or the type [nviews] of each view the rule lets take
	 * r->type (an allocation: cg_bitalloc); r->type then only says
	 * which views may (the narrowest type of the allocation) */
	const enum cg_dtype *types;
};

/* What became of one view. */
struct cg_quant_view {
	const char *name;	    /* the view's (m's) */
	enum cg_dtype from, to;
	uint64_t nelem, bytes_from, bytes_to;
	const char *why; /* why it is f32, or NULL when it took the type */
};

/*
 * The dtype view v of m takes under r (*why says why it stays f32, or
 * NULL).  -1 with a message when r->type is not a float dtype.
 */
int cg_quant_choose(const struct cg_model *m, const struct cg_view *v,
                    const struct cg_quant_rule *r, enum cg_dtype *to,
                    const char **why);

/*
 * The file in (a model file, m read from it) with its views in the dtypes
 * r chooses, every other tensor and the manifest as they are; a view
 * whose dtype does not change keeps its bytes (with r->strip, the
 * optimizer's state is left out).  rep[m->nviews] receives
 * what became of each view, in m's order.  Returns a new file (its
 * tensors may point into in and m: write it before freeing them), or
 * NULL with a message: a refused requantization, or a value the type
 * cannot hold (nan, inf, beyond f16's range) naming the tensor.
 */
struct cg_file *cg_quantize(const struct cg_file *in,
                            const struct cg_model *m,
                            const struct cg_quant_rule *r,
                            struct cg_quant_view *rep);

#endif
