/*
 * kv_bits.h - the bit arithmetic of pkvs's bitmap commands (cmd_bitops.c),
 * pure functions over bytes in DRAM, with Redis 7.0's numbers.
 *
 * A string is a bitmap whose bit 0 is the most significant bit of its
 * first byte. The commands read a value in pieces (it may be 512 MiB in
 * chunks) and hand each piece here: counts and searches need nothing
 * but the piece, and a BITFIELD integer spans at most 9 bytes.
 */
#ifndef PASTE_SERVICES_KV_BITS_H
#define PASTE_SERVICES_KV_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The set bits in p[0..n). */
uint64_t kv_bits_count(const uint8_t *p, size_t n);

/* The first bit equal to bit (0 or 1) in p[0..n): its position from the
 * first byte's top bit, or -1 when there is none. */
int64_t kv_bits_find(const uint8_t *p, size_t n, int bit);

/* BITCOUNT's and BITPOS's start and end (inclusive, negative from the
 * end; in bits when bit_unit, else bytes) over a string of len bytes, as
 * Redis turns them into a range: the bits [*first, *last] it covers, or
 * false when that range is empty. */
bool kv_bits_range(int64_t start, int64_t end, uint64_t len, bool bit_unit, uint64_t *first,
		   uint64_t *last);

/* BITOP's operators: dst[i] = dst[i] op src[i] (NOT: dst[i] = ~src[i]). */
enum kv_bits_op { KV_BITS_AND, KV_BITS_OR, KV_BITS_XOR, KV_BITS_NOT };
void kv_bits_apply(enum kv_bits_op op, uint8_t *dst, const uint8_t *src, size_t n);

/* BITFIELD's integers: `width` bits (1-64) from bit `off` of p, the
 * field's first bit the most significant. get: the raw bits (zero
 * extended); set: write v's low width bits. p must hold the field's bytes
 * (off / 8 to (off + width - 1) / 8). */
uint64_t kv_bits_get(const uint8_t *p, uint64_t off, unsigned width);
void kv_bits_set(uint8_t *p, uint64_t off, unsigned width, uint64_t v);
/* The raw bits of a signed field as a number (sign extended). */
int64_t kv_bits_signed(uint64_t raw, unsigned width);

/* BITFIELD's OVERFLOW policies. */
enum kv_bits_overflow { KV_BITS_WRAP, KV_BITS_SAT, KV_BITS_FAIL };
/* value + incr in a field of width bits (signed: i1-i64; unsigned:
 * u1-u63): 0 when it fits (*out the sum), else +1 / -1 for over / under,
 * *out then the wrapped (WRAP) or saturated (SAT) result (FAIL: the
 * caller writes nothing). value is the field's number, or for SET the
 * argument as given (incr 0): a negative one for an unsigned field is
 * read as Redis does, as the unsigned 64-bit number of its bits (over the
 * maximum: SAT gives the maximum). The result is the number to answer;
 * kv_bits_set takes it as it is. */
int kv_bits_add(bool is_signed, unsigned width, int64_t value, int64_t incr,
		enum kv_bits_overflow ow, int64_t *out);

#endif
