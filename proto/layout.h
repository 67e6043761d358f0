/* SPDX-License-Identifier: MIT */
/*
 * layout.h - the remote memory layouts that clients read and change with
 * one-sided operations: the slot word, the 64-byte bucket, and the KV block.
 *
 * Index region (host memory, remote read/write/atomic): nbuckets buckets
 * (a power of two) of the server's bucket slots (--bucket-slots, a power
 * of two from RKV_BUCKET_SLOTS_MIN to RKV_BUCKET_SLOTS_MAX, told at
 * HELLO).  A slot is one 8-byte word changed only by CAS.  An empty slot
 * is 0.  A key hashes (xxh3, two seeds) to two candidate buckets that a
 * reader fetches in one doorbell; an insert takes the emptier.
 *
 * Slot word, bit by bit (little-endian host order, as NIC atomics see it):
 *
 *   63      62      61..54     53..46   45..34       33..0
 *   lock    tent    version    fp       size         offset
 *   1 bit   1 bit   8 bits     8 bits   12 bits      34 bits
 *
 *   offset   block offset in the data region, in 64-byte units (1 TiB)
 *   size     block size class, 1..4095 (so never 0 when used): below
 *            2048 the size in 64-byte units; from 2048 on a float of 4
 *            exponent and 7 mantissa bits, (128 + m) << (e + 4) units
 *            (128 KiB to 1 GiB in steps of at most 1/128; a big block is
 *            allocated at its class size, rkv_block_size)
 *   fp       fingerprint: top byte of the key's first hash
 *   tent     tentative: an insert in progress; readers skip the slot,
 *            writers of the key wait for it to be committed or withdrawn
 *   version  bumped (mod 256) by every change except taking the lock, so
 *            a stale expected value never matches again (ABA)
 *   lock     read-modify-write lock; a locked slot still names the last
 *            published block, which gets read without waiting
 *
 * KV block (data region, 64-byte aligned, immutable once published):
 *
 *   struct rkv_block_hdr  32 bytes: checksum, key_len, flags, val_len,
 *                         writer, grant, version
 *   key                   key_len bytes
 *   value                 val_len bytes
 *   padding               to a multiple of 64
 *
 * checksum = xxh3-64 (seed RKV_BLOCK_SEED) over the header from key_len on,
 * the key and the value.  A reader accepts a block only if the checksum and
 * the key match, so a torn, unwritten or reused block is never returned.
 *
 * All multi-byte fields are little-endian; rkv supports little-endian hosts
 * only (NIC atomics act on host-order words; see the assertion below).
 */
#ifndef RKV_PROTO_LAYOUT_H
#define RKV_PROTO_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "rkv's remote layouts are little-endian host words");

/* Slots a bucket holds: larger buckets fill further before an insert
 * finds both of its buckets full (docs/DESIGN.md §4: 8 slots 66-79 % of
 * the index, 32 slots 92-94 %), and cost a cold lookup more bytes. */
#define RKV_BUCKET_SLOTS_MIN 8u
#define RKV_BUCKET_SLOTS_MAX 64u
#define RKV_BUCKET_SLOTS_DEFAULT 32u
#define RKV_BUCKET_MAX_BYTES (RKV_BUCKET_SLOTS_MAX * 8u)
#define RKV_BLOCK_ALIGN 64
#define RKV_BLOCK_HDR_SIZE 32

#define RKV_SLOT_OFF_BITS 34
#define RKV_SLOT_SIZE_BITS 12
#define RKV_SLOT_FP_BITS 8
#define RKV_SLOT_VER_BITS 8

#define RKV_SLOT_SIZE_SHIFT RKV_SLOT_OFF_BITS
#define RKV_SLOT_FP_SHIFT (RKV_SLOT_SIZE_SHIFT + RKV_SLOT_SIZE_BITS)
#define RKV_SLOT_VER_SHIFT (RKV_SLOT_FP_SHIFT + RKV_SLOT_FP_BITS)
#define RKV_SLOT_TENT_SHIFT (RKV_SLOT_VER_SHIFT + RKV_SLOT_VER_BITS)
#define RKV_SLOT_TENT (1ull << RKV_SLOT_TENT_SHIFT)
#define RKV_SLOT_LOCK_SHIFT (RKV_SLOT_TENT_SHIFT + 1)
#define RKV_SLOT_LOCK (1ull << RKV_SLOT_LOCK_SHIFT)

_Static_assert(RKV_SLOT_LOCK_SHIFT == 63, "slot fields fill 64 bits");

/* Largest block: 1 GiB, the largest size class a transport moves in one
 * message (RKV_TP_MAX_MSG). */
#define RKV_MAX_BLOCK (1u << 30)
/* Blocks up to this size are small: read through a client's op buffers,
 * and back for reuse after the server's grace period; a longer extent
 * (a big block) waits its big grace period (rkv-server --big-grace):
 * a big read may take longer than the grace period of small ones. */
#define RKV_SMALL_BLOCK_MAX (4095u * RKV_BLOCK_ALIGN)
/* Sizes below this many units are exact; above, a size class. */
#define RKV_SLOT_LINEAR_UNITS 2048u
/* Largest data region the slot can address. */
#define RKV_MAX_DATA_REGION ((1ull << RKV_SLOT_OFF_BITS) * RKV_BLOCK_ALIGN)

/* Key and value limits (EMSGSIZE beyond them; an empty key is EINVAL). */
/* The same two names, with the same tokens, are client/rkv.h's public
 * limits (an identical redefinition is allowed; either header may come
 * first). */
#define RKV_KEY_MAX 1024u
#define RKV_VALUE_MAX 67108864u /* 64 MiB: the default limit */
/* The largest value any server can be set to take (rkv-server
 * --max-value): it fills the largest block with the largest key.  The
 * block format's checks use this; the limit in force is the server's,
 * told to clients at HELLO. */
#define RKV_VALUE_LIMIT 1073740768u
_Static_assert(RKV_VALUE_LIMIT == RKV_MAX_BLOCK - RKV_BLOCK_HDR_SIZE -
	       RKV_KEY_MAX, "the largest value fills the largest block");

#define RKV_BLOCK_SEED 0x726b76626c6b3031ull /* "rkvblk01" */

struct rkv_block_hdr {
	uint64_t checksum; /* xxh3-64 of everything after this field */
	uint16_t key_len;  /* 1..RKV_KEY_MAX */
	uint16_t flags;    /* RKV_BLOCK_F_* */
	uint32_t val_len;  /* 0..RKV_VALUE_LIMIT */
	uint32_t writer;   /* client id of the writer */
	uint32_t grant;    /* id of the chunk grant the block was carved
			    * from: a BLOCK_RETURN names it (server/space.c) */
	uint64_t version;  /* per-key version: rmw and push add one */
};
_Static_assert(sizeof(struct rkv_block_hdr) == RKV_BLOCK_HDR_SIZE,
	       "block header is 32 bytes");

enum rkv_block_flags {
	RKV_BLOCK_F_NONE = 0,
	/* a tombstone: a delete at replication r > 1 (docs/DESIGN.md §9.7)
	 * keeps the key's sequence in a block with no value; readers see
	 * the key absent */
	RKV_BLOCK_F_DELETED = 1,
};

/* ------------------------------------------------------------ slot word */

/* The class's shift for u >= RKV_SLOT_LINEAR_UNITS units: the least sh
 * (from 4) with u <= 255 << sh. */
static inline unsigned rkv_size_shift(uint32_t u)
{
	unsigned sh = 4;

	while ((255ull << sh) < u)
		sh++;
	return sh;
}

/* The size class of a block of u units (u >= 1): u itself below
 * RKV_SLOT_LINEAR_UNITS, else u rounded up to (128 + m) << sh units. */
static inline uint32_t rkv_units_class(uint32_t u)
{
	unsigned sh;

	if (u < RKV_SLOT_LINEAR_UNITS)
		return u;
	sh = rkv_size_shift(u);
	return (uint32_t)(((u + (1ull << sh) - 1) >> sh) << sh);
}

/* The slot's 12-bit size field for a class size of u units. */
static inline unsigned rkv_size_code(uint32_t u)
{
	unsigned sh;

	if (u < RKV_SLOT_LINEAR_UNITS)
		return u;
	sh = rkv_size_shift(u);
	return RKV_SLOT_LINEAR_UNITS | ((sh - 4) << 7) | ((u >> sh) - 128);
}

/* Units of a size field (bounded: a field past 1 GiB reads as 2 GiB,
 * more than any transport moves). */
static inline uint32_t rkv_code_units(unsigned code)
{
	unsigned sh;

	if (code < RKV_SLOT_LINEAR_UNITS)
		return code;
	sh = ((code >> 7) & 15u) + 4;
	if (sh > 17)
		return (2u << 30) / RKV_BLOCK_ALIGN;
	return (128u + (code & 127u)) << sh;
}

/* size_units: a class size (rkv_units_class), as rkv_block_size gives. */
static inline uint64_t rkv_slot_make(uint64_t off_units, unsigned size_units,
				     unsigned fp, unsigned ver)
{
	return (off_units & ((1ull << RKV_SLOT_OFF_BITS) - 1)) |
	       ((uint64_t)(rkv_size_code(size_units) &
			   ((1u << RKV_SLOT_SIZE_BITS) - 1))
		<< RKV_SLOT_SIZE_SHIFT) |
	       ((uint64_t)(fp & 0xffu) << RKV_SLOT_FP_SHIFT) |
	       ((uint64_t)(ver & ((1u << RKV_SLOT_VER_BITS) - 1))
		<< RKV_SLOT_VER_SHIFT);
}

static inline uint64_t rkv_slot_offset(uint64_t s)
{
	return (s & ((1ull << RKV_SLOT_OFF_BITS) - 1)) * RKV_BLOCK_ALIGN;
}

/* Bytes of the block the slot names (its class size). */
static inline uint32_t rkv_slot_size(uint64_t s)
{
	return rkv_code_units((unsigned)(s >> RKV_SLOT_SIZE_SHIFT) &
			      ((1u << RKV_SLOT_SIZE_BITS) - 1)) *
	       RKV_BLOCK_ALIGN;
}

static inline unsigned rkv_slot_fp(uint64_t s)
{
	return (unsigned)(s >> RKV_SLOT_FP_SHIFT) & 0xffu;
}

static inline unsigned rkv_slot_version(uint64_t s)
{
	return (unsigned)(s >> RKV_SLOT_VER_SHIFT) &
	       ((1u << RKV_SLOT_VER_BITS) - 1);
}

static inline int rkv_slot_locked(uint64_t s)
{
	return (s & RKV_SLOT_LOCK) != 0;
}

static inline int rkv_slot_empty(uint64_t s)
{
	return s == 0;
}

/* An insert in progress: the block is written, the key is not yet visible
 * to readers (see docs/DESIGN.md §6). */
static inline int rkv_slot_tentative(uint64_t s)
{
	return (s & RKV_SLOT_TENT) != 0;
}

/* s committed and unlocked, naming the same block, with version ver. */
static inline uint64_t rkv_slot_with_version(uint64_t s, unsigned ver)
{
	const uint64_t vm = ((1ull << RKV_SLOT_VER_BITS) - 1)
			    << RKV_SLOT_VER_SHIFT;

	return (s & ~(RKV_SLOT_LOCK | RKV_SLOT_TENT | vm)) |
	       ((uint64_t)(ver & ((1u << RKV_SLOT_VER_BITS) - 1))
		<< RKV_SLOT_VER_SHIFT);
}

/* The same block, version bumped, unlocked. */
static inline uint64_t rkv_slot_bump(uint64_t s)
{
	return rkv_slot_with_version(s, rkv_slot_version(s) + 1);
}

/*
 * Migration marks (docs/DESIGN.md §9.5).  A slot whose key was moved to
 * another server has lock and tentative both set (no other slot does:
 * tentative slots are never locked), and keeps its block fields, so the
 * server's free-space scans keep the block alive.  No client changes a
 * moved slot: writers' CASes expect the word they read, and they read
 * the partition's state (below) with the buckets.  Readers skip it as
 * tentative.  Only the migration's cleanup empties it.
 */
#define RKV_SLOT_MOVED (RKV_SLOT_LOCK | RKV_SLOT_TENT)

static inline int rkv_slot_moved(uint64_t s)
{
	return (s & RKV_SLOT_MOVED) == RKV_SLOT_MOVED;
}

/*
 * The partition table: RKV_PART_WORDS words right after the last bucket
 * of the index region, one per placement partition (proto/cmap.h), each
 * changed only by CAS.  A client READs its key's word in every round
 * that reads the key's buckets.
 *   63..62  state: RKV_PART_OWNED (0: this server serves the partition,
 *           or never heard of it), RKV_PART_FROZEN (a migration is moving
 *           its keys: wait), RKV_PART_GONE (moved: ask the map of epoch)
 *   31..0   epoch of the map that moves it (FROZEN, GONE)
 */
#define RKV_PART_WORDS 4096u
#define RKV_PART_TABLE_SIZE (RKV_PART_WORDS * 8u)

/*
 * The index region's tail: one 64-byte line after the partition table.
 * Word 0 is the lease word of a cluster member (HELLO_REPLY flag
 * RKV_HELLO_REPLY_LEASED): until when, in milliseconds of CLOCK_REALTIME,
 * the server's registration in etcd is known to be live, less a margin
 * for clock skew (server/cluster.c).  No failover can make another server
 * the primary of its keys before then, so a READ that a client completes
 * before that time (on its own clock) read current memory; after it, the
 * client reads the word again and answers nothing from the server while
 * it stays in the past (a paused server whose NIC or shared memory still
 * serves, client/op.c).  0: not known live.  Written by the server's
 * registration thread only, with a single 8-byte store.
 */
#define RKV_INDEX_TAIL_SIZE 64u
#define RKV_INDEX_EXTRA (RKV_PART_TABLE_SIZE + RKV_INDEX_TAIL_SIZE)

/*
 * Levels: an index that grows online.  A server's buckets are laid out
 * for its largest index (nbuckets_max = rkv_index_nbuckets(n0, levels_max)
 * buckets; the partition table and the tail follow them), and used level
 * by level: level 0 is buckets [0, n0), level k >= 1 adds
 * (RKV_LEVEL_GROWTH - 1) times all before it, buckets
 * [n0 G^(k-1), n0 G^k).  A key has two candidate buckets in each level
 * in use (rkv_key_level_buckets): a reader READs all of them in one
 * doorbell, and the level word after them; an insert takes the emptiest
 * (in practice the newest level's).  Keys never move: a new level only
 * adds candidates, so every argument made for two buckets holds for the
 * 2L of L levels (docs/DESIGN.md §3, "Levels").  levels_max 1: a fixed
 * index, exactly as before levels (no level word is read).
 */
#define RKV_INDEX_LEVELS_MAX 3u
#define RKV_LEVEL_GROWTH_SHIFT 3u /* G = 8 */
#define RKV_LEVEL_GROWTH (1u << RKV_LEVEL_GROWTH_SHIFT)
#define RKV_KEY_BUCKETS_MAX (2u * RKV_INDEX_LEVELS_MAX)

/* Buckets of levels [0, levels) of an index whose level 0 has n0. */
static inline uint64_t rkv_index_nbuckets(uint64_t n0, unsigned levels)
{
	return levels ? n0 << (RKV_LEVEL_GROWTH_SHIFT * (levels - 1)) : 0;
}

/*
 * The tail's word 1: the level word, the number of levels in use
 * (1..levels_max) in its low byte, the rest 0.  Written by the server
 * alone, with one 8-byte store, only ever upward; a byte cannot be torn,
 * so a READ returns the old count or the new.
 */
#define RKV_INDEX_LEVEL_WORD 1u

static inline unsigned rkv_level_word_levels(uint64_t w)
{
	return w >> 8 ? 0 : (unsigned)w; /* 0: not a level word */
}

/* Whether n is a bucket size servers and clients accept. */
static inline int rkv_bucket_slots_ok(uint64_t n)
{
	return n >= RKV_BUCKET_SLOTS_MIN && n <= RKV_BUCKET_SLOTS_MAX &&
	       (n & (n - 1)) == 0;
}

/* Byte offsets in the index region of nbuckets buckets of slots slots:
 * the partition table, and the lease word (the tail's first word). */
static inline uint64_t rkv_index_part_off(uint64_t nbuckets, unsigned slots)
{
	return nbuckets * slots * 8u;
}

static inline uint64_t rkv_index_lease_off(uint64_t nbuckets,
					   unsigned slots)
{
	return rkv_index_part_off(nbuckets, slots) + RKV_PART_TABLE_SIZE;
}

/* The level word's offset (nbuckets: the largest index's, nbuckets_max). */
static inline uint64_t rkv_index_level_off(uint64_t nbuckets, unsigned slots)
{
	return rkv_index_lease_off(nbuckets, slots) + 8u * RKV_INDEX_LEVEL_WORD;
}

/* The lease word carries its time in 44 bits (ms: until the year 2527)
 * and 20 bits of check, so a READ torn by the server's store (a software
 * provider copies with the kernel, not in one 8-byte access) reads as 0:
 * no promise, never a later time than was written. */
static inline uint64_t rkv_lease_check(uint64_t ms)
{
	return (ms * 0x9e3779b97f4a7c15ull) >> 44;
}

static inline uint64_t rkv_lease_word(uint64_t until_ms)
{
	until_ms &= (1ull << 44) - 1;
	return until_ms << 20 | rkv_lease_check(until_ms);
}

/* The time a lease word promises (0: none, or a torn word). */
static inline uint64_t rkv_lease_until(uint64_t w)
{
	uint64_t ms = w >> 20;

	return (w & 0xfffffu) == rkv_lease_check(ms) ? ms : 0;
}

enum rkv_part_state {
	RKV_PART_OWNED = 0,
	RKV_PART_FROZEN = 1,
	RKV_PART_GONE = 2,
};

static inline unsigned rkv_part_state(uint64_t w)
{
	return (unsigned)(w >> 62);
}

static inline uint32_t rkv_part_epoch(uint64_t w)
{
	return (uint32_t)w;
}

static inline uint64_t rkv_part_word(unsigned state, uint32_t epoch)
{
	return ((uint64_t)state << 62) | epoch;
}

/* Whether two slot words name the same block (lock, tentative mark and
 * version ignored). */
static inline int rkv_slot_same_block(uint64_t a, uint64_t b)
{
	const uint64_t m = (1ull << RKV_SLOT_VER_SHIFT) - 1;

	return (a & m) == (b & m);
}

/* ------------------------------------------------------------- blocks */

/* Block size for a key and value: rounded up to 64, and above 128 KiB
 * to its size class (what a slot can name); 0 if too large. */
static inline uint32_t rkv_block_size(size_t key_len, size_t val_len)
{
	if (key_len > RKV_KEY_MAX || val_len > RKV_VALUE_LIMIT)
		return 0;
	size_t n = RKV_BLOCK_HDR_SIZE + key_len + val_len;

	return rkv_units_class((uint32_t)((n + RKV_BLOCK_ALIGN - 1) /
					  RKV_BLOCK_ALIGN)) *
	       RKV_BLOCK_ALIGN;
}

/*
 * The checksum covers the block's bytes [RKV_BLOCK_SUM_OFF, used), where
 * used = rkv_block_used(): everything after the checksum field up to the
 * end of the value (never the padding), hashed with xxh3-64 seeded
 * RKV_BLOCK_SEED.  rkv_block_checksum() is the host computation; a device
 * path hashes the same span with the same seed on the device (client/gpu.c:
 * rkv_cuda_xxh3_batch with offset RKV_BLOCK_SUM_OFF and length
 * rkv_block_sum_len(used)) and must get the same digest.
 */
#define RKV_BLOCK_SUM_OFF 8u
_Static_assert(offsetof(struct rkv_block_hdr, key_len) == RKV_BLOCK_SUM_OFF,
	       "the checksum is the header's first field");

/* Bytes a block's header, key and value occupy (lengths not checked). */
static inline size_t rkv_block_used(const struct rkv_block_hdr *h)
{
	return RKV_BLOCK_HDR_SIZE + (size_t)h->key_len + h->val_len;
}

/* Length of the checksummed span of a block of used bytes (used >=
 * RKV_BLOCK_HDR_SIZE). */
static inline size_t rkv_block_sum_len(size_t used)
{
	return used - RKV_BLOCK_SUM_OFF;
}

/*
 * Fill every header field but the checksum (set to 0): key_len, flags
 * (RKV_BLOCK_F_NONE), val_len, writer, grant, version.  Key, value,
 * padding and checksum are the caller's (rkv_block_encode, or the device
 * path, which copies h and the key to device memory).  Returns the block
 * size (rkv_block_size(), > 0), -EINVAL for key_len 0 or -EMSGSIZE beyond
 * RKV_KEY_MAX / RKV_VALUE_LIMIT; h is untouched on error.
 */
int rkv_block_hdr_fill(struct rkv_block_hdr *h, size_t key_len,
		       size_t val_len, uint32_t writer, uint32_t grant,
		       uint64_t version);

/*
 * Fill a block at buf (at least rkv_block_size() bytes): header
 * (rkv_block_hdr_fill), key, value, zero padding, checksum.  val may
 * already be in place (buf + RKV_BLOCK_HDR_SIZE + key_len).  Returns the
 * block size, 0 if key_len is 0 or a length is too large.
 */
uint32_t rkv_block_encode(void *buf, const void *key, size_t key_len,
			  const void *val, size_t val_len, uint32_t writer,
			  uint32_t grant, uint64_t version);

/*
 * First step of checking a block read from the data region: its lengths.
 * h points at the first min(buf_len, RKV_BLOCK_HDR_SIZE) bytes of the
 * block; nothing is read from it when buf_len < RKV_BLOCK_HDR_SIZE.
 * Returns -EBADMSG when buf_len is shorter than a header, key_len is 0 or
 * above RKV_KEY_MAX, val_len above RKV_VALUE_LIMIT, or header + key + value
 * exceed buf_len; else 0 with *used = rkv_block_used(h) (<= buf_len).
 */
int rkv_block_hdr_check(const struct rkv_block_hdr *h, size_t buf_len,
			size_t *used);

/*
 * xxh3-64 (seed RKV_BLOCK_SEED) of bytes [RKV_BLOCK_SUM_OFF, used) of the
 * block at buf, as stored in its checksum field.  used >=
 * RKV_BLOCK_HDR_SIZE; all used bytes must be readable.
 */
uint64_t rkv_block_checksum(const void *buf, size_t used);

/*
 * rkv_block_checksum of a block held in two pieces, as a split READ
 * brings it (the PS pull path): its first head_len bytes at head (header,
 * key and the first value bytes; head_len >= RKV_BLOCK_HDR_SIZE) and the
 * next tail_len bytes at tail (the rest of the value); used = head_len +
 * tail_len.  The same digest as rkv_block_checksum over one copy.
 */
/* Start h for a block's checksum: feed it the bytes from
 * RKV_BLOCK_SUM_OFF to the end of the value, in order, in any pieces;
 * rkv_hash_digest then gives rkv_block_checksum(). */
struct rkv_hash_state;
void rkv_block_hash_start(struct rkv_hash_state *h);
uint64_t rkv_block_checksum_split(const void *head, size_t head_len,
				  const void *tail, size_t tail_len);

/*
 * Whether a block whose header passed rkv_block_hdr_check holds key:
 * 0 when key_len equals the header's key_len and the key bytes match,
 * else -ESTALE (a valid block of another key).  Reads at most
 * RKV_BLOCK_HDR_SIZE + key_len bytes of buf, and none of the key bytes
 * when the lengths differ.
 */
int rkv_block_key_match(const void *buf, const void *key, size_t key_len);

/*
 * Check a block read from the data region: rkv_block_hdr_check, then the
 * checksum (rkv_block_checksum), then (when key is not NULL)
 * rkv_block_key_match.  Returns 0, -EBADMSG (torn, reused or garbage),
 * -ESTALE (a valid block of another key).  On success *val and *val_len
 * point into buf and *hdr is buf (each optional).
 */
int rkv_block_decode(const void *buf, size_t buf_len, const void *key,
		     size_t key_len, const void **val, uint32_t *val_len,
		     const struct rkv_block_hdr **hdr);
/*
 * rkv_block_decode, and when the value is at least RKV_HASH_COPY_CHUNK
 * bytes and fits in cap, the value copied to dst in the pass that
 * verifies it (hash.h: rkv_hash_copy); *copied says whether it was.  On
 * an error dst may hold some of the bytes read.
 */
int rkv_block_decode_copy(const void *buf, size_t buf_len, const void *key,
			  size_t key_len, void *dst, size_t cap,
			  uint32_t *val_len, int *copied);

/* --------------------------------------------------------------- hashing */

struct rkv_key_hash {
	uint64_t h1;     /* first bucket, fingerprint */
	uint64_t h2;     /* second bucket */
	uint64_t route;  /* server choice */
	unsigned fp;
};

void rkv_key_hash(const void *key, size_t key_len, struct rkv_key_hash *out);

/*
 * Tests only: when set, rkv_key_hash calls it last with the hashes it
 * computed, which it may change (two keys given the same hashes, to prove
 * that the location cache never answers one key with another's value).
 * NULL, the default, costs one predictable branch.  Set and clear it
 * only while no client of the process holds a key whose hashes it changes.
 */
extern void (*g_rkv_key_hash_hook)(const void *key, size_t key_len,
				   struct rkv_key_hash *out);

/* The two candidate buckets of a key in a table of nbuckets (power of two).
 * They always differ when nbuckets >= 2. */
void rkv_key_buckets(const struct rkv_key_hash *kh, uint64_t nbuckets,
		     uint64_t *b1, uint64_t *b2);

/* The key's candidate buckets in levels [0, levels) of an index whose
 * level 0 has n0 buckets (layout.h "Levels"): level 0's pair as
 * rkv_key_buckets, then each level's, two different buckets of that level
 * (one when the level has one bucket: only level 0 can).  Writes
 * b[0..n), returns n (at most RKV_KEY_BUCKETS_MAX). */
unsigned rkv_key_level_buckets(const struct rkv_key_hash *kh, uint64_t n0,
			       unsigned levels, uint64_t *b);

/* Jump consistent hash (Lamping & Veach): a bucket in [0, n). */
uint32_t rkv_jump_hash(uint64_t key, uint32_t n);

#ifdef __cplusplus
}
#endif
#endif
