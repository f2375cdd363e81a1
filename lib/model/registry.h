/*
 * model/registry.h - an architecture as the model layer sees it (struct
 * cg_arch: its options, layout, kernels and sampling), and the registry
 * that finds one by name.
 *
 * Programs meet architectures only through struct cg_arch; the registry
 * names none of them (lib/arch/all.c hands in the table of built-in ones).
 */
#ifndef CG_REGISTRY_H
#define CG_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "data/shard.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "nn/qlinear.h"

struct cJSON;
struct cg_model;

/*
 * Pipeline stages (lib/train/pipe.c): an arch whose layers run one after
 * another on rows of T positions of width C, cut between layers.  A stage
 * holds layers [a, b): views [layer_view(a), layer_view(b)), a contiguous
 * range of the flat buffer (the inputs' views go with layer 0, the head's
 * with the last).  What flows between stages for a micro-batch of B rows
 * is activations [B, T, C] forward and their gradient back; the first
 * stage makes the rows from the data, and the batch's targets and
 * weights travel to the last.
 */
/*
 * Sampling across stages: how a stage's generator hands the rows of a
 * chunk, x [n, C] at positions p0 .. p0 + n - 1, to the next stage, and
 * gets back the logits [V] of the last row.  0, or -1 with a message.
 */
struct cg_sampler;
struct cg_stage_link {
	int (*rows)(void *ctx, int p0, const float *x, int n, float *logits);
	void *ctx;
};

struct cg_stage_ops {
	/* The layers a split cuts between, T and C; -1 with a message
	 * where m cannot be split into n stages. */
	int (*layers)(const struct cg_model *m, int n, int *T, int *C);
	/* The first view of layer l (0 <= l <= layers: nviews). */
	int (*layer_view)(const struct cg_model *m, int l);
	/* The rows of examples ex[0..B) of s as batch makes them: tokens,
	 * targets [B, T] and weight [B, T] (summing to 1 over the batch),
	 * *count the scored positions; 0, or -1 with a message. */
	int (*rows)(struct cg_model *m, const struct cg_shard *s,
	            const uint64_t *ex, int B, uint64_t noise_seed, int *tokens,
	            int *targets, float *weight, uint64_t *count);
	/* A workspace for layers [a, b) and micro-batches of up to mb rows
	 * (free it with stage_free), or NULL with a message.  keep 0: the
	 * backward pass runs the forward pass again; keep > 0: keep sets
	 * of activations, each kept from a forward pass to the backward
	 * pass of the same set (not run again). */
	void *(*stage_new)(const struct cg_model *m, int a, int b, int mb,
	                   int keep);
	/* What layers [a, b) cost, for a plan (train/plan.h): *flops the
	 * floating-point operations of one row forward, *ws the bytes
	 * stage_new(m, a, b, mb, keep) takes; 0, or -1 with a message. */
	int (*cost)(const struct cg_model *m, int a, int b, int mb, int keep,
	            double *flops, size_t *ws);
	void (*stage_free)(void *ws);
	/* Forward, not the last stage, on set k of the activations (0
	 * where none are kept): tokens (the first) or x into y. */
	int (*forward)(const struct cg_model *m, void *ws, int k,
	               const int *tokens, const float *x, int B, float *y);
	/* On set k: forward again (unless kept: set k's last forward
	 * pass's, of the same input), then backward from the loss of
	 * targets and weight (the last stage, whose forward pass this is:
	 * *loss) or from dy; grad += the stage's share, dx (not the first)
	 * = d(loss)/d(x). */
	int (*backward)(const struct cg_model *m, void *ws, int k,
	                const int *tokens, const float *x, const int *targets,
	                const float *weight, const float *dy, int B,
	                float *grad, float *dx, double *loss);
	/* Text archs that sample across stages (else NULL): a generator of
	 * layers [a, b) of m, next the link onward (NULL for the last
	 * stage), *V the logits' length; NULL with a message. */
	void *(*gen_new)(const struct cg_model *m, int a, int b,
	                 const struct cg_stage_link *next, int *V);
	void (*gen_free)(void *gen);
	/* The first stage: sample_text's contract through gen. */
	long (*gen_sample)(void *gen, int cond, const uint8_t *prompt,
	                   size_t plen, const struct cg_sampler *s,
	                   struct cg_rng *r, int (*emit)(void *ctx, int byte),
	                   void *ctx);
	/* A later stage: rows x [n, C] at p0 in, the logits [V] out
	 * (struct cg_stage_link's contract). */
	int (*gen_rows)(void *gen, int p0, const float *x, int n,
	                float *logits);
};

/* How a text model picks each next byte. */
struct cg_sampler {
	double temperature; /* 0: greedy (argmax) */
	int top_k;	    /* keep the k most likely tokens; 0: all */
	double top_p;	    /* keep the smallest set of mass >= top_p; 1: all */
	size_t max_bytes;   /* stop after this many bytes */
};

/* How a diffusion model draws images (cg-sample's --guidance, --steps,
 * --sampler); an arch reads it only where its diffusion flag is set.
 * All zero: the arch's defaults. */
enum cg_diffusion_sampler {
	CG_SAMPLER_DEFAULT,
	CG_SAMPLER_DDPM, /* ancestral: fresh noise at every step */
	CG_SAMPLER_DDIM, /* deterministic after the starting noise */
};
struct cg_diffusion_opts {
	double guidance; /* classifier-free guidance weight w >= 0 */
	int steps;       /* denoising steps; 0: the arch's default */
	enum cg_diffusion_sampler sampler;
	/* interval 1: guidance only at the steps from timesteps in
	 * [glo, ghi] x (T - 1) (0 the clean image's end, 1 pure noise's);
	 * 0: at every step */
	int interval;
	double glo, ghi;
};

/* Called with each generated byte as soon as it is drawn; a nonzero
 * return stops generation (and is not an error). */
typedef int (*cg_emit_fn)(void *ctx, int byte);

/*
 * Figures one batch (or a whole evaluation) produced, all means.  Image
 * archs give the objective per example.  Text archs give it in nats per
 * scored token, bits_per = loss / ln 2 in bits per byte (end-of-text
 * counted as a byte), and part[0] = scored tokens per example, which
 * lib/train/train.c uses to weigh batches by their tokens.
 */
struct cg_metrics {
	double loss;     /* the training objective */
	double part[3];	 /* named parts of it (cvae: rec, kl), or named
			  * figures beside it (cclf: acc, the share
			  * classified as their condition) */
	uint64_t n;	 /* examples */
	double bits_per; /* text: bits per byte; else 0 */
	/* Distilled (struct cg_distill): the data term and the teacher
	 * term the loss mixes, means as loss is; else 0. */
	double data, teacher;
};

/*
 * Distillation toward a teacher: a model of the same arch whose outputs
 * on the same inputs are soft targets.  The loss is (1 - alpha) times the
 * data term plus alpha times the teacher term, tau^2 times the KL of the
 * student's output distribution at temperature tau to the teacher's
 * (each arch's distill hook says which distributions).
 */
struct cg_distill {
	struct cg_model *teacher;
	double alpha; /* the teacher term's weight, in [0, 1] */
	double tau;   /* the temperature, > 0 */
	/*
	 * Step distillation (diffusion archs, which take nothing else): 0
	 * for none, else N >= 2, one step of the student on its N-step DDIM
	 * grid learns two of the teacher's on the grid of 2N - 1 steps
	 * (cddpm.h's cg_cddpm_visited), the teacher guided by guidance.
	 */
	int steps;
	double guidance;
};

/* What kind of value an architecture's config option takes. */
enum cg_arch_opt_type {
	CG_ARCH_OPT_INT,   /* a whole number in [min, max] */
	CG_ARCH_OPT_BOOL,  /* 0 or 1; the option alone means 1 */
	CG_ARCH_OPT_FLOAT, /* a finite number in [min, max] */
};

/*
 * One config option an architecture declares: cg-init's --NAME, and the
 * config key of the same name.  cg-init parses, checks and documents it
 * from this row alone; the value is stored as a JSON number.
 */
struct cg_arch_opt {
	const char *name; /* [a-z0-9-]+, not one of cg-init's own options */
	enum cg_arch_opt_type type;
	double dflt, min, max; /* bool: 0 or 1, [0, 1] */
	const char *help;      /* one line, without the default */
};

#define CG_ARCH_MAX_OPTS 32

/*
 * An architecture: a row of the registry (lib/model/registry.c says how to add
 * one).  Programs never name an architecture; they find it by the name a
 * model file or cg-init's -a gives, and meet it only through this struct.
 */
/*
 * One key of an architecture's config as its code reads it: the value
 * under name goes to offset in the arch's config struct, an int (for an
 * INT or BOOL option) or a double (FLOAT).  An option of the same name
 * gives its type and range; a key no option sets (one config_from_shard
 * adds) is a whole number in [min, max].  optional: models made before
 * the key existed lack it, and get absent.  cg_arch_read_config reads
 * the whole table, so a key is checked in this one place.
 */
struct cg_arch_key {
	const char *name;
	size_t offset;
	double min, max; /* a key no option sets */
	int optional;
	double absent;
};

/* The largest config struct an arch may declare (config_size). */
#define CG_ARCH_MAX_CONFIG 1024

struct cg_arch {
	const char *name;
	const char *summary;        /* one line for help: what it models */
	const char *loss_name;	    /* the objective's name in reports */
	const char *part_names[3];
	/*
	 * The config options, in the order their keys follow the keys
	 * config_from_shard adds: the manifest's key order is part of a
	 * model's bytes.
	 */
	const struct cg_arch_opt *opts;
	int nopts;
	/*
	 * The config as the arch's code reads it (cg_arch_read_config):
	 * nkeys rows, every option among them, into a struct of config_size
	 * bytes, which check_config (may be NULL) then checks as a whole
	 * (what one key's range cannot say: sizes that must divide, sums
	 * that must not overflow).  nkeys 0: the arch reads its config
	 * itself.
	 */
	const struct cg_arch_key *keys;
	int nkeys;
	/*
	 * Options (NULL-terminated names, or NULL for none) left out of a
	 * new model's config where they have their default, so that the
	 * model is byte for byte one made before the option existed: each
	 * one's key optional, its absent value the default.
	 */
	const char *const *quiet;
	size_t config_size;
	int (*check_config)(const void *config);
	/*
	 * The config keys and manifest entries that come from data shard s
	 * for arch a (this one): adds them to config (before the options'
	 * keys) and to extra (after "conditions", which the caller adds).
	 * Returns 0, or -1 with a message when s does not suit the arch.
	 * Image archs: cg_arch_image_from_shard (arch/common.h).
	 */
	int (*config_from_shard)(const struct cg_arch *a,
	                         const struct cg_shard *s, struct cJSON *config,
	                         struct cJSON *extra);
	/*
	 * The number of conditions the model was built for (its config
	 * fixes what a condition index selects), or -1 with a message.
	 */
	int (*nconds)(const struct cg_model *m);
	/*
	 * Optional (NULL: the arch's models cannot take other conditions):
	 * carry the weights of old into m, a new model of this arch whose
	 * config is old's but for what the conditions fix
	 * (cg_model_recondition): map [m's nconds] gives, for each of m's
	 * conditions, its index in old, or -1 for one old lacks, whose
	 * weights stay as m's init made them; every other weight is old's.
	 * Returns 0, or -1 with a message.
	 */
	int (*recondition)(struct cg_model *m, const struct cg_model *old,
	                   const int *map);
	/*
	 * Image models: the shape of one sample, {height, width, channels},
	 * from the manifest and checked against the config (see
	 * cg_arch_image_shape).  Returns 0 or -1 with a message.  NULL for
	 * text models.
	 */
	int (*image_shape)(const struct cg_model *m, int shape[3]);
	/*
	 * Check m->config and set m->nparams, m->views, m->nviews, and
	 * the parameter groups if the arch has several
	 * (cg_model_set_groups).  Returns 0 or -1 with a message.
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
	 * DP-SGD (NULL: not done for the arch, and refused): as batch, but
	 * grad [nparams] += the sum over the examples of each one's own
	 * gradient clipped to L2 norm clip (a sum, not a mean), made
	 * without a pass per example; out as batch's.  Neither chunks nor
	 * checkpoints (the caller passes at most the batch it planned).
	 * Returns 0, or -1 with a message (a config the arch cannot clip
	 * per example among them).
	 */
	int (*dp_batch)(struct cg_model *m, const struct cg_shard *s,
	                const uint64_t *ex, int B, uint64_t noise_seed,
	                double clip, float *grad, struct cg_metrics *out);
	/*
	 * Image models: n images out [n, pixels] in [0, 1] (pixel
	 * probabilities / intensities) for conditions cond [n]; latent noise
	 * drawn from r and scaled by temperature.  NULL for text models.
	 */
	int (*sample_image)(struct cg_model *m, const int *cond, int n,
			    double temperature, struct cg_rng *r, float *out);
	/* Image models that denoise: 1 where sample_image follows
	 * m->diffusion (so cg-sample takes --guidance, --steps and
	 * --sampler for it), else 0. */
	int diffusion;
	/* 1 where the objective is an adversarial loss (no likelihood:
	 * cg-eval restates none of it as bits/dim), else 0. */
	int adversarial;
	/*
	 * Text models: continue after condition cond and the prompt bytes
	 * prompt[0..plen) (plen may be 0), drawing from r as s says, until
	 * end-of-text or s->max_bytes; each byte goes to emit at once.
	 * Returns the number of bytes generated, or -1 with a message.  NULL
	 * for image models.
	 */
	long (*sample_text)(struct cg_model *m, int cond, const uint8_t *prompt,
			    size_t plen, const struct cg_sampler *s,
			    struct cg_rng *r, cg_emit_fn emit, void *ctx);
	/* Release the workspace the arch hung on m (m->ws). */
	void (*free_ws)(struct cg_model *m);
	/*
	 * Classifiers of images (NULL for the generative archs, which
	 * have a sample hook instead): for n images x [n, pixels] in
	 * [0, 1], read as the arch reads a shard's (byte / 255), the
	 * logits over the conditions logits [n, nconds] and the features
	 * feat [n, nfeatures] (the activations the last layer reads: what
	 * cg-eval --judge compares between generated and real images);
	 * either may be NULL.  Returns 0 or -1 with a message.
	 */
	int (*classify)(struct cg_model *m, const float *x, int n,
	                float *logits, float *feat);
	/* Classifiers: the width of classify's features, or -1 with a
	 * message. */
	int (*nfeatures)(const struct cg_model *m);
	/*
	 * Bytes of workspace that batches of B examples take, run in
	 * equal chunks of at most chunk examples (as few chunks as that
	 * allows, their sizes evened out; chunk 0: the arch's default),
	 * with activation checkpointing when checkpoint != 0 (an arch
	 * without it, checkpoints 0, counts as if it were 0); 0 with a
	 * message if impossible.  NULL when the arch neither chunks nor
	 * checkpoints (its batch function then ignores m->chunk and
	 * m->checkpoint).
	 */
	size_t (*ws_bytes)(struct cg_model *m, int B, int chunk,
			   int checkpoint);
	/* 1 where batch recomputes activations when m->checkpoint says
	 * so (ws_bytes counts it), else 0: the planner then only chunks. */
	int checkpoints;
	/*
	 * Optional, with checkpoints 1 (NULL: every model of the arch
	 * checkpoints): 1 where m's batch recomputes activations (its
	 * form has blocks to recompute), else 0 with a message saying
	 * which form does; the planner then only chunks m, and refuses
	 * checkpointing asked for.
	 */
	int (*can_checkpoint)(const struct cg_model *m);
	/*
	 * Inference (cg_model_read_infer): whether view i of m, stored in
	 * a file as dtype dt, may stay so.  CG_KEEP_PRODUCT (1): the arch's
	 * forward pass and sampling multiply it through cg_qlinear_forward
	 * as m->stored gives it (kept only where it is a matrix the
	 * product takes: cg_wmat_ok).  CG_KEEP_ANY (2): they take it
	 * through a weight set (nn/qlinear.h's cg_wset: multiplied as
	 * stored where the product takes it, else decoded one layer at a
	 * time), so any float dtype stays as stored, but for a pruned
	 * model's dtypes that do not encode 0 exactly, decoded whole.  0:
	 * decoded to f32.  NULL: every view is decoded to f32.
	 */
	int (*keeps)(const struct cg_model *m, int i, enum cg_dtype dt);
	/*
	 * Optional (NULL: Wanda's importance is not available): what
	 * reaches the prunable views (cg_model_prunable, the Linear
	 * layers' weights [OC, IC]) on examples ex[0..B) of s, noise drawn
	 * as batch draws it.  For each prunable view in layout order, its
	 * IC entries of sq get, for input column j, the sum over every row
	 * of input the layer multiplies (an example, or a position of a
	 * sequence that is not padding) of x_j squared: sq [the sum of IC
	 * over the prunable views] +=, in double.  *rows (may be NULL) +=
	 * the rows of input counted per layer.  Returns 0 or -1 with a
	 * message.
	 */
	int (*input_sq)(struct cg_model *m, const struct cg_shard *s,
	                const uint64_t *ex, int B, uint64_t noise_seed,
	                double *sq, uint64_t *rows);
	/*
	 * Distillation (NULL: the arch cannot learn from a teacher).
	 * check_teacher: whether t can teach m (same data: vocabulary,
	 * conditions, inputs); 0, or -1 with a message.  distill: batch's
	 * work with the loss of struct cg_distill; out->data and
	 * out->teacher are the two terms.  The teacher only runs forward,
	 * with its own workspace (on t->ws, in chunks of at most t->chunk,
	 * checkpointed when t->checkpoint is set), and draws no randomness,
	 * so the split among workers changes nothing, as for batch.
	 * teacher_bytes: the bytes that takes for batches of B in chunks
	 * of chunk (as ws_bytes; NULL where it is small).
	 */
	int (*check_teacher)(const struct cg_model *m, const struct cg_model *t);
	int (*distill)(struct cg_model *m, const struct cg_distill *d,
		       const struct cg_shard *s, const uint64_t *ex, int B,
		       uint64_t noise_seed, float *grad, struct cg_metrics *out);
	size_t (*teacher_bytes)(struct cg_model *t, int B, int chunk);
	/* Optional (NULL: the arch's models are not split into stages). */
	const struct cg_stage_ops *stages;
	/*
	 * Structured pruning (NULL: the arch's models do not shrink;
	 * cg_prune_shrink drives it).  structures: the kinds of structure
	 * the arch can remove, NULL-terminated, at most
	 * CG_ARCH_MAX_STRUCTURES.  shrink: for each kind k with remove[k]
	 * > 0 (each in [0, 1)), in every layer that has them, the
	 * round(remove[k] n) of its n structures of kind k that matter
	 * least (at most n - 1), by the arch's importance, ties to the
	 * lower index; the same every call on the same weights.  Then:
	 * with config (a copy of m's) and small NULL, set in config the
	 * sizes of the smaller model; with small (a model of that config),
	 * copy into small->params the weights m keeps; with both NULL,
	 * zero in m->params the weights the removed structures are made
	 * of, so that m computes what the smaller model computes.  Returns
	 * 0, or -1 with a message.
	 */
	const char *const *structures;
	int (*shrink)(struct cg_model *m, const double *remove,
		      struct cJSON *config, struct cg_model *small);
};

/* The most kinds of structure (struct cg_arch's structures) an arch
 * names. */
#define CG_ARCH_MAX_STRUCTURES 8

/* What struct cg_arch's keeps answers. */
enum { CG_KEEP_NONE, CG_KEEP_PRODUCT, CG_KEEP_ANY };

/* The architecture called name, or NULL with a message. */
const struct cg_arch *cg_arch_find(const char *name);
/* How many architectures there are, and the i-th (0 <= i < count), the
 * table's in table order, then registered ones in registration order. */
int cg_arch_count(void);
const struct cg_arch *cg_arch_at(int i);
/*
 * Make the n rows of t (which must outlive every use) the table of
 * built-in architectures, listed before the registered ones; the model
 * layer names no architecture, and lib/arch/all.c's cg_arch_all() hands
 * its table in here.  Each row is checked (cg_arch_check), and so again
 * is each architecture registered before: one that clashes with the
 * table leaves the registry.  Returns 0, or -1 with a message.  Calling
 * it again with the same table does nothing.
 */
int cg_arch_install(const struct cg_arch *const *t, int n);
/*
 * Add an architecture that is not in the table (a test's, a plug-in's),
 * e.g. from a constructor function.  a must outlive every use.  Returns
 * 0, or -1 with a message when a fails cg_arch_check or the registry is
 * full.
 */
int cg_arch_register(const struct cg_arch *a);
/*
 * Whether a is well formed and fits beside the registered ones: a new
 * name, the callbacks every arch needs, an option table of valid,
 * distinct names whose defaults lie in range, and options named as
 * another arch's take an argument as those do.  Returns 0 or -1.
 */
int cg_arch_check(const struct cg_arch *a);

/*
 * m's config as arch a reads it (a->keys) into out (a->config_size
 * bytes): each key present (or optional) and in its range, then
 * a->check_config.  Returns 0, or -1 with the message 'config: "KEY"
 * missing or out of range' or check_config's.
 */
int cg_arch_read_config(const struct cg_arch *a, const struct cJSON *config,
                        void *out);

/* The option of a called name, or NULL. */
const struct cg_arch_opt *cg_arch_opt_find(const struct cg_arch *a,
                                           const char *name);
/*
 * arg as a value of option o (arg NULL: the option given alone, allowed
 * for a bool only) into *out; -1 with a message naming --NAME otherwise.
 */
int cg_arch_opt_parse(const struct cg_arch_opt *o, const char *arg,
                      double *out);
/*
 * A new model's config and manifest extras for arch a and data shard s:
 * extra gets "conditions" (s's vocabulary) and what a adds; config the
 * keys from s, then each option's value vals[i] (vals NULL: defaults),
 * in table order.  The caller owns *config and *extra (cg_model_create
 * takes them).  Returns 0, or -1 with a message.
 */
int cg_arch_config(const struct cg_arch *a, const struct cg_shard *s,
                   const double *vals, struct cJSON **config,
                   struct cJSON **extra);

#endif
