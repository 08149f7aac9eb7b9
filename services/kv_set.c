/*
 * kv_set.c - sets, and the collection handle, member entries, walks and
 * whole-built collections sorted sets share (kv_set.h).
 *
 * What one change writes (each in one group with its COMMIT):
 *   SADD of a new member        the member, the record (its count)
 *   SREM of a member            the member's delete, the record
 *   the last member removed     the key's delete and its grave (kv_remove;
 *                               the sweeper deletes the member entries)
 * A command of many members writes each, then the record once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_set.h"

/* ---- the handle ---------------------------------------------------------- */

int kv_cset_open(struct kv *kv, struct kv_cset *s, enum kv_type type, bool read)
{
	s->batch = 0;
	s->changed = false;
	if (kv_lookup(kv, &s->key, &s->o, read))
		return -ENOENT;
	if (s->o.type != type)
		return -EMEDIUMTYPE;
	s->stored = true;
	s->saved = s->o.coll.count;
	return 0;
}

void kv_cset_new(struct kv *kv, struct kv_cset *s, enum kv_type type)
{
	kv_coll_new(kv, &s->o, type);
	s->batch = 0;
	s->changed = false;
	s->stored = false;
	s->saved = 0;
}

int kv_cset_begin(struct kv *kv, struct kv_cset *s, uint64_t bytes)
{
	int r = kv_coll_batch(kv, &s->batch, bytes);
	if (r)
		return r > 0 ? 0 : r;
	s->begun = s->o.coll;
	s->begun_stored = s->stored;
	s->changed = false;
	return 0;
}

/* The record as the count says: written (the key's deadline kept), or the
 * key removed when no member is left; a later member is a new
 * collection's, under a new id. */
static int save(struct kv *kv, struct kv_cset *s)
{
	if (s->o.coll.count == 0) {
		if (!s->stored)
			return 0;
		int r = kv_remove(kv, &s->key);
		if (r < 0)
			return r;
		enum kv_type type = s->o.type;
		kv_coll_new(kv, &s->o, type);
		s->stored = false;
	} else {
		int r = kv_coll_save(kv, &s->key, &s->o);
		if (r)
			return r;
		s->stored = true;
	}
	s->saved = s->o.coll.count;
	return 0;
}

int kv_cset_end(struct kv *kv, struct kv_cset *s, int r)
{
	if (!s->batch || --s->batch)
		return r;
	if (r == 0 && (s->o.coll.count != s->saved || (!s->stored && s->o.coll.count)))
		r = save(kv, s);            /* the key is touched there */
	else if (r == 0 && s->changed)
		kv_touched(kv, &s->key, KV_TOUCH_WRITTEN);
	if (r == 0)
		return kv_commit(kv);
	kv_abort(kv);
	s->o.coll = s->begun;
	s->stored = s->begun_stored;
	s->saved = s->begun.count;
	return r;
}

void kv_cset_prepare(struct kv *kv, uint64_t entries, uint64_t bytes)
{
	if (entries >= 512 && !kv->group_depth)
		kv_make_room(kv, bytes);    /* a checkpoint: the log lane is the group's */
}

/* ---- member entries ------------------------------------------------------ */

int kv_cset_key(const struct kv *kv, struct kv_key *mk, uint64_t id, uint8_t kind, const void *pre,
		uint32_t plen, const void *name, size_t len, uint8_t *stack, size_t cap,
		uint8_t **buf)
{
	*buf = stack;
	if (plen == 0) {
		kv_member_key(kv, mk, id, kind, name, len);
		return 0;
	}
	if (plen + len > cap && !(*buf = malloc(plen + len)))
		return -ENOMEM;
	memcpy(*buf, pre, plen);
	if (len)
		memcpy(*buf + plen, name, len);
	kv_member_key(kv, mk, id, kind, *buf, plen + len);
	return 0;
}

static void unref(struct kv *kv, const struct paste_extent *ext, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(kv->store, ext[i].buf, false);
}

/* Split ext[0..*n) (bytes, in order) after its first `at` bytes: an
 * extent across the cut becomes two (sharing its buffer's reference). */
static void split_at(struct paste_extent *ext, uint32_t *n, uint32_t at, uint32_t *first)
{
	uint32_t i = 0;
	while (i < *n && at >= ext[i].len) {
		at -= ext[i].len;
		i++;
	}
	if (at && i < *n) {
		memmove(ext + i + 1, ext + i, sizeof(*ext) * (*n - i));
		ext[i].len = at;
		ext[i + 1].off += at;
		ext[i + 1].len -= at;
		(*n)++;
		i++;
	}
	*first = i;
}

/* A long name held where it landed: [u32 length][pre] copied, then the
 * member's own extents, then the value copied: no byte of the member
 * moves. The references the copies hold are the buffers' of the copy
 * (one each; the tree takes its own). */
static int put_held(struct kv *kv, struct kv_key *mk, const struct kv_name *nm, uint32_t plen,
		    const void *val, size_t vlen)
{
	uint8_t head[4 + 8 + 64];
	size_t total = plen + nm->len;
	if (plen + vlen > sizeof(head) - 4)
		return -EINVAL;
	head[0] = (uint8_t)total;
	head[1] = (uint8_t)(total >> 8);
	head[2] = (uint8_t)(total >> 16);
	head[3] = (uint8_t)(total >> 24);
	memcpy(head + 4, mk->p, plen);
	if (vlen)
		memcpy(head + 4 + plen, val, vlen);
	struct paste_extent cp[8], orig[4], all[PASTE_BTREE_MAX_EXTENTS];
	uint32_t cn = 0, refs, cut;
	int r = kv_copy_in(kv, head, 4 + plen + vlen, orig, 4, &refs);
	if (r)
		return r;
	memcpy(cp, orig, sizeof(*orig) * refs);
	cn = refs;
	split_at(cp, &cn, 4 + plen, &cut);
	const struct paste_body *b = nm->held;
	if (cn + b->n > PASTE_BTREE_MAX_EXTENTS) {
		r = -ENAMETOOLONG;
	} else {
		memcpy(all, cp, sizeof(*cp) * cut);
		memcpy(all + cut, b->ext, sizeof(*b->ext) * b->n);
		memcpy(all + cut + b->n, cp + cut, sizeof(*cp) * (cn - cut));
		r = kv_tree_put(kv, mk->t, mk->tlen, all, cn + b->n, KV_TAG_LONG);
	}
	unref(kv, orig, refs);          /* the tree took its own */
	return r;
}

int kv_cset_put(struct kv *kv, struct kv_key *mk, const struct kv_name *nm, uint32_t plen,
		const void *val, size_t vlen)
{
	if (mk->longkey && nm && nm->held && nm->held->n && !nm->held->error &&
	    nm->held->len == nm->len)
		return put_held(kv, mk, nm, plen, val, vlen);
	return kv_member_put_bytes(kv, mk, vlen ? val : "", vlen);
}

int kv_cset_get(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		uint32_t *len)
{
	return kv_member_lookup(kv, mk, ext, n, len);
}

/* ---- sets ---------------------------------------------------------------- */

bool kv_set_has(struct kv *kv, const struct kv_cset *s, const void *p, size_t len)
{
	if (s->o.coll.count == 0 || len > KV_MAX_KEY)
		return false;
	struct kv_key mk;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, l;
	kv_member_key(kv, &mk, s->o.coll.id, KV_SET_MEMBER, p, len);
	return kv_member_lookup(kv, &mk, ext, &n, &l) == 0;
}

int kv_set_add(struct kv *kv, struct kv_cset *s, const struct kv_name *nm)
{
	if (kv_set_has(kv, s, nm->p, nm->len))
		return 0;
	struct kv_key mk;
	kv_member_key(kv, &mk, s->o.coll.id, KV_SET_MEMBER, nm->p, nm->len);
	int r = kv_cset_begin(kv, s, 0);
	if (r)
		return r;
	r = kv_cset_put(kv, &mk, nm, 0, NULL, 0);
	if (r == 0) {
		s->o.coll.count++;
		s->changed = true;
	}
	r = kv_cset_end(kv, s, r);
	return r ? r : 1;
}

int kv_set_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len)
{
	if (!kv_set_has(kv, s, p, len))
		return 0;
	struct kv_key mk;
	kv_member_key(kv, &mk, s->o.coll.id, KV_SET_MEMBER, p, len);
	int r = kv_cset_begin(kv, s, 0);
	if (r)
		return r;
	r = kv_member_remove(kv, &mk);
	if (r > 0) {
		s->o.coll.count--;
		s->changed = true;
	}
	r = kv_cset_end(kv, s, r < 0 ? r : 0);
	return r ? r : 1;
}

/* string2ll's rule: an optional '-', no leading zero (but "0"), at most
 * 20 bytes, in range. */
static bool is_ll(const uint8_t *p, size_t len)
{
	struct paste_resp_arg a = { (const char *)p, len };
	int64_t v;
	return paste_resp_arg_i64(&a, &v) == 0;
}

bool kv_set_intset(struct kv *kv, const struct kv_obj *o, uint64_t max_entries)
{
	if (o->type != KV_SET || o->coll.count > max_entries)
		return false;
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, o->coll.id, KV_SET_MEMBER, 0, false, NULL, 0);
	int r;
	while ((r = kv_cwalk_next(kv, &w)) == 1)
		if (!is_ll(w.name, w.nlen))
			return false;
	return r == 0;
}

/* ---- walks --------------------------------------------------------------- */

void kv_cwalk_init(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint32_t skip,
		   bool back, const void *from, uint32_t flen)
{
	uint8_t t[PASTE_BTREE_MAX_KEY + 1];
	uint32_t tlen = kv_member_prefix(w->prefix, id, kind);
	memcpy(t, w->prefix, tlen);
	if (from) {
		if (flen > PASTE_BTREE_MAX_KEY - tlen)
			flen = PASTE_BTREE_MAX_KEY - tlen;
		memcpy(t + tlen, from, flen);
		tlen += flen;
	} else if (back) {
		/* below the next kind: the last of this one */
		t[tlen - 1] = (uint8_t)(kind + 1);
	}
	w->back = back;
	w->owns = false;
	w->own = NULL;
	w->skip = skip;
	paste_btree_cursor_init(&w->c, kv->tree, t, tlen);
}

bool kv_cwalk_at(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint32_t skip,
		 const uint8_t *t, uint32_t tlen)
{
	kv_member_prefix(w->prefix, id, kind);
	if (tlen < sizeof(w->prefix) || memcmp(t, w->prefix, sizeof(w->prefix)) != 0)
		return false;
	w->back = false;
	w->owns = false;
	w->own = NULL;
	w->skip = skip;
	paste_btree_cursor_init(&w->c, kv->tree, t, tlen);
	return true;
}

int kv_cwalk_next(struct kv *kv, struct kv_cwalk *w)
{
	const uint8_t *t;
	uint32_t tlen;
	int got = w->back ? paste_btree_cursor_prev(&w->c, &t, &tlen, w->ext, &w->n, &w->len)
			  : paste_btree_cursor_next(&w->c, &t, &tlen, w->ext, &w->n, &w->len);
	if (got != 1 || tlen < sizeof(w->prefix) + w->skip ||
	    memcmp(t, w->prefix, sizeof(w->prefix)) != 0)
		return 0;
	w->t = t;
	w->tlen = tlen;
	w->pre = t + sizeof(w->prefix);
	const struct paste_btree_attr *a = paste_btree_cursor_attr(&w->c);
	if (a->tag & KV_TAG_LONG) {
		uint32_t next, l;
		if (kv_long_span(kv, w->ext, w->n, &next, &l) || l < w->skip)
			return -EBADMSG;
		uint8_t **buf = w->owns ? &w->own : &kv->namebuf;
		if (!*buf && !(*buf = malloc(KV_MAX_KEY + 16)))
			return -ENOMEM;
		size_t got_len = kv_long_read(kv, w->ext, next, l, *buf);
		w->pre = *buf;
		w->name = *buf + w->skip;
		w->nlen = got_len - w->skip;
		for (uint32_t i = 0; i < next; i++)
			w->len -= w->ext[i].len;
		w->n -= next;
		memmove(w->ext, w->ext + next, sizeof(*w->ext) * w->n);
	} else {
		w->name = t + sizeof(w->prefix) + w->skip;
		w->nlen = tlen - sizeof(w->prefix) - w->skip;
	}
	return 1;
}

int kv_cwalk_sample(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint64_t seed)
{
	kv_cwalk_init(kv, w, id, kind, 0, false, NULL, 0);
	uint8_t hi[sizeof(w->prefix)];
	memcpy(hi, w->prefix, sizeof(hi));
	hi[sizeof(hi) - 1] = (uint8_t)(kind + 1);        /* below the next kind */
	/* A descent may end in an edge leaf holding no member: a few more
	 * seeds, then the caller's exact pick. */
	for (int i = 0; i < 4; i++, seed = seed * 0x9E3779B97F4A7C15ull + 1) {
		int r = paste_btree_cursor_sample(&w->c, w->prefix, sizeof(w->prefix), hi, sizeof(hi), seed);
		if (r == -ENOENT)
			continue;
		if (r)
			return r;
		return kv_cwalk_next(kv, w);
	}
	return 0;
}

uint64_t kv_cwalk_skip(struct kv_cwalk *w, uint64_t n, const void *end, uint32_t elen)
{
	uint8_t t[PASTE_BTREE_MAX_KEY + 1];
	uint32_t tlen = sizeof(w->prefix);
	memcpy(t, w->prefix, tlen);
	if (end) {
		if (elen > PASTE_BTREE_MAX_KEY - tlen)
			elen = PASTE_BTREE_MAX_KEY - tlen;
		memcpy(t + tlen, end, elen);
		tlen += elen;
	} else {
		t[tlen - 1]++;                  /* the next kind: past every entry of this one */
	}
	return paste_btree_cursor_skip(&w->c, n, t, tlen);
}

/* ---- a merge of walks ----------------------------------------------------- */

int kv_cmerge_init(struct kv_cmerge *m, uint32_t k)
{
	m->k = k;
	m->at = -1;
	m->tlen = 0;
	m->w = calloc(k, sizeof(*m->w));
	m->live = calloc(k, sizeof(*m->live));
	if (!m->w || !m->live) {
		kv_cmerge_free(m);
		return -ENOMEM;
	}
	return 0;
}

int kv_cmerge_add(struct kv *kv, struct kv_cmerge *m, uint32_t i, uint64_t id, uint8_t kind)
{
	kv_cwalk_init(kv, &m->w[i], id, kind, 0, false, NULL, 0);
	m->w[i].owns = true;                /* members of several walks side by side */
	int r = kv_cwalk_next(kv, &m->w[i]);
	m->live[i] = r == 1;
	return r < 0 ? r : 0;
}

bool kv_cmerge_holds(const struct kv_cmerge *m, uint32_t i)
{
	const struct kv_cwalk *w = &m->w[i];
	uint32_t p = sizeof(w->prefix);
	return m->live[i] && paste_btree_keycmp(w->t + p, w->tlen - p, m->t + p, m->tlen - p) == 0;
}

/* Tree-order compare of two walks' current members: their tree names. */
static int name_cmp(const struct kv_cwalk *a, const struct kv_cwalk *b)
{
	uint32_t p = sizeof(a->prefix);
	return paste_btree_keycmp(a->t + p, a->tlen - p, b->t + p, b->tlen - p);
}

int kv_cmerge_next(struct kv *kv, struct kv_cmerge *m)
{
	for (uint32_t i = 0; m->at >= 0 && i < m->k; i++)
		if (kv_cmerge_holds(m, i)) {
			int r = kv_cwalk_next(kv, &m->w[i]);
			m->live[i] = r == 1;
			if (r < 0)
				return r;
		}
	int min = -1;
	for (uint32_t i = 0; i < m->k; i++)
		if (m->live[i] && (min < 0 || name_cmp(&m->w[i], &m->w[min]) < 0))
			min = (int)i;
	m->at = min;
	if (min < 0)
		return 0;
	/* Kept: stepping w[at] moves its key. */
	m->tlen = m->w[min].tlen;
	memcpy(m->t, m->w[min].t, m->tlen);
	return 1;
}

void kv_cmerge_free(struct kv_cmerge *m)
{
	for (uint32_t i = 0; m->w && i < m->k; i++)
		free(m->w[i].own);
	free(m->w);
	free(m->live);
	m->w = NULL;
	m->live = NULL;
}

/* ---- a collection written whole ------------------------------------------ */

int kv_cbuild_begin(struct kv *kv, struct kv_cbuild *b, enum kv_type type)
{
	kv_coll_new(kv, &b->o, type);
	b->glen = kv_grave_key(b->grave, KV_GRAVE_COLL, b->o.coll.id);
	return kv_tree_set(kv, b->grave, b->glen);
}

int kv_cbuild_put(struct kv *kv, struct kv_cbuild *b, uint8_t kind, const void *pre, uint32_t plen,
		  const void *name, size_t len, const void *val, size_t vlen)
{
	uint8_t stack[512], *buf;
	struct kv_key mk;
	int r = kv_cset_key(kv, &mk, b->o.coll.id, kind, pre, plen, name, len, stack, sizeof(stack),
			    &buf);
	if (r == 0)
		r = kv_cset_put(kv, &mk, NULL, plen, val, vlen);
	if (buf != stack)
		free(buf);
	return r;
}

int kv_cbuild_end(struct kv *kv, struct kv_cbuild *b, struct kv_key *k, int r)
{
	if (r == 0 && (r = kv_begin(kv)) == 0) {
		if (b->o.coll.count || b->o.type == KV_STREAM)   /* an empty stream stays */
			r = kv_coll_save(kv, k, &b->o);
		else if ((r = kv_remove(kv, k)) > 0)
			r = 0;
		if (r == 0)
			r = kv_tree_del(kv, b->grave, b->glen);
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (r)
		kv->sweep_due = true;       /* the grave takes what was written */
	return r;
}
