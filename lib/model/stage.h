/*
 * model/stage.h - a model cut by layers into pipeline stages, and the
 * stages joined back.
 *
 * Stage i of n holds layers [a, b) of an arch that can be split (struct
 * cg_stage_ops): views [v0, v1), the range [lo, hi) of the flat buffer,
 * and that range of the optimizer's moments.  Its file is a model file
 * (kind "model") with the whole model's manifest and a "stage" object
 * {"index", "count", "layers": [a, b]}, holding the views of its range
 * and "opt.m", "opt.v" of hi - lo values; readers of whole models refuse
 * it.  Joining the n stage files of one model gives the whole model's
 * file again, byte for byte (the manifest is the stages' own, less
 * "stage").  Masks, adapters, several parameter groups and the
 * coordinator's arrays are not cut: such a model is refused.
 */
#ifndef CG_STAGE_H
#define CG_STAGE_H

#include <stddef.h>

#include "model/model.h"

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
 * The whole model from the n stage files f [n] (any order; display [n]
 * names them in messages): all of one model, each stage once.  Returns
 * the model (the caller frees it), or NULL with a message.
 */
struct cg_model *cg_stage_join(struct cg_file *const *f, int n,
                               const char *const *display);

#endif
