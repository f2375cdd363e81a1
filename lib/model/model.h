/*
 * model/model.h - a model in memory: one flat parameter buffer, named views,
 * its architecture's operations, and the optimizer state that travels with it.
 *
 * Programs meet architectures only through struct cg_arch; everything that
 * reduces, applies, prunes or quantizes works on the flat buffer.  A model
 * file (kind "model") holds one f32 tensor per view, and, when an optimizer
 * has run, flat tensors "opt.m", "opt.v" (moments) and "outer.mom" (the
 * DiLoCo outer momentum).  A pruned model also holds a mask: which of its
 * weights are pruned, to stay exactly zero through any later training
 * (lib/model/mask.c; cg(7) names its tensors "mask.VIEW").
 *
 * Parameters come in groups (struct cg_group, optim.h), each a
 * contiguous run of views with its own optimizer step count, perhaps
 * frozen.  An arch's layout may declare them (cg_model_set_groups); one
 * that does not gets one group "all" over everything.  The moments stay
 * flat buffers over every group.  On disk one group is the manifest's
 * "opt_t"; several are its "groups" array (see model.c).
 */
#ifndef CG_MODEL_H
#define CG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "data/shard.h"
#include "model/lora.h"
#include "model/mask.h"
#include "model/registry.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "nn/qlinear.h"

struct cJSON;

struct cg_model {
	const struct cg_arch *arch;
	struct cJSON *manifest; /* owned: arch, config, conditions, ... */
	struct cJSON *config;	/* borrowed from manifest */
	size_t nparams;
	float *params; /* [nparams], 64-byte aligned */
	int nviews;
	struct cg_view *views;
	uint64_t step; /* optimizer steps applied */
	/* Parameter groups in layout order, covering every view; each
	 * keeps its optimizer step count (opt_t). */
	int ngroups;
	struct cg_group *groups;
	/* Optimizer state; NULL when absent. */
	float *opt_m, *opt_v, *outer_mom; /* [nparams] each */
	/* A coordinator's downlink residual: what the compressed changes
	 * it published have not carried yet (cg_apply_publish). */
	float *ef_down; /* [nparams] or NULL */
	/* The mask: bit i (byte i / 8, bit i % 8) set where parameter i is
	 * kept, clear where it is pruned, set past nparams; NULL: nothing
	 * pruned.  Only prunable views have clear bits. */
	uint8_t *mask; /* [(nparams + 7) / 8] or NULL */
	void *ws;			  /* arch workspace */
	int ws_batch;			  /* its batch capacity */
	/* How sample_image denoises, where the arch's diffusion flag is
	 * set (zero: its defaults). */
	struct cg_diffusion_opts diffusion;
	/* How the arch may spend memory on a batch (see ws_bytes). */
	int checkpoint;	 /* recompute activations instead of keeping them */
	int chunk;	 /* most examples through the model at once; 0: any */
	/*
	 * A model read for inference (cg_model_read_infer), else NULL:
	 * stored [nviews] gives each view its dtype and bytes, those the
	 * arch keeps pointing into src (the file, owned: mapped or read),
	 * the others CG_F32 at params + off.  The parameters of a kept view
	 * are not in params (they read as zeros), so such a model has no
	 * gradient, digest or file of its own.
	 */
	struct cg_wmat *stored;
	struct cg_file *src;
	void *pack; /* the stored matrices packed for the kernels, or NULL */
	size_t params_map; /* nonzero: params is a mapping of that many bytes */
	/* Low-rank adapters (model/lora.h; the manifest's "lora"), their
	 * views after the arch's; NULL: none. */
	struct cg_lora *lora;
};

/* --------------------------------------------------------------- models */

/*
 * A new model of arch with config (taken over: the model owns it) and
 * manifest extras (also taken over; may be NULL), weights from seed.
 * Returns NULL with a message.
 */
struct cg_model *cg_model_create(const char *arch, struct cJSON *config,
				 struct cJSON *extra, uint64_t seed);
/*
 * A model laid out from manifest man (taken over: arch, config, step),
 * its parameters zeroed: with lazy an anonymous mapping whose pages
 * take memory only once written (a pipeline stage's model writes its
 * range alone: model/stage.h).  NULL with a message.
 */
struct cg_model *cg_model_laid_out(struct cJSON *man, int lazy);
/* Read a model file; NULL with a message naming the file and tensor. */
struct cg_model *cg_model_read(const char *path);
/*
 * Read a model file to run it (cg-eval, cg-sample): the views the arch
 * keeps (struct cg_arch keeps) stay in the file's bytes, mapped where
 * the file is plain (so a q8_0 model costs about its file's size), and
 * only the others are decoded to f32; no optimizer state is read.  An
 * arch that keeps nothing gets the model cg_model_read gives, but for the
 * optimizer state.  Also chooses the kernels' path (cg_qpath_init).
 * NULL with a message naming the file and tensor.
 */
struct cg_model *cg_model_read_infer(const char *path);
/*
 * Whether model file f is one every model reader takes, f left as it is:
 * the checks cg_model_read and cg_model_read_infer make before they read
 * a value (the arch and its config, every view a tensor of its shape, the
 * optimizer tensors' sizes, the groups, the masks).  A model that names
 * no arch, or one this build lacks, has no layout to check: 0.  What
 * --verify asks of a model.  Returns 0, or -1 with a message that does
 * not name the file.
 */
int cg_model_file_check(const struct cg_file *f);
/* Build from a file already read (views must match the layout exactly);
 * f is left alone. */
struct cg_model *cg_model_from_file(const struct cg_file *f,
				    const char *display);
/* The model as a cg file (the caller frees it, before m: the file
 * borrows m's arrays), or NULL. */
struct cg_file *cg_model_file(struct cg_model *m);
/* The model with the moving average avg [nparams] (cg_train_opts' ema)
 * as its parameters, as a file: no optimizer's or outer loop's arrays
 * (they belong to the parameters trained, not to their average), the
 * manifest's "ema" its decay.  The file borrows avg and m's arrays;
 * NULL with a message. */
struct cg_file *cg_model_file_ema(struct cg_model *m, const float *avg,
                                  double decay);
/* Write atomically (path "-": stdout).  Returns 0 or -1. */
int cg_model_write(struct cg_model *m, const char *path, enum cg_compress c);
void cg_model_free(struct cg_model *m);

/* SHA-256 of the parameters' bytes: the identity of a grad's base. */
void cg_model_digest(const struct cg_model *m, unsigned char out[32]);
/* The same for the model in file f, copying only its parameters.
 * Returns 0, or -1 with a message when f is no model of a known arch. */
int cg_model_file_digest(const struct cg_file *f, unsigned char out[32]);

/*
 * Declare m's parameter groups (from an arch's layout, after the views):
 * g [n] with name, off, n and frozen set, in layout order, each the exact
 * range of a run of consecutive views, together covering every view.
 * view0, nviews are filled in and opt_t starts at 0.  Returns 0, or -1
 * with a message when the groups do not tile the views.
 */
int cg_model_set_groups(struct cg_model *m, const struct cg_group *g, int n);

/*
 * The optimizer state of f into m, which has f's layout: tensors
 * "opt.m", "opt.v", "outer.mom", "ef.down" where present and the groups' step
 * counts ("opt_t", or "groups" for several), replacing what m held.
 * Returns 0, or -1 with a message when they do not fit m (m may then
 * hold part of them).
 */
int cg_model_load_opt(struct cg_model *m, const struct cg_file *f);

/* Allocate zeroed optimizer arrays if missing.  Returns 0 or -1. */
int cg_model_ensure_opt(struct cg_model *m, int need_m, int need_v);
int cg_model_ensure_outer(struct cg_model *m);
int cg_model_ensure_ef_down(struct cg_model *m);

/*
 * The condition names of m's manifest ("conditions") into a new array
 * *names [*n] (the strings are the manifest's: free the array only),
 * checked as every reader needs: a list of at most
 * CG_SHARD_MAX_CONDITIONS strings, as many as the arch's config takes
 * (m->arch->nconds), which fixes what a condition index selects.  A
 * manifest without the list gives *names NULL and *n the arch's count,
 * or with need 1 an error.  Returns 0, or -1 with a message.
 */
int cg_model_conditions(const struct cg_model *m, int need, const char ***names,
                        int *n);
/*
 * Whether shard s names its conditions as m's manifest does (same names,
 * same order): a model trained on "Dress" = 3 must not be fed data where
 * 3 means something else.  A model without names accepts any.  Returns 0
 * or -1 with a message.
 */
int cg_model_check_conditions(const struct cg_model *m,
			      const struct cg_shard *s);

/*
 * A new model of old's arch and config for the conditions of shard s
 * (their names and number, as cg-init -d s would give them), holding
 * old's weights: those of a condition old has by name (in any order)
 * are old's, those of a condition old lacks as the arch's init makes
 * them from seed, those of a condition s lacks are dropped (struct
 * cg_arch's recondition).  Step 0, no optimizer state.  old must name
 * its conditions.  Returns the model (the caller frees it), or NULL with
 * a message.
 */
struct cg_model *cg_model_recondition(const struct cg_model *old,
                                      const struct cg_shard *s,
                                      uint64_t seed);

/*
 * old with low-rank adapters of rank r and scale alpha / r on the
 * matrices whose names match one of the fnmatch(3) patterns glob [n]
 * (model/lora.h): old's weights, A drawn from seed, B zero (the same
 * function as old), at step 0 without optimizer state.  Returns the
 * model (the caller frees it), or NULL with a message when old has
 * adapters already or a pruning mask, a pattern matches no matrix, or r
 * exceeds a target's sides.
 */
struct cg_model *cg_model_add_lora(const struct cg_model *old, int r,
                                   double alpha, const char *const *glob,
                                   int n, uint64_t seed);
/*
 * m with its adapters merged into its weights, W + (alpha / r) B A: a
 * plain model of m's arch, step and manifest but for "lora", without
 * optimizer state.  NULL with a message (m without adapters, out of
 * memory).
 */
struct cg_model *cg_model_merge_lora(const struct cg_model *m);

/*
 * Whether t can teach m on shard s (struct cg_distill): the same arch,
 * one that distills, t fit for s as m is (the same conditions) and what
 * the arch's check_teacher asks.  Returns 0, or -1 with a message.
 */
int cg_model_check_teacher(const struct cg_model *m, struct cg_model *t,
                           const struct cg_shard *s);

/*
 * The manifest's record of a step distillation, "distilled": {"steps":
 * N, "guidance": w}: m was taught to sample in N DDIM steps what its
 * teacher drew with guidance w in 2N - 1.  cg_model_distilled returns N
 * (0 where m has no record) and *guidance (0 without one), or -1 with a
 * message where the record is not two numbers in range (N a whole
 * number in [2, 100000], w finite and >= 0).  cg_model_set_distilled
 * writes it, in place of an earlier one; 0, or -1 out of memory.
 */
int cg_model_distilled(const struct cg_model *m, double *guidance);
int cg_model_set_distilled(struct cg_model *m, int steps, double guidance);

/*
 * Put the flat buffer buf [nparams] into file f as one f32 tensor per
 * view, borrowed (cg_file_add_ref: buf must outlive f), or decode from
 * f back into buf, checking names and shapes (a view of any dtype is
 * decoded to f32 through the codec table: cg_tensor_to_f32): -1 with a
 * message when a view is missing, misshapen or cannot be decoded).
 */
int cg_model_put_views(const struct cg_model *m, struct cg_file *f,
		       const float *buf);
int cg_model_get_views(const struct cg_model *m, const struct cg_file *f,
		       float *buf);

/*
 * Whether x [nparams], in m's layout (a gradient, a delta, parameters),
 * is finite: 0, or -1 with "tensor VIEW: element I is nan" (inf, -inf)
 * for the first element that is not, in layout order.
 */
int cg_model_check_finite(const struct cg_model *m, const float *x);
/* The same for m's parameters, then each optimizer array it holds
 * ("tensor opt.v: element I is inf"): what a model file would carry. */
int cg_model_check_all_finite(const struct cg_model *m);

#endif
