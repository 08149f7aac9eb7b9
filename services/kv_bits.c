/*
 * kv_bits.c - the bit arithmetic of the bitmap commands (kv_bits.h).
 *
 * Counts and searches go a 64-bit word at a time (a word loaded with
 * memcpy, one instruction, no alignment assumed); BITFIELD's integers a
 * bit at a time, as they are at most 64 bits. Overflow is decided on the
 * exact sum in 128 bits, which is what Redis's wrap-safe comparisons
 * amount to.
 */
#include <string.h>

#include "kv_bits.h"

static uint64_t load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

uint64_t kv_bits_count(const uint8_t *p, size_t n)
{
	uint64_t c = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		c += (uint64_t)__builtin_popcountll(load64(p + i));
	for (; i < n; i++)
		c += (uint64_t)__builtin_popcount(p[i]);
	return c;
}

int64_t kv_bits_find(const uint8_t *p, size_t n, int bit)
{
	const uint64_t skip_word = bit ? 0 : UINT64_MAX;
	const uint8_t skip_byte = bit ? 0 : 0xFF;
	size_t i = 0;
	while (i + 8 <= n && load64(p + i) == skip_word)
		i += 8;
	for (; i < n; i++)
		if (p[i] != skip_byte) {
			unsigned b = bit ? p[i] : (uint8_t)~p[i];   /* the bits sought, as ones */
			return (int64_t)(i * 8) + (__builtin_clz(b) - 24);
		}
	return -1;
}

bool kv_bits_range(int64_t start, int64_t end, uint64_t len, bool bit_unit, uint64_t *first,
		   uint64_t *last)
{
	/* len is at most KV_STRING_MAX (512 MiB): its bits fit easily. */
	int64_t total = (int64_t)(bit_unit ? len * 8 : len);
	if (start < 0)
		start += total;
	if (end < 0)
		end += total;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= total)
		end = total - 1;
	if (start > end)
		return false;
	*first = bit_unit ? (uint64_t)start : (uint64_t)start * 8;
	*last = bit_unit ? (uint64_t)end : (uint64_t)end * 8 + 7;
	return true;
}

void kv_bits_apply(enum kv_bits_op op, uint8_t *dst, const uint8_t *src, size_t n)
{
	switch (op) {
	case KV_BITS_AND:
		for (size_t i = 0; i < n; i++)
			dst[i] &= src[i];
		break;
	case KV_BITS_OR:
		for (size_t i = 0; i < n; i++)
			dst[i] |= src[i];
		break;
	case KV_BITS_XOR:
		for (size_t i = 0; i < n; i++)
			dst[i] ^= src[i];
		break;
	case KV_BITS_NOT:
		for (size_t i = 0; i < n; i++)
			dst[i] = (uint8_t)~src[i];
		break;
	}
}

uint64_t kv_bits_get(const uint8_t *p, uint64_t off, unsigned width)
{
	uint64_t v = 0;
	for (uint64_t b = off; b < off + width; b++)
		v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1u);
	return v;
}

void kv_bits_set(uint8_t *p, uint64_t off, unsigned width, uint64_t v)
{
	for (unsigned i = 0; i < width; i++) {
		uint64_t b = off + i;
		uint8_t mask = (uint8_t)(0x80u >> (b & 7));
		if ((v >> (width - 1 - i)) & 1)
			p[b >> 3] |= mask;
		else
			p[b >> 3] &= (uint8_t)~mask;
	}
}

int64_t kv_bits_signed(uint64_t raw, unsigned width)
{
	if (width < 64 && (raw >> (width - 1)) & 1)
		raw |= UINT64_MAX << width;
	return (int64_t)raw;
}

static uint64_t low_bits(uint64_t v, unsigned width)
{
	return width == 64 ? v : v & ((1ull << width) - 1);
}

int kv_bits_add(bool is_signed, unsigned width, int64_t value, int64_t incr,
		enum kv_bits_overflow ow, int64_t *out)
{
	/* The wrapped result: the sum's low width bits, as the field reads them. */
	uint64_t wrapped = low_bits((uint64_t)value + (uint64_t)incr, width);
	int over;
	__int128 max, min, sum;
	if (is_signed) {
		max = width == 64 ? INT64_MAX : (int64_t)((1ull << (width - 1)) - 1);
		min = -max - 1;
		sum = (__int128)value + incr;
		over = sum > max ? 1 : sum < min ? -1 : 0;
	} else {
		/* An unsigned field's number is the argument's 64 bits. */
		uint64_t u = (uint64_t)value;
		max = (int64_t)((1ull << width) - 1);
		min = 0;
		sum = (__int128)u + incr;
		over = (__int128)u > max || sum > max ? 1 : sum < 0 ? -1 : 0;
	}
	if (!over)
		*out = (int64_t)sum;
	else if (ow == KV_BITS_SAT)
		*out = (int64_t)(over > 0 ? max : min);
	else
		*out = is_signed ? kv_bits_signed(wrapped, width) : (int64_t)wrapped;
	return over;
}
