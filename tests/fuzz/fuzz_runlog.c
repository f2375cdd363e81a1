/*
 * fuzz_runlog.c - libFuzzer target: a run's --log lines, as cg-plot reads
 * and draws them.
 *
 * The input is the log, read by cg_runlog_read from a stream in memory
 * (fmemopen), once with the held-out metric to be found and once named;
 * what it reads is drawn both ways: the gnuplot script (cg_plot_script,
 * written to /dev/null) and the text form (cg_plot_text, into memory).
 */
#include "eval/plot.h"
#include "eval/runlog.h"
#include "fuzz.h"

static void
read_and_draw(const uint8_t *data, size_t size, const char *metric)
{
	struct cg_runlog lg = {0};
	struct cg_plot_opts o = {.xs = CG_PLOT_STEP | CG_PLOT_EXAMPLES |
	                               CG_PLOT_SECONDS};
	FILE *in = fmemopen((void *)data, size, "r");
	FILE *null = fopen("/dev/null", "w");
	char *text = NULL;
	size_t tn = 0;
	FILE *t = open_memstream(&text, &tn);

	if (in == NULL || null == NULL || t == NULL)
		abort();
	if (cg_runlog_read(&lg, in, "fuzz.log", metric) == 0) {
		(void)cg_plot_script(null, &lg, 1, &o);
		(void)cg_plot_text(t, &lg, 7);
	}
	cg_runlog_free(&lg);
	fclose(in);
	fclose(null);
	fclose(t);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0; /* fmemopen takes no empty buffer */
	read_and_draw(data, size, NULL);
	read_and_draw(data, size, "rec");
	return 0;
}
