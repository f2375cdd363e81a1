/*
 * model/stage.h - a model cut by layers into pipeline stages, and the
 * stages joined back.
 *
 * Stage i of n holds layers [a, b) of an arch that can be split (struct
 * cg_stage_ops): views [v0, v1), the range [lo, hi) of the flat buffer,
 * and that range of the optimizer's moments.  Its file is a model file
 * (kind "model") with the whole model's manifest and a "stage" object
 * {"index", "count", "layers": [a, b]}, holding the views of its range
 * and "opt.m", "opt.v" and DiLoCo's "outer.mom" of hi - lo values;
 * readers of whole models refuse it.  Joining the n stage files of one
 * model gives the whole model's file again, byte for byte (the manifest
 * is the stages' own, less "stage").  Masks, adapters, several parameter
 * groups and the downlink's residual are not cut: such a model is
 * refused.
 *
 * A stage's update (a grad or delta of its views alone, exchange/update.h)
 * carries the same "stage" record, and as its base the stage's digest
 * (cg_stage_digest): the SHA-256 of its range of the parameters.
 */
#ifndef CG_STAGE_H
#define CG_STAGE_H

#include <stddef.h>

#include "model/model.h"

struct cJSON;

#define CG_STAGE_MAX 256

struct cg_stage {
	int index, count;
	int a, b;   /* layers */
	int v0, v1; /* views */
	size_t lo, hi;
	int T, C; /* the rows' shape (struct cg_stage_ops) */
};

/*
 * Stage index of count for model m: layers cut as evenly as they go,
 * the first stages taking one more where they do not divide.  Returns
 * 0, or -1 with a message (an arch that cannot be split, a model of
 * fewer layers, or one with what is not cut).
 */
int cg_stage_plan(const struct cg_model *m, int index, int count,
                  struct cg_stage *st);

/* Stage index of count for model m holding layers [a, b): the first
 * stage from layer 0, the last to the model's last, one layer each at
 * least.  0, or -1 with a message. */
int cg_stage_plan_at(const struct cg_model *m, int index, int count, int a,
                     int b, struct cg_stage *st);

/* Stage st of m as a file (the caller frees it before m: it borrows m's
 * arrays), or NULL with a message. */
struct cg_file *cg_stage_file(struct cg_model *m, const struct cg_stage *st);

/*
 * Read a stage file: a model laid out whole whose parameters and
 * moments are written only in the stage's range (the rest is address
 * space never touched, and costs no memory), *st its stage.  NULL with a
 * message naming the file and tensor.
 */
struct cg_model *cg_stage_read(const char *path, struct cg_stage *st);

/*
 * Read path as a stage (*staged 1, *st its stage) or as a whole model
 * (*staged 0), whichever it is.  NULL with a message naming the file.
 */
struct cg_model *cg_stage_or_model_read(const char *path, struct cg_stage *st,
                                        int *staged);

/* The digest of stage st of m: SHA-256 of params [lo, hi) as a file
 * holds them (little-endian), what a stage's update names as its base. */
void cg_stage_digest(const struct cg_model *m, const struct cg_stage *st,
                     unsigned char out[32]);

/* The record "stage" {"index", "count", "layers": [a, b]} of st into
 * manifest man: 0, or -1 with a message. */
int cg_stage_put(struct cJSON *man, const struct cg_stage *st);

/*
 * The "stage" record of manifest man: 1 with *index, *count, *a, *b set,
 * 0 when man has none, -1 with a message when it is not a stage's
 * record.
 */
int cg_stage_get(const struct cJSON *man, int *index, int *count, int *a,
                 int *b);

/*
 * The whole model from the n stage files f [n] (any order; display [n]
 * names them in messages): all of one model, each stage once.  Returns
 * the model (the caller frees it), or NULL with a message.
 */
struct cg_model *cg_stage_join(struct cg_file *const *f, int n,
                               const char *const *display);

#endif
