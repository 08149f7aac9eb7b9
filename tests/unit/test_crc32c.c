/* test_crc32c.c - CRC32C against the standard check value, a bit-at-a-time
 * reference, and the hardware path against the table path. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "paste.h"

/* Not in paste.h: both paths are exported for this test. */
uint32_t paste_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t paste_crc32c_hw(uint32_t crc, const void *p, size_t n);

/* Straight from the definition: no table, no instruction. */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

static void test_check_value(void)
{
	const char *s = "123456789";
	CHECK_EQ(paste_crc32c(0, s, 9), 0xE3069283u);
	CHECK_EQ(paste_crc32c_sw(0, s, 9), 0xE3069283u);
	CHECK_EQ(paste_crc32c_hw(0, s, 9), 0xE3069283u);
	CHECK_EQ(crc32c_bitwise(0, (const uint8_t *)s, 9), 0xE3069283u);
	CHECK_EQ(paste_crc32c(0, s, 0), 0);
	CHECK_EQ(paste_crc32c(0x1234u, s, 0), 0x1234u);
	/* 32 zero bytes: RFC 3720 (iSCSI) test vector. */
	uint8_t zeros[32] = {0};
	CHECK_EQ(paste_crc32c(0, zeros, 32), 0x8A9136AAu);
}

static void test_chaining(void)
{
	const char *s = "The quick brown fox jumps over the lazy dog";
	size_t n = strlen(s);
	uint32_t whole = paste_crc32c(0, s, n);
	for (size_t cut = 0; cut <= n; cut++) {
		uint32_t c = paste_crc32c(0, s, cut);
		c = paste_crc32c(c, s + cut, n - cut);
		CHECK_EQ(c, whole);
	}
}

static void test_random_lengths_alignments(void)
{
	enum { MAX = 4096 + 64 };
	uint8_t *buf = malloc(MAX);
	unsigned seed = 12345;
	for (size_t i = 0; i < MAX; i++)
		buf[i] = (uint8_t)rand_r(&seed);
	int mismatches = 0;
	for (int iter = 0; iter < 2000; iter++) {
		size_t off = (size_t)rand_r(&seed) % 64;
		size_t len = (size_t)rand_r(&seed) % (MAX - off);
		uint32_t init = (iter & 1) ? (uint32_t)rand_r(&seed) : 0;
		uint32_t ref = crc32c_bitwise(init, buf + off, len);
		if (paste_crc32c_sw(init, buf + off, len) != ref ||
		    paste_crc32c_hw(init, buf + off, len) != ref ||
		    paste_crc32c(init, buf + off, len) != ref)
			mismatches++;
	}
	CHECK_EQ(mismatches, 0);
	/* One flipped bit changes the sum (a test that would catch a no-op). */
	uint32_t a = paste_crc32c(0, buf, 1024);
	buf[500] ^= 0x10;
	CHECK(paste_crc32c(0, buf, 1024) != a);
	free(buf);
}

int main(void)
{
	test_check_value();
	test_chaining();
	test_random_lengths_alignments();
	return check_done();
}
