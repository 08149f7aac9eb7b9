/*
 * kv_zset.c - sorted sets (kv_zset.h).
 *
 * What one change writes (in one group with its COMMIT):
 *   a new member                the member, its score entry, the record
 *   a new score of a member     the member, the old score entry's delete,
 *                               the new score entry
 *   a member removed            both entries' deletes, the record
 *   the last member removed     the key's delete and its grave
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_zset.h"

/* ---- score keys ---------------------------------------------------------- */

void kv_zscore_put(uint8_t out[KV_ZSCORE], double d)
{
	if (d == 0)
		d = 0;                          /* -0 sorts (and is kept) as 0 */
	uint64_t b;
	memcpy(&b, &d, sizeof(b));
	b = b >> 63 ? ~b : b | (1ull << 63);
	for (int i = 7; i >= 0; i--, b >>= 8)
		out[i] = (uint8_t)b;
}

double kv_zscore_get(const uint8_t in[KV_ZSCORE])
{
	uint64_t b = kv_be64(in);
	b = b >> 63 ? b & ~(1ull << 63) : ~b;
	double d;
	memcpy(&d, &b, sizeof(d));
	return d;
}

void kv_zscore_after(uint8_t out[KV_ZSCORE], double d)
{
	kv_zscore_put(out, d);
	for (int i = 7; i >= 0 && ++out[i] == 0; i--)
		;                               /* + 1 (never all ones: that is a NaN's) */
}

/* ---- members ------------------------------------------------------------- */

static int score_of(struct kv *kv, struct kv_key *mk, double *score)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint8_t b[KV_ZSCORE];
	if (kv_cset_get(kv, mk, ext, &n, &len))
		return -ENOENT;
	if (len != KV_ZSCORE || paste_store_read(kv->store, ext, n, 0, b, KV_ZSCORE) != KV_ZSCORE)
		return -EBADMSG;
	*score = kv_zscore_get(b);
	return 0;
}

int kv_zset_score(struct kv *kv, const struct kv_cset *s, const void *p, size_t len, double *score)
{
	if (s->o.coll.count == 0 || len > KV_MAX_KEY)
		return -ENOENT;
	struct kv_key mk;
	kv_member_key(kv, &mk, s->o.coll.id, KV_ZSET_MEMBER, p, len);
	return score_of(kv, &mk, score) ? -ENOENT : 0;
}

/* The score entry of member p[0..len) with score d: put or deleted. */
static int index_entry(struct kv *kv, const struct kv_cset *s, const struct kv_name *nm,
		       const void *p, size_t len, double d, bool put)
{
	uint8_t pre[KV_ZSCORE], stack[512], *buf;
	struct kv_key sk;
	kv_zscore_put(pre, d);
	int r = kv_cset_key(kv, &sk, s->o.coll.id, KV_ZSET_SCORE, pre, KV_ZSCORE, p, len, stack,
			    sizeof(stack), &buf);
	if (r)
		return r;
	if (put) {
		r = kv_cset_put(kv, &sk, nm, KV_ZSCORE, NULL, 0);
	} else {
		r = kv_member_remove(kv, &sk);
		r = r < 0 ? r : 0;
	}
	if (buf != stack)
		free(buf);
	return r;
}

int kv_zset_set(struct kv *kv, struct kv_cset *s, const struct kv_name *nm, double d, bool had,
		double was)
{
	struct kv_key mk;
	uint8_t v[KV_ZSCORE];
	kv_member_key(kv, &mk, s->o.coll.id, KV_ZSET_MEMBER, nm->p, nm->len);
	kv_zscore_put(v, d);
	int r = kv_cset_begin(kv, s, 0);
	if (r)
		return r;
	r = kv_cset_put(kv, &mk, nm, 0, v, sizeof(v));
	if (r == 0 && had)
		r = index_entry(kv, s, NULL, nm->p, nm->len, was, false);
	if (r == 0)
		r = index_entry(kv, s, nm, nm->p, nm->len, d, true);
	if (r == 0) {
		s->o.coll.count += !had;
		s->changed = true;
	}
	return kv_cset_end(kv, s, r);
}

int kv_zset_del(struct kv *kv, struct kv_cset *s, const void *p, size_t len, double d)
{
	struct kv_key mk;
	kv_member_key(kv, &mk, s->o.coll.id, KV_ZSET_MEMBER, p, len);
	/* A popped member's index slot is cold: it loads while the score
	 * entry's delete runs. */
	(void)paste_btree_prefetch(kv->tree, mk.t, mk.tlen);
	int r = kv_cset_begin(kv, s, 0);
	if (r)
		return r;
	/* The score entry first: a pop's walk found it, and the descent it
	 * left (bt_memo_keep) lasts only until a change ends. */
	r = index_entry(kv, s, NULL, p, len, d, false);
	if (r == 0 && (r = kv_member_remove(kv, &mk)) == 0)
		r = -ENOENT;
	else if (r > 0)
		r = 0;
	if (r == 0) {
		s->o.coll.count--;
		s->changed = true;
	}
	return kv_cset_end(kv, s, r);
}

int kv_zset_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len)
{
	double d;
	if (kv_zset_score(kv, s, p, len, &d))
		return 0;
	int r = kv_zset_del(kv, s, p, len, d);
	return r ? r : 1;
}

int kv_cset_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len)
{
	return s->o.type == KV_ZSET ? kv_zset_rem(kv, s, p, len) : kv_set_rem(kv, s, p, len);
}

uint64_t kv_zset_rank(struct kv *kv, const struct kv_cset *s, const void *p, size_t len, double d)
{
	uint8_t pre[KV_ZSCORE], stack[512], *buf;
	struct kv_key sk;
	kv_zscore_put(pre, d);
	if (kv_cset_key(kv, &sk, s->o.coll.id, KV_ZSET_SCORE, pre, KV_ZSCORE, p, len, stack,
			sizeof(stack), &buf))
		return 0;
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, false, NULL, 0);
	uint64_t rank = kv_cwalk_skip(&w, UINT64_MAX, sk.t + sizeof(w.prefix),
				      sk.tlen - (uint32_t)sizeof(w.prefix));
	if (buf != stack)
		free(buf);
	return rank;
}

/* ---- walks of the score index -------------------------------------------- */

void kv_zwalk_score(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back,
		    const double *d, bool after)
{
	uint8_t from[KV_ZSCORE];
	if (d) {
		/* forward: >= d (> d: from d's successor key); back: below
		 * d's successor (<= d), or below d's own key (< d) */
		if (back != after)
			kv_zscore_after(from, *d);
		else
			kv_zscore_put(from, *d);
	}
	kv_cwalk_init(kv, w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, back, d ? from : NULL,
		      d ? KV_ZSCORE : 0);
}

void kv_zwalk_rank(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back,
		   uint64_t i)
{
	kv_cwalk_init(kv, w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, false, NULL, 0);
	if (i)
		kv_cwalk_skip(w, i, NULL, 0);
	if (!back)
		return;
	/* Back from the i-th: below its tree name and a zero byte, which
	 * only it precedes. */
	const uint8_t *t;
	uint32_t tlen;
	uint8_t from[PASTE_BTREE_MAX_KEY];
	if (paste_btree_cursor_next(&w->c, &t, &tlen, NULL, NULL, NULL) != 1 ||
	    tlen < sizeof(w->prefix) || memcmp(t, w->prefix, sizeof(w->prefix)) != 0) {
		kv_cwalk_init(kv, w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, true, NULL, 0);
		return;
	}
	uint32_t flen = tlen - (uint32_t)sizeof(w->prefix);
	memcpy(from, t + sizeof(w->prefix), flen);
	from[flen++] = 0;
	kv_cwalk_init(kv, w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, true, from, flen);
}

void kv_zwalk_lex(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back, double d,
		  const void *m, size_t len, bool after)
{
	if (!m) {
		/* -: from before score d's first member; +: back from after
		 * its last */
		kv_zwalk_score(kv, w, s, back, &d, false);
		return;
	}
	uint8_t stack[512], *buf, pre[KV_ZSCORE];
	struct kv_key sk;
	kv_zscore_put(pre, d);
	if (kv_cset_key(kv, &sk, s->o.coll.id, KV_ZSET_SCORE, pre, KV_ZSCORE, m, len, stack,
			sizeof(stack), &buf)) {
		kv_zwalk_score(kv, w, s, back, &d, false);
		return;
	}
	uint8_t from[PASTE_BTREE_MAX_KEY];
	uint32_t flen = sk.tlen - 10;
	memcpy(from, sk.t + 10, flen);
	if (buf != stack)
		free(buf);
	/* forward >= m: from m; > m: from m + a zero byte (the next name);
	 * back <= m: below m + a zero byte; < m: below m */
	if (back != after && flen < sizeof(from))
		from[flen++] = 0;
	kv_cwalk_init(kv, w, s->o.coll.id, KV_ZSET_SCORE, KV_ZSCORE, back, from, flen);
}

bool kv_zset_listpack(struct kv *kv, const struct kv_obj *o, uint64_t max_entries,
		      uint64_t max_value)
{
	if (o->type != KV_ZSET || o->coll.count > max_entries)
		return false;
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, o->coll.id, KV_ZSET_MEMBER, 0, false, NULL, 0);
	int r;
	while ((r = kv_cwalk_next(kv, &w)) == 1)
		if (w.nlen > max_value)
			return false;
	return r == 0;
}

int kv_zbuild_add(struct kv *kv, struct kv_cbuild *b, const void *p, size_t len, double d)
{
	uint8_t sc[KV_ZSCORE];
	kv_zscore_put(sc, d);
	int r = kv_cbuild_put(kv, b, KV_ZSET_MEMBER, NULL, 0, p, len, sc, sizeof(sc));
	if (r == 0)
		r = kv_cbuild_put(kv, b, KV_ZSET_SCORE, sc, sizeof(sc), p, len, NULL, 0);
	if (r == 0)
		b->o.coll.count++;
	return r;
}

int kv_cset_rebuild(struct kv *kv, struct kv_cset *s, uint64_t lo, uint64_t hi, const uint64_t *skip,
		    uint64_t nskip)
{
	bool z = s->o.type == KV_ZSET;
	struct kv_cbuild b;
	int r = kv_cbuild_begin(kv, &b, s->o.type), got = 0;
	if (r)
		return r;
	b.o.expire_ms = s->o.expire_ms;
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, s->o.coll.id, z ? KV_ZSET_SCORE : KV_SET_MEMBER, z ? KV_ZSCORE : 0,
		      false, NULL, 0);
	for (uint64_t i = 0, j = 0; r == 0 && (got = kv_cwalk_next(kv, &w)) == 1; i++) {
		while (j < nskip && skip[j] < i)
			j++;
		if ((i >= lo && i < hi) || (j < nskip && skip[j] == i))
			continue;
		if (z) {
			r = kv_zbuild_add(kv, &b, w.name, w.nlen, kv_zwalk_scoreof(&w));
		} else if ((r = kv_cbuild_put(kv, &b, KV_SET_MEMBER, NULL, 0, w.name, w.nlen, NULL, 0)) == 0) {
			b.o.coll.count++;
		}
	}
	if (r == 0 && got < 0)
		r = got;
	r = kv_cbuild_end(kv, &b, &s->key, r);
	if (r == 0) {
		s->o = b.o;
		s->stored = s->o.coll.count != 0;
		s->saved = s->o.coll.count;
	}
	return r;
}
