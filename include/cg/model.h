/*
 * cg/model.h - models and data shards (libcg's public interface;
 * libcg(3), cg_model_read(3)).
 *
 * A model is read from a model file that cg-init or any training made;
 * training runs on a data shard that cg-shard made, and leaves the
 * trained model in memory, to be saved or drawn from.  Every
 * architecture of cg works through these functions alike.
 */
#ifndef CG_MODEL_PUBLIC_H
#define CG_MODEL_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cg_model;
struct cg_shard;

/* ---------------------------------------------------------------- shards */

/* Read and check the data shard at path ("-": standard input).  Returns
 * the shard, freed with cg_shard_free, or NULL with a message. */
struct cg_shard *cg_shard_open(const char *path);
/* Release s; s may be NULL. */
void cg_shard_free(struct cg_shard *s);
/* The number of examples s holds. */
uint64_t cg_shard_examples(const struct cg_shard *s);

/* ---------------------------------------------------------------- models */

/*
 * Read the model file at path ("-": standard input), with its optimizer
 * state.  Returns the model, freed with cg_model_free, or NULL with a
 * message naming the file (and the tensor at fault).
 */
struct cg_model *cg_model_read(const char *path);
/* Release m; m may be NULL. */
void cg_model_free(struct cg_model *m);
/* Write m to path ("-": standard output) as cg-train-step would, in
 * place atomically.  Returns 0, or -1 with a message. */
int cg_model_save(struct cg_model *m, const char *path);

/* m's architecture ("cvae", "cgpt", ...); owned by m. */
const char *cg_model_arch(const struct cg_model *m);
/* The optimizer steps m has taken. */
uint64_t cg_model_step(const struct cg_model *m);
/* The number of parameters of m. */
size_t cg_model_nparams(const struct cg_model *m);
/* The number of conditions m is trained for; -1 with a message where
 * the model's manifest says none. */
int cg_model_nconds(const struct cg_model *m);
/* Condition i's name (for example a class, "Dress"), or NULL where the
 * model has no names or i is out of range; owned by m. */
const char *cg_model_cond_name(const struct cg_model *m, int i);
/* The shape of m's images, height, width and channels (1 or 3), into
 * shape [3]: 0, or -1 with a message where m makes text. */
int cg_model_image_shape(const struct cg_model *m, int shape[3]);

/*
 * Train m on s in place: steps optimizer steps of batch examples each,
 * the examples in an order drawn from seed, continuing where m's step
 * left the shard (as cg-train-step --emit model does).  optimizer is
 * "sgd", "momentum", "adam" or "adamw" (NULL: "adam"), lr its learning
 * rate (0: PyTorch's default for it).  On success the mean loss over the
 * steps goes to *loss (loss may be NULL), m's step rises by steps, and
 * its manifest's "loss" and "samples" are those cg-train-step records:
 * the model saved is the file cg-train-step --batch B --seed S writes.
 * Returns 0, or -1 with a message (the shard does not fit the model, a
 * value out of range); m may then be part trained.
 */
int cg_model_train(struct cg_model *m, const struct cg_shard *s, int steps,
                   int batch, const char *optimizer, double lr, uint64_t seed,
                   double *loss);

/*
 * Draw count images of condition cond from an image model into out
 * [count * height * width * channels] (cg_model_image_shape), each
 * row by row with its channels interleaved, values in [0, 1]; the same
 * seed gives the same images (those cg-sample draws).  temperature
 * scales the noise (1: as trained).  Returns 0, or -1 with a message.
 */
int cg_model_sample_images(struct cg_model *m, int cond, int count,
                           double temperature, uint64_t seed, float *out);
/*
 * Draw one text of condition cond from a text model, continuing prompt
 * (NUL-terminated; NULL: none), at temperature (0: the likeliest byte
 * each time), into buf [size]: at most size - 1 bytes, then a NUL.
 * Returns the number of bytes drawn, or -1 with a message.
 */
long cg_model_sample_text(struct cg_model *m, int cond, const char *prompt,
                          double temperature, uint64_t seed, char *buf,
                          size_t size);

#ifdef __cplusplus
}
#endif
#endif
