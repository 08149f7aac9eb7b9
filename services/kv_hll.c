/*
 * kv_hll.c - HyperLogLog in Redis's bytes (kv_hll.h).
 *
 * Damaged sparse values (runs that do not cover exactly the 16384
 * registers, bytes after the last one, an XZERO cut in half at the end)
 * are refused by every reader. Redis refuses the first two; a cut XZERO
 * it takes, reading its string's terminating zero as the missing byte.
 */
#include <math.h>
#include <string.h>

#include "kv_hll.h"

#define Q 50                           /* hash bits left after the register's 14 */
#define ALPHA_INF 0.721347520444481703680  /* 0.5 / ln 2 */
#define SEED 0xadc83b19ull

/* ------------------------------------------------------------ the header */

int kv_hll_encoding(const uint8_t *v, size_t len)
{
	if (len < KV_HLL_HDR || memcmp(v, "HYLL", 4) || v[4] > KV_HLL_SPARSE)
		return -1;
	if (v[4] == KV_HLL_DENSE && len != KV_HLL_DENSE_SIZE)
		return -1;
	return v[4];
}

void kv_hll_new(uint8_t *v)
{
	memset(v, 0, KV_HLL_NEW_SIZE);
	memcpy(v, "HYLL", 4);
	v[4] = KV_HLL_SPARSE;
	v[KV_HLL_HDR] = 0x40 | (uint8_t)((KV_HLL_REGS - 1) >> 8);    /* XZERO of 16384 */
	v[KV_HLL_HDR + 1] = (uint8_t)((KV_HLL_REGS - 1) & 0xFF);
}

bool kv_hll_cached(const uint8_t *v, uint64_t *card)
{
	if (v[15] & 0x80)
		return false;
	uint64_t c = 0;
	for (int i = 7; i >= 0; i--)
		c = c << 8 | v[8 + i];
	*card = c;
	return true;
}

void kv_hll_cache(uint8_t *v, uint64_t card)
{
	for (int i = 0; i < 8; i++)
		v[8 + i] = (uint8_t)(card >> (8 * i));
}

void kv_hll_stale(uint8_t *v)
{
	v[15] |= 0x80;
}

/* ------------------------------------------------------------ hashing */

/* MurmurHash64A (Austin Appleby's, public domain), words read little
 * endian as Redis reads them on x86-64. */
static uint64_t murmur64a(const uint8_t *p, size_t n, uint64_t seed)
{
	const uint64_t m = 0xc6a4a7935bd1e995ull;
	uint64_t h = seed ^ ((uint64_t)n * m);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t k = 0;
		for (int b = 7; b >= 0; b--)
			k = k << 8 | p[i + b];
		k *= m;
		k ^= k >> 47;
		k *= m;
		h ^= k;
		h *= m;
	}
	size_t rest = n - i;
	if (rest) {
		for (size_t b = rest; b-- > 0;)
			h ^= (uint64_t)p[i + b] << (8 * b);
		h *= m;
	}
	h ^= h >> 47;
	h *= m;
	h ^= h >> 47;
	return h;
}

void kv_hll_hash(const void *e, size_t n, uint32_t *reg, uint8_t *count)
{
	uint64_t h = murmur64a(e, n, SEED);
	*reg = (uint32_t)(h & (KV_HLL_REGS - 1));
	h >>= 14;
	h |= 1ull << Q;                      /* at most Q + 1 */
	*count = (uint8_t)(__builtin_ctzll(h) + 1);
}

/* ------------------------------------------------------------ registers */

uint8_t kv_hll_dense_reg(const uint8_t *at, uint32_t i)
{
	uint32_t fb = i * 6 % 8;
	unsigned v = at[0] >> fb;
	if (fb > 2)                          /* the register runs into the next byte */
		v |= (unsigned)at[1] << (8 - fb);
	return (uint8_t)(v & 63);
}

uint8_t kv_hll_dense_get(const uint8_t *regs, uint32_t i)
{
	return kv_hll_dense_reg(regs + i * 6 / 8, i);
}

bool kv_hll_dense_set(uint8_t *regs, uint32_t i, uint8_t count)
{
	if (count <= kv_hll_dense_get(regs, i))
		return false;
	uint32_t byte = i * 6 / 8, fb = i * 6 % 8;
	regs[byte] = (uint8_t)((regs[byte] & ~(63u << fb)) | ((unsigned)count << fb));
	if (fb > 2)
		regs[byte + 1] = (uint8_t)((regs[byte + 1] & ~(63u >> (8 - fb))) | (count >> (8 - fb)));
	return true;
}

/* ------------------------------------------------------- sparse runs */

#define IS_ZERO(b) (((b) & 0xC0) == 0)
#define IS_XZERO(b) (((b) & 0xC0) == 0x40)
#define ZERO_LEN(b) (((b) & 0x3F) + 1u)
#define XZERO_LEN(b0, b1) (((((b0) & 0x3Fu) << 8) | (b1)) + 1u)
#define VAL_VALUE(b) ((((b) >> 2) & 0x1F) + 1u)
#define VAL_LEN(b) (((b) & 3) + 1u)
#define VAL(v, l) ((uint8_t)(0x80 | ((v) - 1) << 2 | ((l) - 1)))

/* The opcode at p: its registers and bytes; 0 registers for an XZERO
 * cut in half by the end (damaged). */
static uint32_t run_at(const uint8_t *p, const uint8_t *end, uint32_t *oplen)
{
	*oplen = 1;
	if (IS_ZERO(*p))
		return ZERO_LEN(*p);
	if (!IS_XZERO(*p))
		return VAL_LEN(*p);
	*oplen = 2;
	return p + 1 < end ? XZERO_LEN(*p, p[1]) : 0;
}

/* Every run of sparse registers v[0..len): fn(arg, first register,
 * registers, value) for VAL runs that fit; stops at one that does not.
 * Returns the registers the runs cover, KV_HLL_REGS when v is whole
 * (bytes after the last register make it damaged). */
static uint64_t each_run(const uint8_t *v, size_t len, void (*fn)(void *, uint32_t, uint32_t, uint8_t),
			 void *arg)
{
	const uint8_t *p = v + KV_HLL_HDR, *end = v + len;
	uint64_t idx = 0;
	while (p < end) {
		uint32_t oplen, n = run_at(p, end, &oplen);
		if (n == 0)
			return KV_HLL_REGS + 1;      /* a cut XZERO */
		if (!IS_ZERO(*p) && !IS_XZERO(*p)) {
			if (idx + n > KV_HLL_REGS)
				return idx + n;
			fn(arg, (uint32_t)idx, n, (uint8_t)VAL_VALUE(*p));
		}
		idx += n;
		p += oplen;
	}
	return idx;
}

static void put_max(void *arg, uint32_t first, uint32_t n, uint8_t val)
{
	uint8_t *max = arg;
	for (uint32_t i = first; i < first + n; i++)
		if (val > max[i])
			max[i] = val;
}

static void put_dense(void *arg, uint32_t first, uint32_t n, uint8_t val)
{
	for (uint32_t i = first; i < first + n; i++)
		kv_hll_dense_set(arg, i, val);
}

bool kv_hll_to_dense(const uint8_t *v, size_t len, uint8_t *out)
{
	memset(out, 0, KV_HLL_DENSE_SIZE);
	memcpy(out, v, KV_HLL_HDR);
	out[4] = KV_HLL_DENSE;
	return each_run(v, len, put_dense, out + KV_HLL_HDR) == KV_HLL_REGS;
}

bool kv_hll_merge(uint8_t max[KV_HLL_REGS], const uint8_t *v, size_t len)
{
	if (v[4] == KV_HLL_DENSE) {
		for (uint32_t i = 0; i < KV_HLL_REGS; i++) {
			uint8_t r = kv_hll_dense_get(v + KV_HLL_HDR, i);
			if (r > max[i])
				max[i] = r;
		}
		return true;
	}
	return each_run(v, len, put_max, max) == KV_HLL_REGS;
}

/* One opcode of a run of n zero registers into q: its bytes. */
static int put_zeros(uint8_t *q, uint32_t n)
{
	if (n > 64) {
		q[0] = (uint8_t)(0x40 | (n - 1) >> 8);
		q[1] = (uint8_t)((n - 1) & 0xFF);
		return 2;
	}
	q[0] = (uint8_t)(n - 1);
	return 1;
}

int kv_hll_sparse_set(uint8_t *v, size_t *len, uint32_t i, uint8_t count, size_t max_bytes)
{
	if (count > 32)
		return 2;
	uint8_t *s = v + KV_HLL_HDR, *end = v + *len, *p = s, *prev = NULL;
	uint32_t first = 0, span = 0, oplen = 1;
	/* The opcode holding register i, and the one before it. */
	while (p < end) {
		span = run_at(p, end, &oplen);
		if (i <= first + span - 1)
			break;
		prev = p;
		p += oplen;
		first += span;
	}
	if (p >= end || span == 0)
		return -1;
	uint8_t *next = p + oplen < end ? p + oplen : NULL;
	bool is_val = !IS_ZERO(*p) && !IS_XZERO(*p);
	if (is_val && VAL_VALUE(*p) >= count)
		return 0;
	if ((is_val || IS_ZERO(*p)) && span == 1) {
		*p = VAL(count, 1u);             /* the run was this register alone */
	} else {
		/* Split the run: what comes before i, i itself, what comes after. */
		uint8_t seq[5];
		int n = 0;
		uint32_t last = first + span - 1;
		if (is_val) {
			unsigned cur = VAL_VALUE(*p);
			if (i != first)
				seq[n++] = VAL(cur, i - first);
			seq[n++] = VAL(count, 1u);
			if (i != last)
				seq[n++] = VAL(cur, last - i);
		} else {
			if (i != first)
				n += put_zeros(seq + n, i - first);
			seq[n++] = VAL(count, 1u);
			if (i != last)
				n += put_zeros(seq + n, last - i);
		}
		long delta = n - (long)oplen;
		if (delta > 0 && *len + (size_t)delta > max_bytes)
			return 2;
		if (delta && next)
			memmove(next + delta, next, (size_t)(end - next));
		*len = (size_t)((long)*len + delta);
		end += delta;
		memcpy(p, seq, (size_t)n);
	}
	/* Merge equal VAL runs next to each other, scanning up to five
	 * opcodes from the one before the change (Redis's window: the bytes
	 * come out as Redis's). */
	p = prev ? prev : s;
	for (int scan = 5; p < end && scan--;) {
		if (IS_XZERO(*p)) {
			p += 2;
			continue;
		}
		if (IS_ZERO(*p)) {
			p++;
			continue;
		}
		if (p + 1 < end && !IS_ZERO(p[1]) && !IS_XZERO(p[1]) && VAL_VALUE(*p) == VAL_VALUE(p[1]) &&
		    VAL_LEN(*p) + VAL_LEN(p[1]) <= 4) {
			p[1] = VAL(VAL_VALUE(*p), VAL_LEN(*p) + VAL_LEN(p[1]));
			memmove(p, p + 1, (size_t)(end - p - 1));
			end--;
			(*len)--;
			continue;                    /* and try the merged run with the next */
		}
		p++;
	}
	kv_hll_stale(v);
	return 1;
}

/* ------------------------------------------------------------ counting */

static double sigma(double x)
{
	if (x == 1.)
		return INFINITY;
	double y = 1, z = x, before;
	do {
		x *= x;
		before = z;
		z += x * y;
		y += y;
	} while (before != z);
	return z;
}

static double tau(double x)
{
	if (x == 0. || x == 1.)
		return 0.;
	double y = 1.0, z = 1 - x, before;
	do {
		x = sqrt(x);
		before = z;
		y *= 0.5;
		z -= pow(1 - x, 2) * y;
	} while (before != z);
	return z / 3;
}

/* Ertl's estimator ("New cardinality estimation algorithms for
 * HyperLogLog sketches", 2017) in Redis's steps. */
static uint64_t estimate(const int hist[64])
{
	double m = KV_HLL_REGS;
	double z = m * tau((m - hist[Q + 1]) / m);
	for (int j = Q; j >= 1; --j) {
		z += hist[j];
		z *= 0.5;
	}
	z += m * sigma(hist[0] / m);
	return (uint64_t)llroundl(ALPHA_INF * m * m / z);
}

static void histogram(void *arg, uint32_t first, uint32_t n, uint8_t val)
{
	(void)first;
	((int *)arg)[val] += (int)n;
}

uint64_t kv_hll_count(const uint8_t *v, size_t len, bool *damaged)
{
	int hist[64] = { 0 };
	*damaged = false;
	if (v[4] == KV_HLL_DENSE) {
		for (uint32_t i = 0; i < KV_HLL_REGS; i++)
			hist[kv_hll_dense_get(v + KV_HLL_HDR, i)]++;
		return estimate(hist);
	}
	/* The VAL runs' registers by value; the zero runs' are the rest. */
	*damaged = each_run(v, len, histogram, hist) != KV_HLL_REGS;
	if (*damaged)
		return 0;
	hist[0] = (int)KV_HLL_REGS;
	for (int i = 1; i < 64; i++)
		hist[0] -= hist[i];
	return estimate(hist);
}

uint64_t kv_hll_count_regs(const uint8_t max[KV_HLL_REGS])
{
	int hist[64] = { 0 };
	for (uint32_t i = 0; i < KV_HLL_REGS; i++)
		hist[max[i] & 63]++;
	return estimate(hist);
}
