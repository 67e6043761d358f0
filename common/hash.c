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

/*
 * rkv_hash_copy's one pass: XXH3_update runs over dst, and its accumulate,
 * given a stripe of dst's range, loads the stripe from the same place in
 * src, stores it to dst and hashes the register it loaded.  Every other
 * byte XXH3_update reads from dst it copies into its own buffer (at most
 * the first XXH3_INTERNALBUFFER_SIZE bytes of a call, and the last stripe
 * before the buffered tail and the tail, so at most the last COPY_TAIL):
 * rkv_hash_copy copies those first.  So every byte is hashed as dst holds
 * it at the end, even if src changes meanwhile (a torn READ is caught, as
 * with a copy then a hash).  The accumulates are xxhash's own (0.8.1)
 * with the store added; test_xxh3 checks the digest and the copy against
 * rkv_hash_update for every variant, length and cut.
 *
 * The accumulate's signature is xxhash's (accumulators, input, secret),
 * so the range rides with the secret: for the call the state hashes with
 * a copy of its secret at the start of a COPY_CTX_ALIGN-aligned copy_ctx,
 * and every secret pointer an accumulate is given lies within its first
 * secretLimit bytes, so rounding it down finds the context (a thread-local
 * would cost a __tls_get_addr call per stripe in a shared library, and
 * the initial-exec model cannot be loaded by dlopen, as Python does).
 *
 * 1 MiB, cache-hot, on the AVX-512 EPYC of docs/DESIGN.md's figures:
 * AVX-512 20-27 us fused against 31-34 copied then hashed (memcpy 20),
 * SSE2 58 against 77; AVX2 fused took 58 against 40, so AVX2 copies then
 * hashes.
 */
#define COPY_HEAD XXH3_INTERNALBUFFER_SIZE
#define COPY_TAIL (XXH3_INTERNALBUFFER_SIZE + XXH_STRIPE_LEN)
#define COPY_CTX_ALIGN 256

struct copy_ctx {
	_Alignas(COPY_CTX_ALIGN) unsigned char secret[RKV_HASH_SECRET_SIZE];
	uintptr_t lo;	/* dst */
	size_t n;	/* its length */
	const char *src;
};

_Static_assert(RKV_HASH_SECRET_SIZE - XXH_STRIPE_LEN < COPY_CTX_ALIGN,
	       "an accumulate's secret pointer rounds down to its copy_ctx");

/* Where the stripe at input comes from: src when it is one of dst's
 * stripes (*store set: store it to input as it is loaded), else input. */
XXH_FORCE_INLINE const char *stripe_from(const void *input,
					  const void *secret, int *store)
{
	const struct copy_ctx *c =
		(const struct copy_ctx *)((uintptr_t)secret &
					  ~(uintptr_t)(COPY_CTX_ALIGN - 1));
	uintptr_t at = (uintptr_t)input - c->lo;

	*store = at < c->n;
	return *store ? c->src + at : (const char *)input;
}

XXH_FORCE_INLINE XXH_TARGET_AVX512 void
acc_copy_avx512(void *XXH_RESTRICT acc, const void *XXH_RESTRICT input,
		const void *XXH_RESTRICT secret)
{
	__m512i *const xacc = (__m512i *)acc;
	int store;
	const char *from = stripe_from(input, secret, &store);
	__m512i const data_vec = _mm512_loadu_si512(from);

	if (store)
		_mm512_storeu_si512((void *)(uintptr_t)input, data_vec);
	{
		__m512i const key_vec = _mm512_loadu_si512(secret);
		__m512i const data_key = _mm512_xor_si512(data_vec, key_vec);
		__m512i const data_key_lo = _mm512_shuffle_epi32(
			data_key, (_MM_PERM_ENUM)_MM_SHUFFLE(0, 3, 0, 1));
		__m512i const product = _mm512_mul_epu32(data_key, data_key_lo);
		__m512i const data_swap = _mm512_shuffle_epi32(
			data_vec, (_MM_PERM_ENUM)_MM_SHUFFLE(1, 0, 3, 2));
		__m512i const sum = _mm512_add_epi64(*xacc, data_swap);

		*xacc = _mm512_add_epi64(product, sum);
	}
}

XXH_FORCE_INLINE void acc_copy_sse2(void *XXH_RESTRICT acc,
				    const void *XXH_RESTRICT input,
				    const void *XXH_RESTRICT secret)
{
	__m128i *const xacc = (__m128i *)acc;
	const __m128i *const xsecret = (const __m128i *)secret;
	__m128i *const xout = (__m128i *)(uintptr_t)input;
	int store;
	const __m128i *const xin =
		(const __m128i *)stripe_from(input, secret, &store);

	for (size_t i = 0; i < XXH_STRIPE_LEN / sizeof(__m128i); i++) {
		__m128i const data_vec = _mm_loadu_si128(xin + i);

		if (store)
			_mm_storeu_si128(xout + i, data_vec);
		{
			__m128i const key_vec = _mm_loadu_si128(xsecret + i);
			__m128i const data_key = _mm_xor_si128(data_vec, key_vec);
			__m128i const data_key_lo = _mm_shuffle_epi32(
				data_key, _MM_SHUFFLE(0, 3, 0, 1));
			__m128i const product =
				_mm_mul_epu32(data_key, data_key_lo);
			__m128i const data_swap = _mm_shuffle_epi32(
				data_vec, _MM_SHUFFLE(1, 0, 3, 2));
			__m128i const sum = _mm_add_epi64(xacc[i], data_swap);

			xacc[i] = _mm_add_epi64(product, sum);
		}
	}
}

XXH_TARGET_AVX512 static void cpy_avx512(XXH3_state_t *st, void *dst,
					  size_t n)
{
	XXH3_update(st, dst, n, acc_copy_avx512, XXH3_scrambleAcc_avx512);
}

static void cpy_sse2(XXH3_state_t *st, void *dst, size_t n)
{
	XXH3_update(st, dst, n, acc_copy_sse2, XXH3_scrambleAcc_sse2);
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

#ifdef RKV_HASH_X86
	void (*cpy)(XXH3_state_t *, void *, size_t) = NULL;

	if (g_rkv_hash_long == long_avx512)
		cpy = cpy_avx512;
	else if (g_rkv_hash_long == long_sse2)
		cpy = cpy_sse2;
	if (cpy && n > COPY_HEAD + COPY_TAIL && h->st.extSecret) {
		struct copy_ctx c = { .lo = (uintptr_t)d, .n = n, .src = s };
		const unsigned char *secret = h->st.extSecret;

		memcpy(c.secret, secret, sizeof(c.secret));
		memcpy(d, s, COPY_HEAD);
		memcpy(d + n - COPY_TAIL, s + n - COPY_TAIL, COPY_TAIL);
		h->st.extSecret = c.secret;
		cpy(&h->st, d, n);
		h->st.extSecret = secret;
		return;
	}
	if (cpy) { /* short: what it copies fits the cache anyway */
		memcpy(d, s, n);
		rkv_hash_update(h, d, n);
		return;
	}
#endif
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
