/*
 * test_stepdistill.c - the cddpm's step distillation (struct cg_distill's
 * steps) against a reference written here in double, and finite
 * differences.
 *
 * Checks that the grid of 2N - 1 steps holds the N-step grid at every
 * other point with a timestep strictly between; that N DDIM steps of
 * cg_cddpm_ddim_step are cg_cddpm_sample's DDIM draw, bit for bit,
 * guided and not; the arch's distillation pass on a shard against a
 * reference that draws what cddpm.h says training draws, runs the
 * teacher's two DDIM steps and the student's network in double from
 * the views (the target x0 of one student step landing where the
 * teacher's two did, its weighted loss and the data's), for a v teacher
 * and an x0 student, guided and not, teacher weights 1 and 0.4; that the
 * target is what one DDIM step needs (a step from z_t with it lands on
 * the teacher's z_s); every view's gradient against central differences
 * (a spoilt one caught); and the refusals (no steps, too many, another
 * schedule).  Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cddpm/cddpm.h"
#include "cg.h"
#include "cli/cli.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "model/model.h"

#define TEST_NAME "test_stepdistill"
#include "check.h"

#include "fd.h"
#include "shards.h"

#define NIMG 9
#define SIDE 3
#define D (SIDE * SIDE)
#define B 6
#define T 100
#define NOISE_SEED 11

static struct cg_rng rng;

/* ------------------------------------------------------------ the grid */

static void
test_grid(void)
{
	static const int Ts[] = {50, 99, 100, 1000, 1001};
	int bad = 0;

	for (size_t k = 0; k < sizeof(Ts) / sizeof(Ts[0]); k++)
		for (int N = 2; 2 * N - 1 <= Ts[k]; N++)
			for (int i = 0; i < N; i++) {
				int a = cg_cddpm_visited(i, N, Ts[k]);
				if (cg_cddpm_visited(2 * i, 2 * N - 1, Ts[k]) !=
				    a)
					bad++;
				if (i == 0)
					continue;
				int mid = cg_cddpm_visited(2 * i - 1, 2 * N - 1,
				                           Ts[k]);
				if (!(mid > cg_cddpm_visited(i - 1, N, Ts[k]) &&
				      mid < a))
					bad++;
			}
	expect(bad == 0, "the 2N - 1 grid holds the N grid, a timestep "
	                 "strictly between each two");
}

/* ------------------------------------------- DDIM steps and the sampler */

static void
test_steps(double guidance)
{
	struct cg_cddpm_config c = {D, 3, 8, 2, 6, T, 5, 1, 0, 0, 0, 0, 0, 0, 0};
	const int n = 4, N = 7;
	size_t np = cg_cddpm_nparams(&c);
	float *p = xcalloc(np, sizeof(float));
	struct cg_cddpm_ws *w = cg_cddpm_ws_new(&c, 2 * n, 0);
	int cond[4] = {0, 1, 2, 3}, t[4], s[4];
	float *x = xcalloc((size_t)n * D, sizeof(float));
	float *a = xcalloc((size_t)n * D, sizeof(float));
	struct cg_cddpm_sampling sm = {guidance, N, 1, 0.8, 0, 0, 0};
	struct cg_rng r0, r1;
	char what[128];

	if (w == NULL)
		die("cg_cddpm_ws_new");
	cg_cddpm_init(&c, p, &rng);
	for (size_t i = 0; i < np; i++)
		p[i] += 0.1f * cg_rng_normal(&rng);
	cg_rng_seed(&r0, 3);
	r1 = r0;
	if (cg_cddpm_sample(&c, p, w, cond, n, &sm, &r0, a) != 0)
		die("cg_cddpm_sample");
	for (int i = 0; i < n * D; i++)
		x[i] = 0.8f * cg_rng_normal(&r1);
	for (int i = N - 1; i >= 0; i--) {
		for (int b = 0; b < n; b++) {
			t[b] = cg_cddpm_visited(i, N, T);
			s[b] = i > 0 ? cg_cddpm_visited(i - 1, N, T) : -1;
		}
		if (cg_cddpm_ddim_step(&c, p, w, x, cond, t, s, n, guidance) !=
		    0)
			die("cg_cddpm_ddim_step");
	}
	int same = 1;
	for (int k = 0; k < n * D; k++) {
		float v = 0.5f * (x[k] + 1);
		v = v < 0 ? 0 : v > 1 ? 1 : v;
		same &= v == a[k];
	}
	snprintf(what, sizeof(what),
	         "guidance %g: %d DDIM steps are the sampler's draw, bit for "
	         "bit",
	         guidance, N);
	expect(same, what);
	t[0] = 10, s[0] = 10;
	expect(cg_cddpm_ddim_step(&c, p, w, x, cond, t, s, 1, guidance) != 0,
	       "a step to a timestep not earlier is refused");
	expect(cg_cddpm_ddim_step(&c, p, w, x, cond, t, s, 3 * n, 0) != 0,
	       "more chains than the workspace holds are refused");
	cg_cddpm_ws_free(w);
	free(p);
	free(x);
	free(a);
}

/* ------------------------------------------- the reference, in double */

static const struct cg_view *
view(const struct cg_model *m, const char *name)
{
	for (int i = 0; i < m->nviews; i++)
		if (strcmp(m->views[i].name, name) == 0)
			return &m->views[i];
	die(name);
	return NULL;
}

/* out [OC] = W in + b (+ add) (then ReLU) for m's layer named layer. */
static void
ref_layer(const struct cg_model *m, const char *layer, double *out,
          const double *in, const double *add, int relu)
{
	char wn[64], bn[64];

	snprintf(wn, sizeof(wn), "%s.w", layer);
	snprintf(bn, sizeof(bn), "%s.b", layer);
	const struct cg_view *w = view(m, wn), *b = view(m, bn);
	const int OC = (int)w->shape[0], C = (int)w->shape[1];

	for (int o = 0; o < OC; o++) {
		double s = m->params[b->off + o] + (add ? add[o] : 0);
		for (int i = 0; i < C; i++)
			s += (double)m->params[w->off + (size_t)o * C + i] *
			     in[i];
		out[o] = relu && s < 0 ? 0 : s;
	}
}

static double
ref_abar(int t)
{
	double a = 1, lo = 0.1 / T, hi = 20.0 / T;

	for (int s = 0; s <= t; s++)
		a *= 1 - (lo + (hi - lo) * s / (T - 1));
	return a;
}

/* x0_hat [D] of m's MLP (hidden H, layers L, embed E, predict_x0 px) at
 * xt, ts, cond, from cddpm.h's description. */
static void
ref_x0(const struct cg_model *m, int H, int L, int E, int px, const double *xt,
       int ts, int cond, double *x0)
{
	double temb[64], emb[64], h[64], h2[64], o[D];
	const struct cg_view *ce = view(m, "cond.emb");
	const int half = E / 2;
	char name[32];

	for (int i = 0; i < half; i++) {
		temb[i] = sin(ts * pow(10000.0, -(double)i / half));
		temb[half + i] = cos(ts * pow(10000.0, -(double)i / half));
	}
	ref_layer(m, "time", emb, temb, NULL, 0);
	for (int j = 0; j < H; j++)
		emb[j] += m->params[ce->off + (size_t)cond * H + j];
	for (int l = 0; l < L; l++) {
		snprintf(name, sizeof(name), "hid.%d", l);
		ref_layer(m, name, h2, l == 0 ? xt : h, emb, 1);
		memcpy(h, h2, sizeof(h));
	}
	ref_layer(m, "out", o, h, NULL, 0);
	const double ab = ref_abar(ts);
	for (int i = 0; i < D; i++)
		x0[i] = px ? o[i] : sqrt(ab) * xt[i] - sqrt(1 - ab) * o[i];
}

struct side {
	struct cg_model *m;
	int H, L, E, px;
};

/* One DDIM step of x [D] from t to s (-1: clean) by the teacher, guided
 * by g: eps = (1 + g) eps(c) - g eps(null), x0 clipped. */
static void
ref_step(const struct side *te, int ncond, double *x, int t, int s, int cond,
         double g)
{
	double xc[D], xn[D];
	const double at = ref_abar(t), as = s >= 0 ? ref_abar(s) : 1;

	ref_x0(te->m, te->H, te->L, te->E, te->px, x, t, cond, xc);
	ref_x0(te->m, te->H, te->L, te->E, te->px, x, t, ncond, xn);
	for (int i = 0; i < D; i++) {
		double ec = (x[i] - sqrt(at) * xc[i]) / sqrt(1 - at);
		double en = (x[i] - sqrt(at) * xn[i]) / sqrt(1 - at);
		double e = g != 0 ? (1 + g) * ec - g * en : ec;
		double x0 = (x[i] - sqrt(1 - at) * e) / sqrt(at);
		x0 = x0 < -1 ? -1 : x0 > 1 ? 1 : x0;
		e = (x[i] - sqrt(at) * x0) / sqrt(1 - at);
		x[i] = sqrt(as) * x0 + sqrt(1 - as) * e;
	}
}

/* ------------------------------------------------- the arch's pass */

static struct cg_model *
make(const struct cg_shard *sh, const char *keys, uint64_t seed)
{
	const struct cg_arch *a = cg_arch_find("cddpm");
	cJSON *config, *extra, *set = cJSON_Parse(keys), *it;
	struct cg_model *m;

	if (a == NULL || set == NULL ||
	    cg_arch_config(a, sh, NULL, &config, &extra) != 0)
		die("cg_arch_config");
	cJSON_ArrayForEach(it, set)
	{
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL || !cJSON_ReplaceItemInObjectCaseSensitive(
		                       config, it->string, dup))
			die(it->string);
	}
	cJSON_Delete(set);
	if ((m = cg_model_create("cddpm", config, extra, seed)) == NULL ||
	    m->arch->check_data(m, sh) != 0)
		die("cg_model_create");
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(&rng);
	return m;
}

struct fcase {
	struct cg_model *m;
	const struct cg_distill *d;
	const struct cg_shard *s;
	uint64_t ex[B];
};

static double
fcase_loss(void *ctx, int v)
{
	struct fcase *c = ctx;
	struct cg_metrics r;

	(void)v;
	if (c->m->arch->distill(c->m, c->d, c->s, c->ex, B, NOISE_SEED, NULL,
	                        &r) != 0)
		die("distill");
	return r.loss;
}

/*
 * The distillation pass of student st toward teacher te (N steps,
 * guidance g, weight alpha, cond-drop drop) against the reference, and
 * its gradient against central differences.
 */
static void
test_distill(const struct cg_shard *sh, const struct side *st,
             const struct side *te, int N, double g, double alpha, double drop)
{
	struct cg_distill d = {te->m, alpha, 1, N, g};
	struct fcase c = {st->m, &d, sh, {0}};
	struct cg_metrics r;
	double data = 0, teach = 0, land = 0;
	const int ncond = 3;
	char what[200];

	for (int b = 0; b < B; b++)
		c.ex[b] = (uint64_t)(b * 2) % sh->n;
	float *grad = xcalloc(st->m->nparams, sizeof(float));
	if (st->m->arch->distill(st->m, &d, sh, c.ex, B, NOISE_SEED, grad,
	                         &r) != 0)
		die(cg_errmsg());

	for (int b = 0; b < B; b++) {
		struct cg_rng er;
		double x0[D], eps[D], z[D], x[D], tgt[D], xh[D];
		uint64_t len;
		const uint8_t *px = cg_shard_example(sh, c.ex[b], &len);

		cg_rng_derive(&er, NOISE_SEED, sh->index[c.ex[b]], 0);
		const int i = (int)cg_rng_below(&er, (uint64_t)N);
		const int cond =
		    cg_rng_uniform(&er) < drop ? ncond : (int)sh->cond[c.ex[b]];
		const int t = cg_cddpm_visited(i, N, T);
		const int s = i > 0 ? cg_cddpm_visited(i - 1, N, T) : -1;
		const double at = ref_abar(t), as = s >= 0 ? ref_abar(s) : 1;
		for (int j = 0; j < D; j++) {
			x0[j] = (float)(px[j] * (1.0f / 127.5f) - 1.0f);
			eps[j] = cg_rng_normal(&er);
			z[j] = sqrt(at) * x0[j] + sqrt(1 - at) * eps[j];
			x[j] = z[j];
		}
		if (i > 0) {
			ref_step(te, ncond, x, t,
			         cg_cddpm_visited(2 * i - 1, 2 * N - 1, T),
			         cond, g);
			ref_step(te, ncond, x,
			         cg_cddpm_visited(2 * i - 1, 2 * N - 1, T), s,
			         cond, g);
		} else
			ref_step(te, ncond, x, t, -1, cond, g);
		/* the x0 whose one DDIM step from z lands on x */
		const double ratio = sqrt(1 - as) / sqrt(1 - at);
		for (int j = 0; j < D; j++)
			tgt[j] = (x[j] - ratio * z[j]) /
			         (sqrt(as) - ratio * sqrt(at));
		for (int j = 0; j < D; j++) {
			double e = (z[j] - sqrt(at) * tgt[j]) / sqrt(1 - at);
			double y = sqrt(as) * tgt[j] + sqrt(1 - as) * e;
			land = fmax(land, fabs(y - x[j]));
		}
		ref_x0(st->m, st->H, st->L, st->E, st->px, z, t, cond, xh);
		const double snr = at / (1 - at), wx = fmin(snr, 5) + 1;
		double sd = 0, stt = 0;
		for (int j = 0; j < D; j++) {
			sd += (xh[j] - x0[j]) * (xh[j] - x0[j]);
			stt += (xh[j] - tgt[j]) * (xh[j] - tgt[j]);
		}
		data += wx * sd / D / B;
		teach += wx * stt / D / B;
	}
	const double loss = (1 - alpha) * data + alpha * teach;
	const double rel = fmax(
	    fabs(r.loss - loss) / loss,
	    fmax(fabs(r.data - data) / data, fabs(r.teacher - teach) / teach));
	snprintf(what, sizeof(what),
	         "N %d guidance %g weight %g: loss %.6g, data %.6g, teacher "
	         "%.6g as the double reference's (worst rel diff %.2g)",
	         N, g, alpha, r.loss, r.data, r.teacher, rel);
	expect(rel < 1e-4, what);
	snprintf(what, sizeof(what),
	         "the target's one DDIM step lands on the teacher's two "
	         "(largest miss %.2g)",
	         land);
	expect(land < 1e-9, what);

	double worst =
	    fd_views(&FD_IMAGE, st->m->views, st->m->nviews, st->m->params,
	             grad, fcase_loss, &c, NULL, &rng, 1);
	snprintf(what, sizeof(what),
	         "N %d guidance %g weight %g: every view's gradient vs "
	         "central differences (worst rel err %.3g)",
	         N, g, alpha, worst);
	expect(worst <= FD_IMAGE.tol, what);
	const struct cg_view *v = &st->m->views[st->m->nviews - 1];
	grad[v->off] += 0.05f;
	expect(fd_views(&FD_IMAGE, v, 1, st->m->params, grad, fcase_loss, &c,
	                NULL, &rng, 1) > FD_IMAGE.tol,
	       "a gradient off by 0.05 in one element is caught");
	free(grad);
}

static void
test_refusals(const struct cg_shard *sh, struct cg_model *st,
              struct cg_model *te)
{
	struct cg_distill d = {te, 1, 1, 0, 0};
	struct cg_metrics r;
	uint64_t ex[2] = {0, 1};

	expect(st->arch->distill(st, &d, sh, ex, 2, 1, NULL, &r) != 0,
	       "a cddpm teacher without steps is refused");
	d.steps = 1;
	expect(st->arch->distill(st, &d, sh, ex, 2, 1, NULL, &r) != 0,
	       "1 step is refused");
	d.steps = (T + 1) / 2 + 1;
	expect(st->arch->distill(st, &d, sh, ex, 2, 1, NULL, &r) != 0,
	       "steps whose teacher grid passes T are refused");
	d.steps = (T + 1) / 2;
	expect(st->arch->distill(st, &d, sh, ex, 2, 1, NULL, &r) == 0,
	       "the most steps T allows are taken");
	struct cg_model *o = make(sh,
	                          "{\"hidden\":6,\"layers\":1,\"embed\":4,"
	                          "\"timesteps\":200}",
	                          9);
	expect(st->arch->check_teacher(st, o) != 0,
	       "a teacher of another schedule is refused");
	cg_model_free(o);
}

int
main(void)
{
	cg_set_threads(0);
	cg_rng_seed(&rng, 21);
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_grid();
	test_steps(0);
	test_steps(1.5);

	struct cg_shard *sh = image_shard(NIMG, SIDE, SIDE, "img", NULL);
	/* a v teacher wider than its x0 student; the condition dropped
	 * half the time, so that both paths of the guidance are drawn */
	struct side te = {make(sh,
	                       "{\"hidden\":7,\"layers\":2,\"embed\":6,"
	                       "\"timesteps\":100,\"predict-x0\":0,"
	                       "\"cond-drop\":0.5}",
	                       3),
	                  7, 2, 6, 0};
	struct side st = {make(sh,
	                       "{\"hidden\":6,\"layers\":2,\"embed\":4,"
	                       "\"timesteps\":100,\"predict-x0\":1,"
	                       "\"cond-drop\":0.5}",
	                       4),
	                  6, 2, 4, 1};
	test_distill(sh, &st, &te, 4, 0, 1, 0.5);
	test_distill(sh, &st, &te, 4, 1.5, 0.4, 0.5);
	test_distill(sh, &st, &te, 8, 1, 1, 0.5);
	/* the other way round: a v student */
	test_distill(sh, &te, &st, 3, 2, 0.7, 0.5);
	test_refusals(sh, st.m, te.m);
	cg_model_free(st.m);
	cg_model_free(te.m);
	cg_shard_free(sh);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}
