/*
 * api/api.c - the public interface of libcg (include/cg/): what a
 * program outside cg calls, over the layers below.
 *
 * The installed shared library exports these functions and no other
 * (lib/libcg.map); those of the interface that already exist in a layer
 * below with the interface's own signature (cg_errmsg, cg_file_read,
 * cg_model_read, cg_shard_open, ...) are exported as they are, and this
 * file includes both the public and the internal headers, so that the
 * compiler holds each such declaration to the function.  The rest are
 * here: access by index to a file's tensors, names in place of the
 * internal enums, and one call each to train and to draw.  Every
 * argument is checked: a program's slip is a message, never a crash.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cg/cg.h>
#include <config.h>

#include "arch/all.h"
#include "cg.h"
#include "data/shard.h"
#include "model/cond.h"
#include "model/draw.h"
#include "model/model.h"
#include "nn/optim.h"
#include "train/train.h"

/* The built-in architectures join the registry as the library loads,
 * before any model is read; a program of cg's does it as it parses its
 * options (cli/cli.c).  Only a program that calls this interface links
 * this object, so the programs' own registries are left as they are. */
__attribute__((constructor)) static void
api_init(void)
{
	(void)cg_arch_all();
}

/* The package's version, as configure wrote it into config.h. */
const char *
cg_version(void)
{
	return VERSION;
}

/* ----------------------------------------------------------------- files */

/* Tensor i of f, or NULL with a message. */
static struct cg_tensor *
tensor_at(const struct cg_file *f, size_t i)
{
	if (f == NULL || i >= f->ntensors) {
		cg_seterr("tensor %zu: no such tensor (the file has %zu)", i,
		          f ? f->ntensors : 0);
		return NULL;
	}
	return f->tensors[i];
}

char *
cg_file_manifest_json(struct cg_file *f)
{
	cJSON *m = cg_file_manifest(f);
	char *s;

	if (m == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	s = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	if (s == NULL)
		cg_seterr("out of memory");
	return s;
}

int
cg_file_set_number(struct cg_file *f, const char *key, double v)
{
	if (key == NULL || *key == '\0' || strcmp(key, "format") == 0 ||
	    strcmp(key, "kind") == 0 || strcmp(key, "tensors") == 0)
		return cg_seterr("manifest key '%.64s': not one a program sets",
		                 key ? key : "");
	cg_json_set_num(f->manifest, key, v);
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, key) == NULL)
		return cg_seterr("out of memory");
	return 0;
}

size_t
cg_file_ntensors(const struct cg_file *f)
{
	return f ? f->ntensors : 0;
}

const char *
cg_file_tensor_name(const struct cg_file *f, size_t i)
{
	struct cg_tensor *t = tensor_at(f, i);

	return t ? t->name : NULL;
}

const char *
cg_file_tensor_dtype(const struct cg_file *f, size_t i)
{
	struct cg_tensor *t = tensor_at(f, i);

	return t ? cg_dtype_name(t->dtype) : NULL;
}

int
cg_file_tensor_shape(const struct cg_file *f, size_t i, uint64_t *shape,
                     int max)
{
	struct cg_tensor *t = tensor_at(f, i);

	if (t == NULL)
		return -1;
	for (int d = 0; d < t->ndim && d < max; d++)
		shape[d] = t->shape[d];
	return t->ndim;
}

const void *
cg_file_tensor_data(const struct cg_file *f, size_t i, size_t *nbytes)
{
	struct cg_tensor *t = tensor_at(f, i);

	if (t == NULL)
		return NULL;
	if (nbytes)
		*nbytes = (size_t)t->nbytes;
	return t->data;
}

int
cg_file_tensor_f32(const struct cg_file *f, size_t i, float *out, size_t n)
{
	struct cg_tensor *t = tensor_at(f, i);

	if (t == NULL)
		return -1;
	if (n != t->nelem)
		return cg_seterr("tensor %s: %llu elements, not %zu", t->name,
		                 (unsigned long long)t->nelem, n);
	if (cg_tensor_to_f32(t, out) != 0) {
		cg_errprefix(t->name);
		cg_errprefix("tensor");
		return -1;
	}
	return 0;
}

int
cg_file_add_f32(struct cg_file *f, const char *name, int ndim,
                const uint64_t *shape, const float *data)
{
	if (name == NULL || ndim < 1 || ndim > CG_MAX_DIMS)
		return cg_seterr("tensor %.64s: %d dimensions (1 to %d)",
		                 name ? name : "(null)", ndim, CG_MAX_DIMS);
	return cg_file_add(f, name, CG_F32, ndim, shape, data) ? 0 : -1;
}

int
cg_file_save(struct cg_file *f, const char *path, const char *compress)
{
	enum cg_compress c;

	if (compress == NULL || strcmp(compress, "none") == 0)
		c = CG_COMPRESS_NONE;
	else if (strcmp(compress, "gzip") == 0)
		c = CG_COMPRESS_GZIP;
	else if (strcmp(compress, "zstd") == 0)
		c = CG_COMPRESS_ZSTD;
	else
		return cg_seterr("compression '%.32s': not none, gzip or zstd",
		                 compress);
	/* What every reader would refuse is not written. */
	if (!cg_kind_known(cg_file_kind(f)))
		return cg_seterr("kind '%.32s': not a kind of cg file (model, "
		                 "grad, delta, data or state)",
		                 cg_file_kind(f));
	return cg_file_write(f, path, c);
}

/* ---------------------------------------------------------------- shards */

uint64_t
cg_shard_examples(const struct cg_shard *s)
{
	return s ? s->n : 0;
}

/* ---------------------------------------------------------------- models */

int
cg_model_save(struct cg_model *m, const char *path)
{
	return cg_model_write(m, path, CG_COMPRESS_NONE);
}

const char *
cg_model_arch(const struct cg_model *m)
{
	return m->arch->name;
}

uint64_t
cg_model_step(const struct cg_model *m)
{
	return m->step;
}

size_t
cg_model_nparams(const struct cg_model *m)
{
	return m->nparams;
}

int
cg_model_nconds(const struct cg_model *m)
{
	struct cg_conds c;
	int n;

	if (cg_conds_get(m, 0, &c) != 0)
		return -1;
	n = c.n;
	cg_conds_free(&c);
	return n;
}

const char *
cg_model_cond_name(const struct cg_model *m, int i)
{
	return i < 0 ? NULL : cg_conds_name(m, i);
}

int
cg_model_image_shape(const struct cg_model *m, int shape[3])
{
	if (m->arch->image_shape == NULL || m->arch->sample_image == NULL)
		return cg_seterr("%s models make text, not images",
		                 m->arch->name);
	return m->arch->image_shape(m, shape);
}

int
cg_model_train(struct cg_model *m, const struct cg_shard *s, int steps,
               int batch, const char *optimizer, double lr, uint64_t seed,
               double *loss)
{
	struct cg_train_opts o = {.steps = steps,
	                          .batch = batch,
	                          .seed = seed,
	                          .emit = CG_EMIT_MODEL,
	                          .order = CG_ORDER_SHUFFLE};
	struct cg_train_result res;
	struct cg_memplan plan;
	enum cg_opt_kind kind = CG_OPT_ADAM;
	double samples;

	if (steps < 1 || steps > 1 << 30 || batch < 1 || batch > 1 << 20)
		return cg_seterr("%d steps of %d examples: steps and batch "
		                 "must be from 1 (to 2^30 and 2^20)",
		                 steps, batch);
	if (!(lr >= 0 && lr <= 1e6))
		return cg_seterr("learning rate %g: not in [0, 1e6]", lr);
	if (optimizer != NULL && cg_optim_parse(optimizer, &kind) != 0)
		return -1;
	cg_optim_defaults(&o.opt, kind);
	if (lr > 0)
		o.opt.lr = (float)lr;
	/* Whole batches at once, as cg-train-step without --max-memory. */
	if (cg_train_plan(m, &o, NULL, 0, 0, 0, &plan) != 0 ||
	    cg_train_run(m, s, &o, NULL, NULL, &res) != 0)
		return -1;
	/* A diverged model is refused, and the manifest's figures kept, as
	 * cg-train-step keeps them: the same call, the same file. */
	if (cg_model_check_all_finite(m) != 0)
		return cg_seterr("the model is not finite: %s (the model "
		                 "diverged? lower the learning rate)",
		                 cg_errmsg());
	samples = cg_json_num(m->manifest, "samples", 0) + (double)res.samples;
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "loss");
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "samples");
	if (cJSON_AddNumberToObject(m->manifest, "loss", res.mean.loss) ==
	        NULL ||
	    cJSON_AddNumberToObject(m->manifest, "samples", samples) == NULL)
		return cg_seterr("out of memory");
	if (loss)
		*loss = res.mean.loss;
	return 0;
}

/* cond as a condition of m: 0, or -1 with a message. */
static int
check_cond(const struct cg_model *m, int cond)
{
	int n = cg_model_nconds(m);

	if (n < 0)
		return -1;
	if (cond < 0 || cond >= n)
		return cg_seterr("condition %d: the model has %d (0 to %d)",
		                 cond, n, n - 1);
	return 0;
}

int
cg_model_sample_images(struct cg_model *m, int cond, int count,
                       double temperature, uint64_t seed, float *out)
{
	int shape[3];

	if (cg_model_image_shape(m, shape) != 0 || check_cond(m, cond) != 0)
		return -1;
	if (count < 1 || count > 1 << 16)
		return cg_seterr("%d images: from 1 to 65536", count);
	if (!(temperature >= 0 && temperature <= 1e3))
		return cg_seterr("temperature %g: not in [0, 1000]",
		                 temperature);
	return cg_draw_images(m, &cond, 1, count, temperature, seed, out);
}

/* Where cg_model_sample_text's bytes go. */
struct textbuf {
	char *buf;
	size_t n, size;
};

static int
put_byte(void *ctx, int byte)
{
	struct textbuf *b = ctx;

	if (b->n + 1 >= b->size)
		return 1;
	b->buf[b->n++] = (char)byte;
	return 0;
}

long
cg_model_sample_text(struct cg_model *m, int cond, const char *prompt,
                     double temperature, uint64_t seed, char *buf, size_t size)
{
	struct textbuf b = {.buf = buf, .size = size};
	struct cg_sampler sm = {.temperature = temperature, .top_p = 1};
	size_t plen = prompt ? strlen(prompt) : 0;

	if (m->arch->sample_text == NULL)
		return cg_seterr("%s models make images, not text",
		                 m->arch->name);
	if (check_cond(m, cond) != 0)
		return -1;
	if (buf == NULL || size < 1 || size > (size_t)LONG_MAX)
		return cg_seterr("no room for the text");
	if (!(temperature >= 0 && temperature <= 1e3))
		return cg_seterr("temperature %g: not in [0, 1000]",
		                 temperature);
	sm.max_bytes = size - 1;
	buf[0] = '\0';
	if (size > 1 && cg_draw_texts(m, &cond, 1, 1, (const uint8_t *)prompt,
	                              plen, &sm, seed, put_byte, NULL, &b) != 0)
		return -1;
	buf[b.n] = '\0';
	return (long)b.n;
}
