/*
 * kv_hash.c - hashes over the typed core's members (kv_hash.h).
 *
 * What one change writes:
 *   a new value of an existing field    the field's entry (one record)
 *   a new field                         the field, the record (its count)
 *                                       and the group's COMMIT: 3 records
 *   the last field deleted              the key's delete and its grave
 *                                       (kv_remove; the sweeper deletes
 *                                       the field entry later)
 *   another field deleted               the field's delete, the record,
 *                                       the COMMIT
 * A batch (kv_hash_begin/end) writes its fields, then the record once,
 * then one COMMIT.
 *
 * Why the count lives in the record: a count kept in DRAM would have to be
 * rebuilt at every start by walking every field of every hash, and one
 * counted when asked makes HLEN O(N) where Redis's is O(1). The record
 * and the COMMIT are paid only when a field comes or goes; an overwrite,
 * the common write, is one record, as a SET is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_hash.h"

/* The hash opened last: its tree key (when short) and id, for
 * kv_hash_prefetch; and the field key that made, which the command then
 * takes instead of making it again (field_key). A stale one costs a
 * useless prefetch, nothing else. */
static struct {
	uint64_t id;
	uint32_t tlen;
	uint8_t t[64];
	const void *f;                  /* mk names field f (the command's bytes) of mk_id */
	size_t flen;
	uint64_t mk_id;
	struct kv_key mk;
} last;

void kv_hash_prefetch(struct kv *kv, const struct kv_key *k, const void *f, size_t flen)
{
	last.f = NULL;
	if (k->tlen != last.tlen || memcmp(k->t, last.t, k->tlen) != 0 || flen > KV_INLINE)
		return;
	kv_member_key(kv, &last.mk, last.id, KV_HASH_FIELD, f, flen);
	last.f = f;
	last.flen = flen;
	last.mk_id = last.id;
	(void)paste_btree_prefetch(kv->tree, last.mk.t, last.mk.tlen);
}

int kv_hash_open(struct kv *kv, struct kv_hash *h, bool read)
{
	h->batch = 0;
	h->changed = false;
	if (kv_lookup(kv, &h->key, &h->o, read))
		return -ENOENT;
	if (h->o.type != KV_HASH)
		return -EMEDIUMTYPE;
	h->stored = true;
	h->saved = h->o.coll.count;
	if (h->key.tlen <= sizeof(last.t)) {
		last.id = h->o.coll.id;
		last.tlen = h->key.tlen;
		memcpy(last.t, h->key.t, h->key.tlen);
	}
	return 0;
}

void kv_hash_new(struct kv *kv, struct kv_hash *h)
{
	kv_coll_new(kv, &h->o, KV_HASH);
	h->batch = 0;
	h->changed = false;
	h->stored = false;
	h->saved = 0;
}


/* Field f's tree key: the one kv_hash_prefetch made for this command's
 * field (once: the command's bytes may be another's next time), or mk. */
static struct kv_key *field_key(const struct kv *kv, const struct kv_hash *h, struct kv_key *mk,
				const void *f, size_t flen)
{
	if (f == last.f && flen == last.flen && h->o.coll.id == last.mk_id) {
		last.f = NULL;
		return &last.mk;
	}
	kv_member_key(kv, mk, h->o.coll.id, KV_HASH_FIELD, f, flen);
	return mk;
}

static void touched(struct kv *kv, struct kv_hash *h)
{
	kv_touched(kv, &h->key, KV_TOUCH_WRITTEN);
}

/* The key went with its last field: a field set later is a new hash's,
 * under a new id (the old one's entries belong to its grave). */
static void gone(struct kv *kv, struct kv_hash *h)
{
	uint32_t batch = h->batch;
	kv_hash_new(kv, h);
	h->batch = batch;
}

/* The record as the count says: written (the key's deadline kept), or
 * the key removed when no field is left. */
static int save(struct kv *kv, struct kv_hash *h)
{
	if (h->o.coll.count == 0) {
		if (!h->stored)
			return 0;
		int r = kv_remove(kv, &h->key);
		if (r < 0)
			return r;
		gone(kv, h);
	} else {
		int r = kv_coll_save(kv, &h->key, &h->o);
		if (r)
			return r;
		h->stored = true;
	}
	h->saved = h->o.coll.count;
	return 0;
}

int kv_hash_get(struct kv *kv, const struct kv_hash *h, const void *f, size_t flen,
		struct paste_extent *ext, uint32_t *n, uint32_t *len, uint64_t *big)
{
	if (h->o.coll.count == 0)
		return -ENOENT;
	struct kv_key mk;
	return kv_elem_lookup(kv, field_key(kv, h, &mk, f, flen), ext, n, len, big);
}

/* ---- batches ------------------------------------------------------------ */

int kv_hash_begin(struct kv *kv, struct kv_hash *h, uint64_t bytes)
{
	int r = kv_coll_batch(kv, &h->batch, bytes);
	if (r)
		return r > 0 ? 0 : r;
	h->begun = h->o.coll;
	h->begun_stored = h->stored;
	h->changed = false;
	return 0;
}

int kv_hash_end(struct kv *kv, struct kv_hash *h, int r)
{
	if (!h->batch || --h->batch)
		return r;
	if (r == 0 && h->o.coll.count != h->saved)
		r = save(kv, h);                /* touched there */
	else if (r == 0 && h->changed)
		touched(kv, h);
	if (r == 0)
		return kv_commit(kv);
	kv_abort(kv);
	h->o.coll = h->begun;
	h->stored = h->begun_stored;
	h->saved = h->begun.count;
	return r;
}

/* ---- one field ---------------------------------------------------------- */

/* The field's value from ext[0..n), or from bytes copied in (val). */
static int put(struct kv *kv, struct kv_key *mk, const struct paste_extent *ext, uint32_t n,
	       const void *val, size_t len)
{
	return val ? kv_member_put_bytes(kv, mk, val, len) : kv_member_put(kv, mk, ext, n);
}

static int set_field(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		     const struct paste_extent *ext, uint32_t n, const void *val, size_t len,
		     bool *created)
{
	struct kv_key key, *mk = field_key(kv, h, &key, f, flen);
	bool had = false;
	uint64_t far = 0;                       /* the old value's chunks, buried once replaced */
	if (h->o.coll.count) {
		struct paste_extent old[PASTE_BTREE_MAX_EXTENTS];
		uint32_t on, olen;
		had = kv_elem_lookup(kv, mk, old, &on, &olen, &far) != -ENOENT;
	}
	if (created)
		*created = !had;
	if (had && !h->batch && !far) {
		/* One entry: no group, the record stays as it is. */
		int r = put(kv, mk, ext, n, val, len);
		if (r == 0)
			touched(kv, h);
		return r;
	}
	/* A new field: the field and the record's count together. */
	int r = kv_hash_begin(kv, h, 0);
	if (r)
		return r;
	r = put(kv, mk, ext, n, val, len);
	if (r == 0 && far)
		r = kv_elem_bury(kv, far);
	if (r == 0) {
		h->o.coll.count += !had;
		h->changed = true;
	}
	return kv_hash_end(kv, h, r);
}

int kv_hash_set(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		const struct paste_extent *ext, uint32_t n, bool *created)
{
	return set_field(kv, h, f, flen, ext, n, NULL, 0, created);
}

int kv_hash_set_bytes(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		      const void *val, size_t len, bool *created)
{
	if (len > kv_max_value(kv))
		return -EFBIG;
	/* An empty value is an entry of no extents: val must still say
	 * "bytes" so that put() copies (nothing). */
	return set_field(kv, h, f, flen, NULL, 0, val ? val : "", len, created);
}

int kv_hash_set_body(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		     struct paste_body *b, bool *created)
{
	int r;
	if (b->error) {
		/* Its bytes were dropped: the store was below its reserve.
		 * Make room for the next write; this one is refused. */
		kv_make_room(kv, b->len);
		r = -ENOSPC;
	} else if (b->len <= KV_PACK_MAX && b->n == 1) {
		/* Small: packed, and the held packet buffer goes back at once. */
		r = kv_hash_set_bytes(kv, h, f, flen,
				      paste_store_buf(kv->store, b->ext[0].buf) + b->ext[0].off,
				      b->ext[0].len, created);
	} else {
		r = kv_hash_set(kv, h, f, flen, b->ext, b->n, created);
	}
	paste_body_release(b, kv->store);
	return r;
}

int kv_hash_del(struct kv *kv, struct kv_hash *h, const void *f, size_t flen)
{
	struct kv_key key, *mk;
	struct paste_extent old[PASTE_BTREE_MAX_EXTENTS];
	uint32_t on, olen;
	if (h->o.coll.count == 0)
		return 0;
	mk = field_key(kv, h, &key, f, flen);
	/* A lookup first: it checks a long name against the one stored (a
	 * digest is not the name), and an absent field writes nothing. */
	uint64_t far = 0;
	if (kv_elem_lookup(kv, mk, old, &on, &olen, &far) == -ENOENT)
		return 0;
	if (h->o.coll.count == 1 && h->stored && !h->batch) {
		/* The last field: the key goes, the field with its grave. */
		int r = kv_remove(kv, &h->key);
		if (r < 0)
			return r;
		gone(kv, h);
		return 1;
	}
	int r = kv_hash_begin(kv, h, 0);
	if (r)
		return r;
	r = kv_member_remove(kv, mk);
	if (r > 0 && far && (r = kv_elem_bury(kv, far)) == 0)
		r = 1;
	if (r > 0) {
		h->o.coll.count--;
		h->changed = true;
	}
	r = kv_hash_end(kv, h, r < 0 ? r : 0);
	return r < 0 ? r : 1;
}

/* ---- walks -------------------------------------------------------------- */

bool kv_hash_small(struct kv *kv, const struct kv_obj *o)
{
	if (o->type != KV_HASH || o->coll.count > KV_HASH_SMALL_FIELDS)
		return false;
	struct kv_hash h = { .o.coll = o->coll };
	struct kv_hash_walk w;
	if (kv_hash_walk_init(kv, &h, &w, NULL, 0))
		return false;
	while (kv_hash_walk_next(kv, &w) == 1)
		if (w.nlen > KV_HASH_SMALL_BYTES || w.len > KV_HASH_SMALL_BYTES)
			return false;
	return true;
}

static int walk_buf(struct kv *kv, struct kv_hash_walk *w)
{
	if (!kv->namebuf && !(kv->namebuf = malloc(KV_MAX_KEY)))
		return -ENOMEM;
	w->longbuf = kv->namebuf;
	return 0;
}

int kv_hash_walk_init(struct kv *kv, const struct kv_hash *h, struct kv_hash_walk *w,
		      const void *from, size_t flen)
{
	kv_members_init(kv, &w->m, h->o.coll.id, KV_HASH_FIELD, from, flen);
	return walk_buf(kv, w);
}

bool kv_hash_walk_at(struct kv *kv, const struct kv_hash *h, struct kv_hash_walk *w,
		     const uint8_t *t, uint32_t tlen)
{
	kv_member_prefix(w->m.prefix, h->o.coll.id, KV_HASH_FIELD);
	if (tlen < sizeof(w->m.prefix) || memcmp(t, w->m.prefix, sizeof(w->m.prefix)) != 0 ||
	    walk_buf(kv, w))
		return false;
	paste_btree_cursor_init(&w->m.c, kv->tree, t, tlen);
	return true;
}

int kv_hash_walk_next(struct kv *kv, struct kv_hash_walk *w)
{
	int r = kv_members_next(kv, &w->m, &w->name, &w->nlen, w->longbuf, w->ext, &w->n, &w->len);
	if (r == 1 && kv_elem_decode(kv, paste_btree_cursor_attr(&w->m.c)->tag, w->ext, w->n, &w->len,
				     &w->big))
		return -EBADMSG;
	return r;
}

uint64_t kv_hash_walk_skip(struct kv_hash_walk *w, uint64_t n)
{
	/* The fields end before [0xFF][id][kind + 1]. */
	uint8_t end[sizeof(w->m.prefix)];
	memcpy(end, w->m.prefix, sizeof(end));
	end[sizeof(end) - 1]++;
	return paste_btree_cursor_skip(&w->m.c, n, end, sizeof(end));
}

const uint8_t *kv_hash_walk_pos(const struct kv_hash_walk *w, uint32_t *tlen)
{
	*tlen = w->m.c.klen;
	return w->m.c.key;
}
