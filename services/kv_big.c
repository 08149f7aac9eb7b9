/*
 * kv_big.c - strings longer than one entry (kv.h, "strings in chunks").
 *
 * One tree entry names at most PASTE_BTREE_MAX_EXTENTS (63) extents: 126
 * KiB with 2 KiB buffers, less a long key's name. A longer string (up to
 * KV_STRING_MAX, Redis's 512 MiB) is cut into chunk entries
 *
 *   [0xFF][id BE64]['c'][end offset BE64]  ->  up to 63 extents
 *
 * keyed by where each one ends, so the chunk holding byte x is the first
 * at or after end x + 1 (one descent), and a walk from there reads the
 * rest in order. The key's own entry holds the record {id, length} with
 * the type bits KV_TAG_BIG; callers see a string (kv_obj.big).
 *
 * Writing one (kv_writer): the id's grave [0xFE]['c'][id] first, then the
 * chunks as they fill (each a body of 32 buffers: held where the bytes
 * landed, zero copy, with room left for reads that do not fill a buffer
 * before the body falls back to copying), then the key's record in one
 * group with the grave's delete (kv_put_big). So after a crash anywhere
 * the key is its old value or the new one whole, and chunks without a
 * key are under a grave, which the sweeper deletes like a dropped
 * collection's members; DEL, an overwrite and expiry bury the id the same
 * way. While a write is in progress its id is in kv->writing: the sweeper
 * leaves its grave alone and FLUSHALL buries databases instead of
 * clearing the tree (which would take its chunks).
 *
 * Reading (kv_value_each): a cursor over the chunks from the one holding
 * the first byte wanted; GET sends each chunk's extents as they are.
 * Nothing here copies a whole string into DRAM: SETRANGE rewrites only the
 * chunks it touches, one at a time.
 *
 * Elements (kv.h, "elements"): a hash field's value or a list element too
 * long for its entry is chunks of the same kind under an id of its own,
 * its member entry the record {id, length} tagged KV_TAG_BIG; the readers
 * above serve it (kv_elem_each), and whoever removes it buries the id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* Buffers per chunk: half an entry's extents, so a chunk's reads stay
 * held (zero copy) even when they fill under half a buffer each. */
#define KV_CHUNK_BUFS 32u

static uint32_t buf_size(const struct kv *kv)
{
	return paste_store_geom(kv->store)->buf_size;
}

static uint32_t chunk_key(uint8_t *out, uint64_t id, uint64_t end)
{
	uint32_t n = kv_member_prefix(out, id, KV_CHUNK);
	for (int i = 7; i >= 0; i--, end >>= 8)
		out[n + (uint32_t)i] = (uint8_t)end;
	return n + 8;
}

/* ---- writes in progress ---------------------------------------------- */

bool kv_writing(const struct kv *kv, uint64_t id)
{
	for (uint32_t i = 0; i < kv->nwriting; i++)
		if (kv->writing[i] == id)
			return true;
	return false;
}

static int writing_add(struct kv *kv, uint64_t id)
{
	if (kv->nwriting == kv->capwriting) {
		uint32_t cap = kv->capwriting ? 2 * kv->capwriting : 8;
		uint64_t *p = realloc(kv->writing, sizeof(*p) * cap);
		if (!p)
			return -ENOMEM;
		kv->writing = p;
		kv->capwriting = cap;
	}
	kv->writing[kv->nwriting++] = id;
	return 0;
}

static void writing_del(struct kv *kv, uint64_t id)
{
	for (uint32_t i = 0; i < kv->nwriting; i++)
		if (kv->writing[i] == id) {
			kv->writing[i] = kv->writing[--kv->nwriting];
			return;
		}
}

/* A fresh id with its grave written (durable before any chunk of it). */
static int new_chunked(struct kv *kv, uint64_t *id)
{
	*id = kv_new_id(kv);
	uint8_t g[16];
	int r = kv_tree_set(kv, g, kv_grave_key(g, KV_GRAVE_COLL, *id));
	if (r == 0 && (r = writing_add(kv, *id)) != 0)
		kv->sweep_due = true;
	return r;
}

/* The write of id ended (put, or given up: its grave is the sweeper's). */
static void chunked_done(struct kv *kv, uint64_t id, bool given_up)
{
	writing_del(kv, id);
	if (given_up)
		kv->sweep_due = true;
}

static int put_chunk(struct kv *kv, uint64_t id, uint64_t end, const struct paste_extent *ext,
		     uint32_t n)
{
	uint8_t t[32];
	return kv_tree_put(kv, t, chunk_key(t, id, end), ext, n, KV_TAG_BIG);
}

/* ---- the writer ------------------------------------------------------- */

static int next_body(struct kv *kv, struct kv_writer *w)
{
	uint64_t c = (uint64_t)KV_CHUNK_BUFS * buf_size(kv);
	uint64_t l = w->len - w->at < c ? w->len - w->at : c;
	kv_admit(kv, l);
	return paste_body_begin(&w->body, &kv->bc, kv->store, l);
}

/* A value of len bytes may be written at all: 0, -EFBIG over --max-value,
 * -ENOSPC when it is more than the whole store holds. */
static int may_write(const struct kv *kv, uint64_t len)
{
	const struct paste_store_geom *g = paste_store_geom(kv->store);
	if (len > kv->max_value)
		return -EFBIG;
	return len / g->buf_size + kv_reserve(kv) >= g->nbufs ? -ENOSPC : 0;
}

int kv_writer_begin(struct kv *kv, struct kv_writer *w, uint64_t len)
{
	int r = may_write(kv, len);
	if (r)
		return r;
	kv_writer_idle(w);
	w->len = w->left = len;
	if (len <= paste_body_max(&kv->bc, kv->store)) {
		kv_admit(kv, len);
		return paste_body_begin(&w->body, &kv->bc, kv->store, len) ? -EFBIG : 0;
	}
	r = new_chunked(kv, &w->id);
	if (r) {
		w->id = 0;
		w->len = w->left = 0;
		return r;
	}
	return next_body(kv, w) ? -EFBIG : 0;
}

/* The chunk being gathered is whole: it becomes an entry. */
static int flush_chunk(struct kv *kv, struct kv_writer *w)
{
	int r = put_chunk(kv, w->id, w->at + w->body.len, w->body.ext, w->body.n);
	w->at += w->body.len;
	paste_body_release(&w->body, kv->store);    /* the tree took its own references */
	if (r == 0 && w->at < w->len && next_body(kv, w))
		r = -EFBIG;
	return r;
}

static int fail(struct kv *kv, struct kv_writer *w, int r)
{
	if (!w->err)
		w->err = r;
	paste_body_release(&w->body, kv->store);
	return w->err;
}

/* Add len bytes: of event ev from off (held), or at p (copied). */
static int add(struct kv *kv, struct kv_writer *w, struct paste_port *pt,
	       const struct paste_event *ev, uint32_t off, const uint8_t *p, uint64_t len)
{
	if (len > w->left)
		return -EINVAL;
	while (len) {
		if (w->err) {
			w->left -= len;
			return w->err;
		}
		uint64_t take = len < w->body.left ? len : w->body.left;
		int r = ev ? paste_body_feed(&w->body, &kv->bc, pt, ev, off, (uint32_t)take)
			   : paste_body_copy(&w->body, &kv->bc, kv->store, p, take);
		w->left -= take;
		len -= take;
		off += (uint32_t)take;
		if (p)
			p += take;
		if (r || w->body.error) {
			/* The store went below its reserve: make room for the
			 * writes after this one; this one is refused. */
			kv_make_room(kv, w->len - w->at);
			fail(kv, w, -ENOSPC);
			continue;
		}
		if (w->id && !w->body.left && (r = flush_chunk(kv, w)) != 0)
			fail(kv, w, r);
	}
	return w->err;
}

int kv_writer_feed(struct kv *kv, struct kv_writer *w, struct paste_port *pt,
		   const struct paste_event *ev, uint32_t off, uint32_t len)
{
	return add(kv, w, pt, ev, off, NULL, len);
}

int kv_writer_copy(struct kv *kv, struct kv_writer *w, const void *p, uint64_t len)
{
	return add(kv, w, NULL, NULL, 0, p, len);
}

int kv_writer_put(struct kv *kv, struct kv_writer *w, struct kv_key *k, int64_t expire_ms,
		  bool *created)
{
	int r = w->err ? w->err : w->left ? -EINVAL : 0;
	if (!w->id) {
		if (r == 0)
			r = kv_put_body(kv, k, &w->body, expire_ms, created);
		else
			paste_body_release(&w->body, kv->store);
		kv_writer_idle(w);
		return r;
	}
	if (r == 0)
		r = kv_put_big(kv, k, w->id, w->len, expire_ms, created);
	paste_body_release(&w->body, kv->store);
	chunked_done(kv, w->id, r != 0);
	kv_writer_idle(w);
	return r;
}

void kv_writer_drop(struct kv *kv, struct kv_writer *w)
{
	paste_body_release(&w->body, kv->store);
	if (w->id)
		chunked_done(kv, w->id, true);
	kv_writer_idle(w);
}

/* ---- a string of extents too long for one entry with its name ---------- */

/* Bytes of ext[0..n). */
static uint64_t ext_bytes(const struct paste_extent *ext, uint32_t n)
{
	uint64_t l = 0;
	for (uint32_t i = 0; i < n; i++)
		l += ext[i].len;
	return l;
}

/* Chunks of up to 63 of ext's extents after byte `at` of chunked string
 * id: the new end. */
static int put_extents(struct kv *kv, uint64_t id, uint64_t at, const struct paste_extent *ext,
		       uint32_t n, uint64_t *end)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t k = n - i < PASTE_BTREE_MAX_EXTENTS ? n - i : PASTE_BTREE_MAX_EXTENTS;
		at += ext_bytes(ext + i, k);
		int r = put_chunk(kv, id, at, ext + i, k);
		if (r)
			return r;
		i += k;
	}
	*end = at;
	return 0;
}

int kv_put_chunks(struct kv *kv, struct kv_key *k, const struct paste_extent *ext, uint32_t n,
		  int64_t expire_ms, bool *created)
{
	uint64_t id, len;
	int r = new_chunked(kv, &id);
	if (r)
		return r;
	r = put_extents(kv, id, 0, ext, n, &len);
	if (r == 0)
		r = kv_put_big(kv, k, id, len, expire_ms, created);
	chunked_done(kv, id, r != 0);
	return r;
}

/* ---- elements in chunks ------------------------------------------------ */

int kv_elem_put_far(struct kv *kv, struct kv_key *mk, const void *val, uint64_t len)
{
	uint64_t id, step = (uint64_t)KV_CHUNK_BUFS * buf_size(kv);
	int r = may_write(kv, len);
	if (r || (r = new_chunked(kv, &id)) != 0)
		return r;
	/* The chunks, copied to the append point (the bytes are a gathered
	 * command's), then the record and the grave's delete in one group:
	 * a crash before it leaves the chunks to the sweeper. */
	for (uint64_t at = 0; r == 0 && at < len;) {
		uint64_t l = len - at < step ? len - at : step;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n = 0;
		r = kv_copy_in(kv, (const uint8_t *)val + at, l, ext, PASTE_BTREE_MAX_EXTENTS, &n);
		if (r == 0)
			r = put_chunk(kv, id, at + l, ext, n);
		for (uint32_t i = 0; i < n; i++)
			paste_store_unref(kv->store, ext[i].buf, false);   /* the tree took its own */
		at += l;
	}
	uint8_t gk[16];
	struct paste_extent ext[1];
	uint32_t n = 0;
	if (r == 0)
		r = kv_big_record(kv, id, len, ext, &n);
	if (r == 0 && (r = kv_begin(kv)) == 0) {
		r = mk->t[9] == 'l' ? kv_db_far_lists(kv) : 0;     /* KV_LIST_ELEM */
		if (r == 0)
			r = kv_member_put_tag(kv, mk, KV_TAG_BIG, ext, n);
		if (r == 0)
			r = kv_tree_del(kv, gk, kv_grave_key(gk, KV_GRAVE_COLL, id));
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
	}
	if (n)
		paste_store_unref(kv->store, ext[0].buf, false);
	chunked_done(kv, id, r != 0);
	return r;
}

int kv_elem_bury(struct kv *kv, uint64_t big)
{
	uint8_t g[16];
	int r = kv_tree_set(kv, g, kv_grave_key(g, KV_GRAVE_COLL, big));
	if (r == 0)
		kv->sweep_due = true;
	return r;
}

struct cmp_to {
	const struct kv *kv;
	const uint8_t *p;               /* the bytes still to compare */
};

/* Bytes [skip, skip + len) of ext[0..n) against c->p, where they lie. */
static int cmp_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		     uint64_t len)
{
	struct cmp_to *c = arg;
	for (uint32_t i = 0; i < n && len; i++) {
		if (skip >= ext[i].len) {
			skip -= ext[i].len;
			continue;
		}
		uint64_t k = ext[i].len - skip < len ? ext[i].len - skip : len;
		if (memcmp(paste_store_buf(c->kv->store, ext[i].buf) + ext[i].off + skip, c->p, k) != 0)
			return 1;
		c->p += k;
		len -= k;
		skip = 0;
	}
	return len != 0;
}

bool kv_elem_equal(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint64_t vlen,
		   uint64_t big, const void *p, size_t plen)
{
	if (vlen != plen)
		return false;
	struct cmp_to c = { kv, p };
	return kv_elem_each(kv, ext, n, vlen, big, 0, vlen, cmp_piece, &c) == 0;
}

/* ---- reading ---------------------------------------------------------- */

int kv_value_each(const struct kv *kv, const struct kv_obj *o, uint64_t from, uint64_t len,
		  kv_extents_fn fn, void *arg)
{
	return kv_elem_each(kv, o->ext, o->n, o->len, o->big, from, len, fn, arg);
}

int kv_elem_each(const struct kv *kv, const struct paste_extent *vext, uint32_t vn, uint64_t vlen,
		 uint64_t big, uint64_t from, uint64_t len, kv_extents_fn fn, void *arg)
{
	if (from >= vlen)
		return 0;
	if (len > vlen - from)
		len = vlen - from;
	if (!len)
		return 0;
	if (!big)
		return fn(arg, vext, vn, from, len);
	uint8_t t[32], pfx[10];
	uint32_t plen = kv_member_prefix(pfx, big, KV_CHUNK);
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, t, chunk_key(t, big, from + 1));
	const uint8_t *key;
	uint32_t klen, n, clen;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint64_t at = from, stop = from + len;
	while (at < stop) {
		if (paste_btree_cursor_next(&c, &key, &klen, ext, &n, &clen) != 1 || klen != plen + 8 ||
		    memcmp(key, pfx, plen) != 0)
			return -EBADMSG;                  /* a chunk missing */
		uint64_t end = kv_be64(key + plen), start = end - clen;
		if (clen > end || start > at || end <= at)
			return -EBADMSG;                  /* chunks that do not follow on */
		uint64_t l = (end < stop ? end : stop) - at;
		int r = fn(arg, ext, n, at - start, l);
		if (r)
			return r;
		at += l;
	}
	return 0;
}

bool kv_elem_kind(const uint8_t *t, uint32_t tlen)
{
	/* KV_HASH_FIELD, KV_LIST_ELEM (kv_hash.h, kv_list.h) */
	return tlen >= 10 && t[0] == KV_PFX_MEMBER && (t[9] == 'f' || t[9] == 'l');
}

int kv_elem_decode(const struct kv *kv, uint8_t tag, const struct paste_extent *ext, uint32_t n,
		   uint32_t *len, uint64_t *big)
{
	*big = 0;
	if ((tag & KV_TAG_TYPE) != KV_TAG_BIG)
		return 0;
	uint8_t rec[16];
	if (*len != sizeof(rec) || paste_store_read(kv->store, ext, n, 0, rec, sizeof(rec)) != sizeof(rec))
		return -EBADMSG;
	*big = kv_be64(rec);
	uint64_t l = kv_be64(rec + 8);
	if (!*big || l > KV_STRING_MAX)
		return -EBADMSG;
	*len = (uint32_t)l;
	return 0;
}

int kv_elem_entry(const struct kv *kv, uint8_t tag, const struct paste_extent *ext, uint32_t n,
		  uint32_t *at, uint32_t *len, uint64_t *big)
{
	uint32_t next = 0, l = 0;
	if ((tag & KV_TAG_LONG) && kv_long_span(kv, ext, n, &next, &l))
		return -EBADMSG;
	for (uint32_t i = 0; i < next; i++)
		*len -= ext[i].len;
	*at = next;
	return kv_elem_decode(kv, tag, ext + next, n - next, len, big);
}

struct read_to {
	const struct kv *kv;
	uint8_t *out;
	size_t got;
};

static int read_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		      uint64_t len)
{
	struct read_to *rt = arg;
	rt->got += paste_store_read(rt->kv->store, ext, n, skip, rt->out + rt->got, (size_t)len);
	return 0;
}

size_t kv_elem_read(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint64_t vlen,
		    uint64_t big, uint64_t from, void *out, size_t cap)
{
	if (!big)
		return paste_store_read(kv->store, ext, n, from, out, cap);
	if (from >= vlen)
		return 0;
	struct read_to rt = { kv, out, 0 };
	kv_elem_each(kv, ext, n, vlen, big, from, cap < vlen - from ? cap : vlen - from, read_piece, &rt);
	return rt.got;
}

size_t kv_value_read(const struct kv *kv, const struct kv_obj *o, uint64_t from, void *out,
		     size_t cap)
{
	return kv_elem_read(kv, o->ext, o->n, o->len, o->big, from, out, cap);
}

/* ---- changes in place -------------------------------------------------- */

/* A string in one entry over the limit of one entry becomes one in
 * chunks (its extents reused, no byte copied): its id, or 0 when o is
 * NULL or in chunks already; the caller's group is open. */
static int to_chunks(struct kv *kv, const struct kv_obj *o, uint64_t *id)
{
	*id = o ? o->big : 0;
	if (*id)
		return 0;
	int r = new_chunked(kv, id);
	uint64_t end = 0;
	if (r == 0 && o)
		r = put_extents(kv, *id, 0, o->ext, o->n, &end);
	return r;
}

/* The chunk holding byte x - 1 of id's string (the last one when x is
 * its length): its end, extents and length. */
static int chunk_ending(struct kv *kv, uint64_t id, uint64_t x, uint64_t *end,
			struct paste_extent *ext, uint32_t *n, uint32_t *len)
{
	uint8_t t[32], pfx[10];
	uint32_t plen = kv_member_prefix(pfx, id, KV_CHUNK);
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, t, chunk_key(t, id, x));
	const uint8_t *key;
	uint32_t klen;
	if (paste_btree_cursor_next(&c, &key, &klen, ext, n, len) != 1 || klen != plen + 8 ||
	    memcmp(key, pfx, plen) != 0)
		return -EBADMSG;
	*end = kv_be64(key + plen);
	return 0;
}

/* Adjacent extents of one buffer become one. */
static uint32_t coalesce(struct paste_extent *ext, uint32_t n)
{
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (m && ext[m - 1].buf == ext[i].buf && ext[m - 1].off + ext[m - 1].len == ext[i].off)
			ext[m - 1].len += ext[i].len;
		else
			ext[m++] = ext[i];
	}
	return m;
}

/* Chunked string id of length len gets ext[0..n) at its end: the last
 * chunk takes what its extents have room for (so small appends do not
 * make a chunk each), the rest new chunks. */
static int append_chunks(struct kv *kv, uint64_t id, uint64_t len, const struct paste_extent *ext,
			 uint32_t n, uint64_t *newlen)
{
	if (!n) {
		*newlen = len;
		return 0;
	}
	struct paste_extent last[2 * PASTE_BTREE_MAX_EXTENTS];
	uint32_t ln = 0, llen = 0;
	uint64_t end = 0;
	int r = len ? chunk_ending(kv, id, len, &end, last, &ln, &llen) : 0;
	if (r)
		return r;
	if (len && end != len)
		return -EBADMSG;
	uint32_t take = n < PASTE_BTREE_MAX_EXTENTS ? n : PASTE_BTREE_MAX_EXTENTS;
	memcpy(last + ln, ext, sizeof(*ext) * take);
	uint32_t m = coalesce(last, ln + take);
	uint64_t at = len - llen;
	if (len && m <= PASTE_BTREE_MAX_EXTENTS) {
		/* The last chunk grows: its entry moves to its new end. */
		uint8_t t[32];
		uint64_t grown = at + ext_bytes(last, m);
		if ((r = put_chunk(kv, id, grown, last, m)) != 0 ||
		    (r = kv_tree_del(kv, t, chunk_key(t, id, len))) != 0)
			return r;
		ext += take;
		n -= take;
		len = grown;
	}
	return put_extents(kv, id, len, ext, n, newlen);
}

int kv_value_append(struct kv *kv, struct kv_key *k, const struct kv_obj *o,
		    const struct paste_extent *ext, uint32_t n)
{
	uint64_t olen = o ? o->len : 0, add_len = ext_bytes(ext, n);
	if (olen + add_len > kv->max_value)
		return -EFBIG;
	if (!o || !o->big) {
		/* One entry still, when its extents and the name fit. */
		struct paste_extent all[2 * PASTE_BTREE_MAX_EXTENTS];
		uint32_t on = o ? o->n : 0;
		if (on + n <= 2 * PASTE_BTREE_MAX_EXTENTS) {
			if (on)
				memcpy(all, o->ext, sizeof(*all) * on);
			memcpy(all + on, ext, sizeof(*all) * n);
			uint32_t m = coalesce(all, on + n);
			if (m <= PASTE_BTREE_MAX_EXTENTS)
				return kv_put(kv, k, KV_STRING, all, m, KV_KEEP_TTL, NULL);
		}
	}
	int r = kv_begin(kv);
	if (r)
		return r;
	uint64_t id, len = olen;
	bool fresh = !o || !o->big;
	r = to_chunks(kv, o, &id);
	if (r == 0)
		r = append_chunks(kv, id, olen, ext, n, &len);
	if (r == 0)
		r = kv_put_big(kv, k, id, len, KV_KEEP_TTL, NULL);
	if (r == 0)
		r = kv_commit(kv);
	else
		kv_abort(kv);
	if (fresh && id)
		chunked_done(kv, id, r != 0);
	return r;
}

/* len bytes copied to fresh buffers, at most 62 at a time, each piece
 * appended as extents. */
int kv_value_append_bytes(struct kv *kv, struct kv_key *k, const struct kv_obj *o, const void *p,
			  uint64_t len)
{
	uint64_t olen = o ? o->len : 0;
	if (olen + len > kv->max_value)
		return -EFBIG;
	if (!len)
		return o ? 0 : kv_put_bytes(kv, k, KV_STRING, "", 0, KV_KEEP_TTL, NULL);
	if (!o || !o->big) {
		/* Small enough to rebuild in one entry: as SETRANGE at the end. */
		if (olen + len <= (uint64_t)(PASTE_BTREE_MAX_EXTENTS - 1) * buf_size(kv))
			return kv_value_setrange(kv, k, o, olen, p, len);
	}
	struct kv_writer *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	int r = kv_begin(kv);
	struct kv_obj cur;
	if (o)
		cur = *o;
	const struct kv_obj *now = o;
	const uint8_t *src = p;
	uint64_t piece = (uint64_t)(PASTE_BTREE_MAX_EXTENTS - 1) * buf_size(kv);
	for (uint64_t at = 0; r == 0 && at < len; at += piece) {
		uint64_t l = len - at < piece ? len - at : piece;
		kv_writer_idle(w);
		if ((r = paste_body_begin(&w->body, &kv->bc, kv->store, l)) != 0 ||
		    (r = paste_body_copy(&w->body, &kv->bc, kv->store, src + at, l)) != 0 || w->body.error) {
			r = -ENOSPC;
		} else if ((r = kv_value_append(kv, k, now, w->body.ext, w->body.n)) == 0) {
			r = kv_lookup(kv, k, &cur, false);
			now = &cur;
		}
		paste_body_release(&w->body, kv->store);
	}
	if (r == 0)
		r = kv_commit(kv);
	else
		kv_abort(kv);
	free(w);
	return r;
}

/* SETRANGE within a string in one entry that stays one: rebuilt in DRAM
 * (at most an entry's worth) and written densely. */
static int setrange_small(struct kv *kv, struct kv_key *k, const struct kv_obj *o, uint64_t off,
			  const void *p, uint64_t len, uint64_t nlen)
{
	uint8_t small[KV_PACK_MAX];
	uint8_t *b = nlen <= sizeof(small) ? small : malloc(nlen);
	if (!b)
		return -ENOMEM;
	uint64_t olen = o ? o->len : 0;
	if (olen)
		kv_value_read(kv, o, 0, b, olen);
	if (off > olen)
		memset(b + olen, 0, off - olen);
	if (p)
		memcpy(b + off, p, len);
	else
		memset(b + off, 0, len);
	int r = kv_put_bytes(kv, k, KV_STRING, b, nlen, KV_KEEP_TTL, NULL);
	if (b != small)
		free(b);
	return r;
}

/* Bytes [off, off + len) of chunked string id (all inside it) become
 * p[0..len) (NULL: zeros): each chunk they touch is read into buf (an
 * entry's worth), patched and written again at the same end. */
static int patch_chunks(struct kv *kv, uint64_t id, uint64_t off, const uint8_t *p, uint64_t len,
			uint8_t *buf)
{
	while (len) {
		uint64_t end;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, clen;
		int r = chunk_ending(kv, id, off + 1, &end, ext, &n, &clen);
		if (r)
			return r;
		uint64_t start = end - clen, l = end - off < len ? end - off : len;
		paste_store_read(kv->store, ext, n, 0, buf, clen);
		if (p)
			memcpy(buf + (off - start), p, l);
		else
			memset(buf + (off - start), 0, l);
		struct paste_extent nx[PASTE_BTREE_MAX_EXTENTS];
		uint32_t nn = 0;
		r = paste_append_copy(kv->store, &kv->app, buf, clen, kv_reserve(kv), nx,
				      PASTE_BTREE_MAX_EXTENTS, &nn);
		if (r == 0) {
			r = put_chunk(kv, id, end, nx, nn);
			for (uint32_t i = 0; i < nn; i++)
				paste_store_unref(kv->store, nx[i].buf, false);
		}
		if (r)
			return r == -E2BIG ? -EFBIG : r;
		off += l;
		len -= l;
		if (p)
			p += l;
	}
	return 0;
}

int kv_value_setrange(struct kv *kv, struct kv_key *k, const struct kv_obj *o, uint64_t off,
		      const void *p, uint64_t len)
{
	uint64_t olen = o ? o->len : 0, nlen = off + len > olen ? off + len : olen;
	if (nlen > kv->max_value || off + len < off)
		return -EFBIG;
	if (!len)
		return 0;
	uint32_t bs = buf_size(kv);
	/* The bytes it adds (a gap of zeros too) must fit the free buffers:
	 * refused at once, not after writing most of them in a group. */
	uint64_t grow = nlen - olen, need = grow / bs + 2 + kv_reserve(kv);
	if (grow && paste_store_nfree(kv->store) < need &&
	    (!kv_make_room(kv, grow) || paste_store_nfree(kv->store) < need))
		return -ENOSPC;
	if ((!o || !o->big) && nlen <= (uint64_t)(PASTE_BTREE_MAX_EXTENTS - 1) * bs)
		return setrange_small(kv, k, o, off, p, len, nlen);
	uint8_t *buf = malloc((size_t)PASTE_BTREE_MAX_EXTENTS * bs);
	if (!buf)
		return -ENOMEM;
	int r = kv_begin(kv);
	uint64_t id = 0, len_now = olen;
	bool fresh = !o || !o->big;
	if (r == 0)
		r = to_chunks(kv, o, &id);
	/* The part inside the string: its chunks patched. */
	uint64_t inside = off < olen ? (off + len < olen ? len : olen - off) : 0;
	if (r == 0 && inside)
		r = patch_chunks(kv, id, off, p, inside, buf);
	/* The part past its end (and the gap before it): new bytes in
	 * buffers of their own, appended an entry's worth at a time. */
	uint64_t from = olen > off ? olen : off, piece = (uint64_t)(PASTE_BTREE_MAX_EXTENTS - 1) * bs;
	for (uint64_t at = olen; r == 0 && at < nlen;) {
		uint64_t l = nlen - at < piece ? nlen - at : piece;
		memset(buf, 0, l);
		if (p && at + l > from) {
			uint64_t s = at > from ? at : from;
			memcpy(buf + (s - at), (const uint8_t *)p + (s - off), at + l - s);
		}
		struct paste_extent nx[PASTE_BTREE_MAX_EXTENTS];
		uint32_t nn = 0;
		r = paste_append_copy(kv->store, &kv->app, buf, l, kv_reserve(kv), nx,
				      PASTE_BTREE_MAX_EXTENTS, &nn);
		if (r == 0) {
			r = append_chunks(kv, id, at, nx, nn, &len_now);
			for (uint32_t i = 0; i < nn; i++)
				paste_store_unref(kv->store, nx[i].buf, false);
		}
		at += l;
	}
	if (r == 0)
		r = kv_put_big(kv, k, id, nlen, KV_KEEP_TTL, NULL);
	if (r == 0)
		r = kv_commit(kv);
	else
		kv_abort(kv);
	if (fresh && id)
		chunked_done(kv, id, r != 0);
	free(buf);
	return r == -E2BIG ? -EFBIG : r;
}
