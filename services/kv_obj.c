/*
 * kv_obj.c - typed keys (kv.h): lookup with the type, the deadline and a
 * long key's check; writes that drop a collection they replace; a
 * collection's record and members; groups.
 *
 * A write reads the key's entry first, which the point index answers for
 * a short string key in one probe (its line is then warm for the write's
 * own index update): that is how a SET learns whether it replaces a
 * collection (its members must be buried) or an expired key.
 *
 * Expiry: a key's deadline is its entry's word; an index entry
 * [0xFB][deadline][tree key] is written before the key, so that after a
 * crash no key with a deadline lacks one (an index entry whose key changed
 * is dropped by the expiry step when it reaches it). A lookup that finds
 * the deadline passed removes the key, as a DEL would, and answers absent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

const char *kv_type_name(enum kv_type t)
{
	static const char *const names[] = { "string", "hash", "list", "set", "zset", "none", "stream" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "none";
}

/* ---- the record of a collection ---------------------------------------- */

/* A collection's record: four words; a stream's has nine more. */
#define COLL_MAX_BYTES (KV_COLL_BYTES + 72u)

static size_t coll_encode(const struct kv_coll *c, enum kv_type type, uint8_t out[COLL_MAX_BYTES])
{
	kv_be64_put(out, c->id);
	kv_be64_put(out + 8, c->count);
	kv_be64_put(out + 16, (uint64_t)c->head);
	kv_be64_put(out + 24, (uint64_t)c->tail);
	if (type != KV_STREAM)
		return KV_COLL_BYTES;
	const uint64_t w[9] = { c->last_ms, c->last_seq, c->del_ms, c->del_seq, c->added, c->node,
				c->fill, c->top_ms, c->top_seq };
	for (int i = 0; i < 9; i++)
		kv_be64_put(out + KV_COLL_BYTES + 8 * i, w[i]);
	return COLL_MAX_BYTES;
}

/* The four words every collection has; a stream's others only for a
 * stream (every HSET, SADD, LPUSH decodes a record: they are left as
 * they were otherwise, and only a stream's code reads them). */
static void coll_decode(const struct kv *kv, struct kv_obj *o)
{
	uint8_t b[COLL_MAX_BYTES];
	bool stream = o->type == KV_STREAM;
	size_t want = stream ? COLL_MAX_BYTES : KV_COLL_BYTES;
	memset(b, 0, want);
	paste_store_read(kv->store, o->ext, o->n, 0, b, want);
	struct kv_coll *c = &o->coll;
	c->id = kv_be64(b);
	c->count = kv_be64(b + 8);
	c->head = (int64_t)kv_be64(b + 16);
	c->tail = (int64_t)kv_be64(b + 24);
	if (!stream)
		return;
	uint64_t *w[9] = { &c->last_ms, &c->last_seq, &c->del_ms, &c->del_seq, &c->added, &c->node,
			   &c->fill, &c->top_ms, &c->top_seq };
	for (int i = 0; i < 9; i++)
		*w[i] = kv_be64(b + KV_COLL_BYTES + 8 * i);
}

/* No collection (a string): the four words every reader looks at; a
 * stream's others are read only for a stream. */
static void coll_none(struct kv_obj *o)
{
	o->coll.id = o->coll.count = 0;
	o->coll.head = o->coll.tail = 0;
}

/* A string in chunks: its record {id, length}; to its callers a string
 * of that length (ext keeps the record, for a write of the key's entry
 * again: kv_set_expire, a rename). */
static void big_decode(const struct kv *kv, struct kv_obj *o)
{
	uint8_t b[16] = { 0 };
	paste_store_read(kv->store, o->ext, o->n, 0, b, sizeof(b));
	o->type = KV_STRING;
	o->big = kv_be64(b);
	uint64_t len = kv_be64(b + 8);
	o->len = len <= UINT32_MAX ? (uint32_t)len : UINT32_MAX;
	coll_none(o);
}

/* The tag a key found as o is written back with. */
static uint8_t obj_tag(const struct kv_obj *o)
{
	return o->big ? KV_TAG_BIG : (uint8_t)o->type;
}

/* ---- a long key's own extent ------------------------------------------- */

/* The entry of a long name (tag KV_TAG_LONG) starts with the name:
 * check it against the name looked up (a digest collision names another
 * key) and drop its extents from ext[0..*n), *len. */
static bool strip_long(const struct kv *kv, const struct kv_key *k, struct paste_extent *ext,
		       uint32_t *n, uint32_t *len)
{
	uint32_t next;
	if (!kv_long_same(kv, ext, *n, k->p, k->len, &next))
		return false;
	for (uint32_t i = 0; i < next; i++)
		*len -= ext[i].len;
	*n -= next;
	memmove(ext, ext + next, sizeof(*ext) * *n);
	return true;
}

/* ---- counts ------------------------------------------------------------ */

static void count_key(struct kv *kv, uint32_t db, int keys, int expires)
{
	if (kv->dbkeys[db] != UINT64_MAX)
		kv->dbkeys[db] += (uint64_t)(int64_t)keys;
	if (kv->dbexpires[db] != UINT64_MAX)
		kv->dbexpires[db] += (uint64_t)(int64_t)expires;
}

/* ---- groups ------------------------------------------------------------ */

int kv_begin(struct kv *kv)
{
	if (kv->group_depth++)
		return 0;
	int r = paste_btree_group_begin(kv->tree);
	if (r) {
		kv->group_depth = 0;
		return r;
	}
	memcpy(kv->saved_map, kv->dbmap, sizeof(kv->dbmap));
	memcpy(kv->saved_keys, kv->dbkeys, sizeof(kv->dbkeys[0]) * kv->ndbs);
	memcpy(kv->saved_expires, kv->dbexpires, sizeof(kv->dbexpires[0]) * kv->ndbs);
	return 0;
}

int kv_commit(struct kv *kv)
{
	if (!kv->group_depth || --kv->group_depth)
		return 0;
	return paste_btree_group_commit(kv->tree, NULL);
}

void kv_abort(struct kv *kv)
{
	if (!kv->group_depth)
		return;
	kv->group_depth = 0;
	paste_btree_group_abort(kv->tree);
	memcpy(kv->dbmap, kv->saved_map, sizeof(kv->dbmap));
	memcpy(kv->dbkeys, kv->saved_keys, sizeof(kv->dbkeys[0]) * kv->ndbs);
	memcpy(kv->dbexpires, kv->saved_expires, sizeof(kv->dbexpires[0]) * kv->ndbs);
}

/* Tree writes: one that found no room makes room and is tried once more. */
static int tree_put(struct kv *kv, const struct kv_key *k, const struct paste_extent *ext,
		    uint32_t n, const struct paste_btree_attr *a)
{
	int r = paste_btree_put(kv->tree, k->t, k->tlen, ext, n, a, NULL);
	if (r == -ENOSPC && kv_make_room(kv, 0))
		r = paste_btree_put(kv->tree, k->t, k->tlen, ext, n, a, NULL);
	return r;
}

int kv_tree_put(struct kv *kv, const uint8_t *t, uint32_t tlen, const struct paste_extent *ext,
		uint32_t n, uint8_t tag)
{
	struct paste_btree_attr a = { .tag = tag };
	int r = paste_btree_put(kv->tree, t, tlen, ext, n, &a, NULL);
	if (r == -ENOSPC && kv_make_room(kv, 0))
		r = paste_btree_put(kv->tree, t, tlen, ext, n, &a, NULL);
	return r;
}

int kv_tree_set(struct kv *kv, const uint8_t *t, uint32_t tlen)
{
	int r = paste_btree_set(kv->tree, t, tlen, NULL, 0, NULL);
	if (r == -ENOSPC && kv_make_room(kv, 0))
		r = paste_btree_set(kv->tree, t, tlen, NULL, 0, NULL);
	return r;
}

int kv_tree_del(struct kv *kv, const uint8_t *t, uint32_t tlen)
{
	int r = paste_btree_del(kv->tree, t, tlen, NULL);
	if (r == -ENOSPC && kv_make_room(kv, 0))
		r = paste_btree_del(kv->tree, t, tlen, NULL);
	return r;
}

/* Copy len bytes to the append point: extents ext[0..*n), each holding a
 * reference of the caller's. */
static int copy_in(struct kv *kv, const void *p, size_t len, struct paste_extent *ext, uint32_t max,
		   uint32_t *n)
{
	int r = paste_append_copy(kv->store, &kv->app, p, len, kv_reserve(kv), ext, max, n);
	if (r == -ENOSPC && kv_make_room(kv, len))
		r = paste_append_copy(kv->store, &kv->app, p, len, kv_reserve(kv), ext, max, n);
	return r == -E2BIG ? -EFBIG : r;
}

int kv_copy_in(struct kv *kv, const void *p, size_t len, struct paste_extent *ext, uint32_t max,
	       uint32_t *n)
{
	return copy_in(kv, p, len, ext, max, n);
}

static void drop_refs(struct kv *kv, const struct paste_extent *ext, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		paste_store_unref(kv->store, ext[i].buf, false);
}

static int put_bytes(struct kv *kv, const uint8_t *t, uint32_t tlen, const void *val, size_t len,
		     uint8_t tag)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n = 0;
	struct paste_btree_attr a = { .tag = tag };
	int r = len ? copy_in(kv, val, len, ext, PASTE_BTREE_MAX_EXTENTS, &n) : 0;
	if (r == 0) {
		r = paste_btree_put(kv->tree, t, tlen, ext, n, &a, NULL);
		if (r == -ENOSPC && kv_make_room(kv, 0))
			r = paste_btree_put(kv->tree, t, tlen, ext, n, &a, NULL);
	}
	drop_refs(kv, ext, n);
	return r;
}

int kv_tree_put_bytes(struct kv *kv, const uint8_t *t, uint32_t tlen, const void *val, size_t len)
{
	return put_bytes(kv, t, tlen, val, len, 0);
}

int kv_sys_put(struct kv *kv, const uint8_t *t, uint32_t tlen, const void *val, size_t len)
{
	return put_bytes(kv, t, tlen, val, len, KV_TAG_SYS);
}

int kv_sys_get(struct kv *kv, const uint8_t *t, uint32_t tlen, void *out, uint32_t cap,
	       uint32_t *len)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n;
	if (paste_btree_lookup(kv->tree, t, tlen, ext, &n, len, &a) || a.tag != KV_TAG_SYS)
		return -ENOENT;
	if (*len > cap)
		return -EBADMSG;
	paste_store_read(kv->store, ext, n, 0, out, *len);
	return 0;
}

/* ---- the entry itself -------------------------------------------------- */

/* The most extents a long name takes at the append point (none for a
 * short one): [u32 length][name] over whole buffers (a run that would need
 * one more where the append point stands starts in a fresh buffer). */
static uint32_t name_extents(const struct kv *kv, const struct kv_key *k)
{
	if (!k->longkey)
		return 0;
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	uint64_t e = (4 + k->len + bs - 1) / bs;
	return e < PASTE_BTREE_MAX_EXTENTS ? (uint32_t)e : PASTE_BTREE_MAX_EXTENTS;
}

static int name_fits(const struct kv *kv, const struct kv_key *k)
{
	return k->longkey && k->len > kv_max_key(kv) ? -ENAMETOOLONG : 0;
}

/* A long name to the append point as [u32 length][name], one run. */
static int copy_name(struct kv *kv, const struct kv_key *k, struct paste_extent *ext, uint32_t max,
		     uint32_t *n)
{
	uint8_t small[4 + 2048];
	uint8_t *b = 4 + k->len <= sizeof(small) ? small : malloc(4 + k->len);
	if (!b)
		return -ENOMEM;
	uint32_t l = (uint32_t)k->len;
	b[0] = (uint8_t)l;
	b[1] = (uint8_t)(l >> 8);
	b[2] = (uint8_t)(l >> 16);
	b[3] = (uint8_t)(l >> 24);
	memcpy(b + 4, k->p, k->len);
	int r = copy_in(kv, b, 4 + k->len, ext, max, n);
	if (b != small)
		free(b);
	return r == -EFBIG ? -ENAMETOOLONG : r;
}

/* Put tree key t (a key or a member) = [long name] + ext[0..n) with tag
 * and deadline. A long name is copied to the append point first. */
static int put_entry(struct kv *kv, const struct kv_key *k, uint8_t tag, const struct paste_extent *ext,
		     uint32_t n, int64_t expire_ms)
{
	struct paste_extent all[PASTE_BTREE_MAX_EXTENTS];
	uint32_t total = n, kn = 0;
	const struct paste_extent *put = ext;
	if (k->longkey) {
		int r = name_fits(kv, k);
		if (r == 0)
			r = copy_name(kv, k, all, PASTE_BTREE_MAX_EXTENTS - n, &kn);
		if (r)
			return r;
		if (n)
			memcpy(all + kn, ext, sizeof(*ext) * n);
		total = n + kn;
		put = all;
		tag |= KV_TAG_LONG;
	}
	struct paste_btree_attr a = { .tag = tag, .has_word = expire_ms != KV_NO_TTL,
				      .word = (uint64_t)expire_ms };
	int r = tree_put(kv, k, put, total, &a);
	drop_refs(kv, all, kn);
	return r;
}

/* The index entry of a deadline, written before the key it names. */
static int put_index(struct kv *kv, const struct kv_key *k, int64_t expire_ms)
{
	uint8_t ik[PASTE_BTREE_MAX_KEY];
	uint32_t ilen = kv_expire_key(ik, expire_ms, k);
	if (expire_ms < kv->next_due_ms)
		kv->next_due_ms = expire_ms;
	return kv_tree_set(kv, ik, ilen);
}

/* A deadline that no longer applies: its index entry goes (after the key
 * changed, so that a crash between leaves an entry too many, which the
 * expiry step drops, never a deadline without one). */
static void drop_index(struct kv *kv, const struct kv_key *k, int64_t expire_ms)
{
	if (expire_ms == KV_NO_TTL)
		return;
	uint8_t ik[PASTE_BTREE_MAX_KEY];
	uint32_t ilen = kv_expire_key(ik, expire_ms, k);
	(void)kv_tree_del(kv, ik, ilen);   /* absent, or no room: the expiry step drops it */
}

static int bury(struct kv *kv, uint64_t id)
{
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_COLL, id);
	kv->sweep_due = true;
	return kv_tree_set(kv, g, glen);
}

/* What the key's entry is now, without counting a read or removing it
 * when expired: *had, its type, deadline and (collections) id. */
struct old {
	bool had, expired;
	enum kv_type type;
	int64_t expire_ms;
	uint64_t id;
};

static void probe(struct kv *kv, struct kv_key *k, struct old *o)
{
	struct kv_obj ob;
	struct paste_btree_attr a;
	uint32_t n, len;
	*o = (struct old){ 0 };
	if (paste_btree_lookup(kv->tree, k->t, k->tlen, ob.ext, &n, &len, &a))
		return;
	if ((a.tag & KV_TAG_LONG) && !strip_long(kv, k, ob.ext, &n, &len))
		return;   /* another key's digest: treated as absent; the write replaces it */
	o->had = true;
	o->type = (enum kv_type)(a.tag & KV_TAG_TYPE);
	o->expire_ms = a.has_word ? (int64_t)a.word : KV_NO_TTL;
	o->expired = o->expire_ms != KV_NO_TTL && o->expire_ms <= kv_now(kv);
	if (kv_is_coll(o->type)) {
		ob.n = n;
		ob.len = len;
		ob.type = o->type;
		coll_decode(kv, &ob);
		o->id = ob.coll.id;
	}
}

/* A key's entry was written over what `old` says it was, with deadline
 * exp: a new key counts one more; the deadline's count follows; an
 * expired key written over was removed by expiry. */
static void count_replace(struct kv *kv, uint32_t db, const struct old *old, int64_t exp)
{
	count_key(kv, db, old->had ? 0 : 1,
		  (exp != KV_NO_TTL) - (old->had && old->expire_ms != KV_NO_TTL));
	if (old->had && old->expired)
		kv->n.expired++;
}

/* A write over key k as probe found it: an expired key it replaced went
 * by expiry first (as Redis's lookup for the write removes it), then the
 * key was written, or created when it was not there. */
static void touched_over(struct kv *kv, const struct kv_key *k, const struct old *old,
			 bool created)
{
	if (old->had && old->expired)
		kv_touched(kv, k, KV_TOUCH_EXPIRED);
	kv_touched(kv, k, created || !old->had || old->expired ? KV_TOUCH_CREATED
							     : KV_TOUCH_WRITTEN);
}

/* Write key's entry replacing what `old` says it was; drop_id: the
 * collection it held dies (0: keep). One group when two entries change. */
static int replace(struct kv *kv, struct kv_key *k, enum kv_type type, const struct paste_extent *ext,
		   uint32_t n, int64_t expire_ms, const struct old *old, uint64_t drop_id)
{
	int r = 0;
	bool group = drop_id != 0;
	if (group && (r = kv_begin(kv)) < 0)
		return r;
	if (expire_ms != KV_NO_TTL && (!old->had || expire_ms != old->expire_ms))
		r = put_index(kv, k, expire_ms);
	if (r == 0)
		r = put_entry(kv, k, (uint8_t)type, ext, n, expire_ms);
	if (r == 0 && drop_id)
		r = bury(kv, drop_id);
	if (group) {
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (r == 0 && old->had && old->expire_ms != expire_ms)
		drop_index(kv, k, old->expire_ms);
	return r;
}

/* Delete key's entry; a collection's (id) is buried in the same group. */
static int del_key(struct kv *kv, struct kv_key *k, uint64_t id)
{
	if (!id)
		return kv_tree_del(kv, k->t, k->tlen);
	int r = kv_begin(kv);
	if (r < 0)
		return r;
	r = kv_tree_del(kv, k->t, k->tlen);
	if (r == 0)
		r = bury(kv, id);
	if (r == 0)
		return kv_commit(kv);
	kv_abort(kv);
	return r;
}

/* A key whose deadline passed goes as a DEL would. */
static void expire_key(struct kv *kv, struct kv_key *k, enum kv_type type, uint64_t id,
		       int64_t expire_ms);

void kv_expire_now(struct kv *kv, struct kv_key *k, enum kv_type type, uint64_t id,
		   int64_t expire_ms)
{
	bool was = paste_btree_deleting(kv->tree, true);
	expire_key(kv, k, type, id, expire_ms);
	paste_btree_deleting(kv->tree, was);
}

static void expire_key(struct kv *kv, struct kv_key *k, enum kv_type type, uint64_t id,
		       int64_t expire_ms)
{
	(void)type;
	int r = del_key(kv, k, id);
	if (r == 0) {
		drop_index(kv, k, expire_ms);
		kv->n.expired++;
		count_key(kv, k->db, -1, -1);
		kv_touched(kv, k, KV_TOUCH_EXPIRED);
	}
}

/* ---- the API ----------------------------------------------------------- */

int kv_lookup(struct kv *kv, struct kv_key *k, struct kv_obj *o, bool read)
{
	struct paste_btree_attr a;
	if (read)
		kv->n.gets++;
	int r = paste_btree_lookup(kv->tree, k->t, k->tlen, o->ext, &o->n, &o->len, &a);
	if (r == 0 && (a.tag & KV_TAG_LONG) && !strip_long(kv, k, o->ext, &o->n, &o->len))
		r = -ENOENT;
	if (r == 0) {
		enum kv_type raw = (enum kv_type)(a.tag & KV_TAG_TYPE);
		o->type = raw;
		o->expire_ms = a.has_word ? (int64_t)a.word : KV_NO_TTL;
		o->big = 0;
		uint64_t id = 0;
		if (raw == KV_TAG_BIG) {
			big_decode(kv, o);
			id = o->big;
		} else if (kv_is_coll(raw)) {
			coll_decode(kv, o);
			id = o->coll.id;
		} else {
			coll_none(o);
		}
		if (o->expire_ms != KV_NO_TTL && o->expire_ms <= kv_now(kv)) {
			if (!kv->paused)
				kv_expire_now(kv, k, raw, id, o->expire_ms);
			r = -ENOENT;
		}
	}
	if (read) {
		if (r == 0)
			kv->n.hits++;
		else
			kv->n.misses++;
	}
	return r ? -ENOENT : 0;
}

int kv_put(struct kv *kv, struct kv_key *k, enum kv_type type, const struct paste_extent *ext,
	   uint32_t n, int64_t expire_ms, bool *created)
{
	int nr = name_fits(kv, k);
	if (nr)
		return nr;
	if (type == KV_STRING && n + name_extents(kv, k) > PASTE_BTREE_MAX_EXTENTS)
		return kv_put_chunks(kv, k, ext, n, expire_ms, created);   /* no byte copied */
	struct old old;
	probe(kv, k, &old);
	bool live = old.had && !old.expired;
	if (expire_ms == KV_KEEP_TTL)
		expire_ms = live ? old.expire_ms : KV_NO_TTL;
	uint64_t drop = old.had && kv_is_coll(old.type) ? old.id : 0;
	int r = replace(kv, k, type, ext, n, expire_ms, &old, drop);
	if (r)
		return r;
	kv->n.sets++;
	count_replace(kv, k->db, &old, expire_ms);
	if (created)
		*created = !live;
	touched_over(kv, k, &old, false);
	return 0;
}

/* A string too long to be copied to the append point for one entry:
 * written as a body copies, in chunks when it is longer than one. */
static int put_copied(struct kv *kv, struct kv_key *k, const void *val, size_t len,
		      int64_t expire_ms, bool *created)
{
	struct kv_writer *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	kv_writer_idle(w);
	int r = kv_writer_begin(kv, w, len);
	if (r == 0 && (r = kv_writer_copy(kv, w, val, len)) == 0)
		r = kv_writer_put(kv, w, k, expire_ms, created);
	else if (r == 0 || w->len)
		kv_writer_drop(kv, w);
	free(w);
	return r;
}

int kv_put_bytes(struct kv *kv, struct kv_key *k, enum kv_type type, const void *val, size_t len,
		 int64_t expire_ms, bool *created)
{
	if (len > kv->max_value)
		return -EFBIG;
	int r = name_fits(kv, k);
	if (r)
		return r;
	/* (A name that fits takes at most 62 extents: a value of one
	 * extent always fits beside it, so this does not come back here.) */
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	if (type == KV_STRING && (len + bs - 1) / bs + name_extents(kv, k) > PASTE_BTREE_MAX_EXTENTS)
		return put_copied(kv, k, val, len, expire_ms, created);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n = 0;
	if (len)
		r = copy_in(kv, val, len, ext, PASTE_BTREE_MAX_EXTENTS - name_extents(kv, k), &n);
	if (r == 0)
		r = kv_put(kv, k, type, ext, n, expire_ms, created);
	drop_refs(kv, ext, n);    /* the tree took its own */
	return r;
}

int kv_put_body(struct kv *kv, struct kv_key *k, struct paste_body *b, int64_t expire_ms,
		bool *created)
{
	int r;
	if (b->error) {
		/* Its bytes were dropped: the store was below its reserve.
		 * Make room for the next write; this one is refused. */
		kv_make_room(kv, b->len);
		r = -ENOSPC;
	} else if (b->len <= KV_PACK_MAX && b->n == 1) {
		/* Small: packed, and the held packet buffer goes back at once
		 * (a 64-byte value must not pin a receive buffer). */
		r = kv_put_bytes(kv, k, KV_STRING, paste_store_buf(kv->store, b->ext[0].buf) + b->ext[0].off,
				 b->ext[0].len, expire_ms, created);
	} else {
		r = kv_put(kv, k, KV_STRING, b->ext, b->n, expire_ms, created);
	}
	paste_body_release(b, kv->store);
	return r;
}

int kv_big_record(struct kv *kv, uint64_t id, uint64_t len, struct paste_extent *ext, uint32_t *n)
{
	uint8_t rec[16];
	kv_be64_put(rec, id);
	kv_be64_put(rec + 8, len);
	*n = 0;
	return copy_in(kv, rec, sizeof(rec), ext, 1, n);
}

int kv_put_big(struct kv *kv, struct kv_key *k, uint64_t id, uint64_t len, int64_t expire_ms,
	       bool *created)
{
	struct paste_extent ext[1];
	uint32_t n;
	int r = kv_big_record(kv, id, len, ext, &n);
	if (r)
		return r;
	struct old old;
	probe(kv, k, &old);
	bool live = old.had && !old.expired;
	if (expire_ms == KV_KEEP_TTL)
		expire_ms = live ? old.expire_ms : KV_NO_TTL;
	uint64_t drop = old.had && kv_is_coll(old.type) && old.id != id ? old.id : 0;
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_COLL, id);
	if ((r = kv_begin(kv)) == 0) {
		r = replace(kv, k, KV_TAG_BIG, ext, n, expire_ms, &old, drop);
		if (r == 0)
			r = kv_tree_del(kv, g, glen);
		if (r == 0 || r == -ENOENT)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	drop_refs(kv, ext, n);
	if (r)
		return r;
	kv->n.sets++;
	count_replace(kv, k->db, &old, expire_ms);
	if (created)
		*created = !live;
	touched_over(kv, k, &old, false);
	return 0;
}

static int remove_key(struct kv *kv, struct kv_key *k);

/* A delete may use the tree pages puts leave free (paste_btree_deleting). */
int kv_remove(struct kv *kv, struct kv_key *k)
{
	bool was = paste_btree_deleting(kv->tree, true);
	int r = remove_key(kv, k);
	paste_btree_deleting(kv->tree, was);
	return r;
}

static int remove_key(struct kv *kv, struct kv_key *k)
{
	struct old old;
	probe(kv, k, &old);
	if (!old.had)
		return 0;
	int r = del_key(kv, k, kv_is_coll(old.type) ? old.id : 0);
	if (r < 0)
		return r;
	drop_index(kv, k, old.expire_ms);
	count_key(kv, k->db, -1, -(old.expire_ms != KV_NO_TTL));
	kv_touched(kv, k, old.expired ? KV_TOUCH_EXPIRED : KV_TOUCH_DELETED);
	if (old.expired) {
		kv->n.expired++;
		return 0;            /* it was gone already for every reader */
	}
	kv->n.dels++;
	return 1;
}

int kv_rename(struct kv *kv, struct kv_key *src, const struct kv_obj *o, struct kv_key *dst)
{
	struct old old;
	probe(kv, dst, &old);
	bool live = old.had && !old.expired;
	/* What dst held goes; a collection under src keeps its id, so its
	 * members (not under the key) need not move. */
	uint64_t drop = old.had && kv_is_coll(old.type) &&
			!(kv_is_coll(o->type) && old.id == o->coll.id) ? old.id : 0;
	int r = kv_begin(kv);
	if (r < 0)
		return r;
	r = replace(kv, dst, obj_tag(o), o->ext, o->n, o->expire_ms, &old, drop);
	if (r == 0)
		r = kv_tree_del(kv, src->t, src->tlen);
	if (r == 0)
		r = kv_commit(kv);
	else
		kv_abort(kv);
	if (r)
		return r;
	drop_index(kv, src, o->expire_ms);
	bool exp = o->expire_ms != KV_NO_TTL;
	count_key(kv, src->db, -1, -exp);
	if (!live)
		count_key(kv, dst->db, old.had ? 0 : 1, 0);
	count_key(kv, dst->db, 0, exp - (live && old.expire_ms != KV_NO_TTL) - (old.had && old.expired));
	if (old.had && old.expired)
		kv->n.expired++;
	kv_touched(kv, src, KV_TOUCH_DELETED);
	touched_over(kv, dst, &old, true);
	return 0;
}

int kv_set_expire(struct kv *kv, struct kv_key *k, const struct kv_obj *o, int64_t expire_ms)
{
	struct old old = { .had = true, .type = o->type, .expire_ms = o->expire_ms };
	int r = replace(kv, k, obj_tag(o), o->ext, o->n, expire_ms, &old, 0);
	if (r == 0) {
		count_key(kv, k->db, 0, (expire_ms != KV_NO_TTL) - (o->expire_ms != KV_NO_TTL));
		kv_touched(kv, k, KV_TOUCH_WRITTEN);
	}
	return r;
}

/* ---- collections ------------------------------------------------------- */

uint64_t kv_new_id(struct kv *kv)
{
	/* Past the log's last LSN: a later id is larger (the use of one
	 * writes a record), so an id is never reused, not even after its
	 * collection was dropped and swept; and past the last one handed out,
	 * for two taken before either wrote. 0 is never an id. */
	uint64_t id = paste_btree_last_lsn(kv->tree) + 1;
	if (id <= kv->last_id)
		id = kv->last_id + 1;
	return kv->last_id = id;
}

void kv_coll_new(struct kv *kv, struct kv_obj *o, enum kv_type type)
{
	o->type = type;
	o->expire_ms = KV_NO_TTL;
	o->n = o->len = 0;
	o->big = 0;
	o->coll = (struct kv_coll){ .id = kv_new_id(kv) };
}

int kv_coll_save(struct kv *kv, struct kv_key *k, struct kv_obj *o)
{
	uint8_t b[COLL_MAX_BYTES];
	size_t blen = coll_encode(&o->coll, o->type, b);
	struct paste_extent ext[1];
	uint32_t n = 0;
	int r = copy_in(kv, b, blen, ext, 1, &n);
	if (r)
		return r;
	struct old old;
	probe(kv, k, &old);
	bool live = old.had && !old.expired;
	/* The same collection keeps its deadline; a new one over an expired
	 * or other key replaces it. */
	uint64_t drop = old.had && kv_is_coll(old.type) && old.id != o->coll.id ? old.id : 0;
	int64_t exp = live && old.id == o->coll.id ? old.expire_ms : o->expire_ms;
	r = replace(kv, k, o->type, ext, n, exp, &old, drop);
	drop_refs(kv, ext, n);
	if (r == 0) {
		o->expire_ms = exp;
		count_replace(kv, k->db, &old, exp);
		touched_over(kv, k, &old, false);
	}
	return r;
}

int kv_coll_batch(struct kv *kv, uint32_t *batch, uint64_t bytes)
{
	if ((*batch)++)
		return 1;
	/* No room can be made inside a group (a checkpoint would keep half
	 * of it): make it now. */
	if (bytes)
		kv_admit(kv, bytes);
	int r = kv_begin(kv);
	if (r)
		*batch = 0;
	return r;
}

int kv_member_lookup(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		     uint32_t *len)
{
	return kv_elem_lookup(kv, mk, ext, n, len, NULL);
}

int kv_member_put(struct kv *kv, struct kv_key *mk, const struct paste_extent *ext, uint32_t n)
{
	return put_entry(kv, mk, 0, ext, n, KV_NO_TTL);
}

int kv_member_put_tag(struct kv *kv, struct kv_key *mk, uint8_t tag, const struct paste_extent *ext,
		      uint32_t n)
{
	return put_entry(kv, mk, tag, ext, n, KV_NO_TTL);
}

int kv_member_put_word(struct kv *kv, struct kv_key *mk, const void *val, size_t len, uint64_t word)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n = 0;
	/* A hash field's value or a list element that one entry cannot hold
	 * beside its name goes to chunks of its own (kv_elem_put_far). */
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	if (word == KV_NO_TTL && (len + bs - 1) / bs + 1 > PASTE_BTREE_MAX_EXTENTS - name_extents(kv, mk) &&
	    kv_elem_kind(mk->t, mk->tlen))
		return name_fits(kv, mk) ? -ENAMETOOLONG : kv_elem_put_far(kv, mk, val, len);
	int r = name_fits(kv, mk);
	if (r == 0 && len)
		r = copy_in(kv, val, len, ext, PASTE_BTREE_MAX_EXTENTS - name_extents(kv, mk), &n);
	if (r == 0)
		r = put_entry(kv, mk, 0, ext, n, (int64_t)word);
	drop_refs(kv, ext, n);
	return r;
}

int kv_member_put_bytes(struct kv *kv, struct kv_key *mk, const void *val, size_t len)
{
	return kv_member_put_word(kv, mk, val, len, KV_NO_TTL);
}

int kv_elem_lookup(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		   uint32_t *len, uint64_t *big)
{
	struct paste_btree_attr a;
	uint64_t b;
	if (paste_btree_lookup(kv->tree, mk->t, mk->tlen, ext, n, len, &a))
		return -ENOENT;
	if ((a.tag & KV_TAG_LONG) && !strip_long(kv, mk, ext, n, len))
		return -ENOENT;
	int r = kv_elem_decode(kv, a.tag, ext, *n, len, &b);
	if (r == 0 && big)
		*big = b;
	return r == 0 && b && !big ? -EFBIG : r;
}

int kv_member_remove(struct kv *kv, struct kv_key *mk)
{
	int r = kv_tree_del(kv, mk->t, mk->tlen);
	return r == -ENOENT ? 0 : r < 0 ? r : 1;
}

void kv_members_init(struct kv *kv, struct kv_members *m, uint64_t id, uint8_t kind,
		     const void *from, size_t flen)
{
	kv_member_prefix(m->prefix, id, kind);
	struct kv_key k;
	if (from)
		kv_member_key(kv, &k, id, kind, from, flen);
	else
		memcpy(k.t, m->prefix, (k.tlen = sizeof(m->prefix)));
	paste_btree_cursor_init(&m->c, kv->tree, k.t, k.tlen);
}

int kv_members_next(struct kv *kv, struct kv_members *m, const uint8_t **name, size_t *nlen,
		    uint8_t *longbuf, struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	const uint8_t *t;
	uint32_t tlen;
	if (paste_btree_cursor_next(&m->c, &t, &tlen, ext, n, len) != 1 ||
	    tlen < sizeof(m->prefix) || memcmp(t, m->prefix, sizeof(m->prefix)) != 0)
		return 0;
	const struct paste_btree_attr *a = paste_btree_cursor_attr(&m->c);
	if (a->tag & KV_TAG_LONG) {
		uint32_t next, l;
		if (kv_long_span(kv, ext, *n, &next, &l))
			return -EBADMSG;
		*nlen = kv_long_read(kv, ext, next, l, longbuf);
		*name = longbuf;
		for (uint32_t i = 0; i < next; i++)
			*len -= ext[i].len;
		*n -= next;
		memmove(ext, ext + next, sizeof(*ext) * *n);
	} else {
		*name = t + sizeof(m->prefix);
		*nlen = tlen - sizeof(m->prefix);
	}
	return 1;
}
