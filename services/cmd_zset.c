/*
 * cmd_zset.c - pkvs's sorted-set commands with Redis 7.0's replies and
 * errors in RESP2 and RESP3 (kv_zset.h keeps the members and the score
 * index): ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZPOPMIN, ZPOPMAX,
 * ZMPOP, ZSCAN, ZRANDMEMBER; BZPOPMIN, BZPOPMAX and BZMPOP, which wait
 * for a key to get members as cmd_block.c has clients wait. The ranges
 * (ZRANGE ... ZREMRANGEBYLEX) are cmd_zrange.c's, the algebra (ZUNION
 * ... ZINTERCARD) cmd_zsetop.c's; the table below lists every sorted-set
 * command, and what the three files share (scores read and written,
 * replies gathered, members gathered with their scores) is here.
 *
 * Scores are read as Redis reads them (strtod, no leading space, nothing
 * after, not NaN; a range's bounds without the overflow check) and
 * written as Redis 7.0 writes them: "%.17g", inf and -inf (ZSCAN of a
 * small sorted set: an integer score as its digits).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "cmd_set.h"
#include "kv_notify.h"
#include "kv_repl.h"

/* ------------------------------------------------------------ numbers */

/* The decimal digits of v, as "%lld" prints them, without printf. */
static int int_str(char *out, size_t cap, long long v)
{
	char line[32];   /* ":v\r\n" */
	int n = paste_resp_put_int(line, sizeof(line), v) - 3;
	if (n < 0 || (size_t)n >= cap)
		return snprintf(out, cap, "%lld", v);
	memcpy(out, line + 1, (size_t)n);
	out[n] = 0;
	return n;
}

int kv_zscore_str(char *out, size_t cap, double d, bool listpack)
{
	int l;
	/* (the cast only in range: out of it, it is undefined) */
	bool integral = d >= (double)(-LLONG_MAX / 2) && d <= (double)(LLONG_MAX / 2) &&
			(double)(long long)d == d;
	if (isinf(d))
		l = snprintf(out, cap, "%s", d > 0 ? "inf" : "-inf");
	else if (integral && (listpack ||   /* Redis's d2string; else what "%.17g" prints */
			      (d > -1e17 && d < 1e17 && !(d == 0 && signbit(d)))))
		l = int_str(out, cap, (long long)d);
	else
		l = snprintf(out, cap, "%.17g", d);
	return l < 0 ? 0 : (size_t)l >= cap ? (int)cap - 1 : l;
}

/* Argument a NUL-ended in stack (or malloc'd when longer): the caller
 * frees it when it is not stack. NULL: no memory. */
static char *cstr(const struct paste_resp_arg *a, char *stack, size_t cap)
{
	char *b = a->len < cap ? stack : malloc(a->len + 1);
	if (b) {
		memcpy(b, a->p, a->len);
		b[a->len] = 0;
	}
	return b;
}

/* A score as Redis's string2d reads one. */
bool kv_zscore_arg(const struct paste_resp_arg *a, double *d)
{
	/* An integer of up to 15 digits is exactly the double strtod reads
	 * (under 2^53), without strtod's ~500 instructions. */
	if (a->len && a->len <= 16) {
		size_t i = a->p[0] == '-' || a->p[0] == '+', j = i;
		uint64_t v = 0;
		for (; j < a->len && (unsigned char)(a->p[j] - '0') <= 9; j++)
			v = v * 10 + (uint64_t)(a->p[j] - '0');
		if (j == a->len && j > i && j - i <= 15) {
			*d = a->p[0] == '-' ? -(double)v : (double)v;
			return true;
		}
	}
	char stack[128], *b = cstr(a, stack, sizeof(stack));
	if (!b)
		return false;
	char *end;
	errno = 0;
	double v = strtod(b, &end);
	bool ok = a->len && !(b[0] == ' ' || (b[0] >= '\t' && b[0] <= '\r')) &&
		  (size_t)(end - b) == a->len &&
		  !(errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO)) &&
		  !isnan(v);
	if (b != stack)
		free(b);
	*d = v;
	return ok;
}

/* A range's bound as Redis's zslParseRange reads one: "(" for an open
 * one, then all that strtod takes (to the first NUL), not NaN. */
bool kv_zbound_arg(const struct paste_resp_arg *a, double *d, bool *ex)
{
	char stack[128], *b = cstr(a, stack, sizeof(stack));
	if (!b)
		return false;
	*ex = b[0] == '(';
	char *end;
	*d = strtod(b + *ex, &end);
	bool ok = *end == 0 && !isnan(*d);
	if (b != stack)
		free(b);
	return ok;
}

/* ------------------------------------------------------------ replies */

/* A score's reply: RESP3's double, or a bulk string (without printf: a
 * reply of scores formats one per element). */
static int double_reply(char *l, size_t cap, int proto, double d)
{
	char num[40];
	int n = kv_zscore_str(num, sizeof(num), d, false);
	return paste_resp_put_double_text(l, cap, proto, num, (size_t)n);
}

static void out_double(struct kv_out *o, double d)
{
	char l[56];
	kv_out_put(o, l, (size_t)double_reply(l, sizeof(l), kv_proto(o->x), d));
}

static void body_double(struct resp_out *b, int proto, double d)
{
	char l[56];
	resp_out_put(b, l, (size_t)double_reply(l, sizeof(l), proto, d));
}

static void reply_double(struct resp_ctx *x, double d)
{
	struct kv_out o;
	kv_out_init(&o, x);
	out_double(&o, d);
	kv_out_end(&o);
}

void kv_zsink_add(struct kv_zsink *k, const uint8_t *p, size_t len, double d)
{
	k->n++;
	if (k->build) {
		if (!k->r)
			k->r = kv_zbuild_add(k->kv, k->build, p, len, d);
		return;
	}
	if (k->scores && k->proto == 3)
		resp_out_put(&k->body, "*2\r\n", 4);
	resp_out_bulk(&k->body, p, len);
	if (k->scores)
		body_double(&k->body, k->proto, d);
}

void kv_zsink_send(struct resp_ctx *x, struct kv_zsink *k, int r)
{
	if (!r && k->body.oom)
		r = -ENOMEM;
	if (r) {
		free(k->body.b.p);
		kv_reply_errno(x, r);
		return;
	}
	char head[32];
	int hl = paste_resp_put_array(head, sizeof(head),
				      k->scores && k->proto == 2 ? k->n * 2 : k->n);
	resp_out_send(x, head, hl, &k->body);
}

/* ------------------------------------------------------------ ZADD, ZINCRBY */

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_INCR = 16 };
enum { Z_ADDED = 1, Z_UPDATED = 2, Z_NOP = 4, Z_NAN = 8 };

/* One member of ZADD: *d the score given, then the new one. */
static int zadd_one(struct kv *kv, struct kv_cset *s, const struct kv_name *nm, unsigned fl,
		    double *d, int *out)
{
	double cur;
	if (kv_zset_score(kv, s, nm->p, nm->len, &cur) == 0) {
		if (fl & Z_NX) {
			*out = Z_NOP;
			return 0;
		}
		if (fl & Z_INCR) {
			*d += cur;
			if (isnan(*d)) {
				*out = Z_NAN;
				return 0;
			}
		}
		if (((fl & Z_LT) && *d >= cur) || ((fl & Z_GT) && *d <= cur)) {
			*out = Z_NOP;
			return 0;
		}
		*out = 0;
		if (*d == cur)
			return 0;
		*out = Z_UPDATED;
		return kv_zset_set(kv, s, nm, *d, true, cur);
	}
	if (fl & Z_XX) {
		*out = Z_NOP;
		return 0;
	}
	*out = Z_ADDED;
	return kv_zset_set(kv, s, nm, *d, false, 0);
}

static void zadd_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n, unsigned fl)
{
	static const char *const words[] = { "nx", "xx", "ch", "incr", "gt", "lt" };
	static const unsigned bits[] = { Z_NX, Z_XX, 0, Z_INCR, Z_GT, Z_LT };
	uint32_t at = 2;
	bool ch = false;
	for (; at < n; at++) {
		int w = paste_resp_lookup(&a[at], words, 6);
		if (w < 0)
			break;
		fl |= bits[w];
		ch |= w == 2;
	}
	uint32_t pairs = n - at;
	if (pairs % 2 || !pairs) {
		resp_error(x, "ERR syntax error");
		return;
	}
	pairs /= 2;
	if ((fl & Z_NX) && (fl & Z_XX)) {
		resp_error(x, "ERR XX and NX options at the same time are not compatible");
		return;
	}
	if (((fl & Z_GT) && (fl & Z_NX)) || ((fl & Z_LT) && (fl & Z_NX)) ||
	    ((fl & Z_GT) && (fl & Z_LT))) {
		resp_error(x, "ERR GT, LT, and/or NX options at the same time are not compatible");
		return;
	}
	if ((fl & Z_INCR) && pairs > 1) {
		resp_error(x, "ERR INCR option supports a single increment-element pair");
		return;
	}
	double one, *scores = pairs == 1 ? &one : malloc(sizeof(*scores) * pairs);
	if (!scores) {
		resp_error(x, "ERR out of memory");
		return;
	}
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < pairs; i++) {
		if (!kv_zscore_arg(&a[at + 2 * i], &scores[i])) {
			resp_error(x, "ERR value is not a valid float");
			goto done;
		}
		if (a[at + 2 * i + 1].len > KV_INLINE)
			bytes += 2 * a[at + 2 * i + 1].len;
	}
	if (!kv_members_ok(x, kv, a, at + 1, n, 2))
		goto done;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, !(fl & Z_XX), false);
	if (r == -EINVAL)
		goto done;
	int64_t added = 0, updated = 0, processed = 0;
	double score = 0;
	bool nan = false;
	if (r == 0) {
		kv_cset_prepare(kv, 3 * (uint64_t)pairs, bytes);
		r = kv_cset_begin(kv, &s, bytes);
		for (uint32_t i = 0; r == 0 && i < pairs; i++) {
			struct kv_name nm;
			struct paste_body b;
			int out;
			double d = scores[i];
			kv_name_arg(x, kv, &a[at + 2 * i + 1], &nm, &b);
			r = zadd_one(kv, &s, &nm, fl, &d, &out);
			kv_name_done(kv, &nm);
			if (out & Z_NAN) {
				nan = true;
				break;
			}
			added += (out & Z_ADDED) != 0;
			updated += (out & Z_UPDATED) != 0;
			if (!(out & Z_NOP)) {
				processed++;
				score = d;
			}
		}
		r = kv_cset_end(kv, &s, r);
	} else {
		r = 0;                      /* XX on no key: nothing to do */
	}
	if (r == 0 && (added || updated))
		kv_notify(KV_NOTIFY_ZSET, (fl & Z_INCR) ? "zincr" : "zadd", &s.key);
	if (r)
		kv_reply_cset_errno(x, r);
	else if (nan)
		resp_error(x, "ERR resulting score is not a number (NaN)");
	else if (!(fl & Z_INCR))
		resp_int(x, ch ? added + updated : added);
	else if (processed)
		reply_double(x, score);
	else
		resp_null(x);
done:
	if (scores != &one)
		free(scores);
}

void kv_zadd_args(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	zadd_generic(x, kv, a, n, 0);
}

static void cmd_zincrby(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	zadd_generic(x, kv, a, n, Z_INCR);
}

/* ------------------------------------------------------------ point reads */

int kv_zscores_of(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *key,
		  const struct paste_resp_arg *m, uint32_t k, double *d)
{
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, key, &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return -1;
	for (uint32_t i = 0; i < k && !r; i++)
		r = kv_zset_score(kv, &s, m[i].p, m[i].len, &d[i]);
	return !r;
}

static void cmd_zscore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)n;
	double d;
	int r = kv_zscores_of(x, kv, &a[1], &a[2], 1, &d);
	if (r > 0)
		reply_double(x, d);
	else if (r == 0)
		resp_null(x);
}

void kv_zscores_reply(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		      kv_zscore_out_fn each)
{
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, n - 2);
	for (uint32_t i = 2; i < n; i++) {
		double d = 0;
		bool found = !r && kv_zset_score(kv, &s, a[i].p, a[i].len, &d) == 0;
		each(&o, found, d);
	}
	kv_out_end(&o);
}

static void zmscore_one(struct kv_out *o, bool found, double d)
{
	if (found)
		out_double(o, d);
	else
		kv_out_null(o);
}

static void cmd_zmscore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	kv_zscores_reply(x, kv, a, n, zmscore_one);
}

/* ------------------------------------------------------------ members gathered */

bool kv_zgather_add(struct kv_zgather *g, const uint8_t *p, size_t len, double d)
{
	if (g->names.n == g->cap) {
		uint64_t nc = g->cap ? g->cap * 2 : 16;
		double *ns = realloc(g->scores, sizeof(*ns) * nc);
		if (!ns) {
			g->names.oom = true;
			return false;
		}
		g->scores = ns;
		g->cap = nc;
	}
	g->scores[g->names.n] = d;
	kv_names_add(&g->names, p, len);
	return !g->names.oom;
}

bool kv_zgather_walked(void *arg, const struct kv_cwalk *w)
{
	return kv_zgather_add(arg, w->name, w->nlen, kv_zwalk_scoreof(w));
}

void kv_zgather_free(struct kv_zgather *g)
{
	kv_names_free(&g->names);
	free(g->scores);
}

int kv_zgather_remove(struct kv *kv, struct kv_cset *s, const struct kv_zgather *g, uint64_t lo)
{
	uint64_t k = g->names.n;
	if (g->names.oom)
		return -ENOMEM;
	if (k == 0)
		return 0;
	if (k == s->o.coll.count) {
		int r = kv_remove(kv, &s->key);
		return r < 0 ? r : 0;
	}
	if (k >= KV_REBUILD_MIN && s->o.coll.count - k < k)
		return kv_cset_rebuild(kv, s, lo, lo + k, NULL, 0);
	kv_cset_prepare(kv, 2 * k + 1, 0);
	int r = kv_cset_begin(kv, s, 0);
	for (uint64_t i = 0; r == 0 && i < g->names.n; i++) {
		size_t len;
		const uint8_t *p = kv_names_get(&g->names, i, &len);
		r = kv_zset_del(kv, s, p, len, g->scores[i]);
	}
	return kv_cset_end(kv, s, r);
}

/* ------------------------------------------------------------ pops */

/* Pop count members from s's lowest (max: highest) end, into g. */
static int zpop(struct kv *kv, struct kv_cset *s, bool max, uint64_t count, struct kv_zgather *g)
{
	int r = kv_zgather_ranks(kv, s, max, 0,
				 count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)count - 1, g);
	uint64_t before = s->o.coll.count;
	if (r == 0)
		r = kv_zgather_remove(kv, s, g, max ? s->o.coll.count - g->names.n : 0);
	if (r == 0 && g->names.n) {
		kv_notify(KV_NOTIFY_ZSET, max ? "zpopmax" : "zpopmin", &s->key);
		if (g->names.n == before)
			kv_notify(KV_NOTIFY_GENERIC, "del", &s->key);
	}
	return r;
}

/* The popped members as Redis answers them: flat [m, s, ...] (with the
 * key first when `key`), or nested pairs ([key, [[m, s], ...]] when key:
 * ZMPOP). */
static void reply_popped(struct resp_ctx *x, const struct kv_zgather *g, const struct paste_resp_arg *key,
			 bool nested)
{
	struct kv_out o;
	kv_out_init(&o, x);
	uint64_t k = g->names.n;
	if (key && nested) {
		kv_out_array(&o, 2);
		kv_out_bulk(&o, key->p, key->len);
		kv_out_array(&o, k);
	} else if (key) {
		kv_out_array(&o, k * 2 + 1);
		kv_out_bulk(&o, key->p, key->len);
	} else {
		kv_out_array(&o, nested ? k : k * 2);
	}
	for (uint64_t i = 0; i < k; i++) {
		size_t len;
		const uint8_t *p = kv_names_get(&g->names, i, &len);
		if (nested)
			kv_out_array(&o, 2);
		kv_out_bulk(&o, p, len);
		out_double(&o, g->scores[i]);
	}
	kv_out_end(&o);
}

/* ZPOPMIN / ZPOPMAX key [count] */
static void zpopminmax(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n, bool max)
{
	if (n > 3) {
		resp_error(x, "ERR syntax error");
		return;
	}
	int64_t count = -1;
	if (n == 3 && !kv_arg_range(x, &a[2], 0, INT64_MAX, "value is out of range, must be positive",
				    &count))
		return;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, false);
	if (r == -EINVAL)
		return;
	if (r || count == 0) {
		resp_array(x, 0);
		return;
	}
	struct kv_zgather g = { 0 };
	r = zpop(kv, &s, max, count < 0 ? 1 : (uint64_t)count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, NULL, kv_proto(x) == 3 && count != -1);
	kv_zgather_free(&g);
}

static void cmd_zpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	zpopminmax(x, kv, a, n, (a[0].p[5] | 0x20) == 'a');     /* ZPOPMAX */
}

/* The first of keys a[0..k) that holds members: 1 (*s open, *which its
 * index), 0 (none), -EINVAL (replied WRONGTYPE: keys are looked at in
 * order up to the first that holds members). */
static int first_nonempty(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t k, struct kv_cset *s, uint32_t *which)
{
	for (uint32_t i = 0; i < k; i++) {
		int r = kv_cset_arg(x, kv, &a[i], s, KV_ZSET, false, false);
		if (r == -EINVAL)
			return r;
		if (r == 0 && s->o.coll.count) {
			*which = i;
			return 1;
		}
	}
	return 0;
}

/* Pop from the first non-empty of keys a[0..k): the reply as ZMPOP's
 * (nested) or BZPOPMIN's (flat with the key). Returns 1 (popped and
 * replied), 0 (every key empty: nothing replied), -1 (replied an error). */
static int zpop_keys(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t k,
		     bool max, int64_t count, bool nested)
{
	struct kv_cset s;
	uint32_t which;
	int r = first_nonempty(x, kv, a, k, &s, &which);
	if (r <= 0)
		return r < 0 ? -1 : 0;
	struct kv_zgather g = { 0 };
	r = zpop(kv, &s, max, count < 0 ? 1 : (uint64_t)count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, &a[which], nested);
	kv_zgather_free(&g);
	return r ? -1 : 1;
}

static const char *const min_max[2] = { "MIN", "MAX" };

static void cmd_zmpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	uint32_t k;
	bool max;
	int64_t count;
	int which;
	if (!kv_arg_mpop(x, a, n, 1, min_max, &k, &which, &count))
		return;
	max = which == 1;
	if (zpop_keys(x, kv, a + 2, k, max, count, true) == 0)
		resp_send(x, kv_proto(x) == 3 ? "_\r\n" : "*-1\r\n", kv_proto(x) == 3 ? 3 : 5);
}

/* A blocked BZPOPMIN, BZPOPMAX or BZMPOP: what it pops. */
struct zblock {
	bool max, nested;
	int64_t count;
};

/* Key k (holding a sorted set) got members: pop for the blocked x. */
static bool zblock_serve(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const void *arg)
{
	const struct zblock *b = arg;
	struct kv_cset s = { .key = *k };
	if (kv_cset_open(kv, &s, KV_ZSET, false) || !s.o.coll.count)
		return false;
	struct paste_resp_arg name = { (const char *)(k->longkey ? k->p : k->t + 1),
				       k->longkey ? k->len : k->tlen - 1u };
	struct kv_zgather g = { 0 };
	uint32_t mark = kv_repl_active ? kv_repl_serve_mark() : 0;
	uint64_t had = s.o.coll.count;
	int r = zpop(kv, &s, b->max, b->count < 0 ? 1 : (uint64_t)b->count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, &name, b->nested);
	if (r == 0 && kv_repl_active)           /* replicas get ZPOPMIN/ZPOPMAX (kv_repl.h) */
		kv_repl_served_pop(mark, k, b->max ? "ZPOPMAX" : "ZPOPMIN",
				   b->count < 0 ? -1 : (int64_t)(had < (uint64_t)b->count ? had : (uint64_t)b->count));
	kv_zgather_free(&g);
	return true;
}

/* Nothing to pop from keys[0..k): wait for a push (cmd_block.c), or,
 * where no client may block (MULTI, a script), answer as a timeout. */
static void zblock(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *keys, uint32_t k,
		   uint64_t ms, const struct zblock *b)
{
	if (!kv_block_allowed(x, kv)) {
		resp_send(x, kv_proto(x) == 3 ? "_\r\n" : "*-1\r\n", kv_proto(x) == 3 ? 3 : 5);
		return;
	}
	struct kv_block_req req = { KV_ZSET, zblock_serve, b, sizeof(*b) };
	kv_block(x, kv, keys, k, ms, &req);
}

/* BZPOPMIN / BZPOPMAX key [key ...] timeout */
static void bzpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		  bool max)
{
	uint64_t ms;
	if (!kv_block_timeout(x, &a[n - 1], &ms))
		return;
	struct zblock b = { .max = max, .count = -1 };
	if (zpop_keys(x, kv, a + 1, n - 2, max, -1, false) == 0)
		zblock(x, kv, a + 1, n - 2, ms, &b);
}

static void cmd_bzpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      uint32_t n)
{
	bzpop(x, kv, a, n, (a[0].p[6] | 0x20) == 'a');           /* BZPOPMAX */
}

static void cmd_bzmpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	uint32_t k;
	bool max;
	int64_t count;
	uint64_t ms;
	int which;
	if (!kv_arg_mpop(x, a, n, 2, min_max, &k, &which, &count) || !kv_block_timeout(x, &a[1], &ms))
		return;
	max = which == 1;
	struct zblock b = { .max = max, .nested = true, .count = count };
	if (zpop_keys(x, kv, a + 3, k, max, count, true) == 0)
		zblock(x, kv, a + 3, k, ms, &b);
}

/* ------------------------------------------------------------ ZRANDMEMBER, ZSCAN */

struct rand_out {
	struct kv *kv;
	struct kv_zgather g;
};

static int pick_scored(void *arg, uint64_t j, const struct kv_cwalk *w)
{
	(void)j;
	struct rand_out *ro = arg;
	uint8_t sc[KV_ZSCORE] = { 0 };
	paste_store_read(ro->kv->store, w->ext, w->n, 0, sc, sizeof(sc));
	return kv_zgather_add(&ro->g, w->name, w->nlen, kv_zscore_get(sc)) ? 0 : -ENOMEM;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define PICK_BATCH 1000u

static void out_member(struct kv_out *o, const struct kv_zgather *g, uint64_t i, bool scores)
{
	size_t len;
	const uint8_t *p = kv_names_get(&g->names, i, &len);
	if (scores && kv_proto(o->x) == 3)
		kv_out_array(o, 2);
	kv_out_bulk(o, p, len);
	if (scores)
		out_double(o, g->scores[i]);
}

static void cmd_zrandmember(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	int64_t c = 0;
	bool scores = false;
	if (n >= 3) {
		if (!kv_arg_range(x, &a[2], -INT64_MAX, INT64_MAX, NULL, &c))
			return;
		if (n > 4 || (n == 4 && !paste_resp_arg_eq(&a[3], "WITHSCORES"))) {
			resp_error(x, "ERR syntax error");
			return;
		}
		if (n == 4) {
			scores = true;
			if (c < -INT64_MAX / 2 || c > INT64_MAX / 2) {
				resp_error(x, "ERR value is out of range");
				return;
			}
		}
	}
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	if (n == 2 && r) {
		resp_null(x);
		return;
	}
	if (n > 2 && (r || c == 0)) {
		resp_array(x, 0);
		return;
	}
	uint64_t size = s.o.coll.count, count = c < 0 ? (uint64_t)-c : (uint64_t)c;
	struct kv_out o;
	kv_out_init(&o, x);
	struct rand_out ro = { .kv = kv };
	uint64_t *idx = NULL;
	if (n == 2) {
		uint64_t i = kv_rand_below(size);
		r = kv_cset_pick(kv, s.o.coll.id, KV_ZSET_MEMBER, &i, 1, pick_scored, &ro);
		if (r == 0) {
			size_t len;
			const uint8_t *p = kv_names_get(&ro.g.names, 0, &len);
			kv_out_bulk(&o, p, len);
		}
	} else if (c < 0 || count == 1) {
		/* With repetition, in the order drawn (a batch sorted for one
		 * walk, then a random permutation of it). */
		kv_out_array(&o, scores && kv_proto(x) == 2 ? count * 2 : count);
		idx = malloc(sizeof(*idx) * PICK_BATCH);
		r = idx ? 0 : -ENOMEM;
		while (count && r == 0 && !o.r) {
			uint64_t b = count < PICK_BATCH ? count : PICK_BATCH;
			count -= b;
			for (uint64_t j = 0; j < b; j++)
				idx[j] = kv_rand_below(size);
			qsort(idx, b, sizeof(*idx), cmp_u64);
			kv_zgather_free(&ro.g);
			ro.g = (struct kv_zgather){ 0 };
			r = kv_cset_pick(kv, s.o.coll.id, KV_ZSET_MEMBER, idx, b, pick_scored, &ro);
			for (uint64_t j = 0; j < b; j++)
				idx[j] = j;
			for (uint64_t j = b; j > 1; j--) {
				uint64_t i = kv_rand_below(j), t = idx[j - 1];
				idx[j - 1] = idx[i];
				idx[i] = t;
			}
			for (uint64_t j = 0; r == 0 && j < b; j++)
				out_member(&o, &ro.g, idx[j], scores);
		}
	} else {
		/* Distinct: all of them, or a uniform subset in the tree's
		 * order. */
		uint64_t k = count < size ? count : size;
		idx = malloc(sizeof(*idx) * k);
		r = idx ? 0 : -ENOMEM;
		if (r == 0 && k < size)
			r = kv_rand_distinct(size, k, idx);
		else
			for (uint64_t j = 0; r == 0 && j < k; j++)
				idx[j] = j;
		if (r == 0)
			r = kv_cset_pick(kv, s.o.coll.id, KV_ZSET_MEMBER, idx, k, pick_scored, &ro);
		if (r == 0) {
			kv_out_array(&o, scores && kv_proto(x) == 2 ? k * 2 : k);
			for (uint64_t j = 0; j < k; j++)
				out_member(&o, &ro.g, j, scores);
		}
	}
	if (r && !o.len)
		kv_reply_errno(x, r);
	else if (r)
		resp_close(x);
	kv_out_end(&o);
	free(idx);
	kv_zgather_free(&ro.g);
}

const char *kv_zset_encoding(struct kv *kv, const struct kv_obj *o)
{
	return kv_zset_listpack(kv, o, kv_config_num("zset-max-listpack-entries", 128),
				kv_config_num("zset-max-listpack-value", 64)) ? "listpack" : "skiplist";
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_zset[] = {
	{ "zadd", -4, "write denyoom fast", "sorted_set", "Adds one or more members to a sorted set, or updates their scores.", kv_zadd_args, 1, 1, 1 },
	{ "zincrby", 4, "write denyoom fast", "sorted_set", "Increments the score of a member in a sorted set.", cmd_zincrby, 1, 1, 1 },
	{ "zrem", -3, "write fast", "sorted_set", "Removes one or more members from a sorted set.", kv_cset_rem_cmd, 1, 1, 1 },
	{ "zscore", 3, "readonly fast", "sorted_set", "Returns the score of a member in a sorted set.", cmd_zscore, 1, 1, 1 },
	{ "zmscore", -3, "readonly fast", "sorted_set", "Returns the scores of several members of a sorted set.", cmd_zmscore, 1, 1, 1 },
	{ "zcard", 2, "readonly fast", "sorted_set", "Returns the number of members in a sorted set.", kv_cset_card_cmd, 1, 1, 1 },
	{ "zcount", 4, "readonly fast", "sorted_set", "Returns the count of members in a sorted set whose scores are within a range.", cmd_zcount, 1, 1, 1 },
	{ "zlexcount", 4, "readonly fast", "sorted_set", "Returns the number of members in a sorted set within a lexicographical range.", cmd_zlexcount, 1, 1, 1 },
	{ "zrange", -4, "readonly", "sorted_set", "Returns members of a sorted set within a range of indexes, scores or members.", cmd_zrange, 1, 1, 1 },
	{ "zrangestore", -5, "write denyoom", "sorted_set", "Stores a range of members of a sorted set in a key.", cmd_zrange, 1, 2, 1 },
	{ "zrangebyscore", -4, "readonly", "sorted_set", "Returns members of a sorted set within a range of scores.", cmd_zrange, 1, 1, 1 },
	{ "zrevrange", -4, "readonly", "sorted_set", "Returns members of a sorted set within a range of indexes, highest first.", cmd_zrange, 1, 1, 1 },
	{ "zrevrangebyscore", -4, "readonly", "sorted_set", "Returns members of a sorted set within a range of scores, highest first.", cmd_zrange, 1, 1, 1 },
	{ "zrangebylex", -4, "readonly", "sorted_set", "Returns members of a sorted set within a lexicographical range.", cmd_zrange, 1, 1, 1 },
	{ "zrevrangebylex", -4, "readonly", "sorted_set", "Returns members of a sorted set within a lexicographical range, highest first.", cmd_zrange, 1, 1, 1 },
	{ "zrank", 3, "readonly fast", "sorted_set", "Returns the index of a member in a sorted set ordered by score.", cmd_zrank, 1, 1, 1 },
	{ "zrevrank", 3, "readonly fast", "sorted_set", "Returns the index of a member in a sorted set ordered by score, highest first.", cmd_zrank, 1, 1, 1 },
	{ "zpopmin", -2, "write fast", "sorted_set", "Removes and returns the members with the lowest scores of a sorted set.", cmd_zpop, 1, 1, 1 },
	{ "zpopmax", -2, "write fast", "sorted_set", "Removes and returns the members with the highest scores of a sorted set.", cmd_zpop, 1, 1, 1 },
	{ "bzpopmin", -3, "write noscript blocking fast", "sorted_set", "Removes and returns the member with the lowest score of the first sorted set that has one, or blocks until one does.", cmd_bzpop, 1, -2, 1 },
	{ "bzpopmax", -3, "write noscript blocking fast", "sorted_set", "Removes and returns the member with the highest score of the first sorted set that has one, or blocks until one does.", cmd_bzpop, 1, -2, 1 },
	{ "zmpop", -4, "write movablekeys", "sorted_set", "Removes and returns members by score from the first of several sorted sets that has any.", cmd_zmpop, 0, 0, 0 },
	{ "bzmpop", -5, "write blocking movablekeys", "sorted_set", "Removes and returns members by score from the first of several sorted sets that has any, or blocks until one does.", cmd_bzmpop, 0, 0, 0 },
	{ "zremrangebyscore", 4, "write", "sorted_set", "Removes members of a sorted set within a range of scores.", cmd_zremrange, 1, 1, 1 },
	{ "zremrangebyrank", 4, "write", "sorted_set", "Removes members of a sorted set within a range of indexes.", cmd_zremrange, 1, 1, 1 },
	{ "zremrangebylex", 4, "write", "sorted_set", "Removes members of a sorted set within a lexicographical range.", cmd_zremrange, 1, 1, 1 },
	{ "zunionstore", -4, "write denyoom movablekeys", "sorted_set", "Stores the union of sorted sets (and sets) in a key.", cmd_zop, 1, 1, 1 },
	{ "zinterstore", -4, "write denyoom movablekeys", "sorted_set", "Stores the intersection of sorted sets (and sets) in a key.", cmd_zop, 1, 1, 1 },
	{ "zdiffstore", -4, "write denyoom movablekeys", "sorted_set", "Stores the difference of sorted sets (and sets) in a key.", cmd_zop, 1, 1, 1 },
	{ "zunion", -3, "readonly movablekeys", "sorted_set", "Returns the union of sorted sets (and sets).", cmd_zop, 0, 0, 0 },
	{ "zinter", -3, "readonly movablekeys", "sorted_set", "Returns the intersection of sorted sets (and sets).", cmd_zop, 0, 0, 0 },
	{ "zdiff", -3, "readonly movablekeys", "sorted_set", "Returns the difference of sorted sets (and sets).", cmd_zop, 0, 0, 0 },
	{ "zintercard", -3, "readonly movablekeys", "sorted_set", "Returns the number of members of the intersection of sorted sets (and sets).", cmd_zop, 0, 0, 0 },
	{ "zscan", -3, "readonly", "sorted_set", "Iterates over the members and scores of a sorted set.", kv_cset_scan, 1, 1, 1 },
	{ "zrandmember", -2, "readonly", "sorted_set", "Returns one or more random members of a sorted set.", cmd_zrandmember, 1, 1, 1 },
	{ 0 }
};
