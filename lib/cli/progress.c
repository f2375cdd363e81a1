/*
 * cli/progress.c - the progress line of programs that run long.
 *
 * The line is made by cg_progress_format, which needs no terminal (the
 * unit test calls it), and drawn by cg_progress_update.  Fields, in order:
 * label, bar, percentage, count, loss, elapsed time, estimated time left.
 * When the line does not fit, whole fields go, least useful first (bar,
 * elapsed, count, label, loss), and what still does not fit is cut.  A redraw
 * returns to the first column and overwrites the old line, padding with
 * spaces where the new one is shorter; no escape sequence is sent.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/progress.h"

#define BAR_MIN 10 /* inner width of the bar: less is not worth showing */
#define BAR_MAX 30
#define DEFAULT_WIDTH 80 /* when the terminal does not say */

char *
cg_hms(char buf[CG_HMS_LEN], double secs)
{
	/* 1e12 s is 31700 years: the cast below stays in range */
	if (!isfinite(secs) || secs < 0 || secs > 1e12) {
		snprintf(buf, CG_HMS_LEN, "-:--:--");
		return buf;
	}
	unsigned long long s = (unsigned long long)secs;
	snprintf(buf, CG_HMS_LEN, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60,
	         s % 60);
	return buf;
}

/* The fields that may be left out, in the order they go. */
enum { F_BAR = 1, F_ELAPSED = 2, F_COUNT = 4, F_LABEL = 8, F_LOSS = 16 };

/* The line with the fields of mask (bar of inner width bar) in buf. */
static size_t
compose(char *buf, size_t cap, int mask, int bar, const char *label, long done,
        long total, double elapsed, double loss)
{
	char el[CG_HMS_LEN], eta[CG_HMS_LEN], lossbuf[40] = "";
	char barbuf[BAR_MAX + 4] = "", count[48] = "";
	int pct = total > 0 ? (int)(100.0 * (double)done / (double)total) : 0;
	double left = done > 0 ? elapsed * (double)(total - done) / done : -1;
	int n;

	if (mask & F_BAR) {
		int fill = total > 0 ? (int)((double)bar * done / total) : 0;
		barbuf[0] = '[';
		memset(barbuf + 1, '#', (size_t)fill);
		memset(barbuf + 1 + fill, '.', (size_t)(bar - fill));
		barbuf[bar + 1] = ']';
		barbuf[bar + 2] = ' ';
		barbuf[bar + 3] = '\0';
	}
	if (mask & F_COUNT)
		snprintf(count, sizeof(count), " %ld/%ld", done, total);
	if ((mask & F_LOSS) && !isnan(loss))
		snprintf(lossbuf, sizeof(lossbuf), " loss %.4f", loss);
	cg_hms(el, elapsed);
	n = snprintf(buf, cap, "%s%s%s%3d%%%s%s%s%s eta %s",
	             mask & F_LABEL ? label : "", mask & F_LABEL ? " " : "",
	             barbuf, pct, count, lossbuf, mask & F_ELAPSED ? " " : "",
	             mask & F_ELAPSED ? el : "", cg_hms(eta, left));
	return n < 0 ? 0 : (size_t)n;
}

size_t
cg_progress_format(char *buf, size_t cap, int width, const char *label,
                   long done, long total, double elapsed, double loss)
{
	static const int drop[] = {F_BAR, F_ELAPSED, F_COUNT, F_LABEL, F_LOSS};
	int mask = F_BAR | F_ELAPSED | F_COUNT | F_LABEL | F_LOSS;
	size_t room, len;

	if (cap == 0)
		return 0;
	if (done < 0)
		done = 0;
	if (total > 0 && done > total)
		done = total;
	/* The last column is never written: a character there leaves some
	 * terminals about to wrap, and the next "\r" a line further. */
	room = width > 1 ? (size_t)width - 1 : 0;
	if (room > cap - 1)
		room = cap - 1;
	/* The bar takes what the other fields leave, BAR_MIN to BAR_MAX. */
	len = compose(buf, cap, mask & ~F_BAR, 0, label, done, total, elapsed,
	              loss);
	int bar = (int)room - (int)len - 3;
	if (bar > BAR_MAX)
		bar = BAR_MAX;
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		if (i == 0 && bar >= BAR_MIN) {
			len = compose(buf, cap, mask, bar, label, done, total,
			              elapsed, loss);
			if (len <= room)
				return len;
		}
		mask &= ~drop[i];
		len = compose(buf, cap, mask, 0, label, done, total, elapsed,
		              loss);
		if (len <= room)
			return len;
	}
	/* Too narrow for even the percentage and the estimate: cut. */
	if (len > room)
		len = room;
	buf[len] = '\0';
	return len;
}

void
cg_progress_init(struct cg_progress *p, FILE *fp, const char *label, int quiet)
{
	memset(p, 0, sizeof(*p));
	p->fp = fp;
	p->label = label ? label : "";
	p->on = !quiet && fp != NULL && isatty(fileno(fp));
	p->t0 = cg_now();
	p->last_pct = -1;
}

/* The terminal's columns now: a resize since the last redraw counts. */
static int
term_width(FILE *fp)
{
	struct winsize ws;

	if (ioctl(fileno(fp), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return DEFAULT_WIDTH;
}

void
cg_progress_update(struct cg_progress *p, long done, long total, double loss)
{
	char line[512];
	double now;
	int pct, width, pad;
	size_t len;

	if (!p->on || total <= 0)
		return;
	now = cg_now();
	pct = (int)(100.0 * (double)done / (double)total);
	if (pct == p->last_pct && done < total && now - p->shown < 1.0)
		return;
	p->last_pct = pct;
	p->shown = now;
	width = term_width(p->fp);
	len = cg_progress_format(line, sizeof(line), width, p->label, done,
	                         total, now - p->t0, loss);
	/* Spaces over what is left of a longer line before, within the
	 * columns the terminal has now. */
	pad = (p->drawn < width - 1 ? p->drawn : width - 1) - (int)len;
	fprintf(p->fp, "\r%s%*s", line, pad > 0 ? pad : 0, "");
	p->drawn = len > 0 ? (int)len : 1;
	fflush(p->fp);
}

void
cg_progress_done(struct cg_progress *p)
{
	if (p->on && p->drawn > 0) {
		fputc('\n', p->fp);
		fflush(p->fp);
	}
	p->drawn = 0;
}

void
cg_progress_cb(void *ctx, int done, int total, double loss)
{
	cg_progress_update(ctx, done, total, loss);
}
