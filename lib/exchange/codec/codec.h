/*
 * exchange/codec/codec.h - what an update codec is: the row that each
 * lib/exchange/codec/NAME_codec.c defines, and the checks its rows share.
 *
 * A row says everything the drivers of ucodec.c ask of a codec: the
 * names --codec knows it by, its parameters, how its spec is written
 * back, what its manifest's "codec" object adds, how it fits a budget,
 * the state it keeps between calls, and for each view its size, its
 * encoder, the checks a reader makes of its tensors (bind) and a decoder
 * of any range of its elements.  No driver compares rows: what differs
 * between codecs is in the row, a field or a callback (NULL where the
 * codec has nothing to say).
 *
 * To add a codec: write lib/exchange/codec/NAME_codec.c defining `const
 * struct cg_ucodec cg_ucodec_NAME`, add X(NAME) to the list in
 * lib/exchange/ucodec.c (the order of --help and of the names an unknown
 * codec's message lists) and the file to lib_libcg_a_SOURCES.  A codec
 * outside the list (a test's) joins with cg_ucodec_register (ucodec.h).
 */
#ifndef CG_CODEC_CODEC_H
#define CG_CODEC_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cg.h"
#include "exchange/ucodec.h"

struct cJSON;

/* A name --codec knows a row by ("q4"), and the dtype it sets. */
struct cg_uname {
	const char *name;
	enum cg_dtype dtype;
};

/* Row flags. */
enum {
	/* each view one tensor of its own name and shape, of a float
	 * dtype: the manifest needs no "layout", and a reader may take
	 * an f32 tensor's floats where they lie (cg_uview_f32) */
	CG_UCODEC_PLAIN = 1,
	/* the views mean nothing alone: a reader never decodes them,
	 * only sums them (cg_uspec_masked) */
	CG_UCODEC_SUM_ONLY = 2,
};

#define CG_UCODEC_NAMES 4

struct cg_ucodec {
	const char *name; /* the row's own name, unique */
	const char *help; /* one line of --help: its spellings and sense */
	/* the names --codec knows it by, ending at the first NULL one;
	 * with several, cg_uspec_name gives the one of the spec's dtype */
	struct cg_uname names[CG_UCODEC_NAMES];
	unsigned flags;
	/* the parameters a bare name means (NULL: all zero) */
	void (*defaults)(struct cg_uspec *s);
	/* one "key=value" or bare "value" after the colon: 0, or -1 (no
	 * message: the driver names the spec) when the row does not take
	 * it (NULL: takes none) */
	int (*param)(struct cg_uspec *s, const char *p);
	/* the canonical spec into buf [n], name being cg_uspec_name's
	 * (NULL: the name alone) */
	void (*format)(const struct cg_uspec *s, const char *name, char *buf,
	               size_t n);
	/* what the manifest's "codec" object c says besides the spec, name
	 * and dtype and before the sizes (NULL: nothing); 0 or -1 */
	int (*manifest)(const struct cg_uspec *s, struct cJSON *c);
	/* fit s to budget bytes of views v [nv]: 0 when it fits, 1 with s
	 * left at its smallest when nothing does, -1 with a message (NULL:
	 * one size) */
	int (*fit)(struct cg_uspec *s, const struct cg_uview *v, int nv,
	           uint64_t budget);
	/* floats of state kept between calls for view v (NULL: none), and
	 * the worker state's member that holds them */
	uint64_t (*state_floats)(const struct cg_uspec *s,
	                         const struct cg_uview *v);
	const char *state_name;
	/* bytes of view v's coded tensors; 0 or -1 with a message */
	int (*size)(const struct cg_uspec *s, const struct cg_uview *v,
	            uint64_t *bytes);
	/* v's values x [v->n] into f; warm: this view's state_floats, or
	 * NULL.  0 or -1 with a message. */
	int (*encode)(const struct cg_uspec *s, const struct cg_uview *v,
	              const float *x, struct cg_file *f, struct cg_uenc *e,
	              float *warm);
	/* v's tensors of f into v->t (and v->k), checked; 0 or -1 */
	int (*bind)(const struct cg_uspec *s, struct cg_uview *v,
	            const struct cg_file *f);
	/* elements [lo, lo + n) of bound view v into out [n]; cannot fail */
	void (*decode)(const struct cg_uspec *s, const struct cg_uview *v,
	               uint64_t lo, size_t n, float *out);
};

/* 32-bit words of a tensor's bytes, at any alignment: host words, as a
 * tensor of a plain type holds them in memory (the file's reader and
 * writer turn them around: core/util.h). */
static inline uint32_t
cg_ucodec_get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline void
cg_ucodec_put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* name + suffix into out [CG_MAX_NAME]; -1 with a message when it does
 * not fit. */
int cg_ucodec_suffixed(char *out, const char *name, const char *suffix);
/* The tensor name+suffix of f, of dtype dt (or of any float dtype when
 * dt is CG_NDTYPES) and of the shape given: NULL with a message
 * naming it otherwise. */
const struct cg_tensor *cg_ucodec_need(const struct cg_file *f,
                                       const char *name, const char *suffix,
                                       enum cg_dtype dt, int ndim,
                                       const uint64_t *shape);
/* 0, or -1 with a message naming the tensor and the element when one of
 * t's values is not finite. */
int cg_ucodec_check_finite(const struct cg_tensor *t);
/* The same for the values x [v->n] of view v. */
int cg_ucodec_refuse_nonfinite(const struct cg_uview *v, const float *x);
/* Bytes the coded tensors of views v [nv] take under s: 0, or -1 with a
 * message on overflow (cg_uspec_size). */
int cg_ucodec_bytes(const struct cg_uspec *s, const struct cg_uview *v, int nv,
                    uint64_t *bytes);

#endif
