/*
 * cgfit.c - train a cg model a few steps, draw from it, save it, through
 * libcg.
 *
 * usage: cgfit MODEL SHARD STEPS OUT
 *
 * Reads MODEL (made by cg-init or a training) and the data shard SHARD
 * (made by cg-shard), trains STEPS steps of 32 examples with Adam at
 * its default rate, seed 1 (what "cg-train-step --emit model --steps
 * STEPS --batch 32 --seed 1" does), prints the mean loss, draws from
 * the first condition (the mean pixel of 4 images, or a text of at most
 * 60 bytes, other bytes than printable ASCII shown as '?') and writes the
 * trained model to OUT.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <cg/cg.h>

/* What the trained model makes, one line on stdout: 0, or -1. */
static int
draw(struct cg_model *m)
{
	int sh[3];

	if (cg_model_image_shape(m, sh) == 0) {
		size_t n = (size_t)4 * sh[0] * sh[1] * sh[2];
		float *img = malloc(n * sizeof(*img));
		double sum = 0;

		if (img == NULL ||
		    cg_model_sample_images(m, 0, 4, 1.0, 7, img) != 0) {
			free(img);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			sum += img[i];
		free(img);
		printf("4 images %dx%dx%d of %s: mean pixel %.4f\n", sh[0],
		       sh[1], sh[2],
		       cg_model_cond_name(m, 0) ? cg_model_cond_name(m, 0)
		                                : "condition 0",
		       sum / n);
	} else {
		char text[61];
		long n = cg_model_sample_text(m, 0, NULL, 0.8, 7, text,
		                              sizeof(text));
		if (n < 0)
			return -1;
		/* one line of ASCII: a model early in its training draws
		 * any byte */
		for (long i = 0; i < n; i++)
			if ((unsigned char)text[i] < ' ' ||
			    (unsigned char)text[i] >= 0x7f)
				text[i] = '?';
		printf("text of %s: %s\n",
		       cg_model_cond_name(m, 0) ? cg_model_cond_name(m, 0)
		                                : "condition 0",
		       text);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct cg_model *m = NULL;
	struct cg_shard *s = NULL;
	char *end;
	long steps;
	double loss;
	int status = 1;

	if (argc != 5) {
		fprintf(stderr, "usage: cgfit MODEL SHARD STEPS OUT\n");
		return 2;
	}
	errno = 0;
	steps = strtol(argv[3], &end, 10);
	if (errno || *end || end == argv[3] || steps < 1 || steps > 100000) {
		fprintf(stderr,
		        "cgfit: %s: not a number of steps (1 to "
		        "100000)\n",
		        argv[3]);
		return 2;
	}
	if ((m = cg_model_read(argv[1])) == NULL ||
	    (s = cg_shard_open(argv[2])) == NULL)
		goto fail;
	printf("libcg %s: %s model, %zu parameters, step %llu; %llu "
	       "examples\n",
	       cg_version(), cg_model_arch(m), cg_model_nparams(m),
	       (unsigned long long)cg_model_step(m),
	       (unsigned long long)cg_shard_examples(s));
	if (cg_model_train(m, s, (int)steps, 32, "adam", 0, 1, &loss) != 0)
		goto fail;
	printf("step %llu: loss %.4f\n", (unsigned long long)cg_model_step(m),
	       loss);
	if (draw(m) != 0 || cg_model_save(m, argv[4]) != 0)
		goto fail;
	status = 0;
	goto done;
fail:
	fprintf(stderr, "cgfit: %s\n", cg_errmsg());
done:
	cg_shard_free(s);
	cg_model_free(m);
	if (fflush(stdout) != 0) {
		perror("cgfit: standard output");
		status = 1;
	}
	return status;
}
