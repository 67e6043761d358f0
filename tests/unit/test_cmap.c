/* SPDX-License-Identifier: MIT */
/*
 * test_cmap.c - the cluster map (proto/cmap.h): placement depends on the
 * servers' names only (any order of listing gives the same owner for
 * every key), a server added to N takes about 1/(N+1) of 100k keys and
 * every key that moves goes to it, a server removed gives up exactly its
 * own keys, the partitions are spread evenly; and the text forms parse,
 * or fail with the line and the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmap.h"
#include "layout.h"
#include "test.h"

#define NKEYS 100000u

static struct rkv_map *new_map(void)
{
	struct rkv_map *m = malloc(sizeof(*m));

	if (m)
		rkv_map_init(m);
	return m;
}

static void add(struct rkv_map *m, const char *name, unsigned i)
{
	char addr[64], why[128] = "";

	snprintf(addr, sizeof(addr), "tcp://10.0.0.%u:7000", i);
	EXPECT_EQ(rkv_map_add(m, name, addr, why, sizeof(why)), 0);
}

static uint64_t route_of(unsigned k)
{
	struct rkv_key_hash kh;
	char key[32];

	snprintf(key, sizeof(key), "key:%u", k);
	rkv_key_hash(key, strlen(key), &kh);
	return kh.route;
}

static const char *owner_name(const struct rkv_map *m, uint64_t route)
{
	return m->srv[rkv_map_owner(m, route)].name;
}

/* Every listing order of five servers places every key alike. */
static void t_order(void)
{
	static const char *names[5] = { "alpha", "bravo", "charlie", "delta",
					"echo" };
	struct rkv_map *a = new_map(), *b = new_map();
	unsigned perm[5] = { 0, 1, 2, 3, 4 };

	ASSERT_TRUE(a && b);
	for (unsigned i = 0; i < 5; i++)
		add(a, names[i], i);
	rkv_map_place(a);
	srand(7);
	for (unsigned round = 0; round < 20; round++) {
		for (unsigned i = 4; i > 0; i--) {
			unsigned j = (unsigned)rand() % (i + 1), t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		rkv_map_init(b);
		for (unsigned i = 0; i < 5; i++)
			add(b, names[perm[i]], perm[i]);
		rkv_map_place(b);
		unsigned differ = 0;

		for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
			differ += strcmp(a->srv[a->owner[p]].name,
					 b->srv[b->owner[p]].name) != 0;
		EXPECT_EQ(differ, 0);
	}
	free(a);
	free(b);
}

/* Replica sets (r = 2, 3): r distinct servers per partition, the first
 * the owner, the same whatever the listing order, each the r best
 * rendezvous scores; a server added enters some sets, and each set keeps
 * its other members in their order (a removed one leaves only its own);
 * every server is primary of about 1/N and a backup of about (r-1)/N. */
static void t_replicas(void)
{
	static const char *names[5] = { "alpha", "bravo", "charlie", "delta",
					"echo" };
	struct rkv_map *a = new_map(), *b = new_map(), *g = new_map();

	ASSERT_TRUE(a && b && g);
	for (unsigned r = 2; r <= 3; r++) {
		unsigned bad = 0, differ = 0, entered = 0, unstable = 0;
		unsigned as_backup[6] = { 0 }, as_prim[6] = { 0 };

		rkv_map_init(a);
		rkv_map_init(b);
		rkv_map_init(g);
		a->replicas = b->replicas = g->replicas = r;
		for (unsigned i = 0; i < 5; i++) {
			add(a, names[i], i);
			add(b, names[4 - i], 4 - i);
			add(g, names[i], i);
		}
		add(g, "newcomer", 200);
		rkv_map_place(a);
		rkv_map_place(b);
		rkv_map_place(g);
		EXPECT_EQ(rkv_map_r(a), r);
		for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
			const uint16_t *ra = rkv_map_replicas(a, p);
			const uint16_t *rb = rkv_map_replicas(b, p);
			const uint16_t *rg = rkv_map_replicas(g, p);

			bad += ra[0] != a->owner[p];
			for (unsigned j = 0; j < r; j++) {
				differ += strcmp(a->srv[ra[j]].name,
						 b->srv[rb[j]].name) != 0;
				for (unsigned k = j + 1; k < r; k++)
					bad += ra[j] == ra[k];
				if (j + 1 < r)
					bad += rkv_map_score(&a->srv[ra[j]], p) <
					       rkv_map_score(&a->srv[ra[j + 1]],
							     p);
				(j ? as_backup : as_prim)[ra[j]]++;
			}
			/* g = a + newcomer: a's set with the newcomer put in
			 * its place and the last one pushed out, or a's set */
			unsigned ja = 0, has_new = 0;

			for (unsigned j = 0; j < r; j++) {
				if (!strcmp(g->srv[rg[j]].name, "newcomer")) {
					has_new = 1;
					continue;
				}
				unstable += strcmp(g->srv[rg[j]].name,
						   a->srv[ra[ja]].name) != 0;
				ja++;
			}
			entered += has_new;
		}
		/* every server scores below the r-th of each set it is not in */
		for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
			const uint16_t *ra = rkv_map_replicas(a, p);
			uint64_t last = rkv_map_score(&a->srv[ra[r - 1]], p);

			for (unsigned i = 0; i < 5; i++) {
				int in = 0;

				for (unsigned j = 0; j < r; j++)
					in |= ra[j] == i;
				bad += !in && rkv_map_score(&a->srv[i], p) > last;
			}
		}
		double fe = (double)entered / RKV_MAP_PARTS;

		printf("#   r=%u: the newcomer entered %.3f of the replica "
		       "sets (r/6 = %.3f); primaries per server", r, fe,
		       r / 6.0);
		for (unsigned i = 0; i < 5; i++)
			printf(" %u", as_prim[i]);
		printf(", backups");
		for (unsigned i = 0; i < 5; i++)
			printf(" %u", as_backup[i]);
		printf("\n");
		EXPECT_EQ(bad, 0);
		EXPECT_EQ(differ, 0);
		EXPECT_EQ(unstable, 0);
		EXPECT_TRUE(fe > r / 6.0 * 0.9 && fe < r / 6.0 * 1.1);
		for (unsigned i = 0; i < 5; i++) {
			double want = RKV_MAP_PARTS / 5.0;

			EXPECT_TRUE(as_prim[i] > want * 0.85 &&
				    as_prim[i] < want * 1.15);
			EXPECT_TRUE(as_backup[i] > want * (r - 1) * 0.85 &&
				    as_backup[i] < want * (r - 1) * 1.15);
		}
	}
	/* r above n: the map places min(r, n) */
	rkv_map_init(a);
	a->replicas = 3;
	add(a, "solo", 1);
	add(a, "duo", 2);
	rkv_map_place(a);
	EXPECT_EQ(rkv_map_r(a), 2);
	free(a);
	free(b);
	free(g);
}

/* The names of partition p's replicas in m, as one string. */
static void set_names(const struct rkv_map *m, unsigned p, char *out,
		      size_t cap)
{
	size_t off = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < rkv_map_nrep(m, p); k++)
		off += (size_t)snprintf(out + off, cap - off, "%s ",
					m->srv[m->rep[p][k]].name);
}

/* A server in transit: joining, each set is the set without it plus it
 * at the end where the map with it places it (the primary unchanged);
 * leaving, the set with it plus the server that replaces it; the text
 * form keeps the state, and bad uses are refused. */
static void t_transit(void)
{
	static const char *names[4] = { "alpha", "bravo", "charlie", "delta" };
	struct rkv_map *before = new_map(), *after = new_map(), *t = new_map();
	char text[4096], why[256], x[256], y[256];

	ASSERT_TRUE(before && after && t);
	for (unsigned r = 2; r <= 3; r++) {
		for (int leave = 0; leave < 2; leave++) {
			unsigned bad = 0, extra = 0;

			rkv_map_init(before);
			rkv_map_init(after);
			rkv_map_init(t);
			before->replicas = after->replicas = t->replicas = r;
			for (unsigned i = 0; i < 4; i++) {
				add(t, names[i], i);
				/* joining: delta; leaving: alpha */
				if (leave ? 1 : i < 3)
					add(before, names[i], i);
				if (leave ? i > 0 : 1)
					add(after, names[i], i);
			}
			t->srv[leave ? 0 : 3].state =
				leave ? RKV_MAP_LEAVING : RKV_MAP_JOINING;
			rkv_map_place(before);
			rkv_map_place(after);
			rkv_map_place(t);
			EXPECT_EQ(rkv_map_transit(t), leave ? 0 : 3);
			EXPECT_EQ(rkv_map_r(t), r);
			for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
				const struct rkv_map_server *prim =
					&t->srv[t->owner[p]];
				unsigned n = rkv_map_nrep(t, p);

				/* the set before, then the one server the
				 * set after adds */
				for (unsigned k = 0; k < r; k++)
					bad += strcmp(t->srv[t->rep[p][k]].name,
						      before->srv[before->rep[p][k]]
							      .name) != 0;
				bad += strcmp(prim->name,
					      before->srv[before->owner[p]].name);
				bad += prim->state == RKV_MAP_JOINING;
				for (unsigned k = 0; k < r; k++) {
					const char *nm = after->srv[after->rep[p][k]]
								 .name;
					int s = rkv_map_find(t, nm);

					bad += s < 0 ||
					       !rkv_map_holds(t, p, (unsigned)s);
				}
				bad += n != r && n != r + 1;
				extra += n == r + 1;
			}
			printf("#   r=%u, %s: %u of %u partitions hold %u "
			       "copies meanwhile\n", r,
			       leave ? "alpha leaving" : "delta joining", extra,
			       RKV_MAP_PARTS, r + 1);
			EXPECT_EQ(bad, 0);
			EXPECT_TRUE(extra > 0 && extra < RKV_MAP_PARTS);
			/* the text form keeps it */
			ASSERT_TRUE(rkv_map_format(t, text, sizeof(text)) > 0);
			EXPECT_TRUE(strstr(text, leave ? "alpha tcp://10.0.0.0:7000 "
							 "leaving\n"
						       : "delta tcp://10.0.0.3:7000 "
							 "joining\n") != NULL);
			ASSERT_EQ(rkv_map_parse(text, after, why, sizeof(why)), 0);
			for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
				set_names(t, p, x, sizeof(x));
				set_names(after, p, y, sizeof(y));
				bad += strcmp(x, y) != 0;
			}
			EXPECT_EQ(bad, 0);
		}
	}
	/* with fewer members than r: the sets before have the others, the
	 * server joining is the r-th (never a primary) */
	EXPECT_EQ(rkv_map_parse("replicas 2\nb tcp://h:2\nj tcp://h:3 joining\n",
				t, why, sizeof(why)), 0);
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++) {
		set_names(t, p, x, sizeof(x));
		if (strcmp(x, "b j ")) {
			printf("#   partition %u: %s\n", p, x);
			EXPECT_STREQ(x, "b j ");
			break;
		}
	}
	EXPECT_EQ(rkv_map_parse("replicas 2\na tcp://h:1\nb tcp://h:2 joining\n"
				"c tcp://h:3 leaving\n", t, why, sizeof(why)),
		  -EINVAL);
	EXPECT_TRUE(strstr(why, "two servers in transit") != NULL);
	EXPECT_EQ(rkv_map_parse("a tcp://h:1\nb tcp://h:2 joining\n", t, why,
				sizeof(why)), -EINVAL);
	EXPECT_TRUE(strstr(why, "replicas 2 or more") != NULL);
	EXPECT_EQ(rkv_map_parse("replicas 2\na tcp://h:1\nb tcp://h:2 gone\n",
				t, why, sizeof(why)), -EINVAL);
	EXPECT_TRUE(strstr(why, "'joining' or 'leaving'") != NULL);
	free(before);
	free(after);
	free(t);
}

/* N -> N+1: about 1/(N+1) of the keys move, all of them to the new
 * server; N+1 -> N: only the removed server's keys move. */
static void t_movement(void)
{
	struct rkv_map *m = new_map(), *g = new_map();
	char name[32];

	ASSERT_TRUE(m && g);
	for (unsigned n = 1; n <= 8; n++) {
		unsigned moved = 0, wrong = 0;

		rkv_map_init(m);
		rkv_map_init(g);
		for (unsigned i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "srv-%u", i);
			add(m, name, i);
			add(g, name, i);
		}
		add(g, "newcomer", 200);
		rkv_map_place(m);
		rkv_map_place(g);
		for (unsigned k = 0; k < NKEYS; k++) {
			uint64_t r = route_of(k);
			const char *before = owner_name(m, r);
			const char *after = owner_name(g, r);

			if (strcmp(before, after) != 0) {
				moved++;
				wrong += strcmp(after, "newcomer") != 0;
			}
		}
		double frac = (double)moved / NKEYS, want = 1.0 / (n + 1);

		printf("#   %u -> %u servers: %.4f of %u keys moved (1/%u = "
		       "%.4f)\n", n, n + 1, frac, NKEYS, n + 1, want);
		EXPECT_EQ(wrong, 0);
		EXPECT_TRUE(frac > want * 0.9 && frac < want * 1.1);
		/* and back: removing the newcomer moves its keys only */
		unsigned back = 0, stayed_wrong = 0;

		for (unsigned k = 0; k < NKEYS; k++) {
			uint64_t r = route_of(k);

			if (strcmp(owner_name(g, r), "newcomer") == 0)
				back++;
			else
				stayed_wrong += strcmp(owner_name(g, r),
						       owner_name(m, r)) != 0;
		}
		EXPECT_EQ(back, moved);
		EXPECT_EQ(stayed_wrong, 0);
	}
	free(m);
	free(g);
}

/* Each of N servers owns close to 1/N of the partitions. */
static void t_balance(void)
{
	struct rkv_map *m = new_map();
	unsigned per[16];
	char name[32];

	ASSERT_TRUE(m != NULL);
	for (unsigned n = 2; n <= 16; n *= 2) {
		rkv_map_init(m);
		memset(per, 0, sizeof(per));
		for (unsigned i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "node%u.example", i);
			add(m, name, i);
		}
		rkv_map_place(m);
		for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
			per[m->owner[p]]++;
		unsigned lo = RKV_MAP_PARTS, hi = 0;

		for (unsigned i = 0; i < n; i++) {
			lo = per[i] < lo ? per[i] : lo;
			hi = per[i] > hi ? per[i] : hi;
		}
		printf("#   %u servers: %u..%u partitions each (mean %u)\n", n,
		       lo, hi, RKV_MAP_PARTS / n);
		EXPECT_TRUE(lo > RKV_MAP_PARTS / n * 80 / 100);
		EXPECT_TRUE(hi < RKV_MAP_PARTS / n * 120 / 100);
	}
	free(m);
}

static void t_names(void)
{
	char name[RKV_SERVER_NAME_MAX];
	char long_name[100];

	EXPECT_EQ(rkv_server_name_check("a"), 0);
	EXPECT_EQ(rkv_server_name_check("rack1-node_2.dc:7000"), 0);
	EXPECT_EQ(rkv_server_name_check(""), -EINVAL);
	EXPECT_EQ(rkv_server_name_check(NULL), -EINVAL);
	EXPECT_EQ(rkv_server_name_check("has space"), -EINVAL);
	EXPECT_EQ(rkv_server_name_check("slash/no"), -EINVAL);
	memset(long_name, 'x', sizeof(long_name));
	long_name[RKV_SERVER_NAME_MAX - 1] = '\0';
	EXPECT_EQ(rkv_server_name_check(long_name), 0);
	long_name[RKV_SERVER_NAME_MAX - 1] = 'x';
	long_name[RKV_SERVER_NAME_MAX] = '\0';
	EXPECT_EQ(rkv_server_name_check(long_name), -EINVAL);
	EXPECT_EQ(rkv_server_name_from_addr("tcp://127.0.0.1:7000", name,
					    sizeof(name)), 0);
	EXPECT_STREQ(name, "127.0.0.1:7000");
	EXPECT_EQ(rkv_server_name_from_addr("shm:///rkv-a", name,
					    sizeof(name)), 0);
	EXPECT_STREQ(name, "rkv-a");
	EXPECT_EQ(rkv_server_name_from_addr("verbs://[fe80::1]:7000", name,
					    sizeof(name)), 0);
	EXPECT_STREQ(name, "[fe80::1]:7000");
	EXPECT_EQ(rkv_server_name_from_addr("tcp://h o:1", name,
					    sizeof(name)), -EINVAL);
}

static void expect_parse_error(const char *text, const char *want)
{
	struct rkv_map *m = new_map();
	char why[256] = "";

	ASSERT_TRUE(m != NULL);
	EXPECT_EQ(rkv_map_parse(text, m, why, sizeof(why)), -EINVAL);
	if (!strstr(why, want))
		printf("#   '%s': why '%s' lacks '%s'\n", text, why, want);
	EXPECT_TRUE(strstr(why, want) != NULL);
	free(m);
}

static void t_parse(void)
{
	struct rkv_map *m = new_map(), *l = new_map();
	char why[256] = "";

	ASSERT_TRUE(m && l);
	EXPECT_EQ(rkv_map_parse("# a cluster\n"
				"alpha tcp://10.0.0.1:7000\n"
				"\n"
				"  tcp://10.0.0.2:7000   # by address\n"
				"\tgamma\tshm:///rkv-gamma\r\n",
				m, why, sizeof(why)), 0);
	EXPECT_EQ(m->n, 3);
	EXPECT_STREQ(m->srv[0].name, "alpha");
	EXPECT_TRUE(m->srv[0].named);
	EXPECT_STREQ(m->srv[1].name, "10.0.0.2:7000");
	EXPECT_TRUE(!m->srv[1].named);
	EXPECT_STREQ(m->srv[2].addr, "shm:///rkv-gamma");
	EXPECT_EQ(rkv_map_find(m, "gamma"), 2);
	EXPECT_EQ(rkv_map_find(m, "delta"), -1);
	EXPECT_EQ(rkv_map_parse_list("alpha=tcp://10.0.0.1:7000, "
				     "tcp://10.0.0.2:7000,gamma=shm:///rkv-gamma",
				     l, why, sizeof(why)), 0);
	EXPECT_EQ(l->n, 3);
	EXPECT_TRUE(memcmp(l->owner, m->owner, sizeof(m->owner)) == 0);
	EXPECT_EQ(rkv_map_parse_list("tcp://h:1,,tcp://h:2", l, why,
				     sizeof(why)), 0);
	EXPECT_EQ(l->n, 2);
	EXPECT_EQ(rkv_map_parse_list("", l, why, sizeof(why)), -EINVAL);
	EXPECT_EQ(rkv_map_parse_list("nonsense", l, why, sizeof(why)),
		  -EINVAL);
	EXPECT_EQ(rkv_map_parse_list("a=tcp://h:1,a=tcp://h:2", l, why,
				     sizeof(why)), -EINVAL);
	expect_parse_error("", "no servers");
	expect_parse_error("# only a comment\n", "no servers");
	expect_parse_error("a tcp://h:1\nb tcp://h:2\na tcp://h:3\n",
			   "line 3: server name 'a' listed twice");
	expect_parse_error("a tcp://h:1\nb tcp://h:1\n",
			   "line 2: address 'tcp://h:1' listed twice");
	expect_parse_error("a b c\n", "line 1: 'c'");
	expect_parse_error("x\n", "line 1: 'x' is not a server address");
	expect_parse_error("bad/name tcp://h:1\n", "is not a server name");
	expect_parse_error("tcp://h:1\ntcp://h:1\n", "listed twice");
	expect_parse_error("a tcp://h:1\nepoch 3\n", "line 2: 'epoch' must come");
	expect_parse_error("epoch 0\na tcp://h:1\n", "line 1: '0' is not an epoch");
	expect_parse_error("epoch -1\na tcp://h:1\n", "is not an epoch");
	expect_parse_error("epoch 7x\na tcp://h:1\n", "is not an epoch");
	/* epoch line and the text form round trip */
	char text[4096];
	int n;

	EXPECT_EQ(rkv_map_parse("epoch 12\nalpha tcp://h:1\ntcp://h:2\n", m,
				why, sizeof(why)), 0);
	EXPECT_EQ_U64(m->epoch, 12);
	EXPECT_EQ(m->n, 2);
	n = rkv_map_format(m, text, sizeof(text));
	EXPECT_TRUE(n > 0);
	EXPECT_STREQ(text, "epoch 12\nalpha tcp://h:1\nh:2 tcp://h:2\n");
	EXPECT_EQ(rkv_map_parse(text, l, why, sizeof(why)), 0);
	EXPECT_TRUE(memcmp(l->owner, m->owner, sizeof(m->owner)) == 0);
	EXPECT_EQ(rkv_map_format(m, text, 10), -ENOSPC);
	/* replicas: parsed, formatted, placed; bad counts refused */
	EXPECT_EQ(rkv_map_parse("epoch 3\nreplicas 2\na tcp://h:1\n"
				"b tcp://h:2\nc tcp://h:3\n", m, why,
				sizeof(why)), 0);
	EXPECT_EQ(m->replicas, 2);
	EXPECT_EQ(rkv_map_r(m), 2);
	n = rkv_map_format(m, text, sizeof(text));
	EXPECT_STREQ(text, "epoch 3\nreplicas 2\na tcp://h:1\nb tcp://h:2\n"
		     "c tcp://h:3\n");
	EXPECT_EQ(rkv_map_parse(text, l, why, sizeof(why)), 0);
	EXPECT_TRUE(memcmp(l->rep, m->rep, sizeof(m->rep)) == 0);
	for (unsigned p = 0; p < RKV_MAP_PARTS; p++)
		EXPECT_TRUE(m->rep[p][0] != m->rep[p][1]);
	EXPECT_EQ(rkv_map_parse("a tcp://h:1\n", m, why, sizeof(why)), 0);
	EXPECT_EQ(rkv_map_r(m), 1);
	n = rkv_map_format(m, text, sizeof(text));
	EXPECT_STREQ(text, "a tcp://h:1\n");
	expect_parse_error("replicas 3\na tcp://h:1\nb tcp://h:2\n",
			   "replicas 3, but only 2 servers are listed");
	expect_parse_error("replicas 0\na tcp://h:1\n",
			   "line 1: '0' is not a replica count (1 to 3)");
	expect_parse_error("replicas 4\na tcp://h:1\n", "not a replica count");
	expect_parse_error("replicas 22\na tcp://h:1\n", "not a replica count");
	expect_parse_error("a tcp://h:1\nreplicas 2\n",
			   "line 2: 'replicas' must come once");
	expect_parse_error("replicas 1\nreplicas 1\na tcp://h:1\n",
			   "'replicas' must come once");
	/* a member's boot: parsed after the address or the state, kept
	 * in the text form, bad ones refused */
	EXPECT_EQ(rkv_map_parse("epoch 4\nreplicas 2\n"
				"a tcp://h:1 boot=00000000000000ff\n"
				"b tcp://h:2 joining boot=1f\nc tcp://h:3\n",
				m, why, sizeof(why)), 0);
	EXPECT_EQ_U64(m->srv[0].boot, 0xff);
	EXPECT_EQ_U64(m->srv[1].boot, 0x1f);
	EXPECT_EQ(m->srv[1].state, RKV_MAP_JOINING);
	EXPECT_EQ_U64(m->srv[2].boot, 0);
	n = rkv_map_format(m, text, sizeof(text));
	EXPECT_STREQ(text, "epoch 4\nreplicas 2\n"
		     "a tcp://h:1 boot=00000000000000ff\n"
		     "b tcp://h:2 joining boot=000000000000001f\n"
		     "c tcp://h:3\n");
	EXPECT_EQ(rkv_map_parse(text, l, why, sizeof(why)), 0);
	EXPECT_EQ_U64(l->srv[1].boot, 0x1f);
	EXPECT_TRUE(memcmp(l->rep, m->rep, sizeof(m->rep)) == 0);
	expect_parse_error("a tcp://h:1 boot=0\n", "boot=HEX, not 0");
	expect_parse_error("a tcp://h:1 boot=xyz\n", "boot=HEX");
	expect_parse_error("a tcp://h:1 boot=\n", "boot=HEX");
	expect_parse_error("a tcp://h:1 boot=-1\n", "boot=HEX");
	expect_parse_error("a tcp://h:1 boot=1 boot=2\n", "'boot=2'");
	expect_parse_error("a tcp://h:1 boot=1 joining\n", "'joining'");
	expect_parse_error("epoch 2 boot=1\na tcp://h:1\n",
			   "boot= belongs on a server line");
	free(m);
	free(l);
}

int main(int argc, char **argv)
{
	rkv_test_init(argc, argv, 60);
	RKV_TEST(t_order);
	RKV_TEST(t_movement);
	RKV_TEST(t_replicas);
	RKV_TEST(t_transit);
	RKV_TEST(t_balance);
	RKV_TEST(t_names);
	RKV_TEST(t_parse);
	return rkv_test_done();
}
