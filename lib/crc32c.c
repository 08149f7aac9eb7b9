/* crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Two implementations, picked once at run time:
 *  - SSE4.2 crc32 instruction, 8 bytes per instruction. One chain is
 *    latency-bound (3 cycles per 8 bytes: ~130 ns per KiB, 4 % of the
 *    server's CPU in the WAL benchmark), so blocks of 3 x 256 and 3 x 64
 *    bytes run as three independent chains (one instruction per cycle)
 *    and are joined with a "shift by L zero bytes" table: ~60 ns per KiB.
 *  - slice-by-1 table: ~1.5-2 us per KiB, for CPUs without SSE4.2.
 * The WAL checksums every record and its data with this, so the hardware
 * path is the one that matters.
 *
 * paste_crc32c_sw / paste_crc32c_hw are not in paste.h: they exist so the
 * unit test can compare both paths on one machine.
 */
#include <pthread.h>
#include <string.h>
#include "paste.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CRC32C_POLY 0x82F63B78u

uint32_t paste_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t paste_crc32c_hw(uint32_t crc, const void *p, size_t n);

static uint32_t crc32c_table[256];

/* Three-way split (see the top): CRC registers combine linearly,
 *   reg(c, A || B) = shift(reg(c, A), |B|) ^ reg(0, B),
 * where shift(c, L) feeds L zero bytes: a linear map of the 32-bit
 * register, tabulated per byte of c for the two block lengths used. */
#define CRC_LONG 256
#define CRC_SHORT 64
static uint32_t shift_long[4][256], shift_short[4][256];
static uint32_t (*crc32c_impl)(uint32_t, const void *, size_t);
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		crc32c_table[i] = c;
	}
	for (int which = 0; which < 2; which++) {
		uint32_t (*t)[256] = which ? shift_short : shift_long;
		size_t len = which ? CRC_SHORT : CRC_LONG;
		uint32_t basis[32];
		for (int bit = 0; bit < 32; bit++) {
			uint32_t c = 1u << bit;
			for (size_t i = 0; i < len; i++)
				c = crc32c_table[c & 0xff] ^ (c >> 8);
			basis[bit] = c;
		}
		for (int k = 0; k < 4; k++)
			for (uint32_t b = 0; b < 256; b++) {
				uint32_t v = 0;
				for (int j = 0; j < 8; j++)
					if (b & (1u << j))
						v ^= basis[8 * k + j];
				t[k][b] = v;
			}
	}
	uint32_t (*impl)(uint32_t, const void *, size_t) = paste_crc32c_sw;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		impl = paste_crc32c_hw;
#endif
	__atomic_store_n(&crc32c_impl, impl, __ATOMIC_RELEASE);   /* after the tables */
}

/* The tables are ready once the implementation is set: one load on every
 * call after the first (pthread_once's call costs more than the CRC of a
 * short key, which the server computes several times per request). */
static inline uint32_t (*ready(void))(uint32_t, const void *, size_t)
{
	uint32_t (*impl)(uint32_t, const void *, size_t) = __atomic_load_n(&crc32c_impl, __ATOMIC_ACQUIRE);
	if (__builtin_expect(impl == NULL, 0)) {
		pthread_once(&crc32c_once, crc32c_init);
		impl = crc32c_impl;
	}
	return impl;
}

/* Both paths take and return the finalised CRC (pre/post inverted), so
 * callers chain calls starting from 0. */
uint32_t paste_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	ready();
	crc = ~crc;
	while (n--)
		crc = crc32c_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
static inline uint32_t shift(uint32_t (*t)[256], uint32_t c)
{
	return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static inline uint64_t load64(const uint8_t *b)
{
	uint64_t w;
	memcpy(&w, b, 8);   /* compiles to one load; no aliasing UB */
	return w;
}

/* Three chains over consecutive blocks of `len` bytes from b; returns
 * the register after all 3 * len bytes. */
__attribute__((target("sse4.2")))
static inline uint64_t crc3(uint64_t c, const uint8_t *b, size_t len, uint32_t (*t)[256])
{
	uint64_t c1 = 0, c2 = 0;
	for (size_t i = 0; i < len; i += 8) {
		c = _mm_crc32_u64(c, load64(b + i));
		c1 = _mm_crc32_u64(c1, load64(b + len + i));
		c2 = _mm_crc32_u64(c2, load64(b + 2 * len + i));
	}
	c = shift(t, (uint32_t)c) ^ (uint32_t)c1;
	return shift(t, (uint32_t)c) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2")))
uint32_t paste_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t c = ~crc;

	/* Byte steps up to 8-byte alignment: unaligned 8-byte loads would
	 * work too, but aligned ones never split a cache line. */
	while (n && ((uintptr_t)b & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *b++);
		n--;
	}
	if (n >= 3 * CRC_SHORT) {
		ready();   /* the shift tables */
		for (; n >= 3 * CRC_LONG; b += 3 * CRC_LONG, n -= 3 * CRC_LONG)
			c = crc3(c, b, CRC_LONG, shift_long);
		for (; n >= 3 * CRC_SHORT; b += 3 * CRC_SHORT, n -= 3 * CRC_SHORT)
			c = crc3(c, b, CRC_SHORT, shift_short);
	}
	for (; n >= 8; b += 8, n -= 8)
		c = _mm_crc32_u64(c, load64(b));
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *b++);
	return ~(uint32_t)c;
}
#else
uint32_t paste_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	return paste_crc32c_sw(crc, p, n);
}
#endif

uint32_t paste_crc32c(uint32_t crc, const void *p, size_t n)
{
	return ready()(crc, p, n);
}
