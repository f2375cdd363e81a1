/*
 * nn/optim.h - optimizer steps over flat parameter buffers.
 *
 * SGD, momentum, Adam and AdamW as PyTorch defines them, learning-rate
 * schedules, global-norm clipping, and DiLoCo's outer Nesterov step.  The
 * loops see only float arrays: a model calls them once per view so that
 * weight decay can skip biases.
 */
#ifndef CG_OPTIM_H
#define CG_OPTIM_H

#include <stddef.h>
#include <stdint.h>

struct cg_view;

/*
 * A parameter group: the range [off, off + n) of a model's flat buffer
 * (and of its gradient and moment buffers, which share the layout), made
 * of the views views[view0 .. view0 + nviews), stepped by the optimizer
 * with a step count of its own, or never when frozen.  A GAN's generator
 * and discriminator are two groups; a frozen teacher is a third.
 */
#define CG_GROUP_NAME 32
struct cg_group {
	char name[CG_GROUP_NAME];
	size_t off, n;
	int view0, nviews;
	uint64_t opt_t; /* steps this group has taken */
	int frozen;     /* never stepped: its parameters stay as they are */
};

enum cg_opt_kind { CG_OPT_SGD, CG_OPT_MOMENTUM, CG_OPT_ADAM, CG_OPT_ADAMW };
enum cg_sched { CG_SCHED_CONSTANT, CG_SCHED_COSINE };

struct cg_optim {
	enum cg_opt_kind kind;
	float lr;
	float beta1, beta2, eps; /* Adam family */
	float momentum;		 /* SGD with momentum */
	float wd;		 /* decoupled for AdamW, L2 otherwise */
	enum cg_sched sched;
	uint64_t warmup; /* linear warm-up steps (any schedule) */
	uint64_t total;	 /* cosine: steps to decay over */
	float lr_min;	 /* cosine floor */
};

/* PyTorch's defaults for kind (lr 1e-3 for the Adam family, 1e-2
 * otherwise; betas 0.9/0.999, eps 1e-8, momentum 0.9, wd 0 except AdamW's
 * 0.01). */
void cg_optim_defaults(struct cg_optim *o, enum cg_opt_kind kind);
/* Parse "sgd", "momentum", "adam", "adamw"; -1 with a message if unknown. */
int cg_optim_parse(const char *s, enum cg_opt_kind *out);
const char *cg_optim_name(enum cg_opt_kind k);
/* Whether kind keeps the first (m) and second (v) moment arrays. */
int cg_optim_needs_m(enum cg_opt_kind k);
int cg_optim_needs_v(enum cg_opt_kind k);

/* Learning rate at step t (1-based: the step being taken). */
float cg_optim_lr(const struct cg_optim *o, uint64_t t);

/*
 * One step on N parameters.  p [N] updated in place, g [N] the gradient,
 * m [N] and v [N] the moments (NULL where the kind does not use them),
 * t the 1-based step, decay 0 to skip weight decay for this slice.
 */
void cg_optim_step(const struct cg_optim *o, uint64_t t, float *p,
		   const float *g, float *m, float *v, size_t N, int decay);
/*
 * The same step on every view of a model's flat buffers p, g, m, v (each
 * view's slice [off, off+n), weight decay where its decay is 1), in one
 * pass shared among threads.  With zero_g, g is all zeros afterwards (each
 * element cleared once read), ready for the next step's accumulation.
 */
void cg_optim_step_views(const struct cg_optim *o, uint64_t t, float *p,
			 float *g, float *m, float *v,
			 const struct cg_view *views, int nviews, int zero_g);

/*
 * One step of every group that is not frozen, each with its own count
 * (groups[i].opt_t is incremented, then used as that group's t), over
 * the model's flat buffers as cg_optim_step_views takes them.  With
 * zero_g, g is all zeros afterwards, frozen groups' ranges included.
 * One group over all views is exactly cg_optim_step_views.
 */
void cg_optim_step_groups(const struct cg_optim *o, struct cg_group *groups,
                          int ngroups, float *p, float *g, float *m, float *v,
                          const struct cg_view *views, int zero_g);

/* Set the ranges of frozen groups of g to zero: what clipping and
 * stepping must not see. */
void cg_optim_mask_frozen(float *g, const struct cg_group *groups, int ngroups);

/*
 * Scale g [N] so that its L2 norm is at most maxnorm (skip if maxnorm <=
 * 0).  Returns the norm before clipping.
 */
double cg_clip_norm(float *g, size_t N, double maxnorm);

/*
 * DiLoCo outer step from a mean delta (new - old weights of the workers):
 * the outer gradient is -delta; mom = mu*mom + g; p -= lr*(g + mu*mom)
 * (Nesterov, as PyTorch's SGD with nesterov=True).  p, delta, mom [N].
 */
void cg_outer_nesterov(float *p, const float *delta, float *mom, size_t N,
		       float lr, float mu);

#endif
