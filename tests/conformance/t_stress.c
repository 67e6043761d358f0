/* SPDX-License-Identifier: MIT */
/*
 * t_stress.c - a million small operations with nothing growing.
 *
 * 8 B READs posted as chains of 32 with only the last signaled, up to four
 * chains in flight (128 WRs, half of max_send_wr), every value checked.
 * Count: 1,000,000 on tcp and shm, 20,000 on verbs (Soft-RoCE manages a
 * few tens of thousands of operations a second); RKV_CONF_OPS overrides.
 * Resident memory after the run may exceed that after a warm-up by at most
 * 8 MiB (skipped in sanitizer builds, where quarantine and shadow memory
 * grow on their own and LeakSanitizer does the job instead).
 */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtime.h"

enum {
	CHAIN = 32,
	WINDOW = 4,
	WORDS = 8192, /* 64 KiB of distinct words on the server */
	RSS_SLACK_KIB = 8192,
};

static uint64_t value_of(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull;
}

static void t_million_ops(void)
{
	struct conf_fix_opts o;
	struct conf_fix f;
	struct rkv_wr w[WINDOW][CHAIN], *bad;
	uint64_t first[WINDOW];  /* word index of each slot's first WR */
	int busy[WINDOW] = { 0 };
	uint64_t total = conf_scale(1000000, 20000), posted = 0, done = 0;
	uint64_t warm, t0, tw = 0;
	long rss0 = -1, rss1;
	const char *env = getenv("RKV_CONF_OPS");
	uint64_t *reg;

	if (env && *env)
		total = strtoull(env, NULL, 10);
	total = (total + CHAIN - 1) / CHAIN * CHAIN;
	warm = total / 10 / CHAIN * CHAIN;
	conf_fix_opts_init(&o);
	o.region_len = WORDS * 8;
	o.local_len = WINDOW * CHAIN * 8;
	CONF_FIX(&f, &o);
	reg = (uint64_t *)(void *)f.s.reg;
	conf_mem_begin();
	for (uint64_t i = 0; i < WORDS; i++)
		reg[i] = value_of(i);
	conf_mem_end();
	t0 = rkv_now_ms();
	while (done < total) {
		int slot = -1;

		for (int k = 0; k < WINDOW; k++) {
			if (!busy[k]) {
				slot = k;
				break;
			}
		}
		if (slot >= 0 && posted < total) {
			for (int j = 0; j < CHAIN; j++) {
				uint64_t idx = (posted + (uint64_t)j) % WORDS;

				conf_wr(&w[slot][j], RKV_WR_READ,
					(uint64_t)slot,
					j == CHAIN - 1 ? RKV_WR_SIGNALED : 0,
					f.c.loc + 8 * (slot * CHAIN + j), 8,
					f.c.loc_mr->lkey,
					conf_raddr(&f.s, 8 * idx),
					f.s.mr->rkey);
				w[slot][j].next = j + 1 < CHAIN ?
						  &w[slot][j + 1] : NULL;
			}
			first[slot] = posted;
			if (rkv_post(f.c.ep, w[slot], &bad)) {
				printf("#   rkv_post failed after %" PRIu64
				       " ops\n", posted);
				g_test_failures++;
				break;
			}
			busy[slot] = 1;
			posted += CHAIN;
			continue;
		}
		conf_stash_clear(&f.c.st);
		if (conf_wait(&f.s, &f.c, 1, 0, conf_bound_ms())) {
			printf("#   stalled after %" PRIu64 " of %" PRIu64
			       " ops\n", done, total);
			g_test_failures++;
			break;
		}
		for (int i = 0; i < f.c.st.n; i++) {
			struct rkv_wc *wc = &f.c.st.wc[i];
			int k = (int)wc->wr_id;

			if (wc->status != RKV_WC_SUCCESS || k < 0 ||
			    k >= WINDOW || !busy[k]) {
				printf("#   op %" PRIu64 ": %s, wr_id %" PRIu64
				       "\n", done,
				       rkv_wc_status_str(wc->status),
				       wc->wr_id);
				g_test_failures++;
				goto out;
			}
			for (int j = 0; j < CHAIN; j++) {
				uint64_t v, idx = (first[k] + (uint64_t)j) %
						  WORDS;

				memcpy(&v, f.c.loc + 8 * (k * CHAIN + j), 8);
				if (v != value_of(idx)) {
					printf("#   op %" PRIu64 ": read 0x%"
					       PRIx64 ", expected 0x%" PRIx64
					       "\n", first[k] + (uint64_t)j, v,
					       value_of(idx));
					g_test_failures++;
					goto out;
				}
			}
			busy[k] = 0;
			done += CHAIN;
			if (rss0 < 0 && done >= warm) {
				rss0 = conf_rss_kib();
				tw = rkv_now_ms();
			}
		}
	}
out:
	rss1 = conf_rss_kib();
	{
		uint64_t ms = rkv_now_ms() - t0;

		printf("#   %" PRIu64 " READs in %" PRIu64 " ms (%.0f ops/s);"
		       " RSS %ld -> %ld KiB after warm-up\n",
		       done, ms, ms ? (double)done * 1000.0 / (double)ms : 0.0,
		       rss0, rss1);
	}
	(void)tw;
	EXPECT_EQ_U64(done, total);
	EXPECT_EQ(rkv_ep_state(f.c.ep), RKV_EP_CONNECTED);
	if (!CONF_SANITIZED && rss0 > 0 && rss1 > rss0 + RSS_SLACK_KIB) {
		printf("#   RSS grew by %ld KiB\n", rss1 - rss0);
		g_test_failures++;
	}
	/* Nothing left over: no stray completion after the last. */
	conf_stash_clear(&f.c.st);
	conf_quiesce(&f.s, &f.c, 20);
	EXPECT_EQ(f.c.st.n, 0);
	conf_fix_destroy(&f);
}

void conf_tests_stress(void)
{
	CONF_TEST(t_million_ops);
}
