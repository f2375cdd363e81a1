/*
 * test_progress.c - the progress line without a terminal: h:mm:ss, the
 * fields it shows, and that it never takes the terminal's last column.
 *
 * cg_progress_format is what cg_progress_update draws after "\r"; a line
 * of width - 1 columns or less is what keeps a redraw from scrolling.
 * Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <string.h>

#define TEST_NAME "test_progress"
#include "check.h"
#include "cli/progress.h"

static int
has(const char *s, const char *part)
{
	return strstr(s, part) != NULL;
}

static void
test_hms(void)
{
	char b[CG_HMS_LEN];

	expect(strcmp(cg_hms(b, 0), "0:00:00") == 0, "hms: 0 s");
	expect(strcmp(cg_hms(b, 7.9), "0:00:07") == 0, "hms: rounds down");
	expect(strcmp(cg_hms(b, 3000), "0:50:00") == 0, "hms: 3000 s");
	expect(strcmp(cg_hms(b, 3600), "1:00:00") == 0, "hms: an hour");
	expect(strcmp(cg_hms(b, 100000), "27:46:40") == 0,
	       "hms: hours past a day");
	expect(strcmp(cg_hms(b, -1), "-:--:--") == 0, "hms: negative");
	expect(strcmp(cg_hms(b, NAN), "-:--:--") == 0, "hms: nan");
	expect(strcmp(cg_hms(b, INFINITY), "-:--:--") == 0, "hms: inf");
}

static void
test_fields(void)
{
	char b[512];
	size_t n;
	const char *lb, *rb;

	n = cg_progress_format(b, sizeof(b), 120, "cg-train-step", 42, 100, 42,
	                       1.5);
	printf("     120: '%s'\n", b);
	expect(n == strlen(b) && n <= 119, "120 columns: length returned");
	expect(strncmp(b, "cg-train-step [", 15) == 0, "120: label, bar");
	expect(has(b, " 42% 42/100 loss 1.5000 0:00:42 eta 0:00:58"),
	       "120: percentage, count, loss, elapsed, eta as h:mm:ss");
	lb = strchr(b, '[');
	rb = strchr(b, ']');
	expect(lb && rb && rb - lb - 1 == 30, "120: a bar of 30");
	expect(lb && rb && strspn(lb + 1, "#") == 12,
	       "120: 42% of the bar filled (12 of 30)");

	n = cg_progress_format(b, sizeof(b), 120, "x", 0, 100, 5, NAN);
	expect(!has(b, "loss"), "no loss: NAN leaves the field out");
	expect(has(b, "eta -:--:--"), "nothing done: no estimate yet");

	n = cg_progress_format(b, sizeof(b), 120, "x", 1, 3001, 1, 2);
	expect(has(b, "eta 0:50:00"), "3000 s left is 0:50:00, not 3000s");

	n = cg_progress_format(b, sizeof(b), 120, "x", 100, 100, 9, 2);
	lb = strchr(b, '[');
	expect(lb && strspn(lb + 1, "#") == 30, "done: the bar is full");
	expect(has(b, "100% 100/100") && has(b, "eta 0:00:00"),
	       "done: 100%, nothing left");

	/* 50 columns: the bar and the elapsed time go, the rest stays */
	n = cg_progress_format(b, sizeof(b), 50, "cg-train-step", 420, 1000,
	                       4000, 1.23456);
	printf("      50: '%s'\n", b);
	expect(n <= 49, "50 columns: at most 49");
	expect(has(b, " 42%") && has(b, "loss 1.2346") && has(b, "eta 1:32:03"),
	       "50 columns: percentage, loss and eta kept");
	expect(!has(b, "["), "50 columns: no bar");

	/* 20 columns: the percentage and the estimate */
	n = cg_progress_format(b, sizeof(b), 20, "cg-train-step", 420, 1000,
	                       4000, 1.23456);
	printf("      20: '%s'\n", b);
	expect(n <= 19 && strcmp(b, " 42% eta 1:32:03") == 0,
	       "20 columns: the percentage and the estimate");
	/* 10 columns: cut, still one line */
	n = cg_progress_format(b, sizeof(b), 10, "cg-train-step", 420, 1000,
	                       4000, 1.23456);
	expect(n == 9 && strcmp(b, " 42% eta ") == 0, "10 columns: cut to 9");
}

/* Every width, every stage: never the last column, never a line break,
 * and the length returned is the string's. */
static void
test_widths(void)
{
	static const long dones[] = {0, 1, 499, 1000, 1000000};
	char b[512];
	int bad = 0;

	for (int w = 0; w <= 300; w++)
		for (size_t i = 0; i < sizeof(dones) / sizeof(dones[0]); i++) {
			long total = dones[i] > 1000 ? dones[i] : 1000;
			size_t n = cg_progress_format(
			    b, sizeof(b), w, "cg-train-step", dones[i], total,
			    1e5 * (double)i, i % 2 ? NAN : 123456.789);
			size_t room = w > 1 ? (size_t)w - 1 : 0;
			if (n != strlen(b) || n > room ||
			    strpbrk(b, "\r\n") != NULL)
				bad++;
		}
	expect(bad == 0, "widths 0 to 300: fits in width - 1, one line");
	/* the buffer bounds the line too */
	size_t n = cg_progress_format(b, 10, 200, "label", 5, 10, 1, 1);
	expect(n == 9 && strlen(b) == 9, "a short buffer: cut to cap - 1");
}

int
main(void)
{
	test_hms();
	test_fields();
	test_widths();
	return failures ? 1 : 0;
}
