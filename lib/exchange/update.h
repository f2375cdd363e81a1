/*
 * exchange/update.h - the update file (kinds "grad" and "delta"): writing it,
 * reading it, and the rules an update must satisfy.
 *
 * An update is what a worker call emits and what cg-reduce and cg-apply
 * consume: one f32 tensor per view of the model it was computed from,
 * and a manifest saying which model that was ("base": the digest of its
 * parameters and its step), how much it weighs in a mean ("weight",
 * falling back to "samples"), how many examples and worker outputs it
 * sums up ("samples", "inputs") and its mean loss.  Every rule about
 * those fields is here, once: a program that meets an update reads it
 * with cg_update_read and asks this module whether it may use it.
 */
#ifndef CG_UPDATE_H
#define CG_UPDATE_H

/* The most slices a reduction is cut into (cg-reduce --slice). */
#define CG_SLICE_MAX 4096

#include <stdint.h>

#include "cg.h"
#include "exchange/ucodec.h"

struct cg_model;
struct cg_mask_info;

enum cg_update_kind { CG_UPDATE_GRAD, CG_UPDATE_DELTA };

/* An update read and parsed; its manifest fields, checked. */
struct cg_update {
	struct cg_file *file; /* owned: manifest and tensors */
	char *name;           /* for messages: the path, or "(stdin)" */
	enum cg_update_kind kind;
	char base[65];      /* hex SHA-256 of the base model's parameters */
	uint64_t base_step; /* the base model's step */
	double samples;     /* examples it was computed from */
	double weight;      /* "weight", or "samples" where absent */
	double loss;        /* its mean loss (0 where absent) */
	uint64_t inputs;    /* worker outputs it sums up (1 where absent) */
	/* The manifest's "partial": true when the update carries only some
	 * of its model's views (cg-train-step --freeze): those it leaves
	 * out are frozen, their change zero, and a model's step leaves
	 * them as they are.  Without it every view must be there. */
	int partial;
	/* A pipeline stage's update (model/stage.h): the manifest's
	 * "stage", stage index of count, layers [a, b); count 0 for an
	 * update of a whole model.  Its views are the stage's, its base the
	 * stage's digest (cg_stage_digest), and only that stage takes it. */
	struct {
		int index, count, a, b;
	} stage;
	/* The manifest's "slice": {"index": I, "of": N} when the update
	 * carries only slice I of N of its tensors (slice.h: a reduction
	 * of one coordinator of N); slice_n is 0 for a whole update. */
	int slice_i, slice_n;
	/* Its dense views and the codec they are stored in (ucodec.h):
	 * every number of an update is read through these. */
	struct cg_uspec spec;
	struct cg_uview *views;
	int nviews;
	/* A masked update (secagg.h): its round, peers and key; its views
	 * hold no values, and only a reducer of every peer's update reads
	 * them.  NULL for every other update. */
	struct cg_mask_info *mask;
};

/* "grad" or "delta". */
const char *cg_update_kind_name(enum cg_update_kind k);

/*
 * The file a grad or delta call emits for model base: one f32 tensor per
 * view of buf [nparams] (borrowed: buf must outlive the file) and a
 * manifest with arch, base (digest and step of base), samples, weight
 * (what a mean weighs it by), loss and inputs 1.  NULL with a message.
 */
struct cg_file *cg_update_new(const struct cg_model *base,
                              enum cg_update_kind kind, const float *buf,
                              double samples, double weight, double loss);

/*
 * The same as cg_update_new but for the views where skip [nviews] (NULL:
 * none) is nonzero, which the file leaves out: its manifest then says
 * "partial".  NULL with a message, also when skip leaves out every view.
 */
struct cg_file *cg_update_new_part(const struct cg_model *base,
                                   enum cg_update_kind kind, const float *buf,
                                   double samples, double weight, double loss,
                                   const uint8_t *skip);

/*
 * The update of stage st of base (model/stage.h): one f32 tensor per
 * view of the stage from buf [nparams] (borrowed), the manifest of
 * cg_update_new with the stage's digest as base and the stage's
 * "stage".  NULL with a message.
 */
struct cg_stage;
struct cg_file *cg_update_new_stage(const struct cg_model *base,
                                    const struct cg_stage *st,
                                    enum cg_update_kind kind, const float *buf,
                                    double samples, double weight, double loss);

/* "stage 2 of 3" for u's stage, or "a whole model" into buf [n]. */
const char *cg_update_stage_name(const struct cg_update *u, char *buf,
                                 size_t n);

/* The views of m, for an encoder: *out [m->nviews], the caller frees. */
int cg_update_model_views(const struct cg_model *m, struct cg_uview **out);
/* The same less those where skip [m->nviews] (NULL: none) is nonzero:
 * *n of them, in m's order.  0, or -1 with a message. */
int cg_update_views_of(const struct cg_model *m, const uint8_t *skip,
                       struct cg_uview **out, int *n);
/*
 * The same as cg_update_new with buf encoded under s (ucodec.h): sent
 * [nparams] (may be NULL) gets what a reader decodes, left [nparams]
 * (may be NULL) buf minus it, what the file did not carry.  digest (may
 * be NULL: computed) is base's cg_model_digest, when the caller has it.
 * NULL with a message.
 */
struct cg_file *cg_update_encode(const struct cg_model *base,
                                 const unsigned char *digest,
                                 enum cg_update_kind kind, const float *buf,
                                 double samples, double weight, double loss,
                                 const struct cg_uspec *s, struct cg_uenc *e,
                                 float *sent, float *left);
/* cg_update_encode leaving out the views where skip [nviews] (NULL:
 * none) is nonzero, as cg_update_new_part does. */
struct cg_file *cg_update_encode_part(const struct cg_model *base,
                                      const unsigned char *digest,
                                      enum cg_update_kind kind,
                                      const float *buf, double samples,
                                      double weight, double loss,
                                      const struct cg_uspec *s,
                                      struct cg_uenc *e, float *sent,
                                      float *left, const uint8_t *skip);
/*
 * A dense update file f (a reduction's result) encoded under s, fitted
 * to budget bytes when budget > 0, with f's manifest: a new file, f left
 * as it is.  No error feedback: what s loses is lost.  NULL with a
 * message.
 */
struct cg_file *cg_update_recode(const struct cg_file *f,
                                 const struct cg_uspec *s, uint64_t budget);
/*
 * Take over f (freed in all cases) as an update named name in messages:
 * NULL with a message starting with name when f is not a grad or delta
 * or has no base digest.  The caller frees the result (cg_update_free).
 */
struct cg_update *cg_update_from_file(struct cg_file *f, const char *name);
/*
 * Whether f, of any kind, is an update cg_update_from_file takes: the
 * same checks (kind, base digest, codec, layout, every view bound to its
 * tensors and nothing left over, index lists, scales, the mask of a
 * masked update), f left as it is.  What --verify asks of a grad or
 * delta.  Returns 0, or -1 with a message that does not name the file.
 */
int cg_update_file_check(const struct cg_file *f);
/* Read path ("-": stdin) as cg_file_read does (mapped where it can) and
 * parse it; NULL with a message naming the file. */
struct cg_update *cg_update_read(const char *path);
void cg_update_free(struct cg_update *u);

/*
 * The weight rule: a mean needs a positive, finite weight and a positive
 * sample count.  Returns 0, or -1 with a message starting with u's name.
 */
int cg_update_check_weight(const struct cg_update *u);

/*
 * The staleness rule, in one place.  The staleness of u against a model
 * is the model's step now minus u's base step.  base_hex and base_step
 * describe the model (whose: how a message names it, e.g. a path or "the
 * first input's").
 *
 * cg_update_staleness accepts an update computed from the model itself
 * (digest equal: 0) or from an earlier step (the staleness, > 0: the
 * digest of an older model cannot be checked against this one, and a
 * caller that has it checks it apart); an update from a later step, or
 * from another model of the same step, is refused.  Returns the
 * staleness (>= 0), or -1 with a message starting with u's name.
 *
 * cg_update_check_base_of accepts only an update computed from the model
 * itself (staleness 0): synchronous rounds, and a reduction that is not
 * told which model it is for.
 */
int64_t cg_update_staleness(const struct cg_update *u, const char base_hex[65],
                            uint64_t base_step, const char *whose);
int64_t cg_update_check_base_of(const struct cg_update *u,
                                const char base_hex[65], uint64_t base_step,
                                const char *whose);
/* The same against model m (its digest, cg_model_digest), named mname. */
int64_t cg_update_check_base(const struct cg_update *u,
                             const struct cg_model *m, const char *mname);

/* For a model file f, the hex digest that an update computed from it
 * carries as its base (what cg-inspect shows); -1 with a message when f
 * is no model of a known arch. */
int cg_update_base_of_model(const struct cg_file *f, char hex[65]);

/*
 * The floats of tensor t when it is f32, or NULL with a message naming
 * it.  Readers of updates go through cg_update_decode instead.
 */
const float *cg_update_f32(const struct cg_tensor *t);
/*
 * Elements [lo, lo + n) of u's view i into out [n], decoded through its
 * codec: the one place where reduce and apply read an update's numbers.
 * cg_update_view_f32 gives them where they lie when they are stored as
 * f32 (NULL otherwise), which a reader may use instead.
 */
void cg_update_decode(const struct cg_update *u, int i, uint64_t lo, size_t n,
                      float *out);
const float *cg_update_view_f32(const struct cg_update *u, int i);

/*
 * Copy u's tensors into buf [nparams] in m's layout, checking that every
 * view is there with its shape (a partial update: that each of its views
 * is one of m's, and the others are zeros in buf; a stage's update: the
 * same, but the others are left as they are in buf); -1 with a message
 * starting with u's name otherwise, and for a masked update, whose values
 * no one reader has.
 */
int cg_update_get(const struct cg_update *u, const struct cg_model *m,
                  float *buf);
/* Which of m's views u carries: present [m->nviews] set to 1 or 0.
 * Returns how many it carries. */
int cg_update_present(const struct cg_update *u, const struct cg_model *m,
                      uint8_t *present);

#endif
