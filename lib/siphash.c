/*
 * siphash.c - SipHash-2-4 with a 128-bit output (Aumasson and Bernstein,
 * "SipHash: a fast short-input PRF", 2012), written from the paper: a
 * keyed hash whose collisions an attacker who does not know the key cannot
 * arrange. pkvs names a key or member too long for the tree by a prefix
 * and this digest, keyed with the store's random uuid.
 *
 * Cost: about 1.5 cycles per byte plus ~40 cycles per call.
 */
#include <string.h>
#include "paste.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                        \
	do {                                                            \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                  \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                  \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;   /* x86-64: little-endian, as the algorithm reads words */
}

void paste_siphash128(const uint64_t key[2], const void *data, size_t len, uint8_t out[16])
{
	const uint8_t *p = data;
	uint64_t k0 = key[0], k1 = key[1];
	uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
	v1 ^= 0xee;                      /* the 128-bit variant */
	size_t whole = len & ~(size_t)7;
	for (size_t i = 0; i < whole; i += 8) {
		uint64_t m = le64(p + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t b = (uint64_t)len << 56;
	for (size_t i = 0; i < (len & 7); i++)
		b |= (uint64_t)p[whole + i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xee;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	uint64_t h0 = v0 ^ v1 ^ v2 ^ v3;
	v1 ^= 0xdd;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	uint64_t h1 = v0 ^ v1 ^ v2 ^ v3;
	memcpy(out, &h0, 8);
	memcpy(out + 8, &h1, 8);
}
