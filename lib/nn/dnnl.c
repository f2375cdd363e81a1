/*
 * nn/dnnl.c - matrix products through oneDNN's matmul primitive.
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
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "nn/dnnl.h"

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

int
cg_dnnl_gemm(int bf16, int transA, int transB, int M, int N, int K,
             float alpha, const void *A, int lda, const void *B, int ldb,
             float beta, float *C, int ldc)
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
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
	const dnnl_cpu_isa_t want = dnnl_cpu_isa_avx512_core_bf16;

	return ((unsigned)isa & (unsigned)want) == (unsigned)want &&
	       strcmp(cg_dnnl_bf16_impl(), "none") != 0;
}
