/* SPDX-License-Identifier: MIT */
/*
 * hash.c - prepared xxh3 seeds and the long-input variants (hash.h).
 *
 * XXH3's long loop (inputs over 240 bytes: every block checksum of a
 * value of about 200 bytes or more) comes in four variants here: scalar,
 * SSE2 (every x86-64), AVX2 and AVX-512 (16 us a MiB against AVX2's 22
 * on an AVX-512 machine).  The build targets the baseline ISA (no
 * -march=native: the tests run in a Nehalem-class guest), so the AVX2
 * and AVX-512 variants are compiled with a target attribute, as
 * libxxhash's own xxh_x86dispatch.c does, and a constructor installs the
 * fastest only when the CPU and the OS support it.  Until then (other
 * constructors) the baseline variant is in place: every variant computes
 * the same digest.
 */
/* xxh_x86dispatch.c's settings: accumulators aligned for any variant,
 * the AVX2 and AVX-512 functions compiled with their target attribute */
#define XXH_ACC_ALIGN 64
#if defined(__x86_64__) && defined(__GNUC__)
#define RKV_HASH_X86 1
#define XXH_DISPATCH_AVX2 1
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#define XXH_TARGET_AVX512 __attribute__((__target__("avx512f")))
#include <immintrin.h> /* the AVX2 types, whatever the build's ISA */
#endif
#include "hash.h"

#include <string.h>

void rkv_hash_seed_init(struct rkv_hash_seed *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	XXH3_generateSecret_fromSeed(s->secret, seed);
	s->seed = seed;
}

static uint64_t long_scalar(const void *p, size_t n, const void *secret)
{
	return XXH3_hashLong_64b_internal(p, n, secret, RKV_HASH_SECRET_SIZE,
					  XXH3_accumulate_512_scalar,
					  XXH3_scrambleAcc_scalar);
}

#ifdef RKV_HASH_X86
static uint64_t long_sse2(const void *p, size_t n, const void *secret)
{
	return XXH3_hashLong_64b_internal(p, n, secret, RKV_HASH_SECRET_SIZE,
					  XXH3_accumulate_512_sse2,
					  XXH3_scrambleAcc_sse2);
}

XXH_TARGET_AVX2 static uint64_t long_avx2(const void *p, size_t n,
					  const void *secret)
{
	return XXH3_hashLong_64b_internal(p, n, secret, RKV_HASH_SECRET_SIZE,
					  XXH3_accumulate_512_avx2,
					  XXH3_scrambleAcc_avx2);
}

XXH_TARGET_AVX512 static uint64_t long_avx512(const void *p, size_t n,
					      const void *secret)
{
	return XXH3_hashLong_64b_internal(p, n, secret, RKV_HASH_SECRET_SIZE,
					  XXH3_accumulate_512_avx512,
					  XXH3_scrambleAcc_avx512);
}

XXH_TARGET_AVX512 static void upd_avx512(XXH3_state_t *st, const void *p,
					  size_t n)
{
	XXH3_update(st, p, n, XXH3_accumulate_512_avx512,
		    XXH3_scrambleAcc_avx512);
}

XXH_TARGET_AVX2 static void upd_avx2(XXH3_state_t *st, const void *p,
				      size_t n)
{
	XXH3_update(st, p, n, XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}

static void upd_sse2(XXH3_state_t *st, const void *p, size_t n)
{
	XXH3_update(st, p, n, XXH3_accumulate_512_sse2, XXH3_scrambleAcc_sse2);
}

/* libgcc's checks include the OS's: XCR0 says it saves the registers */
static int have_avx2(void)
{
	__builtin_cpu_init(); /* we may run before libgcc's constructor */
	return __builtin_cpu_supports("avx2");
}

static int have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

rkv_hash_long_fn g_rkv_hash_long = long_sse2;
#else
rkv_hash_long_fn g_rkv_hash_long = long_scalar;
#endif

static const struct {
	const char *name;
	rkv_hash_long_fn fn;
} g_variants[] = {
#ifdef RKV_HASH_X86
	{ "avx512", long_avx512 },
	{ "avx2", long_avx2 },
	{ "sse2", long_sse2 },
#endif
	{ "scalar", long_scalar },
};

static void upd_scalar(XXH3_state_t *st, const void *p, size_t n)
{
	XXH3_update(st, p, n, XXH3_accumulate_512_scalar,
		    XXH3_scrambleAcc_scalar);
}

void rkv_hash_start(struct rkv_hash_state *h, const struct rkv_hash_seed *s)
{
	memset(h, 0, sizeof(*h)); /* gcc's maybe-uninitialized */
	/* the prepared secret: the digest of XXH3_64bits_reset_withSeed */
	XXH3_64bits_reset_withSecretandSeed(&h->st, s->secret,
					    RKV_HASH_SECRET_SIZE, s->seed);
}

/* The streaming loop of the variant in use (tests switch it). */
void rkv_hash_update(struct rkv_hash_state *h, const void *p, size_t n)
{
#ifdef RKV_HASH_X86
	if (g_rkv_hash_long == long_avx512)
		upd_avx512(&h->st, p, n);
	else if (g_rkv_hash_long == long_avx2)
		upd_avx2(&h->st, p, n);
	else if (g_rkv_hash_long == long_sse2)
		upd_sse2(&h->st, p, n);
	else
#endif
		upd_scalar(&h->st, p, n);
}

uint64_t rkv_hash_digest(const struct rkv_hash_state *h)
{
	return XXH3_64bits_digest(&h->st);
}

void rkv_hash_copy(struct rkv_hash_state *h, void *dst, const void *src,
		   size_t n)
{
	char *d = dst;
	const char *s = src;

	while (n) {
		size_t k = n < RKV_HASH_COPY_CHUNK ? n : RKV_HASH_COPY_CHUNK;

		memcpy(d, s, k);
		rkv_hash_update(h, d, k);
		d += k;
		s += k;
		n -= k;
	}
}

const char *rkv_hash_variant(unsigned i, rkv_hash_long_fn *fn)
{
	if (i >= sizeof(g_variants) / sizeof(g_variants[0]))
		return NULL;
	*fn = g_variants[i].fn;
#ifdef RKV_HASH_X86
	if ((g_variants[i].fn == long_avx512 && !have_avx512()) ||
	    (g_variants[i].fn == long_avx2 && !have_avx2()))
		*fn = NULL;
#endif
	return g_variants[i].name;
}

const char *rkv_hash_variant_in_use(void)
{
	for (unsigned i = 0; i < sizeof(g_variants) / sizeof(g_variants[0]);
	     i++)
		if (g_variants[i].fn == g_rkv_hash_long)
			return g_variants[i].name;
	return "?";
}

/* Install the fastest variant this CPU runs, before main. */
__attribute__((constructor)) static void hash_pick(void)
{
#ifdef RKV_HASH_X86
	if (have_avx512())
		g_rkv_hash_long = long_avx512;
	else if (have_avx2())
		g_rkv_hash_long = long_avx2;
#endif
}
