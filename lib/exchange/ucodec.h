/*
 * exchange/ucodec.h - update codecs: the forms in which a gradient or a delta
 * travels.
 *
 * The dense update is a list of views (name, shape, place in the flat
 * parameter vector).  An update codec is one row of the table in
 * ucodec.c, defined in a file of its own under exchange/codec/
 * (codec/codec.h says what a row holds): how a view is written as
 * tensors of a cg file, how a reader checks those tensors, and how it
 * decodes any range of a view's elements into floats without a dense
 * copy of the whole.  The element types it stores are rows of the
 * element codec table (core/dtype.h).  The built-in codecs:
 *
 *   f32 f16 bf16    the view as it is, one tensor NAME of that dtype
 *   q8 q4 q2        NAME: the view padded with zeros to a multiple of
 *                   32 and block-quantized (q8_0, q4_0, q2_0); ":sr" for
 *                   stochastic rounding
 *   topk:F | topk:k=N
 *                   the ceil(F n) (or min(N, n)) elements of largest
 *                   magnitude of each view: NAME.idx u32 [k], strictly
 *                   increasing, and NAME.val [k] (f16; ",val=DTYPE" any
 *                   float dtype, a block one padded to whole blocks);
 *                   ",chunk=C" keeps ceil(F C) (or N) of each run of C
 *                   elements instead, indexed within the run (u8 for
 *                   C <= 256, else u16), entry p in run p / kc
 *   sign            EF-signSGD: NAME.sign u8 [ceil(n/8)], bit j%8 of
 *                   byte j/8 set for a negative element, and NAME.scale
 *                   f32 [1], the mean magnitude; decoded as +-scale
 *   lowrank:R       a matrix [m, n] with R (m + n) < m n as the product
 *                   P Q^T of NAME.p f32 [m, R] (orthonormal columns) and
 *                   NAME.q f32 [n, R], one power iteration from the last
 *                   call's Q (PowerSGD, warm start); other views f32
 *   masked          NAME u64 of the view's shape: the fixed-point value
 *                   times the weight plus the pairwise masks, mod 2^64
 *                   (secagg.h), with the manifest's "mask"; no decoder:
 *                   only the sum of every peer's masked update means
 *                   anything, and only cg_mask_sum reads it
 *
 * Every coded file but the dense ones has a manifest "layout" (each
 * view's name and shape, in order), and all have "codec": the spec, its
 * parameters, "bytes" (what the coded tensors take) and "dense_bytes"
 * (4 bytes an element).  A file without "codec" is a dense update of
 * any float dtypes, its views its tensors.
 */
#ifndef CG_UCODEC_H
#define CG_UCODEC_H
#include <stdint.h>

#include "cg.h"

/* One view of a dense update and, once bound, its tensors in a file. */
struct cg_uview {
	char name[CG_MAX_NAME];
	int ndim;
	uint64_t shape[CG_MAX_DIMS];
	uint64_t n;   /* elements */
	uint64_t off; /* first element in the flat vector */
	uint64_t k;   /* topk: elements kept; lowrank: rank, 0 if dense */
	const struct cg_tensor *t[2];
};

struct cg_ucodec;
struct cg_mask;

/* A codec and its parameters, as --codec gives them. */
struct cg_uspec {
	const struct cg_ucodec *codec;
	enum cg_dtype dtype; /* dense, block: the dtype; topk: the values' */
	double frac;         /* topk: fraction kept of each view */
	uint64_t count;      /* topk: count kept of each view (wins if > 0) */
	uint32_t chunk;      /* topk: keep of each run of chunk elements */
	int rank;            /* lowrank */
	int sr;              /* block: stochastic rounding */
	int lut;             /* topk: values as 2-bit codes into a table */
	int gap;             /* topk: indices as gaps within their run */
};

/* What an encoder may use besides the values. */
struct cg_uenc {
	struct cg_rng rng; /* stochastic rounding; lowrank's first Q */
	/* the codec's state between calls (lowrank: the warm-start
	 * factors), cg_uspec_state_floats of them, read and replaced; all
	 * zero means none yet.  NULL: none kept. */
	float *warm;
	/* masked: the worker's masks (cg_mask_round done) and the
	 * update's whole weight */
	const struct cg_mask *mask;
	uint64_t mask_weight;
};

/* Parse s ("q4", "topk:0.01", "topk:k=500,val=f32", "lowrank:4", ...)
 * into *out; -1 with a message listing the codecs otherwise. */
int cg_uspec_parse(const char *s, struct cg_uspec *out);
/* The spec's canonical text into buf [n]. */
void cg_uspec_format(const struct cg_uspec *s, char *buf, size_t n);
/* 1 when decoding gives back exactly what was encoded (f32). */
int cg_uspec_lossless(const struct cg_uspec *s);
/* 1 for the masked codec, whose views a reader must not decode. */
int cg_uspec_masked(const struct cg_uspec *s);
/* The codec's name ("topk"), and --help's lines for every codec. */
const char *cg_uspec_name(const struct cg_uspec *s);
const char *cg_ucodec_help(void);
/* The i-th name --codec knows, over every codec (cg_uspec_parse takes
 * it bare or with its parameters after a colon); NULL from the last on. */
const char *cg_ucodec_name_at(int i);

/* Bytes the coded tensors of views v [nv] take under s (no container
 * headers); -1 with a message on overflow. */
int cg_uspec_size(const struct cg_uspec *s, const struct cg_uview *v, int nv,
                  uint64_t *bytes);
/*
 * Fit s to budget bytes of coded tensors: topk the largest fraction,
 * q the most bits (q8, q4, q2, keeping its codec family), lowrank the
 * largest rank; f32/f16/bf16 and sign have one size.  -1 with a message
 * naming the smallest size possible when even that is over budget.
 */
int cg_uspec_fit(struct cg_uspec *s, const struct cg_uview *v, int nv,
                 uint64_t budget);
/* Floats of warm-start state s keeps for views v (lowrank; else 0),
 * and the name of the worker state's member that keeps them (NULL for
 * a codec that keeps none). */
uint64_t cg_uspec_state_floats(const struct cg_uspec *s,
                               const struct cg_uview *v, int nv);
const char *cg_uspec_state_name(const struct cg_uspec *s);

/*
 * Encode x (the flat vector; view i at v[i].off) under s into f: its
 * tensors, "codec" and "layout".  What a reader decodes from f, through
 * the readers' own path, goes to sent (may be NULL; the flat vector's
 * size), and x minus it, what was not sent (error feedback), to left
 * (may be NULL; not x).  Non-finite values are refused.  0, or -1 with
 * a message naming the view.
 */
int cg_uencode(const struct cg_uspec *s, const struct cg_uview *v, int nv,
               const float *x, struct cg_file *f, struct cg_uenc *e,
               float *sent, float *left);
/*
 * Read f's codec and layout and bind every view to its tensors, checking
 * all a hostile file could get wrong: an unknown codec, a layout that is
 * not one, a tensor missing, left over, standing for two views, of
 * another dtype or size, index lists not strictly increasing or out of
 * range, scales and factors not finite.  *views (allocated, the caller
 * frees) and *nv on success; -1 with a message naming the tensor
 * otherwise.
 */
int cg_ubind(const struct cg_file *f, struct cg_uspec *s,
             struct cg_uview **views, int *nv);
/* Elements [lo, lo + n) of bound view v into out [n]; any number of
 * threads at once.  A masked view has no values: NaN (callers check
 * cg_uspec_masked first). */
void cg_udecode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
                size_t n, float *out);
/* The floats of a bound view when they lie in f as f32 (the dense f32
 * codec), else NULL: a reader may use them where they are. */
const float *cg_uview_f32(const struct cg_uspec *s, const struct cg_uview *v);

/*
 * Add codec c (codec/codec.h; it must outlive every use) after the
 * built-in ones, in --help, in the names an unknown codec's message
 * lists and to cg_uspec_parse.  0, or -1 with a message: a row without
 * help, a name for --codec or one of size, encode, bind and decode; a
 * name not 1 to 32 letters, digits, '-' or '_'; a row or a name taken
 * already; too many registered.
 */
int cg_ucodec_register(const struct cg_ucodec *c);

#endif
