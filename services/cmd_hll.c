/*
 * cmd_hll.c - pkvs's HyperLogLog commands (pkvs_resp.h): PFADD, PFCOUNT,
 * PFMERGE, PFDEBUG and PFSELFTEST, with Redis 7.0's replies and errors.
 *
 * An HLL is a string in Redis's bytes (kv_hll.h): at most 12,304 bytes
 * dense, hll-sparse-max-bytes (3000) sparse. A command reads the value
 * into DRAM, changes it there and writes it back whole (its deadline
 * kept) when a register or the cached count changed: one entry, one log
 * record, so a PFADD of many elements is all there after a crash or not
 * at all. PFCOUNT of one key stores the count it computed in the value's
 * header, as Redis does (a write, which replication sends on as the
 * PFCOUNT itself).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_hll.h"
#include "kv_notify.h"
#include "pkvs_resp.h"

static const char not_hll[] = "WRONGTYPE Key is not a valid HyperLogLog string value.";
static const char damaged[] = "INVALIDOBJ Corrupted HLL object detected";

/* An HLL value in DRAM, with room to grow (a sparse one by 3 bytes a
 * register, or turned dense). */
struct hll {
	uint8_t *v;
	size_t len, cap;
};

static bool hll_room(struct hll *h, size_t need)
{
	if (need <= h->cap)
		return true;
	size_t cap = need < KV_HLL_DENSE_SIZE ? KV_HLL_DENSE_SIZE : need * 2;
	uint8_t *v = realloc(h->v, cap);
	if (!v)
		return false;
	h->v = v;
	h->cap = cap;
	return true;
}

/* The HLL at key arg: its object and header, 0, -ENOENT (absent), or
 * -EINVAL after replying (a key over pkvs's limit, not a string, not an
 * HLL). Only the header is read: a long string that is not an HLL is
 * refused without reading it, and a cached count or unchanged dense
 * registers need no more. */
static int hll_head(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *arg,
		    struct kv_key *k, bool read, struct kv_obj *o, uint8_t head[KV_HLL_HDR])
{
	if (!kv_arg_key(x, kv, arg, k))
		return -EINVAL;
	int r = kv_find(x, kv, k, KV_STRING, o, read);
	if (r)
		return r;
	if (o->len < KV_HLL_HDR || kv_value_read(kv, o, 0, head, KV_HLL_HDR) != KV_HLL_HDR ||
	    kv_hll_encoding(head, o->len) < 0) {
		resp_error(x, not_hll);
		return -EINVAL;
	}
	return 0;
}

/* The whole value of HLL o into *h: 0, or -EINVAL after replying. */
static int hll_load(struct resp_ctx *x, struct kv *kv, const struct kv_obj *o, struct hll *h)
{
	if (!hll_room(h, o->len + 4)) {
		kv_reply_errno(x, -ENOMEM);
		return -EINVAL;
	}
	if (kv_value_read(kv, o, 0, h->v, o->len) != o->len) {
		kv_reply_errno(x, -EIO);
		return -EINVAL;
	}
	h->len = o->len;
	return 0;
}

/* hll_head, then hll_load. */
static int hll_at(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *arg,
		  struct kv_key *k, bool read, struct hll *h)
{
	struct kv_obj o;
	uint8_t head[KV_HLL_HDR];
	int r = hll_head(x, kv, arg, k, read, &o, head);
	return r ? r : hll_load(x, kv, &o, h);
}

/* True when dense HLL o's registers already hold what every element
 * a[0..n) offers: two bytes read per element, not the 12 KiB value. */
static bool dense_holds(struct kv *kv, const struct kv_obj *o, const struct paste_resp_arg *a,
			uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		uint32_t reg;
		uint8_t count, at[2] = { 0, 0 };
		kv_hll_hash(a[j].p, a[j].len, &reg, &count);
		uint64_t off = KV_HLL_HDR + reg * 6 / 8;
		size_t want = off + 2 <= o->len ? 2 : 1;
		if (kv_value_read(kv, o, off, at, want) != want || count > kv_hll_dense_reg(at, reg))
			return false;
	}
	return true;
}

static bool hll_new(struct resp_ctx *x, struct hll *h)
{
	if (!hll_room(h, KV_HLL_DENSE_SIZE)) {
		kv_reply_errno(x, -ENOMEM);
		return false;
	}
	kv_hll_new(h->v);
	h->len = KV_HLL_NEW_SIZE;
	return true;
}

static size_t sparse_max(void)
{
	const char *s = kv_config_kept("hll-sparse-max-bytes");
	uint64_t v = 3000;
	if (s)
		kv_mem_value(s, strlen(s), &v);
	return (size_t)v;
}

/* A sparse value turned dense (its header kept): false when damaged. */
static bool densify(struct hll *h)
{
	uint8_t *d = malloc(KV_HLL_DENSE_SIZE + 4);
	if (!d || !kv_hll_to_dense(h->v, h->len, d)) {
		free(d);
		return false;
	}
	free(h->v);
	h->v = d;
	h->len = KV_HLL_DENSE_SIZE;
	h->cap = KV_HLL_DENSE_SIZE + 4;
	return true;
}

/* Raise register i to count: 1 changed, 0 not, -1 damaged or no memory. */
static int hll_set(struct hll *h, uint32_t i, uint8_t count, size_t max_bytes)
{
	if (h->v[4] == KV_HLL_SPARSE) {
		if (!hll_room(h, h->len + 3))
			return -1;
		int r = kv_hll_sparse_set(h->v, &h->len, i, count, max_bytes);
		if (r != 2)
			return r;
		if (!densify(h))
			return -1;
	}
	bool changed = kv_hll_dense_set(h->v + KV_HLL_HDR, i, count);
	if (changed)
		kv_hll_stale(h->v);
	return changed;
}

/* The value back under key k, its deadline kept (a new key: none). */
static int hll_put(struct kv *kv, struct kv_key *k, const struct hll *h)
{
	return kv_put_bytes(kv, k, KV_STRING, h->v, h->len, KV_KEEP_TTL, NULL);
}

static void cmd_pfadd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct hll h = { 0 };
	struct kv_key k;
	struct kv_obj o;
	uint8_t head[KV_HLL_HDR];
	int r = hll_head(x, kv, &a[1], &k, false, &o, head);
	int updated = 0;
	if (r == 0 && head[4] == KV_HLL_DENSE && dense_holds(kv, &o, &a[2], n - 2)) {
		resp_int(x, 0);
		return;
	}
	if (r == 0)
		r = hll_load(x, kv, &o, &h);
	if (r == -EINVAL)
		goto out;
	if (r == -ENOENT) {
		if (!hll_new(x, &h))
			goto out;
		updated = 1;
	}
	size_t max_bytes = sparse_max();
	for (uint32_t j = 2; j < n; j++) {
		uint32_t reg;
		uint8_t count;
		kv_hll_hash(a[j].p, a[j].len, &reg, &count);
		int s = hll_set(&h, reg, count, max_bytes);
		if (s < 0) {
			resp_error(x, damaged);
			goto out;
		}
		updated |= s;
	}
	if (updated) {
		kv_hll_stale(h.v);
		if ((r = hll_put(kv, &k, &h)) != 0) {
			kv_reply_errno(x, r);
			goto out;
		}
		kv_notify(KV_NOTIFY_STRING, "pfadd", &k);
	}
	resp_int(x, updated);
out:
	free(h.v);
}

static void cmd_pfcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct hll h = { 0 };
	struct kv_key k;
	if (n > 2) {                             /* the count of the union */
		uint8_t *max = calloc(KV_HLL_REGS, 1);
		if (!max) {
			kv_reply_errno(x, -ENOMEM);
			return;
		}
		uint32_t j = 1;
		for (; j < n; j++) {
			int r = hll_at(x, kv, &a[j], &k, true, &h);
			if (r == -EINVAL)
				break;
			if (r == 0 && !kv_hll_merge(max, h.v, h.len)) {
				resp_error(x, damaged);
				break;
			}
		}
		if (j == n)
			resp_int(x, (int64_t)kv_hll_count_regs(max));
		free(max);
		free(h.v);
		return;
	}
	struct kv_obj o;
	uint8_t head[KV_HLL_HDR];
	int r = hll_head(x, kv, &a[1], &k, true, &o, head);
	uint64_t card = 0;
	if (r == -ENOENT)
		resp_int(x, 0);
	if (r)
		return;
	if (kv_hll_cached(head, &card)) {
		resp_int(x, (int64_t)card);
		return;
	}
	if (hll_load(x, kv, &o, &h))
		goto out;
	bool bad;
	card = kv_hll_count(h.v, h.len, &bad);
	if (bad) {
		resp_error(x, damaged);
		goto out;
	}
	/* Kept for the next count (a replica keeps its own, as Redis's does;
	 * a primary sends the PFCOUNT on: kv_repl.c). */
	kv_hll_cache(h.v, card);
	if ((r = hll_put(kv, &k, &h)) != 0) {
		kv_reply_errno(x, r);
		goto out;
	}
	resp_int(x, (int64_t)card);
out:
	free(h.v);
}

static void cmd_pfmerge(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct hll h = { 0 };
	struct kv_key k;
	uint8_t *max = calloc(KV_HLL_REGS, 1);
	bool dense = false;
	if (!max) {
		kv_reply_errno(x, -ENOMEM);
		return;
	}
	/* The destination is a source too (Redis 7.0). */
	for (uint32_t j = 1; j < n; j++) {
		int r = hll_at(x, kv, &a[j], &k, true, &h);
		if (r == -EINVAL)
			goto out;
		if (r == -ENOENT)
			continue;
		dense |= h.v[4] == KV_HLL_DENSE;
		if (!kv_hll_merge(max, h.v, h.len)) {
			resp_error(x, damaged);
			goto out;
		}
	}
	int r = hll_at(x, kv, &a[1], &k, false, &h);
	if (r == -EINVAL || (r == -ENOENT && !hll_new(x, &h)))
		goto out;
	if (dense && h.v[4] == KV_HLL_SPARSE && !densify(&h)) {
		resp_error(x, damaged);
		goto out;
	}
	size_t max_bytes = sparse_max();
	for (uint32_t i = 0; i < KV_HLL_REGS; i++)
		if (max[i] && hll_set(&h, i, max[i], max_bytes) < 0) {
			resp_error(x, damaged);
			goto out;
		}
	kv_hll_stale(h.v);
	if ((r = hll_put(kv, &k, &h)) != 0) {
		kv_reply_errno(x, r);
		goto out;
	}
	kv_notify(KV_NOTIFY_STRING, "pfadd", &k);     /* Redis's event for a merge */
	resp_ok(x);
out:
	free(max);
	free(h.v);
}

/* PFDEBUG DECODE's text of sparse value v: "z:N" ZERO, "Z:N" XZERO,
 * "v:VALUE,N" VAL, space separated; NULL without memory. */
static char *decode(const struct hll *h, size_t *len)
{
	size_t cap = (h->len - KV_HLL_HDR) * 12 + 1, at = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	const uint8_t *p = h->v + KV_HLL_HDR, *end = h->v + h->len;
	while (p < end) {
		if ((*p & 0xC0) == 0) {
			at += (size_t)snprintf(s + at, cap - at, "z:%u ", (*p & 0x3Fu) + 1);
			p++;
		} else if ((*p & 0xC0) == 0x40) {
			unsigned b1 = p + 1 < end ? p[1] : 0;
			at += (size_t)snprintf(s + at, cap - at, "Z:%u ", ((*p & 0x3Fu) << 8 | b1) + 1);
			p += 2;
		} else {
			at += (size_t)snprintf(s + at, cap - at, "v:%u,%u ", ((*p >> 2) & 0x1Fu) + 1, (*p & 3u) + 1);
			p++;
		}
	}
	*len = at ? at - 1 : 0;
	return s;
}

static void cmd_pfdebug(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;                                 /* 3: the table's arity */
	struct hll h = { 0 };
	struct kv_key k;
	int r = hll_at(x, kv, &a[2], &k, false, &h);
	if (r == -ENOENT)
		resp_error(x, "ERR The specified key does not exist");
	if (r)
		goto out;
	const struct paste_resp_arg *sub = &a[1];
	bool getreg = paste_resp_arg_eq(sub, "GETREG"), todense = paste_resp_arg_eq(sub, "TODENSE");
	if (!getreg && !todense && !paste_resp_arg_eq(sub, "DECODE") && !paste_resp_arg_eq(sub, "ENCODING")) {
		resp_error(x, "ERR Unknown PFDEBUG subcommand '%.*s'", (int)sub->len, sub->p);
		goto out;
	}
	bool sparse = h.v[4] == KV_HLL_SPARSE;
	if (getreg || todense) {
		/* Both leave the value dense, as in Redis. */
		if (sparse && !densify(&h)) {
			resp_error(x, damaged);
			goto out;
		}
		if (sparse && (r = hll_put(kv, &k, &h)) != 0) {
			kv_reply_errno(x, r);
			goto out;
		}
		if (todense) {
			resp_int(x, sparse);
		} else {
			resp_array(x, KV_HLL_REGS);
			for (uint32_t i = 0; i < KV_HLL_REGS; i++)
				resp_int(x, kv_hll_dense_get(h.v + KV_HLL_HDR, i));
		}
	} else if (paste_resp_arg_eq(sub, "ENCODING")) {
		resp_simple(x, sparse ? "sparse" : "dense");
	} else if (!sparse) {
		resp_error(x, "ERR HLL encoding is not sparse");
	} else {
		size_t len;
		char *s = decode(&h, &len);
		if (s)
			resp_bulk(x, s, len);
		else
			kv_reply_errno(x, -ENOMEM);
		free(s);
	}
out:
	free(h.v);
}

/* PFSELFTEST: the dense registers keep what is set and leave their
 * neighbours alone; then a dense and a sparse HLL fed the same million
 * distinct elements agree at every power of ten (the sparse one sparse
 * while it is small) and stay within six standard errors of the truth. */
static const char *selftest(void)
{
	uint8_t *regs = calloc(KV_HLL_DENSE_SIZE, 1), *want = malloc(KV_HLL_REGS);
	struct hll s = { 0 };
	const char *fail = NULL;
	if (!regs || !want || !hll_room(&s, KV_HLL_DENSE_SIZE)) {
		fail = "ERR out of memory";
		goto out;
	}
	for (int cycle = 0; cycle < 100 && !fail; cycle++) {
		memset(regs, 0, KV_HLL_DENSE_SIZE);
		for (uint32_t i = 0; i < KV_HLL_REGS; i++) {
			want[i] = (uint8_t)(rand() & 63);
			kv_hll_dense_set(regs + KV_HLL_HDR, i, want[i]);
		}
		for (uint32_t i = 0; i < KV_HLL_REGS && !fail; i++)
			if (kv_hll_dense_get(regs + KV_HLL_HDR, i) != want[i])
				fail = "TESTFAILED a register does not keep its value";
	}
	memset(regs, 0, KV_HLL_DENSE_SIZE);
	memcpy(regs, "HYLL", 4);                 /* dense: encoding 0 */
	kv_hll_new(s.v);
	s.len = KV_HLL_NEW_SIZE;
	size_t max_bytes = sparse_max();
	uint64_t seed = (uint64_t)rand() | (uint64_t)rand() << 32, check = 1;
	double relerr = 1.04 / sqrt(KV_HLL_REGS);
	for (uint64_t j = 1; j <= 1000000 && !fail; j++) {
		uint64_t e = j ^ seed;
		uint32_t reg;
		uint8_t count;
		kv_hll_hash(&e, sizeof(e), &reg, &count);
		kv_hll_dense_set(regs + KV_HLL_HDR, reg, count);
		if (hll_set(&s, reg, count, max_bytes) < 0)
			fail = "TESTFAILED the sparse HLL failed";
		if (j != check || fail)
			continue;
		bool bad;
		uint64_t d = kv_hll_count(regs, KV_HLL_DENSE_SIZE, &bad), sp = kv_hll_count(s.v, s.len, &bad);
		uint64_t err = d > j ? d - j : j - d, maxerr = j == 10 ? 1 : (uint64_t)ceil(relerr * 6 * (double)j);
		if (j < max_bytes / 2 && s.v[4] != KV_HLL_SPARSE)
			fail = "TESTFAILED sparse encoding not used";
		else if (bad || d != sp)
			fail = "TESTFAILED dense/sparse disagree";
		else if (err > maxerr)
			fail = "TESTFAILED Too big error";
		check *= 10;
	}
out:
	free(s.v);
	free(want);
	free(regs);
	return fail;
}

static void cmd_pfselftest(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	const char *fail = selftest();
	if (fail)
		resp_error(x, "%s", fail);
	else
		resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_hll[] = {
	{ "pfadd", -2, "write denyoom fast", "hyperloglog", "Adds elements to a HyperLogLog (created when missing); 1 when its estimate may have changed.", cmd_pfadd, 1, 1, 1 },
	{ "pfcount", -2, "readonly may_replicate", "hyperloglog", "The estimated number of distinct elements added to a HyperLogLog, or to the union of several.", cmd_pfcount, 1, -1, 1 },
	{ "pfmerge", -2, "write denyoom", "hyperloglog", "Merges HyperLogLogs into the first key, which counts the union.", cmd_pfmerge, 1, -1, 1 },
	{ "pfdebug", 3, "write denyoom admin", "hyperloglog", "Internal: a HyperLogLog's registers, encoding or runs, or turns it dense.", cmd_pfdebug, 2, 2, 1 },
	{ "pfselftest", 1, "admin", "hyperloglog", "Internal: checks the HyperLogLog arithmetic.", cmd_pfselftest, 0, 0, 0 },
	{ 0 }
};
