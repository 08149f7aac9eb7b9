/*
 * cmd_zset.c - pkvs's sorted-set commands with Redis 7.0's replies and
 * errors in RESP2 and RESP3 (kv_zset.h keeps the members and the score
 * index): ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZCOUNT, ZLEXCOUNT,
 * ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZRANGESTORE,
 * ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
 * ZREVRANGEBYLEX, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZMPOP,
 * ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZREMRANGEBYLEX, ZUNIONSTORE,
 * ZINTERSTORE, ZDIFFSTORE, ZUNION, ZINTER, ZDIFF, ZINTERCARD, ZSCAN,
 * ZRANDMEMBER; BZPOPMIN, BZPOPMAX and BZMPOP, which wait for a key to
 * get members as cmd_block.c has clients wait.
 *
 * Scores are read as Redis reads them (strtod, no leading space, nothing
 * after, not NaN; a range's bounds without the overflow check) and
 * written as Redis 7.0 writes them: "%.17g", inf and -inf (ZSCAN of a
 * small sorted set: an integer score as its digits).
 *
 * Ranges by member (BYLEX, ZLEXCOUNT, ZREMRANGEBYLEX) are meant for a
 * sorted set whose scores are all one: then they seek the score index
 * (the members of one score are in byte order). With scores that differ
 * they walk from the end in order, as Redis's small sorted sets do.
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

static const char wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* ------------------------------------------------------------ numbers */

int kv_zscore_str(char *out, size_t cap, double d, bool listpack)
{
	int l;
	if (isinf(d))
		l = snprintf(out, cap, "%s", d > 0 ? "inf" : "-inf");
	else if (listpack && d >= (double)(-LLONG_MAX / 2) && d <= (double)(LLONG_MAX / 2) &&
		 (double)(long long)d == d)
		l = snprintf(out, cap, "%lld", (long long)d);    /* Redis's d2string */
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
static bool score_arg(const struct paste_resp_arg *a, double *d)
{
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
static bool bound_arg(const struct paste_resp_arg *a, double *d, bool *ex)
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

struct srange {
	double min, max;
	bool minex, maxex;
};

static bool gte_min(double v, const struct srange *r)
{
	return r->minex ? v > r->min : v >= r->min;
}

static bool lte_max(double v, const struct srange *r)
{
	return r->maxex ? v < r->max : v <= r->max;
}

/* A lexicographic bound: "-", "+", "(member" or "[member". */
enum { LEX_MIN, LEX_MAX, LEX_VAL };
struct lbound {
	int kind;
	bool ex;
	const uint8_t *p;
	size_t len;
};
struct lrange {
	struct lbound min, max;
};

static bool lex_arg(const struct paste_resp_arg *a, struct lbound *b)
{
	if (a->len == 0)
		return false;
	b->p = (const uint8_t *)a->p + 1;
	b->len = a->len - 1;
	switch (a->p[0]) {
	case '+':
		b->kind = LEX_MAX;
		b->ex = true;
		return a->len == 1;
	case '-':
		b->kind = LEX_MIN;
		b->ex = true;
		return a->len == 1;
	case '(':
		b->kind = LEX_VAL;
		b->ex = true;
		return true;
	case '[':
		b->kind = LEX_VAL;
		b->ex = false;
		return true;
	default:
		return false;
	}
}

/* Redis's sdscmplex of a member against a bound. */
static int lex_cmp(const uint8_t *v, size_t vl, const struct lbound *b)
{
	if (b->kind == LEX_MIN)
		return 1;
	if (b->kind == LEX_MAX)
		return -1;
	int c = memcmp(v, b->p, vl < b->len ? vl : b->len);
	return c ? c : (vl > b->len) - (vl < b->len);
}

static bool lex_gte_min(const uint8_t *v, size_t vl, const struct lrange *r)
{
	int c = lex_cmp(v, vl, &r->min);
	return r->min.ex ? c > 0 : c >= 0;
}

static bool lex_lte_max(const uint8_t *v, size_t vl, const struct lrange *r)
{
	int c = lex_cmp(v, vl, &r->max);
	return r->max.ex ? c < 0 : c <= 0;
}

/* ------------------------------------------------------------ replies */

static void out_double(struct kv_out *o, double d)
{
	char num[40], l[48];
	int n = kv_zscore_str(num, sizeof(num), d, false);
	int h = kv_proto(o->x) == 3 ? snprintf(l, sizeof(l), ",%s\r\n", num)
				    : snprintf(l, sizeof(l), "$%d\r\n%s\r\n", n, num);
	kv_out_put(o, l, (size_t)h);
}

static void body_double(struct resp_out *b, int proto, double d)
{
	char num[40], l[48];
	int n = kv_zscore_str(num, sizeof(num), d, false);
	int h = proto == 3 ? snprintf(l, sizeof(l), ",%s\r\n", num)
			   : snprintf(l, sizeof(l), "$%d\r\n%s\r\n", n, num);
	resp_out_put(b, l, (size_t)h);
}

static void reply_double(struct resp_ctx *x, double d)
{
	struct kv_out o;
	kv_out_init(&o, x);
	out_double(&o, d);
	kv_out_end(&o);
}

/* Where the members of a range or an operation go: a reply gathered
 * (its length comes first), or a sorted set being written whole. */
struct zsink {
	int proto;
	bool scores;                 /* WITHSCORES */
	struct resp_out body;
	struct kv *kv;
	struct kv_cbuild *build;
	uint64_t n;
	int r;
};

static void zsink_add(struct zsink *k, const uint8_t *p, size_t len, double d)
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

/* The gathered reply: its array head and body (or the failure r). */
static void zsink_send(struct resp_ctx *x, struct zsink *k, int r)
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
		if (!score_arg(&a[at + 2 * i], &scores[i])) {
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

static void cmd_zadd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	zadd_generic(x, kv, a, n, 0);
}

static void cmd_zincrby(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	zadd_generic(x, kv, a, n, Z_INCR);
}

/* ------------------------------------------------------------ point reads */

static void cmd_zscore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)n;
	struct kv_cset s;
	double d;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	if (r || kv_zset_score(kv, &s, a[2].p, a[2].len, &d))
		resp_null(x);
	else
		reply_double(x, d);
}

static void cmd_zmscore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, n - 2);
	for (uint32_t i = 2; i < n; i++) {
		double d;
		if (r || kv_zset_score(kv, &s, a[i].p, a[i].len, &d))
			kv_out_null(&o);
		else
			out_double(&o, d);
	}
	kv_out_end(&o);
}

/* ZRANK, ZREVRANK key member */
static void zrank(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, bool rev)
{
	struct kv_cset s;
	double d;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	if (r || kv_zset_score(kv, &s, a[2].p, a[2].len, &d)) {
		resp_null(x);
		return;
	}
	uint64_t rank = kv_zset_rank(kv, &s, a[2].p, a[2].len, d);
	resp_int(x, (int64_t)(rev ? s.o.coll.count - 1 - rank : rank));
}

/* ZRANK, ZREVRANK (by the name's length). */
static void cmd_zrank(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	zrank(x, kv, a, a[0].len == 8);
}

/* ------------------------------------------------------------ ranges */

/* Walks of the score index that follow Redis's range semantics. */

/* Score range r from one end: the first entry in range, or 0. */
static int score_first(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s,
		       const struct srange *r, bool rev)
{
	if (rev)
		kv_zwalk_score(kv, w, s, true, &r->max, r->maxex);
	else
		kv_zwalk_score(kv, w, s, false, &r->min, r->minex);
	int got = kv_cwalk_next(kv, w);
	if (got != 1)
		return got;
	double d = kv_zwalk_scoreof(w);
	return (rev ? gte_min(d, r) : lte_max(d, r)) ? 1 : 0;
}

static bool in_score(const struct kv_cwalk *w, const struct srange *r, bool rev)
{
	double d = kv_zwalk_scoreof(w);
	return rev ? gte_min(d, r) : lte_max(d, r);
}

/* The score of a sorted set's first and last members: the lex ranges
 * seek only when they are one. */
static bool one_score(struct kv *kv, const struct kv_cset *s, double *d)
{
	struct kv_cwalk w;
	kv_zwalk_score(kv, &w, s, false, NULL, false);
	if (kv_cwalk_next(kv, &w) != 1)
		return false;
	*d = kv_zwalk_scoreof(&w);
	kv_zwalk_score(kv, &w, s, true, NULL, false);
	return kv_cwalk_next(kv, &w) == 1 && kv_zwalk_scoreof(&w) == *d;
}

/* Lex range r from one end: the first entry in range (Redis's
 * zzlFirstInLexRange / zzlLastInLexRange), or 0. */
static int lex_first(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s,
		     const struct lrange *r, bool rev)
{
	const struct lbound *from = rev ? &r->max : &r->min;
	if ((!rev && from->kind == LEX_MAX) || (rev && from->kind == LEX_MIN))
		return 0;                   /* from "+" forward, from "-" back: nothing */
	double d;
	if (one_score(kv, s, &d))
		kv_zwalk_lex(kv, w, s, rev, d, from->kind == LEX_VAL ? from->p : NULL, from->len, from->ex);
	else
		kv_zwalk_score(kv, w, s, rev, NULL, false);
	int got;
	while ((got = kv_cwalk_next(kv, w)) == 1) {
		if (rev ? lex_lte_max(w->name, w->nlen, r) : lex_gte_min(w->name, w->nlen, r))
			return (rev ? lex_gte_min(w->name, w->nlen, r) : lex_lte_max(w->name, w->nlen, r)) ? 1 : 0;
	}
	return got;
}

static bool in_lex(const struct kv_cwalk *w, const struct lrange *r, bool rev)
{
	return rev ? lex_gte_min(w->name, w->nlen, r) : lex_lte_max(w->name, w->nlen, r);
}

enum zby { BY_RANK, BY_SCORE, BY_LEX };

/* A range as ZRANGE's arguments give it. */
struct zrange {
	enum zby by;
	bool rev;
	int64_t start, end;             /* BY_RANK */
	struct srange score;
	struct lrange lex;
	int64_t offset, limit;          /* limit < 0: none */
};

/* The entries of range q in s, in its order, to fn(arg, walk) (an
 * entry's member and score); fn returns false to stop. 0 or a failure. */
typedef bool (*zrange_fn)(void *arg, const struct kv_cwalk *w);

static int zrange_walk(struct kv *kv, const struct kv_cset *s, const struct zrange *q, zrange_fn fn,
		       void *arg)
{
	struct kv_cwalk w;
	int64_t len = (int64_t)s->o.coll.count;
	if (q->by == BY_RANK) {
		int64_t start = q->start < 0 ? len + q->start : q->start;
		int64_t end = q->end < 0 ? len + q->end : q->end;
		if (start < 0)
			start = 0;
		if (start > end || start >= len)
			return 0;
		if (end >= len)
			end = len - 1;
		kv_zwalk_rank(kv, &w, s, q->rev, (uint64_t)(q->rev ? len - 1 - start : start));
		for (int64_t i = start; i <= end; i++) {
			int got = kv_cwalk_next(kv, &w);
			if (got != 1)
				return got < 0 ? got : -EBADMSG;
			if (!fn(arg, &w))
				break;
		}
		return 0;
	}
	if (q->by == BY_SCORE && q->offset > 0 && q->offset >= len)
		return 0;
	int got = q->by == BY_SCORE ? score_first(kv, &w, s, &q->score, q->rev)
				    : lex_first(kv, &w, s, &q->lex, q->rev);
	if (got != 1)
		return got;
	if (q->offset < 0)
		return 0;                   /* Redis walks past the end */
	/* offset entries after the first in range, not looked at */
	if (q->offset > 0) {
		if (q->rev) {
			for (int64_t i = 0; i < q->offset && got == 1; i++)
				got = kv_cwalk_next(kv, &w);
		} else {
			uint64_t passed = q->offset > 1 ? kv_cwalk_skip(&w, (uint64_t)q->offset - 1, NULL, 0) : 0;
			got = passed == (uint64_t)q->offset - 1 ? kv_cwalk_next(kv, &w) : 0;
		}
		if (got != 1)
			return got;
	}
	for (int64_t left = q->limit; left != 0 && got == 1; left--) {
		if (q->by == BY_SCORE ? !in_score(&w, &q->score, q->rev) : !in_lex(&w, &q->lex, q->rev))
			break;
		if (!fn(arg, &w))
			break;
		got = kv_cwalk_next(kv, &w);
	}
	return got < 0 ? got : 0;
}

static bool sink_walked(void *arg, const struct kv_cwalk *w)
{
	struct zsink *k = arg;
	zsink_add(k, w->name, w->nlen, kv_zwalk_scoreof(w));
	return !k->r;
}

/* ZRANGE and its older forms: a[from] is the key, then min max and the
 * options; store: ZRANGESTORE's destination is a[1]. */
static void zrange_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n, uint32_t from, bool store, enum zby by, int rev)
{
	struct zrange q = { .limit = -1 };
	bool scores = false, limit = false;
	/* ZRANGE and ZRANGESTORE take BYSCORE/BYLEX/REV; the old forms
	 * come with theirs fixed (rev: 1 reverse, 0 forward, -1 either). */
	bool take_rev = rev < 0, take_by = by == BY_RANK && take_rev;
	q.rev = rev > 0;
	for (uint32_t i = from + 3; i < n; i++) {
		if (!store && paste_resp_arg_eq(&a[i], "WITHSCORES")) {
			scores = true;
		} else if (paste_resp_arg_eq(&a[i], "LIMIT") && n - i - 1 >= 2) {
			if (!kv_arg_int(x, &a[i + 1], &q.offset) || !kv_arg_int(x, &a[i + 2], &q.limit))
				return;
			limit = true;
			i += 2;
		} else if (take_rev && paste_resp_arg_eq(&a[i], "REV")) {
			q.rev = true;
		} else if (take_by && paste_resp_arg_eq(&a[i], "BYLEX")) {
			by = BY_LEX;
			take_by = false;
		} else if (take_by && paste_resp_arg_eq(&a[i], "BYSCORE")) {
			by = BY_SCORE;
			take_by = false;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (limit && q.limit != -1 && by == BY_RANK) {
		resp_error(x, "ERR syntax error, LIMIT is only supported in combination with either "
			   "BYSCORE or BYLEX");
		return;
	}
	if (scores && by == BY_LEX) {
		resp_error(x, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
		return;
	}
	q.by = by;
	const struct paste_resp_arg *lo = &a[from + 1], *hi = &a[from + 2];
	if (q.rev && by != BY_RANK) {
		const struct paste_resp_arg *t = lo;   /* given as max min */
		lo = hi;
		hi = t;
	}
	if (by == BY_RANK) {
		if (!kv_arg_int(x, lo, &q.start) || !kv_arg_int(x, hi, &q.end))
			return;
	} else if (by == BY_SCORE) {
		if (!bound_arg(lo, &q.score.min, &q.score.minex) ||
		    !bound_arg(hi, &q.score.max, &q.score.maxex)) {
			resp_error(x, "ERR min or max is not a float");
			return;
		}
	} else if (!lex_arg(lo, &q.lex.min) || !lex_arg(hi, &q.lex.max)) {
		resp_error(x, "ERR min or max not valid string range item");
		return;
	}
	struct kv_key dst;
	if (store && !kv_arg_key(x, kv, &a[1], &dst))
		return;
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[from], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	struct zsink k = { .proto = kv_proto(x), .scores = scores, .kv = kv };
	struct kv_cbuild build;
	if (store) {
		bool had = kv_key_held(kv, &dst);
		k.build = &build;
		int rb = kv_cbuild_begin(kv, &build, KV_ZSET);
		if (rb == 0 && r == 0)
			rb = zrange_walk(kv, &s, &q, sink_walked, &k);
		rb = kv_cbuild_end(kv, &build, &dst, rb ? rb : k.r);
		if (rb) {
			kv_reply_errno(x, rb);
			return;
		}
		kv_notify_stored(kv, &dst, had, k.n, KV_NOTIFY_ZSET, "zrangestore");
		resp_int(x, (int64_t)k.n);
		return;
	}
	if (r) {
		resp_array(x, 0);
		return;
	}
	zsink_send(x, &k, zrange_walk(kv, &s, &q, sink_walked, &k));
}

/* ZRANGE and its older forms: where the key is, whether it stores, what
 * range and direction are fixed (rev -1: REV may say). */
static const struct {
	const char *name;
	uint8_t from;
	bool store;
	enum zby by;
	int rev;
} zranges[] = {
	{ "zrange", 1, false, BY_RANK, -1 }, { "zrangestore", 2, true, BY_RANK, -1 },
	{ "zrevrange", 1, false, BY_RANK, 1 }, { "zrangebyscore", 1, false, BY_SCORE, 0 },
	{ "zrevrangebyscore", 1, false, BY_SCORE, 1 }, { "zrangebylex", 1, false, BY_LEX, 0 },
	{ "zrevrangebylex", 1, false, BY_LEX, 1 },
};

static void cmd_zrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	for (size_t i = 0; i < sizeof(zranges) / sizeof(zranges[0]); i++)
		if (paste_resp_arg_eq(&a[0], zranges[i].name)) {
			zrange_generic(x, kv, a, n, zranges[i].from, zranges[i].store, zranges[i].by,
				       zranges[i].rev);
			return;
		}
}

static bool count_walked(void *arg, const struct kv_cwalk *w)
{
	(void)w;
	(*(uint64_t *)arg)++;
	return true;
}

/* ZCOUNT key min max: by the score index's keys, a leaf at a time. */
static void cmd_zcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)n;
	struct srange q;
	if (!bound_arg(&a[2], &q.min, &q.minex) || !bound_arg(&a[3], &q.max, &q.maxex)) {
		resp_error(x, "ERR min or max is not a float");
		return;
	}
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	if (r || q.min > q.max || (q.min == q.max && (q.minex || q.maxex))) {
		resp_int(x, 0);
		return;
	}
	struct kv_cwalk w;
	uint8_t end[KV_ZSCORE];
	if (q.maxex)
		kv_zscore_put(end, q.max);
	else
		kv_zscore_after(end, q.max);
	kv_zwalk_score(kv, &w, &s, false, &q.min, q.minex);
	resp_int(x, (int64_t)kv_cwalk_skip(&w, UINT64_MAX, end, sizeof(end)));
}

/* ZLEXCOUNT key min max */
static void cmd_zlexcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	(void)n;
	struct zrange q = { .by = BY_LEX, .limit = -1 };
	if (!lex_arg(&a[2], &q.lex.min) || !lex_arg(&a[3], &q.lex.max)) {
		resp_error(x, "ERR min or max not valid string range item");
		return;
	}
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	uint64_t count = 0;
	if (r == 0)
		r = zrange_walk(kv, &s, &q, count_walked, &count);
	if (r < 0 && r != -ENOENT)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)count);
}

/* ------------------------------------------------------------ removals */

/* Members gathered for removal, with their scores. */
struct zgather {
	struct kv_names names;
	double *scores;
	uint64_t cap;
};

static bool gather_walked(void *arg, const struct kv_cwalk *w)
{
	struct zgather *g = arg;
	if (g->names.n == g->cap) {
		uint64_t nc = g->cap ? g->cap * 2 : 64;
		double *ns = realloc(g->scores, sizeof(*ns) * nc);
		if (!ns) {
			g->names.oom = true;
			return false;
		}
		g->scores = ns;
		g->cap = nc;
	}
	g->scores[g->names.n] = kv_zwalk_scoreof(w);
	kv_names_add(&g->names, w->name, w->nlen);
	return !g->names.oom;
}

static void zgather_free(struct zgather *g)
{
	kv_names_free(&g->names);
	free(g->scores);
}

/* Remove the gathered members of s, which are the positions [lo, lo +
 * count) of its order: all of them (the key goes, O(1)), more than stay
 * (s written again without them), or in one group. */
static int zgather_remove(struct kv *kv, struct kv_cset *s, const struct zgather *g, uint64_t lo)
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

static void zremrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      enum zby by)
{
	struct zrange q = { .by = by, .limit = -1 };
	if (by == BY_RANK) {
		if (!kv_arg_int(x, &a[2], &q.start) || !kv_arg_int(x, &a[3], &q.end))
			return;
	} else if (by == BY_SCORE) {
		if (!bound_arg(&a[2], &q.score.min, &q.score.minex) ||
		    !bound_arg(&a[3], &q.score.max, &q.score.maxex)) {
			resp_error(x, "ERR min or max is not a float");
			return;
		}
	} else if (!lex_arg(&a[2], &q.lex.min) || !lex_arg(&a[3], &q.lex.max)) {
		resp_error(x, "ERR min or max not valid string range item");
		return;
	}
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[1], &s, KV_ZSET, false, false);
	if (r) {
		if (r == -ENOENT)
			resp_int(x, 0);
		return;
	}
	struct zgather g = { 0 };
	r = zrange_walk(kv, &s, &q, gather_walked, &g);
	uint64_t lo = 0;                        /* where the range starts in the order */
	if (r == 0 && g.names.n >= KV_REBUILD_MIN) {
		size_t len;
		const uint8_t *p = kv_names_get(&g.names, 0, &len);
		lo = kv_zset_rank(kv, &s, p, len, g.scores[0]);
	}
	uint64_t before = s.o.coll.count;
	if (r == 0)
		r = zgather_remove(kv, &s, &g, lo);
	if (r == 0 && g.names.n) {
		static const char *const ev[] = { [BY_RANK] = "zremrangebyrank",
						  [BY_SCORE] = "zremrangebyscore",
						  [BY_LEX] = "zremrangebylex" };
		kv_notify(KV_NOTIFY_ZSET, ev[by], &s.key);
		if (g.names.n == before)
			kv_notify(KV_NOTIFY_GENERIC, "del", &s.key);
	}
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)g.names.n);
	zgather_free(&g);
}

/* ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX (by the name). */
static void cmd_zremrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	(void)n;
	char c = (char)(a[0].p[11] | 0x20);
	zremrange(x, kv, a, c == 'r' ? BY_RANK : c == 's' ? BY_SCORE : BY_LEX);
}

/* ------------------------------------------------------------ pops */

/* Pop count members from s's lowest (max: highest) end, into g. */
static int zpop(struct kv *kv, struct kv_cset *s, bool max, uint64_t count, struct zgather *g)
{
	struct zrange q = { .by = BY_RANK, .rev = max, .start = 0,
			    .end = count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)count - 1 };
	int r = zrange_walk(kv, s, &q, gather_walked, g);
	uint64_t before = s->o.coll.count;
	if (r == 0)
		r = zgather_remove(kv, s, g, max ? s->o.coll.count - g->names.n : 0);
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
static void reply_popped(struct resp_ctx *x, const struct zgather *g, const struct paste_resp_arg *key,
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
	struct zgather g = { 0 };
	r = zpop(kv, &s, max, count < 0 ? 1 : (uint64_t)count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, NULL, kv_proto(x) == 3 && count != -1);
	zgather_free(&g);
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
	struct zgather g = { 0 };
	r = zpop(kv, &s, max, count < 0 ? 1 : (uint64_t)count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, &a[which], nested);
	zgather_free(&g);
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
	struct zgather g = { 0 };
	int r = zpop(kv, &s, b->max, b->count < 0 ? 1 : (uint64_t)b->count, &g);
	if (r)
		kv_reply_errno(x, r);
	else
		reply_popped(x, &g, &name, b->nested);
	zgather_free(&g);
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

/* ------------------------------------------------------------ ZUNION, ZINTER, ZDIFF */

enum zop { ZOP_UNION, ZOP_INTER, ZOP_DIFF };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

struct zsrc {
	struct kv_cset s;               /* o.coll zero: absent (empty) */
	double weight;
};

static void aggregate(double *t, double v, int agg)
{
	if (agg == AGG_SUM) {
		*t += v;
		if (isnan(*t))
			*t = 0;             /* inf + -inf */
	} else if (agg == AGG_MIN) {
		*t = v < *t ? v : *t;
	} else {
		*t = v > *t ? v : *t;
	}
}

/* A source member's score: a sorted set's, 1 for a set's member. */
static bool src_score(struct kv *kv, const struct zsrc *z, const uint8_t *p, size_t len, double *d)
{
	if (!z->s.o.coll.count)
		return false;
	if (z->s.o.type == KV_SET) {
		*d = 1;
		return kv_set_has(kv, &z->s, p, len);
	}
	return kv_zset_score(kv, &z->s, p, len, d) == 0;
}

/* The score of the entry a walk of a source's members returned. */
static double walked_score(struct kv *kv, const struct zsrc *z, const struct kv_cwalk *w)
{
	if (z->s.o.type == KV_SET)
		return 1;
	uint8_t sc[KV_ZSCORE] = { 0 };
	paste_store_read(kv->store, w->ext, w->n, 0, sc, sizeof(sc));
	return kv_zscore_get(sc);
}

/* The result, gathered then sorted as Redis orders a sorted set. */
struct zres {
	struct zgather g;
	uint64_t *order;
};

static const struct zres *sort_ctx;

static int res_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	const struct zres *z = sort_ctx;
	double x = z->g.scores[a], y = z->g.scores[b];
	if (x != y)
		return x < y ? -1 : 1;
	size_t la, lb;
	const uint8_t *ma = kv_names_get(&z->g.names, a, &la), *mb = kv_names_get(&z->g.names, b, &lb);
	int c = memcmp(ma, mb, la < lb ? la : lb);
	return c ? c : (la > lb) - (la < lb);
}

static bool res_add(struct zres *z, const uint8_t *p, size_t len, double d)
{
	if (z->g.names.n == z->g.cap) {
		uint64_t nc = z->g.cap ? z->g.cap * 2 : 64;
		double *ns = realloc(z->g.scores, sizeof(*ns) * nc);
		if (!ns) {
			z->g.names.oom = true;
			return false;
		}
		z->g.scores = ns;
		z->g.cap = nc;
	}
	z->g.scores[z->g.names.n] = d;
	kv_names_add(&z->g.names, p, len);
	return !z->g.names.oom;
}

static int cmp_card(const void *pa, const void *pb)
{
	const struct zsrc *a = pa, *b = pb;
	return (a->s.o.coll.count > b->s.o.coll.count) - (a->s.o.coll.count < b->s.o.coll.count);
}

/* Sources sorted by size, smallest first, keeping the given order among
 * equals (an insertion sort: a merge of sums must add in Redis's order). */
static void sort_by_card(struct zsrc *src, uint32_t k)
{
	for (uint32_t i = 1; i < k; i++) {
		struct zsrc t = src[i];
		uint32_t j = i;
		while (j > 0 && cmp_card(&src[j - 1], &t) > 0) {
			src[j] = src[j - 1];
			j--;
		}
		src[j] = t;
	}
}

static int name_cmp(const struct kv_cwalk *a, const struct kv_cwalk *b)
{
	return paste_btree_keycmp(a->t + 10, a->tlen - 10, b->t + 10, b->tlen - 10);
}

static int run_zop(struct kv *kv, enum zop op, struct zsrc *src, uint32_t k, int agg,
		   uint64_t limit, struct zres *out, uint64_t *card)
{
	int r = 0;
	if (op != ZOP_DIFF)
		sort_by_card(src, k);
	if (op == ZOP_INTER || op == ZOP_DIFF) {
		if (!src[0].s.o.coll.count)
			return 0;
		for (uint32_t i = 1; op == ZOP_DIFF && i < k; i++)
			if (src[i].s.o.coll.count && src[i].s.o.coll.id == src[0].s.o.coll.id)
				return 0;       /* A - A: nothing */
		struct kv_cwalk w;
		kv_cwalk_init(kv, &w, src[0].s.o.coll.id, KV_ZSET_MEMBER, 0, false, NULL, 0);
		while ((r = kv_cwalk_next(kv, &w)) == 1) {
			double v = walked_score(kv, &src[0], &w), score = op == ZOP_DIFF ? v : src[0].weight * v;
			if (isnan(score))
				score = 0;
			bool keep = true;
			for (uint32_t i = 1; keep && i < k; i++) {
				double d;
				bool has = src_score(kv, &src[i], w.name, w.nlen, &d);
				if (op == ZOP_DIFF) {
					keep = !has;
				} else if (has) {
					aggregate(&score, d * src[i].weight, agg);
				} else {
					keep = false;
				}
			}
			if (!keep)
				continue;
			if (card) {
				if (++*card == limit)
					break;
			} else if (!res_add(out, w.name, w.nlen, score)) {
				return -ENOMEM;
			}
		}
		return r < 0 ? r : 0;
	}
	/* UNION: a merge of the sources' members in the tree's order; a
	 * member's scores aggregate in the sources' (sorted) order. */
	struct kv_cwalk *w = malloc(sizeof(*w) * k);
	bool *live = calloc(k, sizeof(*live));
	if (!w || !live) {
		free(w);
		free(live);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < k && r >= 0; i++) {
		if (!src[i].s.o.coll.count)
			continue;
		kv_cwalk_init(kv, &w[i], src[i].s.o.coll.id, KV_ZSET_MEMBER, 0, false, NULL, 0);
		r = kv_cwalk_next(kv, &w[i]);
		live[i] = r == 1;
	}
	while (r >= 0) {
		int min = -1;
		for (uint32_t i = 0; i < k; i++)
			if (live[i] && (min < 0 || name_cmp(&w[i], &w[min]) < 0))
				min = (int)i;
		if (min < 0)
			break;
		uint8_t t[PASTE_BTREE_MAX_KEY];
		uint32_t tlen = w[min].tlen;
		memcpy(t, w[min].t, tlen);
		bool first = true;
		double score = 0;
		for (uint32_t i = 0; i < k && r >= 0; i++) {
			if (!live[i] || paste_btree_keycmp(w[i].t + 10, w[i].tlen - 10, t + 10, tlen - 10))
				continue;
			double v = src[i].weight * walked_score(kv, &src[i], &w[i]);
			if (isnan(v))
				v = 0;
			if (first)
				score = v;
			else
				aggregate(&score, v, agg);
			if (first && !res_add(out, w[i].name, w[i].nlen, 0))
				r = -ENOMEM;
			first = false;
			if (r >= 0) {
				r = kv_cwalk_next(kv, &w[i]);
				live[i] = r == 1;
			}
		}
		if (r >= 0)
			out->g.scores[out->g.names.n - 1] = score;
	}
	free(w);
	free(live);
	return r < 0 ? r : 0;
}

/* ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE dst numkeys key ... [WEIGHTS w ...]
 * [AGGREGATE SUM|MIN|MAX]; ZUNION/ZINTER/ZDIFF numkeys key ... [...]
 * [WITHSCORES]; ZINTERCARD numkeys key ... [LIMIT limit]. */
static void zop_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n, enum zop op, bool store, bool card_only)
{
	uint32_t at = store ? 2 : 1;
	int64_t k;
	if (!kv_arg_int(x, &a[at], &k))
		return;
	if (k < 1) {
		char name[24];
		size_t l = a[0].len < sizeof(name) - 1 ? a[0].len : sizeof(name) - 1;
		for (size_t i = 0; i < l; i++)
			name[i] = (char)(a[0].p[i] >= 'A' && a[0].p[i] <= 'Z' ? a[0].p[i] + 32 : a[0].p[i]);
		name[l] = 0;
		resp_error(x, "ERR at least 1 input key is needed for '%s' command", name);
		return;
	}
	if (k > (int64_t)(n - at - 1)) {
		resp_error(x, "ERR syntax error");
		return;
	}
	struct kv_key dst;
	if (store && !kv_arg_key(x, kv, &a[1], &dst))
		return;
	struct zsrc *src = calloc((size_t)k, sizeof(*src));
	if (!src) {
		resp_error(x, "ERR out of memory");
		return;
	}
	uint32_t i = at + 1;
	for (int64_t j = 0; j < k; j++, i++) {
		struct kv_cset *s = &src[j].s;
		src[j].weight = 1;
		if (!kv_arg_key(x, kv, &a[i], &s->key))
			goto done;
		if (kv_lookup(kv, &s->key, &s->o, true)) {
			s->o.coll = (struct kv_coll){ 0 };
			s->o.type = KV_ZSET;
			continue;
		}
		if (s->o.type != KV_ZSET && s->o.type != KV_SET) {
			resp_error(x, wrongtype);
			goto done;
		}
	}
	int agg = AGG_SUM;
	bool scores = false;
	int64_t limit = 0;
	while (i < n) {
		uint32_t left = n - i;
		if (op != ZOP_DIFF && !card_only && left >= k + 1 && paste_resp_arg_eq(&a[i], "WEIGHTS")) {
			i++;
			for (int64_t j = 0; j < k; j++, i++)
				if (!score_arg(&a[i], &src[j].weight)) {
					resp_error(x, "ERR weight value is not a float");
					goto done;
				}
		} else if (op != ZOP_DIFF && !card_only && left >= 2 && paste_resp_arg_eq(&a[i], "AGGREGATE")) {
			static const char *const aggs[] = { "sum", "min", "max" };
			agg = paste_resp_lookup(&a[i + 1], aggs, 3);
			if (agg < 0) {
				resp_error(x, "ERR syntax error");
				goto done;
			}
			i += 2;
		} else if (!store && !card_only && paste_resp_arg_eq(&a[i], "WITHSCORES")) {
			scores = true;
			i++;
		} else if (card_only && left >= 2 && paste_resp_arg_eq(&a[i], "LIMIT")) {
			if (!kv_arg_range(x, &a[i + 1], 0, INT64_MAX, "LIMIT can't be negative", &limit))
				goto done;
			i += 2;
		} else {
			resp_error(x, "ERR syntax error");
			goto done;
		}
	}
	struct zres res = { 0 };
	uint64_t card = 0;
	int r = run_zop(kv, op, src, (uint32_t)k, agg, limit ? (uint64_t)limit : UINT64_MAX, &res,
			card_only ? &card : NULL);
	if (card_only) {
		if (r)
			kv_reply_errno(x, r);
		else
			resp_int(x, (int64_t)card);
		goto done_res;
	}
	uint64_t m = res.g.names.n;
	if (r == 0 && m && !(res.order = malloc(sizeof(*res.order) * m)))
		r = -ENOMEM;
	if (r == 0 && m) {
		for (uint64_t j = 0; j < m; j++)
			res.order[j] = j;
		sort_ctx = &res;
		qsort(res.order, m, sizeof(*res.order), res_cmp);
	}
	struct zsink out = { .proto = kv_proto(x), .scores = scores, .kv = kv };
	struct kv_cbuild build;
	bool had = false;
	if (store) {
		had = kv_key_held(kv, &dst);
		out.build = &build;
		if (r == 0)
			r = kv_cbuild_begin(kv, &build, KV_ZSET);
		else
			build = (struct kv_cbuild){ 0 };
	}
	for (uint64_t j = 0; r == 0 && j < m && !out.r; j++) {
		size_t len;
		const uint8_t *p = kv_names_get(&res.g.names, res.order[j], &len);
		zsink_add(&out, p, len, res.g.scores[res.order[j]]);
	}
	if (store) {
		if (build.glen)
			r = kv_cbuild_end(kv, &build, &dst, r ? r : out.r);
		if (r) {
			kv_reply_errno(x, r);
		} else {
			static const char *const ev[] = { [ZOP_UNION] = "zunionstore",
							  [ZOP_INTER] = "zinterstore",
							  [ZOP_DIFF] = "zdiffstore" };
			kv_notify_stored(kv, &dst, had, out.n, KV_NOTIFY_ZSET, ev[op]);
			resp_int(x, (int64_t)out.n);
		}
	} else {
		zsink_send(x, &out, r);
	}
done_res:
	zgather_free(&res.g);
	free(res.order);
done:
	free(src);
}

/* ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD, by the name. */
static void cmd_zop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	char c = (char)(a[0].p[1] | 0x20), last = (char)(a[0].p[a[0].len - 1] | 0x20);
	zop_generic(x, kv, a, n, c == 'u' ? ZOP_UNION : c == 'i' ? ZOP_INTER : ZOP_DIFF, last == 'e',
		    last == 'd');
}

/* ------------------------------------------------------------ ZRANDMEMBER, ZSCAN */

struct rand_out {
	struct kv *kv;
	struct zgather g;
};

static int pick_scored(void *arg, uint64_t j, const struct kv_cwalk *w)
{
	(void)j;
	struct rand_out *ro = arg;
	uint8_t sc[KV_ZSCORE] = { 0 };
	paste_store_read(ro->kv->store, w->ext, w->n, 0, sc, sizeof(sc));
	struct zres z = { .g = ro->g };
	bool ok = res_add(&z, w->name, w->nlen, kv_zscore_get(sc));
	ro->g = z.g;
	return ok ? 0 : -ENOMEM;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define PICK_BATCH 1000u

static void out_member(struct kv_out *o, const struct zgather *g, uint64_t i, bool scores)
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
			zgather_free(&ro.g);
			ro.g = (struct zgather){ 0 };
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
	zgather_free(&ro.g);
}

const char *kv_zset_encoding(struct kv *kv, const struct kv_obj *o)
{
	return kv_zset_listpack(kv, o, kv_config_num("zset-max-listpack-entries", 128),
				kv_config_num("zset-max-listpack-value", 64)) ? "listpack" : "skiplist";
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_zset[] = {
	{ "zadd", -4, "write denyoom fast", "sorted_set", "Adds one or more members to a sorted set, or updates their scores.", cmd_zadd, 1, 1, 1 },
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
