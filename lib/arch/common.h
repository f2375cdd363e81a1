/*
 * arch/common.h - what the architectures share: whole numbers of a
 * config, and the image archs' config, image shape and data checks.
 */
#ifndef CG_ARCH_COMMON_H
#define CG_ARCH_COMMON_H

#include <stdint.h>

#include "model/model.h"

/*
 * For image archs: config_from_shard's work for a model that reads and
 * makes whole images of s: refuses data that is not images (naming arch),
 * adds extra "image" {height, width, channels} and config "in_dim"
 * (values per image) and "ncond".  Returns 0 or -1.
 */
int cg_arch_image_config(const char *arch, const struct cg_shard *s,
                         struct cJSON *config, struct cJSON *extra);
/*
 * The image shape of m's manifest into shape {height, width, channels},
 * checked against the values per image (in_dim) the arch's config makes:
 * a manifest that disagrees would have a reader run past a sample.
 * Returns 0 or -1 with a message.
 */
/*
 * A convolutional model's image: height, width and channels from m's
 * manifest as cg_arch_image_shape reads them (checked against in_dim)
 * into *h, *w, *ch.  Returns 0 or -1 with a message.
 */
int cg_arch_image_hwc(const struct cg_model *m, int in_dim, int *h, int *w,
                      int *ch);
int cg_arch_image_shape(const struct cg_model *m, uint64_t in_dim,
                        int shape[3]);
/*
 * A teacher t of an image model m (check_teacher's common part): the same
 * number of conditions, of values an image, and, where both manifests
 * give one, the same image shape ("the teacher VERB images of HxWxC, the
 * model ..."; verb "reads" or "draws").  Returns 0 or -1 with a message.
 */
int cg_arch_same_images(const struct cg_model *m, const struct cg_model *t,
                        int ncond, int t_ncond, int in_dim, int t_in_dim,
                        const char *verb);
/*
 * check_config's first step for an arch whose convolutional form (*conv
 * > 0, the config key named key) takes its image shape from the
 * manifest, not from a key: until the manifest gives the image (height
 * 0) only the keys can be checked, so *conv is held to [0, max] ("ARCH:
 * KEY = N: not in [0, MAX]") and set to 0, and the rest is checked as
 * the MLP's.  Returns 1 when it did so, 0 when there was nothing to do
 * (the MLP, or the image known), or -1 with a message.
 */
int cg_arch_conv_keys(const char *arch, const char *key, int *conv, int max,
                      int height);
/*
 * For image archs: check_data's work for a model of in_dim values per
 * image and ncond conditions: refuses data that is not images (naming
 * arch), images of another size, another number of conditions or other
 * condition names (cg_model_check_conditions).  Returns 0 or -1 with a
 * message.
 */
int cg_arch_check_image_data(const char *arch, const struct cg_model *m,
                             const struct cg_shard *s, int in_dim, int ncond);
/*
 * The whole number under key of obj (an arch's config) into *out, if it
 * lies in [lo, hi].  Returns 0, or -1 with the message
 * 'config: "KEY" missing or out of range'.
 */
int cg_arch_config_int(const struct cJSON *obj, const char *key, int lo, int hi,
                       int *out);

/* config_from_shard of an image arch a: cg_arch_image_config under a's
 * name. */
int cg_arch_image_from_shard(const struct cg_arch *a, const struct cg_shard *s,
                             struct cJSON *config, struct cJSON *extra);

/*
 * The callbacks of an image arch whose config struct has int keys
 * "in_dim" and "ncond" (struct cg_arch keys): its nconds, image_shape
 * and check_data, each reading the config through the key table
 * (cg_arch_read_config) and then as cg_arch_image_shape and
 * cg_arch_check_image_data say.
 */
int cg_arch_image_nconds(const struct cg_model *m);
int cg_arch_image_sample_shape(const struct cg_model *m, int shape[3]);
int cg_arch_image_check(struct cg_model *m, const struct cg_shard *s);

/*
 * Batches in chunks, for an arch whose batch is a mean over examples
 * that each draw their own randomness (the image archs): the chunk size
 * for batches of B when the planner asks for chunks of at most chunk
 * (0, or B or more: the whole batch), as many chunks as that takes,
 * their sizes evened out.
 */
int cg_arch_chunk_of(int B, int chunk);
/* The bytes cg_arch_chunked adds to the workspace of chunks of cap for
 * batches of B: a gradient of m's size where a chunk is not the whole
 * batch. */
size_t cg_arch_chunk_bytes(const struct cg_model *m, int B, int cap);
/*
 * The batch of struct cg_arch (the loss on ex[0..B) of s as means, grad
 * += their gradient) through run, a batch function of the same form,
 * on chunks of cg_arch_chunk_of(B, m->chunk) examples: each chunk's
 * gradient, in a buffer of its own, added to grad times the chunk's
 * share of the batch, and each figure of out the mean of the chunks'
 * weighted so.  Whole batches go to run as they are (the same bytes as
 * without chunking); chunks change only rounding.  Returns 0 or -1 with
 * a message.
 */
typedef int (*cg_arch_batch_fn)(struct cg_model *m, const struct cg_shard *s,
                                const uint64_t *ex, int B,
                                uint64_t noise_seed, float *grad,
                                struct cg_metrics *out);
int cg_arch_chunked(struct cg_model *m, cg_arch_batch_fn run,
                    const struct cg_shard *s, const uint64_t *ex, int B,
                    uint64_t noise_seed, float *grad, struct cg_metrics *out);
/* The same for struct cg_arch's distill: run is given d with each
 * chunk, and the teacher runs on the chunk as the model does. */
typedef int (*cg_arch_distill_fn)(struct cg_model *m,
                                  const struct cg_distill *d,
                                  const struct cg_shard *s, const uint64_t *ex,
                                  int B, uint64_t noise_seed, float *grad,
                                  struct cg_metrics *out);
int cg_arch_chunked_distill(struct cg_model *m, cg_arch_distill_fn run,
                            const struct cg_distill *d,
                            const struct cg_shard *s, const uint64_t *ex, int B,
                            uint64_t noise_seed, float *grad,
                            struct cg_metrics *out);

/* ------------------------------------------------ structured pruning */

/*
 * What shrink (struct cg_arch) shares.  cg_arch_removed: how many of n
 * structures a fraction remove in [0, 1) takes out, round(remove n) to
 * the nearest (halves up), at most n - 1.  cg_arch_least: keep [n] = 1
 * but for the k of score [n] that are smallest (0 there; a score that
 * is not a number counts as 0; ties to the lower index).
 */
int cg_arch_removed(double remove, int n);
void cg_arch_least(unsigned char *keep, const double *score, int n, int k);
/*
 * The sub-matrix of src [R, K] on the rows kr [R] and columns kc [K]
 * keep (NULL: all) into dst [kept rows, kept columns]; with dst NULL,
 * zero in src the rows and the columns they do not keep.  A 1-D view
 * is K = 1 with kc NULL.
 */
void cg_arch_sub(float *dst, float *src, size_t R, size_t K,
                 const unsigned char *kr, const unsigned char *kc);
/* The L2 norm of row r of x [R, K] (col < 0), or of its column col. */
double cg_arch_norm(const float *x, size_t R, size_t K, long r, long col);
/* The index of m's view called name, or -1. */
int cg_arch_view(const struct cg_model *m, const char *name);

#endif
