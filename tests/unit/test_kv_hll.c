/* test_kv_hll.c - HyperLogLog in Redis's bytes (services/kv_hll.c): the
 * register and count of elements, the sparse bytes of a small set and
 * the counts of larger ones against what Redis 7.0.15 (Debian's
 * redis-server) gives for the same PFADDs (PFDEBUG DECODE, GET, PFCOUNT);
 * dense registers; sparse and dense forms of the same elements agreeing
 * register by register and in their counts; merges; the cached count;
 * damaged values refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv_hll.h"

/* PFADD t <e> on a new key, then PFDEBUG DECODE t: "Z:reg v:count,1 ...". */
static const struct {
	const char *e;
	uint32_t reg;
	uint8_t count;
} elements[] = {
	{ "a", 12711, 2 }, { "b", 15780, 1 }, { "", 5938, 2 }, { "hello", 9216, 1 },
	{ "12345678", 10579, 3 }, { "123456789", 9293, 2 }, { "the quick brown fox", 15795, 1 },
};

struct hll {
	uint8_t v[KV_HLL_DENSE_SIZE + 8];
	size_t len;
};

static void add(struct hll *h, const char *e, size_t n, size_t max_bytes)
{
	uint32_t reg;
	uint8_t count;
	kv_hll_hash(e, n, &reg, &count);
	if (h->v[4] == KV_HLL_SPARSE) {
		int r = kv_hll_sparse_set(h->v, &h->len, reg, count, max_bytes);
		CHECK(r >= 0);
		if (r != 2)
			return;
		uint8_t d[KV_HLL_DENSE_SIZE];
		CHECK(kv_hll_to_dense(h->v, h->len, d));
		memcpy(h->v, d, KV_HLL_DENSE_SIZE);
		h->len = KV_HLL_DENSE_SIZE;
	}
	kv_hll_dense_set(h->v + KV_HLL_HDR, reg, count);
}

static void fresh(struct hll *h)
{
	kv_hll_new(h->v);
	h->len = KV_HLL_NEW_SIZE;
	CHECK_EQ(kv_hll_encoding(h->v, h->len), KV_HLL_SPARSE);
}

static void hashes_as_redis(void)
{
	for (size_t i = 0; i < sizeof(elements) / sizeof(elements[0]); i++) {
		uint32_t reg;
		uint8_t count;
		kv_hll_hash(elements[i].e, strlen(elements[i].e), &reg, &count);
		CHECK_EQ(reg, elements[i].reg);
		CHECK_EQ(count, elements[i].count);
	}
}

static void bytes_and_counts_as_redis(void)
{
	struct hll h;
	fresh(&h);
	/* PFADD s a b c d e f g; GET s. */
	for (const char *e = "abcdefg"; *e; e++)
		add(&h, e, 1, 3000);
	static const uint8_t want[] = "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
		"Fm\x80V\x0c\x80" "D<\x84" "8\x80P\xb1\x84I\x8c\x80" "Bm\x80" "BZ";
	CHECK_EQ(h.len, sizeof(want) - 1);
	CHECK(!memcmp(h.v, want, sizeof(want) - 1));
	/* PFADD c e1 ... e1000: 1008 (1906 bytes, sparse); d e1 ... e100000: 100853. */
	char e[16];
	fresh(&h);
	for (int i = 1; i <= 1000; i++)
		add(&h, e, (size_t)snprintf(e, sizeof(e), "e%d", i), 3000);
	bool bad;
	CHECK_EQ(h.v[4], KV_HLL_SPARSE);
	CHECK_EQ(h.len, 1906);
	CHECK_EQ(kv_hll_count(h.v, h.len, &bad), 1008);
	CHECK(!bad);
	for (int i = 1001; i <= 100000; i++)
		add(&h, e, (size_t)snprintf(e, sizeof(e), "e%d", i), 3000);
	CHECK_EQ(h.v[4], KV_HLL_DENSE);
	CHECK_EQ(kv_hll_count(h.v, h.len, &bad), 100853);
}

/* The same elements into a sparse HLL (with a bound large enough to stay
 * sparse) and a dense one: the same registers and counts. */
static void sparse_and_dense_agree(void)
{
	static struct hll s, d;
	fresh(&s);
	fresh(&d);
	static uint8_t tmp[KV_HLL_DENSE_SIZE];
	CHECK(kv_hll_to_dense(d.v, d.len, tmp));
	memcpy(d.v, tmp, KV_HLL_DENSE_SIZE);
	d.len = KV_HLL_DENSE_SIZE;
	CHECK_EQ(kv_hll_encoding(d.v, d.len), KV_HLL_DENSE);
	srand(3);
	uint8_t max[KV_HLL_REGS] = { 0 };
	for (int i = 0; i < 3000; i++) {
		char e[24];
		size_t n = (size_t)snprintf(e, sizeof(e), "%d-%d", rand(), i);
		add(&s, e, n, KV_HLL_DENSE_SIZE);
		add(&d, e, n, 0);
		if (i % 500 == 0) {
			bool b1, b2;
			CHECK_EQ(kv_hll_count(s.v, s.len, &b1), kv_hll_count(d.v, d.len, &b2));
		}
	}
	CHECK_EQ(s.v[4], KV_HLL_SPARSE);
	uint8_t back[KV_HLL_DENSE_SIZE];
	CHECK(kv_hll_to_dense(s.v, s.len, back));
	CHECK(!memcmp(back + KV_HLL_HDR, d.v + KV_HLL_HDR, KV_HLL_DENSE_SIZE - KV_HLL_HDR));
	CHECK(kv_hll_merge(max, s.v, s.len));
	for (uint32_t i = 0; i < KV_HLL_REGS; i++)
		CHECK_EQ(max[i], kv_hll_dense_get(d.v + KV_HLL_HDR, i));
	bool bad;
	CHECK_EQ(kv_hll_count_regs(max), kv_hll_count(d.v, d.len, &bad));
	/* A merge with the dense form changes nothing; with an empty one neither. */
	CHECK(kv_hll_merge(max, d.v, d.len));
	struct hll e;
	fresh(&e);
	CHECK(kv_hll_merge(max, e.v, e.len));
	CHECK_EQ(kv_hll_count_regs(max), kv_hll_count(d.v, d.len, &bad));
	CHECK_EQ(kv_hll_count(e.v, e.len, &bad), 0);
}

static void registers_and_cache(void)
{
	static uint8_t regs[KV_HLL_DENSE_SIZE];
	memset(regs, 0, sizeof(regs));
	for (uint32_t i = 0; i < KV_HLL_REGS; i++)
		CHECK(kv_hll_dense_set(regs, i, (uint8_t)(1 + i % 63)));
	for (uint32_t i = 0; i < KV_HLL_REGS; i++)
		CHECK_EQ(kv_hll_dense_get(regs, i), 1 + i % 63);
	/* From the bytes a register lies in alone (the last: one byte). */
	for (uint32_t i = 0; i < KV_HLL_REGS; i++) {
		uint32_t b = i * 6 / 8;
		uint8_t at[2] = { regs[b], b + 1 < KV_HLL_REGS * 6 / 8 ? regs[b + 1] : 0 };
		CHECK_EQ(kv_hll_dense_reg(at, i), 1 + i % 63);
	}
	CHECK(!kv_hll_dense_set(regs, 5, 1));               /* only ever raised */
	struct hll h;
	fresh(&h);
	uint64_t c = 1;
	CHECK(kv_hll_cached(h.v, &c) && c == 0);
	kv_hll_cache(h.v, 0x0123456789ABull);
	CHECK(kv_hll_cached(h.v, &c) && c == 0x0123456789ABull);
	add(&h, "x", 1, 3000);
	CHECK(!kv_hll_cached(h.v, &c));
	/* An element already counted changes nothing, the cache included. */
	kv_hll_cache(h.v, 1);
	uint32_t reg;
	uint8_t count;
	kv_hll_hash("x", 1, &reg, &count);
	CHECK_EQ(kv_hll_sparse_set(h.v, &h.len, reg, count, 3000), 0);
	CHECK(kv_hll_cached(h.v, &c) && c == 1);
	CHECK_EQ(kv_hll_sparse_set(h.v, &h.len, reg, 40, 3000), 2);   /* over 32: dense */
}

static void damage_refused(void)
{
	struct hll h;
	fresh(&h);
	for (const char *e = "abc"; *e; e++)
		add(&h, e, 1, 3000);
	bool bad;
	uint8_t max[KV_HLL_REGS] = { 0 }, d[KV_HLL_DENSE_SIZE];
	/* APPEND hll "hello": runs past the last register. */
	memcpy(h.v + h.len, "hello", 5);
	kv_hll_count(h.v, h.len + 5, &bad);
	CHECK(bad);
	CHECK(!kv_hll_merge(max, h.v, h.len + 5));
	CHECK(!kv_hll_to_dense(h.v, h.len + 5, d));
	/* Cut short: its runs do not reach the last register. */
	kv_hll_count(h.v, h.len - 1, &bad);
	CHECK(bad);
	CHECK_EQ(kv_hll_sparse_set(h.v, &(size_t){ KV_HLL_HDR }, 3, 1, 3000), -1);
	/* 255 registers, then an XZERO cut in half (Redis reads its string's
	 * terminating zero as the missing byte and takes it: 16129 more). */
	uint8_t cut[KV_HLL_HDR + 66];
	kv_hll_new(cut);
	memset(cut + KV_HLL_HDR, 0xCF, 63);
	cut[KV_HLL_HDR + 63] = 0xCE;
	cut[KV_HLL_HDR + 64] = 0x7F;
	size_t cutlen = KV_HLL_HDR + 65;
	kv_hll_count(cut, cutlen, &bad);
	CHECK(bad);
	CHECK(!kv_hll_merge(max, cut, cutlen));
	CHECK(!kv_hll_to_dense(cut, cutlen, d));
	CHECK_EQ(kv_hll_sparse_set(cut, &cutlen, 300, 5, 3000), -1);
	CHECK_EQ(cutlen, KV_HLL_HDR + 65);
	/* Whole registers, then one more run. */
	uint8_t tail[KV_HLL_HDR + 3];
	kv_hll_new(tail);
	tail[KV_HLL_HDR + 2] = 0x80;
	kv_hll_count(tail, sizeof(tail), &bad);
	CHECK(bad);
	CHECK(!kv_hll_merge(max, tail, sizeof(tail)));
	CHECK(!kv_hll_to_dense(tail, sizeof(tail), d));
	/* Not HLLs: the magic, an unknown encoding, a dense one's length. */
	uint8_t v[KV_HLL_DENSE_SIZE];
	memcpy(v, h.v, KV_HLL_HDR);
	CHECK_EQ(kv_hll_encoding(v, 15), -1);
	v[4] = 2;
	CHECK_EQ(kv_hll_encoding(v, 20), -1);
	v[4] = KV_HLL_DENSE;
	CHECK_EQ(kv_hll_encoding(v, 20), -1);
	CHECK_EQ(kv_hll_encoding(v, KV_HLL_DENSE_SIZE), KV_HLL_DENSE);
	v[0] = '0';
	CHECK_EQ(kv_hll_encoding(v, KV_HLL_DENSE_SIZE), -1);
	/* Random bytes in a sparse value: refused or counted, never a crash
	 * (the sanitizer build reads past nothing). */
	srand(9);
	for (int round = 0; round < 20000; round++) {
		struct hll r;
		fresh(&r);
		for (int i = 0; i < rand() % 200; i++) {
			char e[12];
			add(&r, e, (size_t)snprintf(e, sizeof(e), "%d", rand()), 3000);
		}
		if (r.v[4] != KV_HLL_SPARSE)
			continue;
		for (int i = 0; i < 1 + rand() % 3; i++)
			r.v[KV_HLL_HDR + (size_t)rand() % (r.len - KV_HLL_HDR)] = (uint8_t)rand();
		size_t len = r.len;
		kv_hll_count(r.v, len, &bad);
		memset(max, 0, sizeof(max));
		kv_hll_merge(max, r.v, len);
		kv_hll_to_dense(r.v, len, d);
		if (len + 3 <= sizeof(r.v))
			kv_hll_sparse_set(r.v, &len, (uint32_t)rand() % KV_HLL_REGS, (uint8_t)(1 + rand() % 32), 3000);
	}
}

int main(void)
{
	hashes_as_redis();
	bytes_and_counts_as_redis();
	sparse_and_dense_agree();
	registers_and_cache();
	damage_refused();
	return check_done();
}
