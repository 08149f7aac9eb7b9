/*
 * cmd_zsetop.c - the algebra of sorted sets (cmd_set.h): ZUNION, ZINTER,
 * ZDIFF, their STORE forms (ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE) and
 * ZINTERCARD, over sorted sets and sets (a set's member scores 1), with
 * Redis 7.0's WEIGHTS, AGGREGATE, WITHSCORES and LIMIT. An intersection
 * or a difference walks the first (smallest) source and looks its
 * members up in the others; a union merges the sources' walks in the
 * tree's order (kv_cmerge). The result is gathered, then sorted as Redis
 * orders a sorted set, then replied or written whole (kv_cbuild).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_set.h"
#include "kv_notify.h"

static const char wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

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
	struct kv_zgather g;
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
			} else if (!kv_zgather_add(&out->g, w.name, w.nlen, score)) {
				return -ENOMEM;
			}
		}
		return r < 0 ? r : 0;
	}
	/* UNION: a merge of the sources' members in the tree's order; a
	 * member's scores aggregate in the sources' (sorted) order. */
	struct kv_cmerge m;
	if (kv_cmerge_init(&m, k))
		return -ENOMEM;
	for (uint32_t i = 0; i < k && r >= 0; i++)
		if (src[i].s.o.coll.count)
			r = kv_cmerge_add(kv, &m, i, src[i].s.o.coll.id, KV_ZSET_MEMBER);
	while (r >= 0 && (r = kv_cmerge_next(kv, &m)) == 1) {
		bool first = true;
		double score = 0;
		for (uint32_t i = 0; i < k && r >= 0; i++) {
			if (!kv_cmerge_holds(&m, i))
				continue;
			double v = src[i].weight * walked_score(kv, &src[i], &m.w[i]);
			if (isnan(v))
				v = 0;
			if (first)
				score = v;
			else
				aggregate(&score, v, agg);
			if (first && !kv_zgather_add(&out->g, m.w[i].name, m.w[i].nlen, 0))
				r = -ENOMEM;
			first = false;
		}
		if (r >= 0)
			out->g.scores[out->g.names.n - 1] = score;
	}
	kv_cmerge_free(&m);
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
				if (!kv_zscore_arg(&a[i], &src[j].weight)) {
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
	struct kv_zsink out = { .proto = kv_proto(x), .scores = scores, .kv = kv };
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
		kv_zsink_add(&out, p, len, res.g.scores[res.order[j]]);
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
		kv_zsink_send(x, &out, r);
	}
done_res:
	kv_zgather_free(&res.g);
	free(res.order);
done:
	free(src);
}

/* ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD, by the name. */
void cmd_zop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	char c = (char)(a[0].p[1] | 0x20), last = (char)(a[0].p[a[0].len - 1] | 0x20);
	zop_generic(x, kv, a, n, c == 'u' ? ZOP_UNION : c == 'i' ? ZOP_INTER : ZOP_DIFF, last == 'e',
		    last == 'd');
}
