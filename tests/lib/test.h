/* SPDX-License-Identifier: MIT */
/*
 * test.h - the test harness: failure-counting EXPECT_* macros, TAP output,
 * exit status 0 (pass), 1 (fail) or 77 (skip), and an alarm() watchdog so a
 * hung test dies instead of blocking the run.
 *
 *   static void t_foo(void) { EXPECT_EQ(1 + 1, 2); }
 *   int main(int argc, char **argv) {
 *       rkv_test_init(argc, argv, 60);
 *       RKV_TEST(t_foo);
 *       return rkv_test_done();
 *   }
 *
 * A test calls rkv_test_skip("reason") to skip itself.  tests/run.sh reads
 * the TAP lines ("ok N - name", "not ok N - name", "# SKIP reason").
 */
#ifndef RKV_TESTS_LIB_TEST_H
#define RKV_TESTS_LIB_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Sanitizer builds: memory-growth checks are meaningless there (ASan's
 * quarantine, TSan's shadow memory), so tests skip them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RKV_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RKV_TEST_SANITIZED 1
#endif
#endif
#ifndef RKV_TEST_SANITIZED
#define RKV_TEST_SANITIZED 0
#endif
/* Margins of "promptly" bounds (never performance goals) grow this much
 * under sanitizers, which slow every step 2-10x on a loaded machine. */
#define RKV_TEST_SLACK (RKV_TEST_SANITIZED ? 5u : 1u)

extern int g_test_failures;   /* failures in the current test */
extern int g_test_skipped;    /* current test asked to skip */
extern char g_test_skip_why[256];

void rkv_test_init(int argc, char **argv, unsigned watchdog_s);
void rkv_test_run(const char *name, void (*fn)(void));
/* Run only tests whose name contains the filter given with -t. */
const char *rkv_test_filter(void);
void rkv_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exit status: 1 if any test failed, 77 if all were skipped, else 0. */
int rkv_test_done(void);

#define RKV_TEST(fn) rkv_test_run(#fn, fn)

#define EXPECT_TRUE(c)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			g_test_failures++;                                     \
			printf("#   %s:%d: expected %s\n", __FILE__, __LINE__, \
			       #c);                                            \
		}                                                              \
	} while (0)

#define EXPECT_EQ(a, b)                                                        \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a != _b) {                                                \
			g_test_failures++;                                     \
			printf("#   %s:%d: %s == %s: %lld != %lld\n",          \
			       __FILE__, __LINE__, #a, #b, _a, _b);            \
		}                                                              \
	} while (0)

#define EXPECT_EQ_U64(a, b)                                                    \
	do {                                                                   \
		uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b);               \
		if (_a != _b) {                                                \
			g_test_failures++;                                     \
			printf("#   %s:%d: %s == %s: 0x%" PRIx64               \
			       " != 0x%" PRIx64 "\n",                          \
			       __FILE__, __LINE__, #a, #b, _a, _b);            \
		}                                                              \
	} while (0)

#define EXPECT_STREQ(a, b)                                                     \
	do {                                                                   \
		const char *_a = (a), *_b = (b);                               \
		if (!_a || !_b || strcmp(_a, _b) != 0) {                       \
			g_test_failures++;                                     \
			printf("#   %s:%d: %s == %s: \"%s\" != \"%s\"\n",      \
			       __FILE__, __LINE__, #a, #b, _a ? _a : "(null)", \
			       _b ? _b : "(null)");                            \
		}                                                              \
	} while (0)

/* Stop the current test when a precondition fails. */
#define ASSERT_TRUE(c)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			g_test_failures++;                                     \
			printf("#   %s:%d: required %s\n", __FILE__, __LINE__, \
			       #c);                                            \
			return;                                                \
		}                                                              \
	} while (0)

#define ASSERT_EQ(a, b)                                                        \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a != _b) {                                                \
			g_test_failures++;                                     \
			printf("#   %s:%d: required %s == %s: %lld != %lld\n", \
			       __FILE__, __LINE__, #a, #b, _a, _b);            \
			return;                                                \
		}                                                              \
	} while (0)

#endif
