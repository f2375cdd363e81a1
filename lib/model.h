/*
 * model.h - a model in memory: one flat parameter buffer, named views, its
 * architecture's operations, and the optimizer state that travels with it.
 *
 * Programs meet architectures only through struct cg_arch; everything that
 * reduces, applies, prunes or quantizes works on the flat buffer.  A model
 * file (kind "model") holds one f32 tensor per view, and, when an optimizer
 * has run, flat tensors "opt.m", "opt.v" (moments) and "outer.mom" (the
 * DiLoCo outer momentum).
 */
#ifndef CG_MODEL_H
#define CG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn.h"
#include "shard.h"

struct cJSON;
struct cg_model;

/* Figures one batch (or a whole evaluation) produced, all means. */
struct cg_metrics {
	double loss;	 /* the training objective, per example */
	double part[3];	 /* named parts of it (cvae: rec, kl) */
	uint64_t n;	 /* examples */
	double bits_per; /* text: bits per byte; else 0 */
};

struct cg_arch {
	const char *name;
	const char *loss_name;	    /* the objective's name in reports */
	const char *part_names[3];
	/*
	 * Check m->config and set m->nparams, m->views, m->nviews.
	 * Returns 0 or -1 with a message.
	 */
	int (*layout)(struct cg_model *m);
	/* Seeded initial weights into m->params. */
	void (*init)(struct cg_model *m, struct cg_rng *r);
	/*
	 * Whether shard s fits the model (payload kind, sizes, vocabulary);
	 * -1 with a message if not.
	 */
	int (*check_data)(struct cg_model *m, const struct cg_shard *s);
	/*
	 * The loss on examples ex[0..B) of s, as means over the batch; if
	 * grad != NULL, grad [nparams] += d(loss)/d(params).  Randomness
	 * inside the model (noise, dropout) is a pure function of noise_seed
	 * and each example's index in the input, so that how examples are
	 * split among workers never changes the result.
	 */
	int (*batch)(struct cg_model *m, const struct cg_shard *s,
		     const uint64_t *ex, int B, uint64_t noise_seed,
		     float *grad, struct cg_metrics *out);
	/*
	 * Image models: n images out [n, pixels] in [0, 1] (pixel
	 * probabilities / intensities) for conditions cond [n]; latent noise
	 * drawn from r and scaled by temperature.  NULL for text models.
	 */
	int (*sample_image)(struct cg_model *m, const int *cond, int n,
			    double temperature, struct cg_rng *r, float *out);
	/* Release the workspace the arch hung on m (m->ws). */
	void (*free_ws)(struct cg_model *m);
};

struct cg_model {
	const struct cg_arch *arch;
	struct cJSON *manifest; /* owned: arch, config, conditions, ... */
	struct cJSON *config;	/* borrowed from manifest */
	size_t nparams;
	float *params; /* [nparams], 64-byte aligned */
	int nviews;
	struct cg_view *views;
	uint64_t step; /* optimizer steps applied */
	/* Optimizer state; NULL when absent. */
	float *opt_m, *opt_v, *outer_mom; /* [nparams] each */
	uint64_t opt_t;			  /* steps taken with opt_m/opt_v */
	void *ws;			  /* arch workspace */
	int ws_batch;			  /* its batch capacity */
};

/* The architecture called name, or NULL with a message. */
const struct cg_arch *cg_arch_find(const char *name);

/*
 * A new model of arch with config (taken over: the model owns it) and
 * manifest extras (also taken over; may be NULL), weights from seed.
 * Returns NULL with a message.
 */
struct cg_model *cg_model_create(const char *arch, struct cJSON *config,
				 struct cJSON *extra, uint64_t seed);
/* Read a model file; NULL with a message naming the file and tensor. */
struct cg_model *cg_model_read(const char *path);
/* Build from a file already read (views must match the layout exactly);
 * f is left alone. */
struct cg_model *cg_model_from_file(const struct cg_file *f,
				    const char *display);
/* The model as a cg file (the caller frees it), or NULL. */
struct cg_file *cg_model_file(struct cg_model *m);
/* Write atomically (path "-": stdout).  Returns 0 or -1. */
int cg_model_write(struct cg_model *m, const char *path, enum cg_compress c);
void cg_model_free(struct cg_model *m);

/* SHA-256 of the parameters' bytes: the identity of a grad's base. */
void cg_model_digest(const struct cg_model *m, unsigned char out[32]);

/* Allocate zeroed optimizer arrays if missing.  Returns 0 or -1. */
int cg_model_ensure_opt(struct cg_model *m, int need_m, int need_v);
int cg_model_ensure_outer(struct cg_model *m);

/*
 * Whether shard s names its conditions as m's manifest does (same names,
 * same order): a model trained on "Dress" = 3 must not be fed data where
 * 3 means something else.  A model without names accepts any.  Returns 0
 * or -1 with a message.
 */
int cg_model_check_conditions(const struct cg_model *m,
			      const struct cg_shard *s);

/* Integer field of the manifest, or dflt when absent. */
uint64_t cg_json_u64(const struct cJSON *obj, const char *key, uint64_t dflt);
double cg_json_num(const struct cJSON *obj, const char *key, double dflt);

/*
 * Copy the flat buffer buf [nparams] into file f as one f32 tensor per
 * view (or from f back into buf, checking names and shapes: -1 with a
 * message when a view is missing or misshapen).
 */
int cg_model_put_views(const struct cg_model *m, struct cg_file *f,
		       const float *buf);
int cg_model_get_views(const struct cg_model *m, const struct cg_file *f,
		       float *buf);

#endif
