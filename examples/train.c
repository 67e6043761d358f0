/* SPDX-License-Identifier: MIT */
/*
 * train.c - rkv-example-train: data-parallel training of a logistic
 * regression on rkv's parameter-server API.
 *
 *   rkv-example-train [--workers W] [--steps S] [--dim D] [--samples N]
 *                     [--lr LR] [--seed SEED] [--shard E] [--out FILE]
 *                     [--servers ADDR,...]   use running servers, or
 *                     [--nservers K] [--provider tcp|shm]  start K here
 *   rkv-example-train --single ...   the same algorithm in one process
 *
 * The data set is synthetic and deterministic (xorshift from --seed): N
 * samples of D features in [-1, 1], labelled by a random hyperplane with
 * a little noise.  Worker w owns samples [w*N/W, (w+1)*N/W).
 *
 * One step of synchronous SGD with W worker processes (each its own
 * client):
 *   1. each worker computes the gradient sum and loss sum over its
 *      samples at the current parameters, and pushes them (SUM) into the
 *      tensor "grad" (D + 1 gradient entries, then the loss);
 *   2. barrier;
 *   3. worker 0 pulls grad, prints the mean loss, pushes an SGD step into
 *      "param" (param -= lr/N * grad) and resets grad (ASSIGN zeros);
 *   4. barrier; every worker pulls param.
 * --single computes the W partial sums one after another and adds them in
 * worker order, so both runs do the same arithmetic except the order in
 * which the W partial sums meet on the server (float addition is not
 * associative): the final parameters agree to about 1e-6 relative.
 * --out writes the final parameters one per line (%.9g).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rkv.h"
#include "rkv_ps.h"

#define MAX_SERVERS_HERE 8
#define BARRIER_MS 60000

struct cfg {
	unsigned workers, steps, dim, samples, shard, nservers;
	float lr;
	uint64_t seed;
	int single;
	const char *servers, *provider, *out;
	char run[32];              /* unique suffix of names */
};

/* ---------------------------------------------------------------- data */

static uint64_t xs_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* uniform in [-1, 1) */
static float xs_unit(uint64_t *s)
{
	return (float)((double)(xs_next(s) >> 11) / (double)(1ull << 52)) - 1.0f;
}

struct data {
	float *x; /* samples x dim */
	float *y; /* 0 or 1 */
};

static int data_make(const struct cfg *g, struct data *d)
{
	uint64_t s = g->seed * 0x9e3779b97f4a7c15ull + 1;
	float *w = malloc(g->dim * sizeof(float));

	d->x = malloc((size_t)g->samples * g->dim * sizeof(float));
	d->y = malloc(g->samples * sizeof(float));
	if (!w || !d->x || !d->y) {
		free(w);
		return -ENOMEM;
	}
	for (unsigned j = 0; j < g->dim; j++)
		w[j] = 2 * xs_unit(&s);
	for (unsigned i = 0; i < g->samples; i++) {
		float z = 0.3f;

		for (unsigned j = 0; j < g->dim; j++) {
			float v = xs_unit(&s);

			d->x[(size_t)i * g->dim + j] = v;
			z += w[j] * v;
		}
		z += 0.5f * xs_unit(&s); /* label noise */
		d->y[i] = z > 0 ? 1.0f : 0.0f;
	}
	free(w);
	return 0;
}

/*
 * Gradient sum and loss sum of samples [a, b) at params p (dim weights,
 * then the bias) into g (dim + 2: gradient, then loss).
 */
static void grad_part(const struct cfg *g, const struct data *d,
		      const float *p, unsigned a, unsigned b, float *out)
{
	unsigned D = g->dim;

	memset(out, 0, (D + 2) * sizeof(float));
	for (unsigned i = a; i < b; i++) {
		const float *x = d->x + (size_t)i * D;
		float z = p[D];

		for (unsigned j = 0; j < D; j++)
			z += p[j] * x[j];
		float s = 1.0f / (1.0f + expf(-z));
		float e = s - d->y[i];

		for (unsigned j = 0; j < D; j++)
			out[j] += e * x[j];
		out[D] += e;
		/* log loss, clamped away from log(0) */
		float q = d->y[i] > 0 ? s : 1.0f - s;

		out[D + 1] += -logf(q > 1e-7f ? q : 1e-7f);
	}
}

static unsigned part_lo(const struct cfg *g, unsigned w)
{
	return (unsigned)((uint64_t)g->samples * w / g->workers);
}

static int write_params(const struct cfg *g, const float *p)
{
	FILE *f;

	printf("final:");
	for (unsigned j = 0; j <= g->dim; j++)
		printf(" %.6g", p[j]);
	printf("\n");
	if (!g->out)
		return 0;
	f = fopen(g->out, "w");
	if (!f) {
		fprintf(stderr, "rkv-example-train: %s: %s\n", g->out,
			strerror(errno));
		return -1;
	}
	for (unsigned j = 0; j <= g->dim; j++)
		fprintf(f, "%.9g\n", p[j]);
	fclose(f);
	return 0;
}

/* -------------------------------------------------------------- single */

static int run_single(const struct cfg *g, const struct data *d)
{
	unsigned D = g->dim;
	float *p = calloc(D + 1, sizeof(float));
	float *sum = calloc(D + 2, sizeof(float));
	float *part = calloc(D + 2, sizeof(float));
	float lr = g->lr / (float)g->samples;

	if (!p || !sum || !part)
		return 1;
	for (unsigned step = 0; step < g->steps; step++) {
		memset(sum, 0, (D + 2) * sizeof(float));
		for (unsigned w = 0; w < g->workers; w++) {
			grad_part(g, d, p, part_lo(g, w), part_lo(g, w + 1),
				  part);
			for (unsigned j = 0; j < D + 2; j++)
				sum[j] += part[j];
		}
		printf("step %u loss %.6f\n", step, sum[D + 1] / g->samples);
		for (unsigned j = 0; j <= D; j++)
			p[j] -= lr * sum[j];
	}
	int rc = write_params(g, p);

	free(p);
	free(sum);
	free(part);
	return rc ? 1 : 0;
}

/* --------------------------------------------------------- distributed */

static void names(const struct cfg *g, char *param, char *grad, char *bar,
		  size_t n)
{
	snprintf(param, n, "train-%s-param", g->run);
	snprintf(grad, n, "train-%s-grad", g->run);
	snprintf(bar, n, "train-%s", g->run);
}

#define CHECK(what, expr)                                                      \
	do {                                                                   \
		int rc_ = (expr);                                              \
		if (rc_) {                                                     \
			fprintf(stderr, "worker %u: %s: %s\n", w, what,        \
				strerror(-rc_));                               \
			goto fail;                                             \
		}                                                              \
	} while (0)

static int worker(const struct cfg *g, const struct data *d, unsigned w)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	struct rkv_ps *ps = NULL;
	struct rkv_ps_tensor *tp = NULL, *tg = NULL;
	struct rkv_ps_barrier *b = NULL;
	char pn[96], gn[96], bn[64];
	unsigned D = g->dim;
	float *p = calloc(D + 1, sizeof(float));
	float *part = calloc(D + 2, sizeof(float));
	float *sum = calloc(D + 2, sizeof(float));
	float *zero = calloc(D + 2, sizeof(float));
	float lr = g->lr / (float)g->samples;
	int ok = 0;

	if (!p || !part || !sum || !zero)
		goto fail;
	names(g, pn, gn, bn, sizeof(pn));
	rkv_client_opts_init(&o);
	o.servers = g->servers;
	o.timeout_ms = 20000;
	CHECK("connect", rkv_client_create(&o, &c));
	CHECK("ps", rkv_ps_create(c, &ps));
	CHECK("open param", rkv_ps_tensor_open(ps, pn, RKV_PS_FLOAT32, D + 1,
					       &tp));
	CHECK("open grad", rkv_ps_tensor_open(ps, gn, RKV_PS_FLOAT32, D + 2,
					      &tg));
	CHECK("barrier", rkv_ps_barrier_create(c, bn, g->workers, &b));
	CHECK("pull", rkv_ps_pull(tp, p, D + 1, NULL, NULL));
	for (unsigned step = 0; step < g->steps; step++) {
		grad_part(g, d, p, part_lo(g, w), part_lo(g, w + 1), part);
		CHECK("push grad", rkv_ps_push(tg, RKV_PS_SUM, part, D + 2, 0));
		CHECK("barrier 1", rkv_ps_barrier_wait(b, BARRIER_MS));
		if (w == 0) {
			CHECK("pull grad", rkv_ps_pull(tg, sum, D + 2, NULL,
						       NULL));
			printf("step %u loss %.6f\n", step,
			       sum[D + 1] / g->samples);
			fflush(stdout);
			/* the SGD rule reads only the first D + 1 entries */
			CHECK("push sgd", rkv_ps_push(tp, RKV_PS_SGD, sum, D + 1,
						      lr));
			CHECK("reset grad", rkv_ps_push(tg, RKV_PS_ASSIGN, zero,
							D + 2, 0));
		}
		CHECK("barrier 2", rkv_ps_barrier_wait(b, BARRIER_MS));
		CHECK("pull param", rkv_ps_pull(tp, p, D + 1, NULL, NULL));
	}
	if (w == 0 && write_params(g, p))
		goto fail;
	ok = 1;
fail:
	rkv_ps_barrier_destroy(b);
	rkv_ps_tensor_close(tp);
	rkv_ps_tensor_close(tg);
	rkv_ps_destroy(ps);
	rkv_client_destroy(c);
	free(p);
	free(part);
	free(sum);
	free(zero);
	return ok ? 0 : 1;
}

/* Create the tensors before the workers start; delete them after. */
static int setup(const struct cfg *g, int create)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	struct rkv_ps *ps = NULL;
	char pn[96], gn[96], bn[64];
	int rc;

	names(g, pn, gn, bn, sizeof(pn));
	rkv_client_opts_init(&o);
	o.servers = g->servers;
	rc = rkv_client_create(&o, &c);
	if (!rc)
		rc = rkv_ps_create(c, &ps);
	if (!rc && create) {
		rc = rkv_ps_tensor_create(ps, pn, RKV_PS_FLOAT32, g->dim + 1,
					  g->shard, NULL);
		if (!rc)
			rc = rkv_ps_tensor_create(ps, gn, RKV_PS_FLOAT32,
						  g->dim + 2, g->shard, NULL);
	} else if (!rc) {
		rc = rkv_ps_tensor_delete(ps, pn);
		int rc2 = rkv_ps_tensor_delete(ps, gn);

		rc = rc ? rc : rc2;
	}
	if (rc)
		fprintf(stderr, "rkv-example-train: %s tensors: %s\n",
			create ? "create" : "delete", strerror(-rc));
	rkv_ps_destroy(ps);
	rkv_client_destroy(c);
	return rc;
}

/* ------------------------------------------------------------- servers */

struct server_proc {
	pid_t pid;
	char addr[300];
};

static int spawn_server(const char *bindir, const char *provider,
			unsigned i, struct server_proc *sp)
{
	char path[PATH_MAX + 16], listen[128], buf[2048];
	int pfd[2];
	size_t got = 0;

	snprintf(path, sizeof(path), "%s/rkv-server", bindir);
	if (!strcmp(provider, "shm"))
		snprintf(listen, sizeof(listen), "shm:///rkv-train-%d-%u",
			 (int)getpid(), i);
	else if (!strcmp(provider, "verbs") && getenv("RKV_VERBS_IP"))
		snprintf(listen, sizeof(listen), "verbs://%s:0",
			 getenv("RKV_VERBS_IP"));
	else
		snprintf(listen, sizeof(listen), "%s://127.0.0.1:0", provider);
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	sp->pid = fork();
	if (sp->pid < 0)
		return -errno;
	if (sp->pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(devnull, 0);
		dup2(pfd[1], 1);
		execl(path, path, "--listen", listen, "--log-level", "error",
		      "--memory", "64M", "--capacity", "10000", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		ssize_t r;
		char *l;

		if (poll(&pf, 1, 10000) <= 0)
			break;
		r = read(pfd[0], buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
		l = strstr(buf, "listening on ");
		if (l && strchr(l, '\n')) {
			l += strlen("listening on ");
			*strchr(l, '\n') = '\0';
			snprintf(sp->addr, sizeof(sp->addr), "%s", l);
			close(pfd[0]);
			return 0;
		}
		if (got == sizeof(buf) - 1)
			got = 0;
	}
	close(pfd[0]);
	kill(sp->pid, SIGKILL);
	waitpid(sp->pid, NULL, 0);
	return -ETIMEDOUT;
}

static void stop_server(struct server_proc *sp)
{
	if (sp->pid <= 0)
		return;
	kill(sp->pid, SIGTERM);
	waitpid(sp->pid, NULL, 0);
	sp->pid = 0;
}

static int run_distributed(struct cfg *g, const struct data *d,
			   const char *argv0)
{
	struct server_proc sp[MAX_SERVERS_HERE];
	char list[MAX_SERVERS_HERE * 310] = "", bindir[PATH_MAX];
	unsigned nsp = 0;
	pid_t pids[64];
	int failed = 0;

	memset(sp, 0, sizeof(sp));
	if (!g->servers) {
		snprintf(bindir, sizeof(bindir), "%s", argv0);
		char *slash = strrchr(bindir, '/');

		if (slash)
			*slash = '\0';
		else
			snprintf(bindir, sizeof(bindir), ".");
		for (nsp = 0; nsp < g->nservers; nsp++) {
			int rc = spawn_server(bindir, g->provider, nsp,
					      &sp[nsp]);

			if (rc) {
				fprintf(stderr, "rkv-example-train: cannot "
					"start %s/rkv-server: %s\n", bindir,
					strerror(-rc));
				failed = 1;
				goto out;
			}
			if (nsp)
				strcat(list, ",");
			strcat(list, sp[nsp].addr);
		}
		g->servers = list;
	}
	if (setup(g, 1)) {
		failed = 1;
		goto out;
	}
	fflush(stdout);
	for (unsigned w = 0; w < g->workers; w++) {
		pids[w] = fork();
		if (pids[w] == 0)
			_exit(worker(g, d, w));
	}
	for (unsigned w = 0; w < g->workers; w++) {
		int st = -1;

		waitpid(pids[w], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "rkv-example-train: worker %u failed\n",
				w);
			failed = 1;
		}
	}
	setup(g, 0);
out:
	for (unsigned i = 0; i < nsp; i++)
		stop_server(&sp[i]);
	return failed;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rkv-example-train [--single] [--workers W] [--steps S]\n"
		"         [--dim D] [--samples N] [--lr LR] [--seed SEED]\n"
		"         [--shard E] [--out FILE]\n"
		"         [--servers ADDR,...] | [--nservers K] "
		"[--provider tcp|shm]\n");
}

static int num(const char *opt, const char *s, unsigned lo, unsigned hi,
	       unsigned *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end || v < lo || v > hi) {
		fprintf(stderr, "rkv-example-train: --%s: want %u..%u\n", opt,
			lo, hi);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "workers", required_argument, NULL, 'w' },
		{ "steps", required_argument, NULL, 's' },
		{ "dim", required_argument, NULL, 'd' },
		{ "samples", required_argument, NULL, 'n' },
		{ "lr", required_argument, NULL, 'l' },
		{ "seed", required_argument, NULL, 'S' },
		{ "shard", required_argument, NULL, 'e' },
		{ "out", required_argument, NULL, 'o' },
		{ "servers", required_argument, NULL, 'A' },
		{ "nservers", required_argument, NULL, 'k' },
		{ "provider", required_argument, NULL, 'p' },
		{ "single", no_argument, NULL, '1' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cfg g = { .workers = 4, .steps = 30, .dim = 32,
			 .samples = 4096, .shard = 8, .nservers = 2,
			 .lr = 2.0f, .seed = 1, .provider = "tcp" };
	struct data d;
	unsigned seed = 1;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'w': if (num("workers", optarg, 1, 64, &g.workers)) return 2; break;
		case 's': if (num("steps", optarg, 1, 100000, &g.steps)) return 2; break;
		case 'd': if (num("dim", optarg, 1, 1u << 20, &g.dim)) return 2; break;
		case 'n': if (num("samples", optarg, 1, 1u << 24, &g.samples)) return 2; break;
		case 'e': if (num("shard", optarg, 1, 65000, &g.shard)) return 2; break;
		case 'k': if (num("nservers", optarg, 1, MAX_SERVERS_HERE, &g.nservers)) return 2; break;
		case 'S': if (num("seed", optarg, 0, UINT_MAX, &seed)) return 2; break;
		case 'l': g.lr = strtof(optarg, NULL); break;
		case 'o': g.out = optarg; break;
		case 'A': g.servers = optarg; break;
		case 'p': g.provider = optarg; break;
		case '1': g.single = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (strcmp(g.provider, "tcp") && strcmp(g.provider, "shm") &&
	    strcmp(g.provider, "verbs")) {
		usage(stderr);
		return 2;
	}
	g.seed = seed;
	snprintf(g.run, sizeof(g.run), "%d-%ld", (int)getpid(),
		 (long)time(NULL));
	if (data_make(&g, &d)) {
		fprintf(stderr, "rkv-example-train: out of memory\n");
		return 1;
	}
	printf("logistic regression: %u samples x %u features, %u workers, "
	       "%u steps, lr %g (%s)\n", g.samples, g.dim, g.workers, g.steps,
	       g.lr, g.single ? "single process" : "rkv parameter server");
	int rc = g.single ? run_single(&g, &d) : run_distributed(&g, &d, argv[0]);

	free(d.x);
	free(d.y);
	return rc;
}
