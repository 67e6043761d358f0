/* SPDX-License-Identifier: MIT */
/*
 * test_registry.c - common/registry.h: cluster URLs (good ones and each
 * way of being bad), the etcd keys of a cluster, and registrations in and
 * out of their text form (missing fields, binary junk, unknown lines).
 */
#include <errno.h>
#include <string.h>

#include "registry.h"
#include "test.h"

static void t_url(void)
{
	struct rkv_reg_url u;
	char why[300], key[RKV_REG_KEY_MAX];

	EXPECT_EQ(rkv_reg_parse_url("etcd://127.0.0.1:2379/prod", &u, why,
				    sizeof(why)), 0);
	EXPECT_STREQ(u.endpoint, "etcd://127.0.0.1:2379");
	EXPECT_STREQ(u.cluster, "prod");
	rkv_reg_map_key(&u, key, sizeof(key));
	EXPECT_STREQ(key, "/rkv/prod/map");
	rkv_reg_server_key(&u, "alpha", key, sizeof(key));
	EXPECT_STREQ(key, "/rkv/prod/servers/alpha");
	rkv_reg_servers_prefix(&u, key, sizeof(key));
	EXPECT_STREQ(key, "/rkv/prod/servers/");
	EXPECT_EQ(rkv_reg_parse_url("etcd://[::1]:2379/a.b_c-1", &u, why,
				    sizeof(why)), 0);
	EXPECT_TRUE(rkv_reg_is_url("etcd://x"));
	EXPECT_TRUE(!rkv_reg_is_url("/etc/rkv/cluster"));
	EXPECT_TRUE(!rkv_reg_is_url(NULL));
	static const char *const bad[] = {
		"http://127.0.0.1:2379/prod", "etcd://127.0.0.1:2379",
		"etcd://127.0.0.1:2379/", "etcd://127.0.0.1/prod",
		"etcd:///prod", "etcd://h:1/has/slash", "etcd://h:1/sp ace",
		"", NULL,
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		EXPECT_EQ(rkv_reg_parse_url(bad[i], &u, why, sizeof(why)),
			  -EINVAL);
		EXPECT_TRUE(why[0] != '\0');
	}
	char longname[200];

	memset(longname, 'a', sizeof(longname));
	memcpy(longname, "etcd://h:1/", 11);
	longname[sizeof(longname) - 1] = '\0';
	EXPECT_EQ(rkv_reg_parse_url(longname, &u, why, sizeof(why)), -EINVAL);
}

static void t_server(void)
{
	struct rkv_reg_server s = { .name = "alpha",
				    .addr = "tcp://10.0.0.1:7000",
				    .proto = 3, .pid = 4242,
				    .boot = 0x8000000000000abcull }, t;
	char buf[1024], why[300];
	int n = rkv_reg_server_format(&s, buf, sizeof(buf));

	ASSERT_TRUE(n > 0);
	EXPECT_EQ(rkv_reg_server_parse("alpha", buf, (size_t)n, &t, why,
				       sizeof(why)), 0);
	EXPECT_STREQ(t.name, "alpha");
	EXPECT_STREQ(t.addr, s.addr);
	EXPECT_EQ(t.proto, 3);
	EXPECT_EQ(t.pid, 4242);
	EXPECT_EQ_U64(t.boot, 0x8000000000000abcull);
	EXPECT_EQ(rkv_reg_server_format(&s, buf, 10), -ENOSPC);
	/* a later version's extra line is ignored */
	static const char more[] = "addr tcp://h:1\nproto 4\nzone eu-1\n";

	EXPECT_EQ(rkv_reg_server_parse("b", more, strlen(more), &t, why,
				       sizeof(why)), 0);
	EXPECT_EQ(t.proto, 4);
	EXPECT_EQ_U64(t.boot, 0); /* none: an older server's */
	static const char badboot[] = "addr tcp://h:1\nproto 4\nboot 12g\n";

	EXPECT_EQ(rkv_reg_server_parse("b", badboot, strlen(badboot), &t, why,
				       sizeof(why)), 0);
	EXPECT_EQ_U64(t.boot, 0);
	static const char noaddr[] = "proto 3\n";

	EXPECT_EQ(rkv_reg_server_parse("b", noaddr, strlen(noaddr), &t, why,
				       sizeof(why)), -EINVAL);
	EXPECT_TRUE(strstr(why, "lacks an address") != NULL);
	static const char noproto[] = "addr tcp://h:1\nproto x3\n";

	EXPECT_EQ(rkv_reg_server_parse("b", noproto, strlen(noproto), &t, why,
				       sizeof(why)), -EINVAL);
	static const char junk[] = "addr tcp://h:1\0\001proto 3";

	EXPECT_EQ(rkv_reg_server_parse("b", junk, sizeof(junk), &t, why,
				       sizeof(why)), -EINVAL);
	EXPECT_EQ(rkv_reg_server_parse("", more, strlen(more), &t, why,
				       sizeof(why)), -EINVAL);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 30);
	RKV_TEST(t_url);
	RKV_TEST(t_server);
	return rkv_test_done();
}
