/*
 * cg.h - the public interface of libcg, the library every cg program links.
 *
 * Conventions: functions return 0 on success and -1 on failure (or NULL),
 * after recording a one-line message that cg_errmsg() returns.  The library
 * never prints and never exits.  Objects are created by _init/_read/_new and
 * released by _free; every _free accepts NULL.
 */
#ifndef CG_H
#define CG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* Record a message for the caller (printf format).  Always returns -1 so
 * that "return cg_seterr(...)" reads naturally. */
int cg_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefix the recorded message with "prefix: " (e.g. a file name). */
void cg_errprefix(const char *prefix);
/* The last recorded message; never NULL. */
const char *cg_errmsg(void);

/* --------------------------------------------------------------- random */

/* xoshiro256** seeded through splitmix64: the one source of randomness.
 * Same seed, same stream, on every machine. */
struct cg_rng {
	uint64_t s[4];
};

void cg_rng_seed(struct cg_rng *r, uint64_t seed);
uint64_t cg_rng_u64(struct cg_rng *r);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t cg_rng_below(struct cg_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
float cg_rng_uniform(struct cg_rng *r);
/* Standard normal (Box-Muller, both values used in turn is not kept:
 * one call, one fresh pair, first value returned - stateless). */
float cg_rng_normal(struct cg_rng *r);
/* Derive an independent stream from (seed, a, b): used to make batch
 * choice a pure function of seed, step and shard. */
void cg_rng_derive(struct cg_rng *r, uint64_t seed, uint64_t a, uint64_t b);

/* ---------------------------------------------------------------- dtypes */

/*
 * The element types of tensors.  Each has one row in the codec table
 * (lib/codec.c), as ggml's type_traits: its name, its size, and its
 * conversions to and from f32.  Nothing else in cg switches on a dtype.
 */
enum cg_dtype {
	CG_F32,
	CG_F16,
	CG_BF16,
	CG_I8,
	CG_U8,
	CG_U16,
	CG_U32,
	CG_U64,
	CG_Q8_0,
	CG_Q4_0,
	CG_Q2_0,
	CG_Q4_1,
	CG_NDTYPES
};

/* What the stored values are: how a reader should print them. */
enum cg_codec_kind {
	CG_KIND_FLOAT, /* real numbers, decoded through f32 */
	CG_KIND_UINT,  /* unsigned integers, exact through to_u64 */
	CG_KIND_SINT   /* signed integers, exact through to_u64 */
};

/*
 * One row of the codec table.  Stored bytes are little-endian on every
 * host.  n counts elements and is always a multiple of block; src and dst
 * hold n / block blocks of bytes bytes each.  None of the functions
 * allocates, and all may run on several threads at once.
 *
 * decode (all rows; never fails): f32 exactly; f16 and bf16 exactly
 *   (nan, inf, -0 and subnormals kept); integers exactly up to 2^24 in
 *   magnitude, beyond that rounded to the nearest float, ties to even
 *   (u32 4294967295 decodes as 4294967296); q8_0 as d * q and q4_0 as
 *   d * (q - 8), the product taken in float as ggml's dequantize_row_*.
 * encode: f32 exactly; f16 and bf16 rounded to nearest even, beyond the
 *   range to inf, nan stays nan; integers rounded to nearest, ties to
 *   even, then saturated to the type's range (inf too), and a nan is
 *   refused; q8_0 and q4_0 as ggml's quantize_row_*_reference, bit for
 *   bit, refusing nan, inf and a block whose scale would overflow f16
 *   (|x| > 65504 * 127 for q8_0, 65504 * 8 for q4_0).  Returns 0, or -1
 *   with a message naming the first element refused and dst untouched.
 *   q2_0 is cg's own: q4_0's rule with four levels, d = max / -2 and
 *   q = min(3, trunc(x * (1/d) + 2.5)), decoded as d * (q - 2); 8 bytes
 *   of 2-bit values after the scale, element j in bits 2(j%4) of byte
 *   j/4 (2.5 bits an element).  q4_1 as ggml's quantize_row_q4_1_reference:
 *   d = (max - min) / 15, q = min(15, trunc((x - min) * (1/d) + 0.5)),
 *   stored as the f16 d, the f16 min and q4_0's nibbles (5 bits an
 *   element), decoded as d * q + m (the product rounded to float first);
 *   refused where |x| > 65504.
 * encode_sr (q8_0, q4_0, q2_0; NULL for the others): the same scale, but each
 *   value rounded up with probability its fraction (stochastic rounding,
 *   unbiased inside the range), the uniforms drawn from r in element
 *   order, so the bytes are a function of src and r's state.
 * check (block rows; NULL for the others): -1 with a message naming the
 *   first block whose scale is not finite (no encoder writes one), else
 *   0.  Readers call it on every tensor they read.
 * Error bounds, per element of a block of scale d (its f16 value): q8_0
 *   |x - y| <= |d|/2 + 127 |d - d32| where d32 is the f32 scale before
 *   rounding to f16; q4_0 and q2_0 |d| + qmax |d - d32| (the value of
 *   largest magnitude opposite to max is clipped one level short, as in
 *   ggml); stochastic rounding |d| + qmax |d - d32| for all three; q4_1
 *   |d|/2 + 15 |d - d32| + |m - m32| (m32 the block's minimum in f32).
 * encode_fit (q4_0, q4_1; NULL for the others): encode, but each block's
 *   stored scale (and minimum) chosen for the least squared error of the
 *   block as decoded, f16 rounding included, each element's error
 *   weighted by w = |x| + the block's root mean square: among the
 *   reference rule's choice and the fixed points of alternating
 *   weighted least squares (levels, then the scale and minimum that fit
 *   them) from a few narrower spans.  So a block is never further from
 *   src than encode's in that weighted error.  The same refusals as
 *   encode; the bytes a function of src alone.
 * to_u64 (integer rows; NULL for float kinds): the exact values, a signed
 *   one as its two's complement in 64 bits.
 */
struct cg_codec {
	const char *name; /* as in a manifest: "f32", "q8_0", ... */
	unsigned block;	  /* elements per block; 1 for plain types */
	unsigned bytes;	  /* bytes per block */
	enum cg_codec_kind kind;
	void (*decode)(float *dst, const void *src, size_t n);
	int (*encode)(void *dst, const float *src, size_t n);
	void (*to_u64)(uint64_t *dst, const void *src, size_t n);
	int (*encode_sr)(void *dst, const float *src, size_t n,
	                 struct cg_rng *r);
	int (*check)(const void *src, size_t n);
	int (*encode_fit)(void *dst, const float *src, size_t n);
};

/* The row of t, or NULL with a message for a value outside the enum. */
const struct cg_codec *cg_codec(enum cg_dtype t);
/* Its name, or "?" outside the enum. */
const char *cg_dtype_name(enum cg_dtype t);
/* Parse a dtype name; returns -1 (with message) if unknown. */
int cg_dtype_parse(const char *s, enum cg_dtype *out);
/* Bytes needed for n elements of t, or -1 with a message on overflow, an
 * unknown dtype or a block dtype whose n is not a multiple of its block. */
int cg_dtype_bytes(enum cg_dtype t, uint64_t n, uint64_t *out);

/* One element of the half-precision rows, as their decode and encode. */
float cg_f16_to_f32(uint16_t h);
uint16_t cg_f32_to_f16(float f);
float cg_bf16_to_f32(uint16_t h);
uint16_t cg_f32_to_bf16(float f);

/*
 * The values of a tensor (struct cg_tensor, below) of any dtype, through
 * its row.  Each first checks that t->nbytes is what dtype and shape say,
 * that t->data is there and that [first, first + n) lies in t, and
 * returns -1 with a message ("tensor NAME: ...") otherwise; 0 on success.  t is only read, nothing
 * is allocated (a few KiB of stack), and any number of threads may
 * decode the same tensor at once.  No cost is paid for f32 beyond a copy.
 *
 * cg_tensor_to_f32: all t->nelem elements into out[nelem].
 * cg_tensor_decode: elements [first, first + n) into out[n], for reading
 *   a large tensor a slice at a time.  first and n need not be multiples
 *   of a block: a block cut by either end is decoded whole on the stack
 *   and the wanted part copied, so slices decode to exactly the values
 *   cg_tensor_to_f32 gives.
 * cg_tensor_decode_f64: the same as doubles: the f32 value widened for
 *   float kinds, the exact integer for integer kinds up to 2^53 (beyond,
 *   the nearest double).
 * cg_tensor_get_u64: integer dtypes only (-1 for a float kind): the exact
 *   values, a signed one as its two's complement.
 */
struct cg_tensor;
int cg_tensor_to_f32(const struct cg_tensor *t, float *out);
int cg_tensor_decode(const struct cg_tensor *t, uint64_t first, size_t n,
		     float *out);
int cg_tensor_decode_f64(const struct cg_tensor *t, uint64_t first, size_t n,
			 double *out);
int cg_tensor_get_u64(const struct cg_tensor *t, uint64_t first, size_t n,
		      uint64_t *out);

/* ------------------------------------------------------------ container */

#define CG_FORMAT "cg/1"
#define CG_MAX_DIMS 8
#define CG_MAX_NAME 128
#define CG_MAX_TENSORS 65536
#define CG_MAX_MANIFEST (16u << 20)

struct cg_tensor {
	char name[CG_MAX_NAME];
	enum cg_dtype dtype;
	int ndim;
	uint64_t shape[CG_MAX_DIMS];
	uint64_t nelem;  /* product of shape */
	uint64_t nbytes; /* length of the member */
	unsigned char sha256[32];
	void *data; /* nbytes, 64-byte aligned; owned by the cg_file */
	int borrowed; /* data is the caller's (cg_file_add_ref) */
};

/*
 * A whole cg file in memory: the manifest (cJSON, owned) and the tensors in
 * manifest order.  Reading verifies every digest.  Each tensor is
 * allocated once and stays where it is until the file is freed: a
 * pointer from cg_file_add* or cg_file_find holds across later adds (the
 * table of pointers grows, the tensors do not move).
 */
struct cJSON;
struct cg_file {
	struct cJSON *manifest; /* everything of cg.json but "tensors" */
	size_t ntensors;
	struct cg_tensor **tensors; /* [ntensors], in manifest order */
	size_t cap;
	struct cg_tensor **index; /* by name: a hash table (container.c) */
	size_t nindex;
	void *blob; /* a plain file mapped whole: its members lie in it */
	size_t blob_size;
	/* Read from a signed file: is_signed is 1 and signer its key, the
	 * signature checked against the manifest (lib/sign.h). */
	int is_signed;
	unsigned char signer[32];
};

/* A new empty file with a manifest {"format":"cg/1","kind":kind}. */
struct cg_file *cg_file_new(const char *kind);
void cg_file_free(struct cg_file *f);
/* Manifest "kind", or "" if absent. */
const char *cg_file_kind(const struct cg_file *f);

/*
 * Add a tensor; the file takes a copy of data (nbytes as the dtype and
 * shape say).  Returns the new tensor, or NULL on error.
 */
struct cg_tensor *cg_file_add(struct cg_file *f, const char *name,
			      enum cg_dtype dtype, int ndim,
			      const uint64_t *shape, const void *data);
/*
 * Like cg_file_add but without a copy: the file points at data, which
 * must stay unchanged until the file is written and freed (saving a model
 * needs no second copy of it).
 */
struct cg_tensor *cg_file_add_ref(struct cg_file *f, const char *name,
				  enum cg_dtype dtype, int ndim,
				  const uint64_t *shape, const void *data);
/* Like cg_file_add but the data is left zeroed for the caller to fill. */
struct cg_tensor *cg_file_add_zero(struct cg_file *f, const char *name,
				   enum cg_dtype dtype, int ndim,
				   const uint64_t *shape);
/* The tensor called name, or NULL (no message recorded); a hash
 * look-up, not a search. */
struct cg_tensor *cg_file_find(const struct cg_file *f, const char *name);
/*
 * Turn t into an f32 tensor in memory of its own, its values decoded
 * through its dtype's codec row (cg_tensor_to_f32); an f32 tensor is left
 * as it is.  The digest in t no longer describes t->data afterwards: for
 * readers that go on to compute, not for files to write again.  Returns
 * 0 or -1 with a message ("tensor NAME: ...").
 */
int cg_tensor_make_f32(struct cg_tensor *t);
/* Like cg_file_find, but records "tensor NAME: missing" or a dtype
 * mismatch message and returns NULL. */
struct cg_tensor *cg_file_need(const struct cg_file *f, const char *name,
			       enum cg_dtype dtype);

/*
 * The kinds of file the format defines ("model", "grad", "delta",
 * "data", "state"): 1 when kind is one, else 0.
 */
int cg_kind_known(const char *kind);
/*
 * The head of manifest m, as every reader of a cg file checks it (the
 * archive's cg.json, a safetensors file's "cg.json" metadata): format
 * "cg/1" and a kind the format defines.  Returns 0, or -1 with a message
 * starting "cg.json: ".
 */
int cg_kind_check_manifest(const struct cJSON *m);

/*
 * Read a cg file from path ("-" is stdin): plain, gzip or zstd tar.  Every
 * size is checked against limits before allocation and every digest is
 * verified (the digests in parallel); a manifest of a kind the format
 * does not define is refused.  A signature member (cg.sig, last) is
 * checked against the manifest whenever there is one; where a trust list
 * is in force (lib/sign.h), a file that is unsigned or signed by a key
 * not in it is refused too.  A plain (uncompressed) regular file
 * is mapped whole (private: writing to a tensor changes only this
 * process's copy) and its tensors are used where they lie (f->blob; the
 * tensors are marked borrowed), so reading copies nothing; compressed
 * files and pipes are read member by member.  Returns NULL with a message naming the file (and
 * tensor).
 */
struct cg_file *cg_file_read(const char *path);
/* The same, but every tensor in a buffer of its own (no blob), which a
 * caller may take over (set data to NULL) and the rest free early. */
struct cg_file *cg_file_read_copy(const char *path);
/* Same, from an open stream (display name used in messages). */
struct cg_file *cg_file_read_fp(FILE *fp, const char *display);
/* The same from fd, whose first npre bytes the caller has already read
 * (to tell a cg file from another format) and hands over in pre; the
 * rest is read from fd.  npre 0 is cg_file_read_fp's behaviour. */
struct cg_file *cg_file_read_fd(int fd, const char *display, const void *pre,
				size_t npre);
/* The same from the bytes buf [n], plain or compressed, which are only
 * read: every tensor is copied into a buffer of its own.  The same
 * checks and messages as a file's (display names it). */
struct cg_file *cg_file_read_mem(const void *buf, size_t n,
				 const char *display);
/* Unmap f's file once no tensor lies in it any more (all copied out and
 * marked not borrowed); otherwise nothing. */
void cg_file_drop_blob(struct cg_file *f);

enum cg_compress { CG_COMPRESS_NONE, CG_COMPRESS_GZIP, CG_COMPRESS_ZSTD };

/*
 * Write f to path ("-" is stdout): digests are computed, cg.json comes
 * first, then the tensors in order, then, where a signing key is in use
 * (lib/sign.h), the signature member cg.sig.  A path is written atomically
 * (temporary file in the same directory, fsync, rename).  Output is a pure
 * function of f (no time, owner or host inside).  Returns 0 or -1.
 */
int cg_file_write(struct cg_file *f, const char *path, enum cg_compress c);
/* cg_file_write, then cg_file_free(f), for a file made only to be
 * written: f NULL (its maker failed, with a message) returns -1. */
int cg_file_write_free(struct cg_file *f, const char *path, enum cg_compress c);

/*
 * The cg.json that cg_file_write writes for f: a copy of f->manifest with
 * "tensors" (name, dtype, shape, bytes, sha256) made from f's tensors,
 * whose digests are computed into them on the way.  Returns a new object
 * the caller frees with cJSON_Delete, or NULL (out of memory).
 */
struct cJSON *cg_file_manifest(struct cg_file *f);

/*
 * Write f into an output already opened with cg_out_open, without
 * committing it: a program that writes several files commits them all
 * only once every one is written.  Returns 0 or -1 (o is left open; the
 * caller aborts it).
 */
struct cg_out;
int cg_file_write_to(struct cg_file *f, struct cg_out *o, enum cg_compress c);

/* Bytes of the largest file a reader accepts (CG_MAX_BYTES in the
 * environment overrides; default 8 GiB). */
uint64_t cg_max_bytes(void);

/* The number under key of a manifest object obj, or dflt where there is
 * none: cg_json_u64 takes one in [0, 2^53] (its whole part), cg_json_num
 * any.  obj may be NULL. */
uint64_t cg_json_u64(const struct cJSON *obj, const char *key, uint64_t dflt);
double cg_json_num(const struct cJSON *obj, const char *key, double dflt);
/* Set key of obj to the number v, replacing what was there. */
void cg_json_set_num(struct cJSON *obj, const char *key, double v);

/* ---------------------------------------------------------------- atomic */

/*
 * Atomic output: a temporary file .NAME.XXXXXX beside path, renamed over
 * it on commit.  Temporaries still open are removed on SIGINT, SIGTERM,
 * SIGHUP and SIGPIPE (the handler is installed on first use).  A writer
 * holds a lock (flock) on its temporary until it is renamed or removed,
 * and opening path first removes the temporaries of path whose lock is
 * free: those a killed writer left (SIGKILL, a crash), never a live
 * writer's.  For "-", fp is stdout and commit only flushes.  A path that
 * exists and is not a regular file (a device such as /dev/null, a FIFO)
 * is opened and written directly, never replaced; a terminal is refused
 * there too.
 */
struct cg_out {
	FILE *fp;
	char *path;
	char *tmp;
	int fd;
	int direct;  /* path is not a regular file: written in place */
	int flushed; /* cg_out_flush done: the bytes are on disk */
};

int cg_out_open(struct cg_out *o, const char *path);
/* Flush and fsync what was written (the temporary stays, unrenamed; no
 * more may be written after it).  Idempotent.  Returns 0 or -1. */
int cg_out_flush(struct cg_out *o);
/*
 * Commit outs[0..n) together: flush and fsync every one, then rename each
 * into place in order, then fsync their directories.  A failure before
 * the renames leaves none renamed; a failed rename leaves those before it
 * in place.  Every temporary not renamed is removed.  Returns 0 or -1.
 */
int cg_out_commit_all(struct cg_out *const *outs, size_t n);
/* cg_out_commit_all of one output. */
int cg_out_commit(struct cg_out *o);
/* Remove the temporary; safe after commit and on a zeroed struct. */
void cg_out_abort(struct cg_out *o);

/* ------------------------------------------------------------------ util */

/* 64-byte aligned zeroed allocation (free with free()); NULL on failure
 * with a message. */
void *cg_alloc(size_t n);
/* The first element of x [n] that is an inf or a nan, or n: a run of
 * values at a time without a branch, then the element. */
uint64_t cg_first_nonfinite(const float *x, uint64_t n);
/* Turn SIGBUS (a mapped input truncated under us) into a one-line
 * error, exit 1, temporaries removed.  Idempotent. */
void cg_guard_mapped_reads(void);
/* This process's resident memory now, and the most it has had, in
 * bytes (0 where the system does not say). */
uint64_t cg_rss_now(void);
uint64_t cg_rss_peak(void);
/*
 * The byte to show people for byte c of somebody else's text: '?' for
 * a control byte (below 0x20, and DEL), but newline and tab when
 * keep_space; c itself otherwise, so UTF-8 passes.  A terminal then never
 * sees an escape sequence it would act on.
 */
int cg_shown_byte(int c, int keep_space);
/* The index i in [lo, hi] of names[] (an enum's names) whose name is s,
 * or -1 (no message: the caller names what it parses). */
int cg_name_index(const char *const *names, int lo, int hi, const char *s);
/* Lower-case hex of n bytes p into out[2n + 1]. */
void cg_tohex(char *out, const unsigned char *p, size_t n);
/* Lower-case hex of a SHA-256 digest into out[65]. */
void cg_hex(char out[65], const unsigned char d[32]);
/* s, exactly 2n hex digits (lower case, or either with any_case), into
 * out[n]: 0, or -1 with no message (out then undefined). */
int cg_unhex(unsigned char *out, const char *s, size_t n, int any_case);
/* The digest that s writes as 64 lower-case hex digits (cg_hex's form)
 * into out.  Returns 0, or -1 with a message when s is anything else (out
 * then undefined). */
int cg_hex_parse(unsigned char out[32], const char *s);
void cg_sha256(unsigned char out[32], const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
