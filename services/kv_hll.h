/*
 * kv_hll.h - HyperLogLog as Redis 7.0 stores it in a string (cmd_hll.c's
 * PFADD, PFCOUNT, PFMERGE, PFDEBUG), pure functions over the value's
 * bytes in DRAM.
 *
 * The bytes are Redis's, so a value moves between pkvs and Redis (DUMP,
 * RESTORE, replication, GET and SET) and either counts it the same: a
 * 16-byte header ("HYLL", the encoding, three zero bytes, the cached
 * cardinality little endian, its top bit set when stale), then 16384
 * registers of 6 bits, either dense (12288 bytes, register i at bit 6i,
 * least significant bit first) or sparse (runs: ZERO 00xxxxxx of 1-64
 * zero registers, XZERO 01xxxxxx xxxxxxxx of 1-16384, VAL 1vvvvvxx of 1-4
 * registers holding 1-32). An element sets register (hash & 16383) to the
 * position of the lowest set bit of hash >> 14 (1-51), hash being
 * MurmurHash64A with Redis's seed; a sparse value turns dense when a
 * register needs more than 32 or it would grow past hll-sparse-max-bytes.
 * The count is Ertl's estimator over the registers' histogram, in
 * Redis's floating-point steps, so both servers answer the same number.
 */
#ifndef PASTE_SERVICES_KV_HLL_H
#define PASTE_SERVICES_KV_HLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_HLL_HDR 16u
#define KV_HLL_REGS 16384u
#define KV_HLL_DENSE_SIZE (KV_HLL_HDR + KV_HLL_REGS * 6 / 8)
#define KV_HLL_NEW_SIZE (KV_HLL_HDR + 2u)     /* one XZERO of every register */
enum { KV_HLL_DENSE = 0, KV_HLL_SPARSE = 1 };

/* The encoding of value v[0..len) if it is an HLL as Redis checks one
 * (magic, a known encoding, a dense one's exact length), else -1. */
int kv_hll_encoding(const uint8_t *v, size_t len);
/* A new, empty HLL (sparse) into v[0..KV_HLL_NEW_SIZE). */
void kv_hll_new(uint8_t *v);

/* Element e[0..n)'s register and the count it offers. */
void kv_hll_hash(const void *e, size_t n, uint32_t *reg, uint8_t *count);

/* The cached cardinality: true and *card when it is current. */
bool kv_hll_cached(const uint8_t *v, uint64_t *card);
void kv_hll_cache(uint8_t *v, uint64_t card);
void kv_hll_stale(uint8_t *v);

/* Dense registers (regs: the bytes after the header). set: raise
 * register i to count when that is more; true when it changed. */
uint8_t kv_hll_dense_get(const uint8_t *regs, uint32_t i);
/* Register i from at, its first byte and the next (when i's bits run
 * into it): what a caller that read only those bytes needs. */
uint8_t kv_hll_dense_reg(const uint8_t *at, uint32_t i);
bool kv_hll_dense_set(uint8_t *regs, uint32_t i, uint8_t count);

/* Raise register i of the sparse value v[0..*len) to count, in place, as
 * Redis's sparse update does it byte for byte (the run split in up to
 * three, adjacent equal VAL runs merged around it): 1 changed, 0 not
 * (it was as high already), 2 the value must turn dense first (count
 * over 32, or past max_bytes), -1 the value is damaged. v needs room for
 * *len + 3 bytes. */
int kv_hll_sparse_set(uint8_t *v, size_t *len, uint32_t i, uint8_t count, size_t max_bytes);
/* The dense form of sparse value v[0..len) into out[0..KV_HLL_DENSE_SIZE)
 * (the header kept, the encoding changed): false when it is damaged. */
bool kv_hll_to_dense(const uint8_t *v, size_t len, uint8_t *out);

/* max[i] = the larger of max[i] and register i of HLL v[0..len): false
 * when v is damaged. */
bool kv_hll_merge(uint8_t max[KV_HLL_REGS], const uint8_t *v, size_t len);
/* The estimated cardinality of HLL v[0..len) (*damaged: a sparse value
 * whose runs do not cover the registers), or of registers max. */
uint64_t kv_hll_count(const uint8_t *v, size_t len, bool *damaged);
uint64_t kv_hll_count_regs(const uint8_t max[KV_HLL_REGS]);

#endif
