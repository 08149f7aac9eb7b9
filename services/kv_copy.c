/*
 * kv_copy.c - COPY's core (kv_copy.h).
 *
 * A collection's members, and the chunks of a string too long for one
 * entry, are entries [0xFF][id][kind][member]; their tree keys hold the
 * member's name (a long one by its prefix and a digest
 * keyed with the store, not with the id), so a member's copy is its entry
 * as it is (tag, value extents, a long name's extent) under the new id:
 * one write per member and no byte of a value copied. O(members), as
 * Redis's own COPY is; the writes are not one group (a hash of millions
 * of fields would not fit one), the grave makes them safe instead. A
 * member whose value is in chunks (kv_elem) is the exception: its copy
 * names chunks of its own, the same extents under a fresh id.
 */
#include <errno.h>
#include <string.h>

#include "kv_copy.h"

static int copy_members(struct kv *kv, uint64_t from, uint64_t to);

/* A member's value in chunks (kv_elem) gets chunks of its own: the same
 * extents under a fresh id, with its grave until the member's entry
 * names them (a COPY that stops leaves them to the sweeper). ext[0..n)
 * is the entry's value: a long name's extents, then the record, which
 * is replaced by the new one. */
static int copy_far(struct kv *kv, struct paste_extent *ext, uint32_t *n, uint32_t len,
		    uint8_t tag, struct paste_extent *rec, uint64_t *id)
{
	uint32_t next, vlen = len;
	uint64_t big;
	int r = kv_elem_entry(kv, tag, ext, *n, &next, &vlen, &big);
	if (r)
		return r;
	*id = kv_new_id(kv);
	uint8_t g[16];
	uint32_t rn;
	if ((r = kv_tree_set(kv, g, kv_grave_key(g, KV_GRAVE_COLL, *id))) != 0 ||
	    (r = copy_members(kv, big, *id)) != 0 || (r = kv_big_record(kv, *id, vlen, rec, &rn)) != 0)
		return r;
	/* ext[next] is the caller's copy: the tree holds the old record's. */
	ext[next] = rec[0];
	*n = next + 1;
	return 0;
}

static int copy_members(struct kv *kv, uint64_t from, uint64_t to)
{
	uint8_t pfx[10], npfx[10];
	kv_member_prefix(pfx, from, 0);
	kv_member_prefix(npfx, to, 0);
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, pfx, 9);      /* [0xFF][id]: every kind */
	const uint8_t *t;
	uint32_t tlen, n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint8_t nk[PASTE_BTREE_MAX_KEY];
	while (paste_btree_cursor_next(&c, &t, &tlen, ext, &n, &len) == 1 && tlen >= 9 &&
	       memcmp(t, pfx, 9) == 0) {
		memcpy(nk, t, tlen);
		memcpy(nk, npfx, 9);
		struct paste_btree_attr a = *paste_btree_cursor_attr(&c);
		struct paste_extent rec[1] = { { .buf = PASTE_NO_BUF } };
		bool far = kv_elem_kind(t, tlen) && (a.tag & KV_TAG_TYPE) == KV_TAG_BIG;
		uint32_t klen = tlen;
		uint64_t fid = 0;
		int r = far ? copy_far(kv, ext, &n, len, a.tag, rec, &fid) : 0;
		if (r == 0)
			r = paste_btree_put(kv->tree, nk, klen, ext, n, &a, NULL);
		if (r == -ENOSPC && kv_make_room(kv, 0))
			r = paste_btree_put(kv->tree, nk, klen, ext, n, &a, NULL);
		if (far && r == 0) {
			/* Named by the member now: the grave goes (a COPY cut
			 * short leaves the member to its collection's grave,
			 * which buries these chunks again). */
			uint8_t g[16];
			r = kv_tree_del(kv, g, kv_grave_key(g, KV_GRAVE_COLL, fid));
		}
		if (rec[0].buf != PASTE_NO_BUF)
			paste_store_unref(kv->store, rec[0].buf, false);
		if (r)
			return r;
	}
	return 0;
}

int kv_copy(struct kv *kv, const struct kv_obj *o, struct kv_key *dst)
{
	if (!kv_is_coll(o->type) && !o->big)
		return kv_put(kv, dst, o->type, o->ext, o->n, o->expire_ms, NULL);
	uint64_t id = kv_new_id(kv);
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_COLL, id);
	int r = kv_tree_set(kv, g, glen);
	if (r)
		return r;
	r = copy_members(kv, o->big ? o->big : o->coll.id, id);
	if (r == 0 && o->big) {
		/* The record and the grave's delete: one group (kv_big.c). */
		r = kv_put_big(kv, dst, id, o->len, o->expire_ms, NULL);
	} else if (r == 0 && (r = kv_begin(kv)) == 0) {
		struct kv_obj c = *o;
		c.coll.id = id;
		r = kv_coll_save(kv, dst, &c);
		if (r == 0)
			r = kv_tree_del(kv, g, glen);
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (r)
		kv->sweep_due = true;      /* the grave takes what was copied */
	return r;
}
