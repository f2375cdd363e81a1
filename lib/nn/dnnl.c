/*
 * nn/dnnl.c - matrix products through oneDNN's matmul primitive, and
 * convolutions through its convolution primitives (below).
 *
 * Making a primitive costs far more than a small product (oneDNN picks
 * an implementation and may generate its code), so each is made once and
 * kept in a table keyed by everything that shapes it; a lookup is a
 * linear scan under a mutex, short beside the product it saves.  The
 * operands' layouts go to oneDNN as strides, so the four transpose cases
 * and any leading dimension need no copy.  alpha is the output scale and
 * beta a sum post-op: dst = alpha * op(A) op(B) + beta * dst.  The
 * scratchpad is the caller's (user mode), allocated per call, so that no
 * buffer is shared between threads; so is the stream (one per thread).
 * A product or convolution of fewer multiply-adds than the BLAS path
 * shares out (gemm.c's 64^3) is made and run on the calling thread
 * alone: oneDNN would open a parallel region for each, whose wake-ups
 * cost more than the arithmetic (a small U-Net's gradient took 6 times
 * as long on 3 threads as on one).  The choice follows from the shape,
 * so a given shape at a given thread count always gives the same bits.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/par.h"
#include "nn/conv.h"
#include "nn/dnnl.h"

/* For work multiply-adds: 0, or, where work is under PAR_MIN_WORK, the
 * thread count to give back to serial_end after making and running the
 * primitive on one thread. */
static int
serial_begin(double work)
{
#ifdef _OPENMP
	int n = omp_get_max_threads();

	if (work < PAR_MIN_WORK && n > 1) {
		omp_set_num_threads(1);
		return n;
	}
#endif
	(void)work;
	return 0;
}

static void
serial_end(int n)
{
#ifdef _OPENMP
	if (n > 0)
		omp_set_num_threads(n);
#endif
	(void)n;
}

struct key {
	int bf16, ta, tb, M, N, K, lda, ldb, ldc;
	float alpha, beta;
};

struct prim {
	struct key k;
	dnnl_primitive_t p;
	dnnl_memory_desc_t a, b, c, pad;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct prim cache[CG_DNNL_CACHE];
static int ncache;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;

/* Every thread's stream, reachable from here for the life of the
 * process (a pool thread's stream lives as long as the pool). */
static dnnl_stream_t *streams;
static size_t nstreams, capstreams;
static _Thread_local dnnl_stream_t stream;

static void
make_engine(void)
{
	if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
		engine = NULL;
}

static dnnl_stream_t
my_stream(void)
{
	dnnl_stream_t s;

	if (stream != NULL)
		return stream;
	if (dnnl_stream_create(&s, engine, dnnl_stream_default_flags) !=
	    dnnl_success)
		return NULL;
	pthread_mutex_lock(&lock);
	if (nstreams == capstreams) {
		size_t cap = capstreams ? 2 * capstreams : 16;
		dnnl_stream_t *n = realloc(streams, cap * sizeof(*n));
		if (n == NULL) {
			pthread_mutex_unlock(&lock);
			dnnl_stream_destroy(s);
			return NULL;
		}
		streams = n;
		capstreams = cap;
	}
	streams[nstreams++] = s;
	pthread_mutex_unlock(&lock);
	return stream = s;
}

/* A row-major [rows, cols] operand, or its transpose stored [cols, ld]. */
static dnnl_status_t
operand(dnnl_memory_desc_t *md, int rows, int cols, int trans, int ld,
        dnnl_data_type_t dt)
{
	dnnl_dims_t dims = {rows, cols};
	dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};

	return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

/* A primitive for k, with its descriptors: 0, or -1. */
static int
make(const struct key *k, struct prim *out)
{
	dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_matmul_desc_t desc;
	int ok = 0;

	memset(out, 0, sizeof(*out));
	out->k = *k;
	if (operand(&out->a, k->M, k->K, k->ta, k->lda, dt) ||
	    operand(&out->b, k->K, k->N, k->tb, k->ldb, dt) ||
	    operand(&out->c, k->M, k->N, 0, k->ldc, dnnl_f32) ||
	    dnnl_matmul_desc_init(&desc, &out->a, &out->b, NULL, &out->c) ||
	    dnnl_primitive_attr_create(&attr) ||
	    dnnl_primitive_attr_set_scratchpad_mode(attr,
	                                            dnnl_scratchpad_mode_user))
		goto out;
	if (k->alpha != 1 &&
	    dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha))
		goto out;
	if (k->beta != 0 &&
	    (dnnl_post_ops_create(&po) || dnnl_post_ops_append_sum(po, k->beta) ||
	     dnnl_primitive_attr_set_post_ops(attr, po)))
		goto out;
	if (dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) ||
	    dnnl_primitive_create(&out->p, pd))
		goto out;
	out->pad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	ok = 1;
out:
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return ok ? 0 : -1;
}

/*
 * The cached primitive for k, made on first use, copied to *p (the copy
 * stays valid: a cached primitive is never destroyed).  1: cached; 0: made
 * for this call only (the table is full), the caller destroys it; -1:
 * oneDNN makes none.
 */
static int
lookup(const struct key *k, struct prim *p)
{
	int r = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < ncache; i++)
		if (memcmp(&cache[i].k, k, sizeof(*k)) == 0) {
			*p = cache[i];
			pthread_mutex_unlock(&lock);
			return 1;
		}
	/* Made under the lock: two threads never make the same one. */
	if (make(k, p) == 0) {
		r = 0;
		if (ncache < CG_DNNL_CACHE) {
			cache[ncache++] = *p;
			r = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

static int
gemm(int bf16, int transA, int transB, int M, int N, int K, float alpha,
     const void *A, int lda, const void *B, int ldb, float beta, float *C,
     int ldc)
{
	struct key k;
	struct prim p;
	dnnl_stream_t s;
	dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mp = NULL;
	void *pad = NULL;
	size_t padsize;
	int cached, ok = 0;

	if (M <= 0 || N <= 0 || K <= 0)
		return -1;
	pthread_once(&once, make_engine);
	if (engine == NULL || (s = my_stream()) == NULL)
		return -1;
	/* The key is compared bytewise: all ints and floats, no padding. */
	k = (struct key){bf16 != 0, transA != 0, transB != 0, M, N, K,
	                 lda, ldb, ldc, alpha, beta};
	if ((cached = lookup(&k, &p)) < 0)
		return -1;
	padsize = dnnl_memory_desc_get_size(&p.pad);
	if (padsize > 0 && (pad = malloc(padsize)) == NULL)
		goto out;
	/* oneDNN takes the handles as void *; it only reads A and B. */
	if (dnnl_memory_create(&ma, &p.a, engine, (void *)(uintptr_t)A) ||
	    dnnl_memory_create(&mb, &p.b, engine, (void *)(uintptr_t)B) ||
	    dnnl_memory_create(&mc, &p.c, engine, C) ||
	    (padsize > 0 && dnnl_memory_create(&mp, &p.pad, engine, pad)))
		goto out;
	dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma},
	                          {DNNL_ARG_WEIGHTS, mb},
	                          {DNNL_ARG_DST, mc},
	                          {DNNL_ARG_SCRATCHPAD, mp}};
	if (dnnl_primitive_execute(p.p, s, padsize > 0 ? 4 : 3, args) ||
	    dnnl_stream_wait(s))
		goto out;
	ok = 1;
out:
	if (ma)
		dnnl_memory_destroy(ma);
	if (mb)
		dnnl_memory_destroy(mb);
	if (mc)
		dnnl_memory_destroy(mc);
	if (mp)
		dnnl_memory_destroy(mp);
	free(pad);
	if (!cached)
		dnnl_primitive_destroy(p.p);
	return ok ? 0 : -1;
}

int
cg_dnnl_gemm(int bf16, int transA, int transB, int M, int N, int K,
             float alpha, const void *A, int lda, const void *B, int ldb,
             float beta, float *C, int ldc)
{
	const int n = serial_begin((double)M * N * K);
	const int r = gemm(bf16, transA, transB, M, N, K, alpha, A, lda, B,
	                   ldb, beta, C, ldc);

	serial_end(n);
	return r;
}

/* ------------------------------------------------------------- probes */

static const char *impl_name = "none";
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* A bf16 primitive made once, for its implementation's name. */
static void
probe(void)
{
	struct key k = {1, 0, 0, 256, 256, 256, 256, 256, 256, 1, 0};
	struct prim p;
	const_dnnl_primitive_desc_t pd;
	const char *s = NULL;

	pthread_once(&once, make_engine);
	if (engine == NULL || make(&k, &p) != 0)
		return;
	if (dnnl_primitive_get_primitive_desc(p.p, &pd) == dnnl_success &&
	    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) ==
	        dnnl_success &&
	    s != NULL) {
		char *d = strdup(s);
		impl_name = d ? d : "unknown";
	}
	dnnl_primitive_destroy(p.p);
}

const char *
cg_dnnl_bf16_impl(void)
{
	pthread_once(&probe_once, probe);
	return impl_name;
}

int
cg_dnnl_bf16(void)
{
	unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
	const unsigned dot = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
	const unsigned amx = (unsigned)dnnl_cpu_isa_avx512_core_amx;

	if ((isa & dot) != dot || strcmp(cg_dnnl_bf16_impl(), "none") == 0)
		return 0;
	return (isa & amx) == amx ? 2 : 1;
}

/* ------------------------------------------------------- convolutions */

/*
 * A convolution's maps go to oneDNN as they lie (NHWC, the "nhwc" tag
 * on its logical N, C, H, W), and so does the output of the forward; the
 * weight, stored [OC, C, KH, KW] ("oihw"), is reordered into the layout
 * the primitive asks for (format "any": blocks of 8 channels on avx2),
 * small beside the maps.  The backward results are oneDNN's to write, not
 * to add to, so they land in a buffer of this thread's and a reorder with
 * a sum post-op adds them to the caller's (the weight's gradient is
 * reordered back to oihw on the way).  In bf16 the map and weight
 * operands are reordered to bf16 (to nearest even) first.  Buffers are
 * per thread, grown as needed and kept.
 */
enum { FWD, BWD_D, BWD_W };

struct ckey {
	int dir, bf16, bias, B, C, H, W, OC, KH, KW, stride, pad;
};

struct cprim {
	struct ckey k;
	dnnl_primitive_t p;
	/* weight in (oihw f32 -> the primitive's); result out (added to the
	 * caller's); the f32 maps to bf16 (src: the input map, dst: the
	 * output's gradient); NULL where not used */
	dnnl_primitive_t w_in, out, src_in, dst_in;
	/* the primitive's operands: src (or diff_src), weights (or
	 * diff_weights), dst (or diff_dst), bias */
	dnnl_memory_desc_t src, wei, dst, bias;
	/* the caller's: nhwc f32, oihw f32 */
	dnnl_memory_desc_t usrc, uwei, udst;
};

static struct cprim ccache[CG_DNNL_CACHE];
static int nccache;

/* Per-thread buffers: the scratchpad, the weight, the result, the two
 * bf16 maps.  Each thread's set hangs on a list, reachable to the end. */
enum { BUF_PAD, BUF_WEI, BUF_OUT, BUF_SRC, BUF_DST, NBUF };
struct bufs {
	void *p[NBUF];
	size_t n[NBUF];
	struct bufs *next;
};
static _Thread_local struct bufs *mybufs;
static struct bufs *allbufs;

static void *
buf(int which, size_t bytes)
{
	if (mybufs == NULL) {
		if ((mybufs = calloc(1, sizeof(*mybufs))) == NULL)
			return NULL;
		pthread_mutex_lock(&lock);
		mybufs->next = allbufs;
		allbufs = mybufs;
		pthread_mutex_unlock(&lock);
	}
	if (bytes == 0)
		bytes = 1;
	if (mybufs->n[which] < bytes) {
		void *p = malloc(bytes);
		if (p == NULL)
			return NULL;
		free(mybufs->p[which]);
		mybufs->p[which] = p;
		mybufs->n[which] = bytes;
	}
	return mybufs->p[which];
}

/* attr with the caller's scratchpad, and a sum post-op when sum. */
static dnnl_primitive_attr_t
attr_make(int sum)
{
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;

	if (dnnl_primitive_attr_create(&attr) ||
	    dnnl_primitive_attr_set_scratchpad_mode(attr,
	                                            dnnl_scratchpad_mode_user))
		goto fail;
	if (sum && (dnnl_post_ops_create(&po) ||
	            dnnl_post_ops_append_sum(po, 1) ||
	            dnnl_primitive_attr_set_post_ops(attr, po)))
		goto fail;
	if (po)
		dnnl_post_ops_destroy(po);
	return attr;
fail:
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return NULL;
}

/* A reorder from a to b (adding to b when sum): 0, or -1. */
static int
reorder(dnnl_primitive_t *r, const dnnl_memory_desc_t *a,
        const dnnl_memory_desc_t *b, int sum)
{
	dnnl_primitive_attr_t attr = attr_make(sum);
	dnnl_primitive_desc_t pd = NULL;
	int ok = 0;

	if (attr != NULL &&
	    dnnl_reorder_primitive_desc_create(&pd, a, engine, b, engine,
	                                       attr) == dnnl_success &&
	    dnnl_primitive_create(r, pd) == dnnl_success)
		ok = 1;
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return ok ? 0 : -1;
}

static void
cprim_free(struct cprim *p)
{
	dnnl_primitive_t *all[] = {&p->p, &p->w_in, &p->out, &p->src_in,
	                           &p->dst_in};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i] != NULL) {
			dnnl_primitive_destroy(*all[i]);
			*all[i] = NULL;
		}
}

/* The primitives for k: 0, or -1. */
static int
cmake(const struct ckey *k, struct cprim *out)
{
	const dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32;
	const int OH = (k->H + 2 * k->pad - k->KH) / k->stride + 1;
	const int OW = (k->W + 2 * k->pad - k->KW) / k->stride + 1;
	dnnl_dims_t sd = {k->B, k->C, k->H, k->W};
	dnnl_dims_t wd = {k->OC, k->C, k->KH, k->KW};
	dnnl_dims_t bd = {k->OC};
	dnnl_dims_t dd = {k->B, k->OC, OH, OW};
	dnnl_dims_t st = {k->stride, k->stride};
	dnnl_dims_t pl = {k->pad, k->pad};
	/* In the primitive: the maps nhwc (of dt, but a result f32), the
	 * weight in the layout it picks. */
	dnnl_memory_desc_t src, dst, bias, wany;
	dnnl_convolution_desc_t fd, bd_desc;
	dnnl_primitive_desc_t hint = NULL, pd = NULL;
	dnnl_primitive_attr_t attr = NULL;
	int ok = 0;

	memset(out, 0, sizeof(*out));
	out->k = *k;
	if (dnnl_memory_desc_init_by_tag(&out->usrc, 4, sd, dnnl_f32,
	                                 dnnl_nhwc) ||
	    dnnl_memory_desc_init_by_tag(&out->udst, 4, dd, dnnl_f32,
	                                 dnnl_nhwc) ||
	    dnnl_memory_desc_init_by_tag(&out->uwei, 4, wd, dnnl_f32,
	                                 dnnl_oihw) ||
	    dnnl_memory_desc_init_by_tag(&src, 4, sd,
	                                 k->dir == BWD_D ? dnnl_f32 : dt,
	                                 dnnl_nhwc) ||
	    dnnl_memory_desc_init_by_tag(&dst, 4, dd,
	                                 k->dir == FWD ? dnnl_f32 : dt,
	                                 dnnl_nhwc) ||
	    dnnl_memory_desc_init_by_tag(&wany, 4, wd,
	                                 k->dir == BWD_W ? dnnl_f32 : dt,
	                                 dnnl_format_tag_any) ||
	    dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x))
		return -1;
	/* The forward's descriptor: the primitive (FWD) or the backward's
	 * hint (its source and weight of dt: as the forward had them). */
	{
		dnnl_memory_desc_t fs, fw, fdst;

		if (dnnl_memory_desc_init_by_tag(&fs, 4, sd, dt, dnnl_nhwc) ||
		    dnnl_memory_desc_init_by_tag(&fw, 4, wd, dt,
		                                 dnnl_format_tag_any) ||
		    dnnl_memory_desc_init_by_tag(&fdst, 4, dd,
		                                 k->dir == FWD ? dnnl_f32 : dt,
		                                 dnnl_nhwc) ||
		    dnnl_convolution_forward_desc_init(
		        &fd, dnnl_forward_training, dnnl_convolution_direct, &fs,
		        &fw, k->bias ? &bias : NULL, &fdst, st, pl, pl))
			return -1;
	}
	if ((attr = attr_make(0)) == NULL)
		return -1;
	if (k->dir == FWD) {
		if (dnnl_primitive_desc_create(&pd, &fd, attr, engine, NULL))
			goto out;
	} else {
		if (dnnl_primitive_desc_create(&hint, &fd, NULL, engine, NULL))
			goto out;
		if (k->dir == BWD_D
		        ? dnnl_convolution_backward_data_desc_init(
		              &bd_desc, dnnl_convolution_direct, &src, &wany,
		              &dst, st, pl, pl)
		        : dnnl_convolution_backward_weights_desc_init(
		              &bd_desc, dnnl_convolution_direct, &src, &wany,
		              NULL, &dst, st, pl, pl))
			goto out;
		if (dnnl_primitive_desc_create(&pd, &bd_desc, attr, engine,
		                               hint))
			goto out;
	}
	/* The layouts the primitive took (the maps as asked; check). */
	out->src = *dnnl_primitive_desc_query_md(
	    pd, k->dir == BWD_D ? dnnl_query_diff_src_md : dnnl_query_src_md,
	    0);
	out->wei = *dnnl_primitive_desc_query_md(
	    pd,
	    k->dir == BWD_W ? dnnl_query_diff_weights_md
	                    : dnnl_query_weights_md,
	    0);
	out->dst = *dnnl_primitive_desc_query_md(
	    pd, k->dir == FWD ? dnnl_query_dst_md : dnnl_query_diff_dst_md, 0);
	out->bias = bias;
	if (!dnnl_memory_desc_equal(&out->src, &src) ||
	    !dnnl_memory_desc_equal(&out->dst, &dst) ||
	    dnnl_primitive_create(&out->p, pd))
		goto out;
	if (k->dir != BWD_W && reorder(&out->w_in, &out->uwei, &out->wei, 0))
		goto out;
	if (k->dir == BWD_W && reorder(&out->out, &out->wei, &out->uwei, 1))
		goto out;
	if (k->dir == BWD_D && reorder(&out->out, &out->src, &out->usrc, 1))
		goto out;
	if (k->bf16 && k->dir != BWD_D &&
	    reorder(&out->src_in, &out->usrc, &out->src, 0))
		goto out;
	if (k->bf16 && k->dir != FWD &&
	    reorder(&out->dst_in, &out->udst, &out->dst, 0))
		goto out;
	ok = 1;
out:
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (hint)
		dnnl_primitive_desc_destroy(hint);
	dnnl_primitive_attr_destroy(attr);
	if (!ok)
		cprim_free(out);
	return ok ? 0 : -1;
}

/* As lookup, for convolutions. */
static int
clookup(const struct ckey *k, struct cprim *p)
{
	int r = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nccache; i++)
		if (memcmp(&ccache[i].k, k, sizeof(*k)) == 0) {
			*p = ccache[i];
			pthread_mutex_unlock(&lock);
			return 1;
		}
	if (cmake(k, p) == 0) {
		r = 0;
		if (nccache < CG_DNNL_CACHE) {
			ccache[nccache++] = *p;
			r = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* Run primitive p on args (n of them, room for one more: the
 * scratchpad, in this thread's buffer): 0, or -1. */
static int
run(dnnl_primitive_t p, dnnl_stream_t s, dnnl_exec_arg_t *args, int n)
{
	const_dnnl_primitive_desc_t pd;
	const dnnl_memory_desc_t *md;
	dnnl_memory_t mp = NULL;
	size_t size;
	void *pad;
	int r = -1;

	if (dnnl_primitive_get_primitive_desc(p, &pd))
		return -1;
	md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
	size = md ? dnnl_memory_desc_get_size(md) : 0;
	if (size > 0) {
		if ((pad = buf(BUF_PAD, size)) == NULL ||
		    dnnl_memory_create(&mp, md, engine, pad))
			return -1;
		args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mp};
	}
	if (dnnl_primitive_execute(p, s, n, args) == dnnl_success &&
	    dnnl_stream_wait(s) == dnnl_success)
		r = 0;
	if (mp)
		dnnl_memory_destroy(mp);
	return r;
}

/* Memory objects for one call, destroyed together. */
struct mems {
	dnnl_memory_t m[8];
	int n;
};

static dnnl_memory_t
mem(struct mems *ms, const dnnl_memory_desc_t *md, const void *p)
{
	dnnl_memory_t m;

	/* oneDNN takes the handles as void *; an input is only read. */
	if (p == NULL || ms->n == 8 ||
	    dnnl_memory_create(&m, md, engine, (void *)(uintptr_t)p))
		return NULL;
	return ms->m[ms->n++] = m;
}

/* A reorder of a (at pa) into b (at pb): 0, or -1. */
static int
reorder_run(dnnl_primitive_t r, dnnl_stream_t s, struct mems *ms,
            const dnnl_memory_desc_t *a, const void *pa,
            const dnnl_memory_desc_t *b, void *pb)
{
	dnnl_exec_arg_t args[3];
	dnnl_memory_t ma = mem(ms, a, pa), mb = mem(ms, b, pb);

	if (ma == NULL || mb == NULL)
		return -1;
	args[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, ma};
	args[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, mb};
	return run(r, s, args, 2);
}

/*
 * One convolution in direction dir: x is the input map (FWD, BWD_W) or
 * its gradient (BWD_D), wt the weight or its gradient, y the output map
 * or its gradient; b the bias (FWD).
 */
static int
conv_run(int dir, int bf16, const struct cg_conv *c, int B, float *x,
         float *wt, float *y, const float *b)
{
	struct ckey k;
	struct cprim p;
	struct mems ms = {{NULL}, 0};
	dnnl_stream_t s;
	dnnl_exec_arg_t args[6];
	const void *px = x, *py = y, *pw = wt;
	void *res = NULL;
	int cached, n = 0, ok = 0;

	if (B <= 0)
		return -1;
	pthread_once(&once, make_engine);
	if (engine == NULL || (s = my_stream()) == NULL)
		return -1;
	k = (struct ckey){dir,   bf16 != 0, dir == FWD && b != NULL,
	                  B,     c->C,      c->H,
	                  c->W,  c->OC,     c->KH,
	                  c->KW, c->stride, c->pad};
	if ((cached = clookup(&k, &p)) < 0)
		return -1;
	/* The operands in the primitive's layouts. */
	if (p.w_in != NULL) {
		void *w2 = buf(BUF_WEI, dnnl_memory_desc_get_size(&p.wei));
		if (w2 == NULL || reorder_run(p.w_in, s, &ms, &p.uwei, wt,
		                              &p.wei, w2))
			goto out;
		pw = w2;
	}
	if (p.src_in != NULL) {
		void *x2 = buf(BUF_SRC, dnnl_memory_desc_get_size(&p.src));
		if (x2 == NULL ||
		    reorder_run(p.src_in, s, &ms, &p.usrc, x, &p.src, x2))
			goto out;
		px = x2;
	}
	if (p.dst_in != NULL) {
		void *y2 = buf(BUF_DST, dnnl_memory_desc_get_size(&p.dst));
		if (y2 == NULL ||
		    reorder_run(p.dst_in, s, &ms, &p.udst, y, &p.dst, y2))
			goto out;
		py = y2;
	}
	/* A backward's result, to be added to the caller's. */
	if (dir == BWD_D &&
	    (px = res = buf(BUF_OUT, dnnl_memory_desc_get_size(&p.src))) == NULL)
		goto out;
	if (dir == BWD_W &&
	    (pw = res = buf(BUF_OUT, dnnl_memory_desc_get_size(&p.wei))) == NULL)
		goto out;
	{
		dnnl_memory_t mx = mem(&ms, &p.src, px), mw = mem(&ms, &p.wei, pw);
		dnnl_memory_t my = mem(&ms, &p.dst, py);

		if (mx == NULL || mw == NULL || my == NULL)
			goto out;
		switch (dir) {
		case FWD:
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mx};
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mw};
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, my};
			if (k.bias) {
				dnnl_memory_t mb = mem(&ms, &p.bias, b);
				if (mb == NULL)
					goto out;
				args[n++] =
				    (dnnl_exec_arg_t){DNNL_ARG_BIAS, mb};
			}
			break;
		case BWD_D:
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, mx};
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mw};
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, my};
			break;
		default:
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mx};
			args[n++] =
			    (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, mw};
			args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, my};
			break;
		}
		if (run(p.p, s, args, n))
			goto out;
	}
	/* Nothing of the caller's is written before this point. */
	if (dir == BWD_D &&
	    reorder_run(p.out, s, &ms, &p.src, res, &p.usrc, x))
		goto out;
	if (dir == BWD_W &&
	    reorder_run(p.out, s, &ms, &p.wei, res, &p.uwei, wt))
		goto out;
	ok = 1;
out:
	for (int i = 0; i < ms.n; i++)
		dnnl_memory_destroy(ms.m[i]);
	if (!cached)
		cprim_free(&p);
	return ok ? 0 : -1;
}

/* conv_run, on one thread where the convolution is small. */
static int
conv(int dir, int bf16, const struct cg_conv *c, int B, float *x, float *wt,
     float *y, const float *b)
{
	const int n = serial_begin((double)B * c->OH * c->OW * c->OC * c->C *
	                           c->KH * c->KW);
	const int r = conv_run(dir, bf16, c, B, x, wt, y, b);

	serial_end(n);
	return r;
}

int
cg_dnnl_conv_forward(int bf16, const struct cg_conv *c, int B, float *out,
                     const float *inp, const float *w, const float *b)
{
	return conv(FWD, bf16, c, B, (float *)(uintptr_t)inp,
	            (float *)(uintptr_t)w, out, b);
}

int
cg_dnnl_conv_backward_data(int bf16, const struct cg_conv *c, int B,
                           float *dinp, const float *dout, const float *w)
{
	return conv(BWD_D, bf16, c, B, dinp, (float *)(uintptr_t)w,
	            (float *)(uintptr_t)dout, NULL);
}

int
cg_dnnl_conv_backward_weights(int bf16, const struct cg_conv *c, int B,
                              float *dw, const float *dout, const float *inp)
{
	return conv(BWD_W, bf16, c, B, (float *)(uintptr_t)inp, dw,
	            (float *)(uintptr_t)dout, NULL);
}
