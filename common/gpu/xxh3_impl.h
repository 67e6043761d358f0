/* SPDX-License-Identifier: MIT */
/*
 * xxh3_impl.h - XXH3_64bits_withSeed written once for the host and the GPU.
 *
 * The block checksum (proto/layout.h) is xxh3-64; a GPU that checks or
 * seals blocks in its own memory must compute exactly the same digest as
 * the host's libxxhash, so blocks stay interoperable.  This is a plain
 * scalar transcription of xxHash 0.8's XXH3_64bits_withSeed (all length
 * classes: 0, 1-3, 4-8, 9-16, 17-128, 129-240, and the long-input loop with
 * a seed-derived secret), one thread per input.  Included by
 * common/gpu/kernels.cu (device) and by tests/unit/test_mem.c (host, where
 * it is compared against libxxhash on every length class).
 *
 * RKV_XXH_FN qualifies the functions: __host__ __device__ under nvcc.
 * The caller passes the 192-byte default secret (RKV_XXH3_KSECRET).
 */
#ifndef RKV_COMMON_GPU_XXH3_IMPL_H
#define RKV_COMMON_GPU_XXH3_IMPL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define RKV_XXH_FN static __host__ __device__ inline
#else
#define RKV_XXH_FN static inline
#endif

#define RKV_XXH3_SECRET_SIZE 192
#define RKV_XXH3_KSECRET \
	0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
	0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, \
	0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, \
	0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, \
	0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, \
	0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, \
	0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, \
	0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, \
	0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, \
	0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, \
	0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, \
	0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e, \
	/* end */

#define RKV_XXH_P32_1 0x9E3779B1u
#define RKV_XXH_P32_2 0x85EBCA77u
#define RKV_XXH_P32_3 0xC2B2AE3Du
#define RKV_XXH_P64_1 0x9E3779B185EBCA87ull
#define RKV_XXH_P64_2 0xC2B2AE3D27D4EB4Full
#define RKV_XXH_P64_3 0x165667B19E3779F9ull
#define RKV_XXH_P64_4 0x85EBCA77C2B2AE63ull
#define RKV_XXH_P64_5 0x27D4EB2F165667C5ull
#define RKV_XXH_MX1 0x165667919E3779F9ull
#define RKV_XXH_MX2 0x9FB21C651E98DF25ull

/* little-endian loads, byte by byte (no alignment assumed) */
RKV_XXH_FN uint32_t rkv_xxh_r32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

RKV_XXH_FN uint64_t rkv_xxh_r64(const uint8_t *p)
{
	return (uint64_t)rkv_xxh_r32(p) | (uint64_t)rkv_xxh_r32(p + 4) << 32;
}

RKV_XXH_FN uint64_t rkv_xxh_rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

RKV_XXH_FN uint64_t rkv_xxh_swap64(uint64_t x)
{
	x = (x & 0x00000000FFFFFFFFull) << 32 | (x & 0xFFFFFFFF00000000ull) >> 32;
	x = (x & 0x0000FFFF0000FFFFull) << 16 | (x & 0xFFFF0000FFFF0000ull) >> 16;
	x = (x & 0x00FF00FF00FF00FFull) << 8 | (x & 0xFF00FF00FF00FF00ull) >> 8;
	return x;
}

RKV_XXH_FN uint32_t rkv_xxh_swap32(uint32_t x)
{
	return (x << 24) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) |
	       (x >> 24);
}

/* low 64 bits xor high 64 bits of the 128-bit product */
RKV_XXH_FN uint64_t rkv_xxh_mulfold(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
	return (a * b) ^ __umul64hi(a, b);
#else
	unsigned __int128 p = (unsigned __int128)a * b;

	return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}

RKV_XXH_FN uint64_t rkv_xxh64_aval(uint64_t h)
{
	h ^= h >> 33;
	h *= RKV_XXH_P64_2;
	h ^= h >> 29;
	h *= RKV_XXH_P64_3;
	h ^= h >> 32;
	return h;
}

RKV_XXH_FN uint64_t rkv_xxh3_aval(uint64_t h)
{
	h ^= h >> 37;
	h *= RKV_XXH_MX1;
	h ^= h >> 32;
	return h;
}

RKV_XXH_FN uint64_t rkv_xxh3_rrmxmx(uint64_t h, uint64_t len)
{
	h ^= rkv_xxh_rotl(h, 49) ^ rkv_xxh_rotl(h, 24);
	h *= RKV_XXH_MX2;
	h ^= (h >> 35) + len;
	h *= RKV_XXH_MX2;
	return h ^ (h >> 28);
}

RKV_XXH_FN uint64_t rkv_xxh3_mix16(const uint8_t *in, const uint8_t *sec,
				   uint64_t seed)
{
	return rkv_xxh_mulfold(rkv_xxh_r64(in) ^ (rkv_xxh_r64(sec) + seed),
			       rkv_xxh_r64(in + 8) ^ (rkv_xxh_r64(sec + 8) - seed));
}

RKV_XXH_FN uint64_t rkv_xxh3_0to16(const uint8_t *in, size_t len,
				   const uint8_t *sec, uint64_t seed)
{
	if (len > 8) {
		uint64_t f1 = (rkv_xxh_r64(sec + 24) ^ rkv_xxh_r64(sec + 32)) + seed;
		uint64_t f2 = (rkv_xxh_r64(sec + 40) ^ rkv_xxh_r64(sec + 48)) - seed;
		uint64_t lo = rkv_xxh_r64(in) ^ f1;
		uint64_t hi = rkv_xxh_r64(in + len - 8) ^ f2;
		uint64_t acc = len + rkv_xxh_swap64(lo) + hi +
			       rkv_xxh_mulfold(lo, hi);

		return rkv_xxh3_aval(acc);
	}
	if (len >= 4) {
		uint64_t s = seed ^ (uint64_t)rkv_xxh_swap32((uint32_t)seed) << 32;
		uint32_t i1 = rkv_xxh_r32(in), i2 = rkv_xxh_r32(in + len - 4);
		uint64_t flip = (rkv_xxh_r64(sec + 8) ^ rkv_xxh_r64(sec + 16)) - s;
		uint64_t i64 = i2 + ((uint64_t)i1 << 32);

		return rkv_xxh3_rrmxmx(i64 ^ flip, len);
	}
	if (len) {
		uint32_t c = ((uint32_t)in[0] << 16) |
			     ((uint32_t)in[len >> 1] << 24) |
			     (uint32_t)in[len - 1] | ((uint32_t)len << 8);
		uint64_t flip = (rkv_xxh_r32(sec) ^ rkv_xxh_r32(sec + 4)) + seed;

		return rkv_xxh64_aval((uint64_t)c ^ flip);
	}
	return rkv_xxh64_aval(seed ^ (rkv_xxh_r64(sec + 56) ^ rkv_xxh_r64(sec + 64)));
}

RKV_XXH_FN uint64_t rkv_xxh3_17to128(const uint8_t *in, size_t len,
				     const uint8_t *sec, uint64_t seed)
{
	uint64_t acc = len * RKV_XXH_P64_1;

	if (len > 32) {
		if (len > 64) {
			if (len > 96) {
				acc += rkv_xxh3_mix16(in + 48, sec + 96, seed);
				acc += rkv_xxh3_mix16(in + len - 64, sec + 112, seed);
			}
			acc += rkv_xxh3_mix16(in + 32, sec + 64, seed);
			acc += rkv_xxh3_mix16(in + len - 48, sec + 80, seed);
		}
		acc += rkv_xxh3_mix16(in + 16, sec + 32, seed);
		acc += rkv_xxh3_mix16(in + len - 32, sec + 48, seed);
	}
	acc += rkv_xxh3_mix16(in, sec, seed);
	acc += rkv_xxh3_mix16(in + len - 16, sec + 16, seed);
	return rkv_xxh3_aval(acc);
}

RKV_XXH_FN uint64_t rkv_xxh3_129to240(const uint8_t *in, size_t len,
				      const uint8_t *sec, uint64_t seed)
{
	uint64_t acc = len * RKV_XXH_P64_1, end;
	unsigned rounds = (unsigned)(len / 16), i;

	for (i = 0; i < 8; i++)
		acc += rkv_xxh3_mix16(in + 16 * i, sec + 16 * i, seed);
	/* XXH3_SECRET_SIZE_MIN 136 - XXH3_MIDSIZE_LASTOFFSET 17 */
	end = rkv_xxh3_mix16(in + len - 16, sec + 136 - 17, seed);
	acc = rkv_xxh3_aval(acc);
	for (i = 8; i < rounds; i++)
		end += rkv_xxh3_mix16(in + 16 * i, sec + 16 * (i - 8) + 3, seed);
	return rkv_xxh3_aval(acc + end);
}

RKV_XXH_FN void rkv_xxh3_acc512(uint64_t *acc, const uint8_t *in,
				const uint8_t *sec)
{
	for (int i = 0; i < 8; i++) {
		uint64_t v = rkv_xxh_r64(in + 8 * i);
		uint64_t k = v ^ rkv_xxh_r64(sec + 8 * i);

		acc[i ^ 1] += v;
		acc[i] += (uint64_t)(uint32_t)k * (k >> 32);
	}
}

RKV_XXH_FN void rkv_xxh3_scramble(uint64_t *acc, const uint8_t *sec)
{
	for (int i = 0; i < 8; i++) {
		uint64_t a = acc[i];

		a ^= a >> 47;
		a ^= rkv_xxh_r64(sec + 8 * i);
		a *= RKV_XXH_P32_1;
		acc[i] = a;
	}
}

/* Inputs over 240 bytes; sec is the (seed-derived) 192-byte secret. */
RKV_XXH_FN uint64_t rkv_xxh3_long(const uint8_t *in, size_t len,
				  const uint8_t *sec)
{
	uint64_t acc[8] = { RKV_XXH_P32_3, RKV_XXH_P64_1, RKV_XXH_P64_2,
			    RKV_XXH_P64_3, RKV_XXH_P64_4, RKV_XXH_P32_2,
			    RKV_XXH_P64_5, RKV_XXH_P32_1 };
	const size_t stripes = (RKV_XXH3_SECRET_SIZE - 64) / 8; /* per block */
	const size_t block = 64 * stripes;
	size_t nb = (len - 1) / block, n, s, last;
	uint64_t r;

	for (n = 0; n < nb; n++) {
		for (s = 0; s < stripes; s++)
			rkv_xxh3_acc512(acc, in + n * block + s * 64, sec + s * 8);
		rkv_xxh3_scramble(acc, sec + RKV_XXH3_SECRET_SIZE - 64);
	}
	last = ((len - 1) - block * nb) / 64;
	for (s = 0; s < last; s++)
		rkv_xxh3_acc512(acc, in + nb * block + s * 64, sec + s * 8);
	/* the last stripe, XXH_SECRET_LASTACC_START 7 */
	rkv_xxh3_acc512(acc, in + len - 64, sec + RKV_XXH3_SECRET_SIZE - 64 - 7);
	/* merge, XXH_SECRET_MERGEACCS_START 11 */
	r = len * RKV_XXH_P64_1;
	for (int i = 0; i < 4; i++)
		r += rkv_xxh_mulfold(acc[2 * i] ^ rkv_xxh_r64(sec + 11 + 16 * i),
				     acc[2 * i + 1] ^
					     rkv_xxh_r64(sec + 11 + 16 * i + 8));
	return rkv_xxh3_aval(r);
}

/*
 * XXH3_64bits_withSeed(in, len, seed).  ksecret: the default secret;
 * scratch: 192 bytes for the seed-derived secret of long inputs.
 */
RKV_XXH_FN uint64_t rkv_xxh3_64(const void *input, size_t len, uint64_t seed,
				const uint8_t *ksecret, uint8_t *scratch)
{
	const uint8_t *in = (const uint8_t *)input;

	if (len <= 16)
		return rkv_xxh3_0to16(in, len, ksecret, seed);
	if (len <= 128)
		return rkv_xxh3_17to128(in, len, ksecret, seed);
	if (len <= 240)
		return rkv_xxh3_129to240(in, len, ksecret, seed);
	if (seed == 0)
		return rkv_xxh3_long(in, len, ksecret);
	for (int i = 0; i < RKV_XXH3_SECRET_SIZE / 16; i++) {
		uint64_t lo = rkv_xxh_r64(ksecret + 16 * i) + seed;
		uint64_t hi = rkv_xxh_r64(ksecret + 16 * i + 8) - seed;

		for (int b = 0; b < 8; b++) {
			scratch[16 * i + b] = (uint8_t)(lo >> (8 * b));
			scratch[16 * i + 8 + b] = (uint8_t)(hi >> (8 * b));
		}
	}
	return rkv_xxh3_long(in, len, scratch);
}

#endif
