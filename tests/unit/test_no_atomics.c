/* SPDX-License-Identifier: MIT */
/*
 * test_no_atomics.c - a fabric without remote atomics (iWARP, some RoCE
 * configurations) is refused at start, by the server and by a client,
 * with one line that says rkv needs 8-byte RDMA atomics and names the
 * device's description.  The fake provider plays the fabric
 * (rkv_fake_set_no_atomics); on verbs the same check reads the device's
 * atomic_cap (verbs.c).
 */
#include <errno.h>
#include <string.h>

#include "fake.h"
#include "rkv.h"
#include "server_internal.h"
#include "test.h"

struct logbuf {
	char text[1024];
};

static void keep_log(int level, const char *msg, void *arg)
{
	struct logbuf *b = arg;

	size_t n = strlen(b->text);

	(void)level;
	snprintf(b->text + n, sizeof(b->text) - n, "%s\n", msg);
}

static void t_server_refuses(void)
{
	struct rkv_srv_config cfg;
	struct rkv_srv *srv = NULL;
	char why[512] = "";

	rkv_srv_config_init(&cfg);
	snprintf(cfg.listen, sizeof(cfg.listen), "fake:///no-atomics");
	cfg.memory = 1 << 20;
	cfg.nbuckets = 16;
	rkv_fake_set_no_atomics(1);
	EXPECT_EQ(rkv_srv_create_why(&cfg, &srv, why, sizeof(why)),
		  -EOPNOTSUPP);
	rkv_fake_set_no_atomics(0);
	printf("# %s\n", why);
	EXPECT_TRUE(strstr(why, "fake (deterministic, single-threaded, no "
				"atomics) reports no remote atomics: rkv needs "
				"8-byte RDMA compare-and-swap and "
				"fetch-and-add") != NULL);
	EXPECT_TRUE(strchr(why, '\n') == NULL);
	/* with atomics the same configuration starts */
	EXPECT_EQ(rkv_srv_create_why(&cfg, &srv, why, sizeof(why)), 0);
	rkv_srv_destroy(srv);
}

static void t_client_refuses(void)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	struct logbuf lb = { "" };

	rkv_client_opts_init(&o);
	o.servers = "fake:///nobody";
	o.connect_timeout_ms = 100;
	o.log_fn = keep_log;
	o.log_arg = &lb;
	rkv_fake_set_no_atomics(1);
	EXPECT_EQ(rkv_client_create(&o, &c), -EOPNOTSUPP);
	rkv_fake_set_no_atomics(0);
	EXPECT_TRUE(c == NULL);
	for (char *nl; (nl = strchr(lb.text, '\n'));)
		*nl = '|';
	printf("# %s\n", lb.text);
	EXPECT_TRUE(strstr(lb.text, "reports no remote atomics: rkv needs "
				    "8-byte RDMA compare-and-swap") != NULL);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	rkv_log_set_level(RKV_LOG_OFF);
	RKV_TEST(t_server_refuses);
	RKV_TEST(t_client_refuses);
	return rkv_test_done();
}
