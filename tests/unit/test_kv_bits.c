/* test_kv_bits.c - the bit arithmetic of the bitmap commands
 * (services/kv_bits.c): counts and searches against a bit-at-a-time
 * reading of random buffers at every length and alignment; ranges as
 * Redis turns start and end into them; BITOP's operators; BITFIELD's
 * integers written and read back at every offset and width; overflow of
 * sums and SET values under WRAP, SAT and FAIL against exact arithmetic
 * and against what Redis 7.0.15 answers for the same BITFIELD calls. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv_bits.h"

static int bit_at(const uint8_t *p, uint64_t i)
{
	return (p[i >> 3] >> (7 - (i & 7))) & 1;
}

static void counts_and_searches(void)
{
	uint8_t buf[200];
	srand(7);
	for (int round = 0; round < 400; round++) {
		int dense = round % 4;       /* all zero, all one, sparse, random */
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = dense == 0 ? 0 : dense == 1 ? 0xFF : dense == 2 ? (rand() % 50 ? 0 : 1u << (rand() % 8))
				: (uint8_t)rand();
		if (dense == 2 && round % 8 == 2)
			buf[rand() % sizeof(buf)] = 0x10;
		size_t off = (size_t)rand() % 16, n = (size_t)rand() % (sizeof(buf) - 16);
		uint64_t ones = 0;
		int64_t first1 = -1, first0 = -1;
		for (uint64_t i = 0; i < n * 8; i++) {
			int b = bit_at(buf + off, i);
			ones += (uint64_t)b;
			if (b && first1 < 0)
				first1 = (int64_t)i;
			if (!b && first0 < 0)
				first0 = (int64_t)i;
		}
		CHECK_EQ(kv_bits_count(buf + off, n), ones);
		CHECK_EQ(kv_bits_find(buf + off, n, 1), first1);
		CHECK_EQ(kv_bits_find(buf + off, n, 0), first0);
	}
	CHECK_EQ(kv_bits_find((const uint8_t *)"", 0, 1), -1);
	CHECK_EQ(kv_bits_find((const uint8_t *)"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", 10, 1), 79);
	CHECK_EQ(kv_bits_find((const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9, 0), 64);
}

static void ranges(void)
{
	uint64_t f = 0, l = 0;
	/* "foobar" (6 bytes): BITCOUNT s 1 1, -3 -1 BIT, 5 30 BIT, 0 -1. */
	CHECK(kv_bits_range(1, 1, 6, false, &f, &l) && f == 8 && l == 15);
	CHECK(kv_bits_range(-3, -1, 6, true, &f, &l) && f == 45 && l == 47);
	CHECK(kv_bits_range(5, 30, 6, true, &f, &l) && f == 5 && l == 30);
	CHECK(kv_bits_range(0, -1, 6, false, &f, &l) && f == 0 && l == 47);
	CHECK(kv_bits_range(-100, 100, 6, false, &f, &l) && f == 0 && l == 47);
	CHECK(kv_bits_range(4, 4294967296, 6, false, &f, &l) && f == 32 && l == 47);
	CHECK(!kv_bits_range(1, 0, 6, false, &f, &l));
	CHECK(!kv_bits_range(-1, -2, 6, false, &f, &l));
	CHECK(!kv_bits_range(6, 10, 6, false, &f, &l));
	CHECK(!kv_bits_range(0, -1, 0, false, &f, &l));     /* the empty string */
	CHECK(!kv_bits_range(0, -1, 0, true, &f, &l));
	CHECK(kv_bits_range(INT64_MIN, INT64_MAX, 3, true, &f, &l) && f == 0 && l == 23);
}

static void operators(void)
{
	uint8_t a[5] = { 0x0F, 0xF0, 0xAA, 0x00, 0xFF }, b[5] = { 0xFF, 0x0F, 0x55, 0x01, 0x80 }, d[5];
	memcpy(d, a, 5);
	kv_bits_apply(KV_BITS_AND, d, b, 5);
	CHECK(!memcmp(d, "\x0F\x00\x00\x00\x80", 5));
	memcpy(d, a, 5);
	kv_bits_apply(KV_BITS_OR, d, b, 5);
	CHECK(!memcmp(d, "\xFF\xFF\xFF\x01\xFF", 5));
	memcpy(d, a, 5);
	kv_bits_apply(KV_BITS_XOR, d, b, 5);
	CHECK(!memcmp(d, "\xF0\xFF\xFF\x01\x7F", 5));
	kv_bits_apply(KV_BITS_NOT, d, a, 5);
	CHECK(!memcmp(d, "\xF0\x0F\x55\xFF\x00", 5));
	memcpy(d, a, 5);
	kv_bits_apply(KV_BITS_NOT, d, d, 5);                 /* in place */
	CHECK(!memcmp(d, "\xF0\x0F\x55\xFF\x00", 5));
}

static void integers(void)
{
	srand(11);
	for (unsigned width = 1; width <= 64; width++)
		for (uint64_t off = 0; off < 16; off++) {
			uint8_t p[10], before[10];
			for (int i = 0; i < 10; i++)
				p[i] = before[i] = (uint8_t)rand();
			uint64_t v = ((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 20) ^ (uint64_t)rand();
			uint64_t mask = width == 64 ? UINT64_MAX : (1ull << width) - 1;
			kv_bits_set(p, off, (unsigned)width, v);
			CHECK_EQ(kv_bits_get(p, off, (unsigned)width), v & mask);
			/* The bits around the field are left as they were. */
			for (uint64_t i = 0; i < 80; i++)
				if (i < off || i >= off + width)
					CHECK_EQ(bit_at(p, i), bit_at(before, i));
		}
	/* BITFIELD bits SET u8 0 255, then GET i8 0 (Redis: -1). */
	uint8_t p[9] = { 0 };
	kv_bits_set(p, 0, 8, 255);
	CHECK_EQ(kv_bits_signed(kv_bits_get(p, 0, 8), 8), -1);
	CHECK_EQ(kv_bits_signed(0x10, 5), -16);
	CHECK_EQ(kv_bits_signed(0x0F, 5), 15);
	CHECK_EQ(kv_bits_signed(UINT64_MAX, 64), -1);
	CHECK_EQ(kv_bits_signed(1, 1), -1);
}

/* Exact arithmetic: the sum against the field's range. */
static void overflow_against_exact(void)
{
	srand(5);
	for (int round = 0; round < 20000; round++) {
		bool sign = rand() & 1;
		unsigned width = 1 + (unsigned)rand() % (sign ? 64 : 63);
		__int128 max = sign ? ((__int128)1 << (width - 1)) - 1 : ((__int128)1 << width) - 1;
		__int128 min = sign ? -max - 1 : 0;
		int64_t value = (int64_t)((__int128)rand() * rand() % (max - min + 1) + min);
		int64_t incr = (int64_t)(((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 10) ^ (uint64_t)rand());
		if (rand() % 3 == 0)
			incr %= 1000;
		__int128 sum = (__int128)value + incr;
		int want = sum > max ? 1 : sum < min ? -1 : 0;
		int64_t out;
		CHECK_EQ(kv_bits_add(sign, width, value, incr, KV_BITS_SAT, &out), want);
		CHECK_EQ(out, (int64_t)(want > 0 ? max : want < 0 ? min : sum));
		CHECK_EQ(kv_bits_add(sign, width, value, incr, KV_BITS_WRAP, &out), want);
		__int128 m = (__int128)1 << width;
		__int128 wrapped = ((sum - min) % m + m) % m + min;
		CHECK_EQ(out, (int64_t)wrapped);
	}
}

/* What Redis 7.0.15 answers (redis-cli, a fresh key each time). */
static void overflow_as_redis(void)
{
	int64_t out;
	/* OVERFLOW WRAP INCRBY u8 0 200, twice: 200, 144. */
	CHECK_EQ(kv_bits_add(false, 8, 200, 200, KV_BITS_WRAP, &out), 1);
	CHECK_EQ(out, 144);
	/* OVERFLOW SAT SET u8 0 -5, then GET: 255 (the argument's 64 bits). */
	CHECK_EQ(kv_bits_add(false, 8, -5, 0, KV_BITS_SAT, &out), 1);
	CHECK_EQ(out, 255);
	/* OVERFLOW WRAP SET u8 0 -5, then GET: 251. */
	CHECK_EQ(kv_bits_add(false, 8, -5, 0, KV_BITS_WRAP, &out), 1);
	CHECK_EQ(out, 251);
	/* SET i8 0 255 then GET i8 0: -1; OVERFLOW SAT SET i8 0 -200: -128. */
	CHECK_EQ(kv_bits_add(true, 8, 255, 0, KV_BITS_WRAP, &out), 1);
	CHECK_EQ(out, -1);
	CHECK_EQ(kv_bits_add(true, 8, -200, 0, KV_BITS_SAT, &out), -1);
	CHECK_EQ(out, -128);
	/* SET i64 0 INT64_MIN, INCRBY i64 0 -1 (WRAP): INT64_MAX. */
	CHECK_EQ(kv_bits_add(true, 64, INT64_MIN, -1, KV_BITS_WRAP, &out), -1);
	CHECK_EQ(out, INT64_MAX);
	/* OVERFLOW SAT INCRBY i64 0 9223372036854775807 from -10: fits. */
	CHECK_EQ(kv_bits_add(true, 64, -10, INT64_MAX, KV_BITS_SAT, &out), 0);
	CHECK_EQ(out, INT64_MAX - 10);
	/* SET u63 3 INT64_MAX then INCRBY u63 3 1 (WRAP): 0. */
	CHECK_EQ(kv_bits_add(false, 63, INT64_MAX, 1, KV_BITS_WRAP, &out), 1);
	CHECK_EQ(out, 0);
	/* OVERFLOW FAIL INCRBY u2 100 9: nil (over). */
	CHECK_EQ(kv_bits_add(false, 2, 0, 9, KV_BITS_FAIL, &out), 1);
	/* SET i1 5 -1, INCRBY i1 5 1: 0 (within -1..0). */
	CHECK_EQ(kv_bits_add(true, 1, -1, 1, KV_BITS_WRAP, &out), 0);
	CHECK_EQ(out, 0);
}

int main(void)
{
	counts_and_searches();
	ranges();
	operators();
	integers();
	overflow_against_exact();
	overflow_as_redis();
	return check_done();
}
