/*
 * cmd_zrange.c - a sorted set's ranges (cmd_set.h): ZRANGE (BYSCORE,
 * BYLEX, REV, LIMIT, WITHSCORES), ZRANGESTORE, ZRANGEBYSCORE, ZREVRANGE,
 * ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZCOUNT, ZLEXCOUNT,
 * ZRANK, ZREVRANK, and the removals of a range (ZREMRANGEBYSCORE,
 * ZREMRANGEBYRANK, ZREMRANGEBYLEX), with Redis 7.0's replies and
 * errors. One walk of the score index serves them all (zrange_walk),
 * with Redis's semantics of bounds, offsets and limits; the pops
 * (cmd_zset.c) take ranks from an end through it too.
 *
 * Ranges by member (BYLEX, ZLEXCOUNT, ZREMRANGEBYLEX) are meant for a
 * sorted set whose scores are all one: then they seek the score index
 * (the members of one score are in byte order). With scores that differ
 * they walk from the end in order, as Redis's small sorted sets do.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cmd_set.h"
#include "kv_notify.h"

/* ------------------------------------------------------------ bounds */

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
	struct kv_zsink *k = arg;
	kv_zsink_add(k, w->name, w->nlen, kv_zwalk_scoreof(w));
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
		if (!kv_zbound_arg(lo, &q.score.min, &q.score.minex) ||
		    !kv_zbound_arg(hi, &q.score.max, &q.score.maxex)) {
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
	struct kv_zsink k = { .proto = kv_proto(x), .scores = scores, .kv = kv };
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
	kv_zsink_send(x, &k, zrange_walk(kv, &s, &q, sink_walked, &k));
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

void cmd_zrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
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
void cmd_zcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		uint32_t n)
{
	(void)n;
	struct srange q;
	if (!kv_zbound_arg(&a[2], &q.min, &q.minex) || !kv_zbound_arg(&a[3], &q.max, &q.maxex)) {
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
void cmd_zlexcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
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

/* ------------------------------------------------------------ ranks */

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
void cmd_zrank(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	zrank(x, kv, a, a[0].len == 8);
}

/* ------------------------------------------------------------ removals */

static void zremrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      enum zby by)
{
	struct zrange q = { .by = by, .limit = -1 };
	if (by == BY_RANK) {
		if (!kv_arg_int(x, &a[2], &q.start) || !kv_arg_int(x, &a[3], &q.end))
			return;
	} else if (by == BY_SCORE) {
		if (!kv_zbound_arg(&a[2], &q.score.min, &q.score.minex) ||
		    !kv_zbound_arg(&a[3], &q.score.max, &q.score.maxex)) {
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
	struct kv_zgather g = { 0 };
	r = zrange_walk(kv, &s, &q, kv_zgather_walked, &g);
	uint64_t lo = 0;                        /* where the range starts in the order */
	if (r == 0 && g.names.n >= KV_REBUILD_MIN) {
		size_t len;
		const uint8_t *p = kv_names_get(&g.names, 0, &len);
		lo = kv_zset_rank(kv, &s, p, len, g.scores[0]);
	}
	uint64_t before = s.o.coll.count;
	if (r == 0)
		r = kv_zgather_remove(kv, &s, &g, lo);
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
	kv_zgather_free(&g);
}

/* ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX (by the name). */
void cmd_zremrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		   uint32_t n)
{
	(void)n;
	char c = (char)(a[0].p[11] | 0x20);
	zremrange(x, kv, a, c == 'r' ? BY_RANK : c == 's' ? BY_SCORE : BY_LEX);
}

int kv_zgather_ranks(struct kv *kv, const struct kv_cset *s, bool rev, int64_t start, int64_t end,
		     struct kv_zgather *g)
{
	struct zrange q = { .by = BY_RANK, .rev = rev, .start = start, .end = end };
	return zrange_walk(kv, s, &q, kv_zgather_walked, g);
}
