/*
 * kv_list.c - lists over the typed core's members (kv_list.h).
 *
 * What one change writes (records of the log):
 *   a push onto a list that exists      the element, then the record
 *   a push of k elements                 k elements, then the record once
 *   a push that makes a new list         the elements, the record, COMMIT
 *   a pop (k elements, some left)        the record, then one delete (a
 *                                        range delete per 256 elements)
 *   a pop that empties the list          the key's delete and its grave,
 *                                        COMMIT (the sweeper deletes the
 *                                        elements later)
 *   LSET                                 the element's entry
 *   LMOVE, LINSERT, LREM                 one group: every entry it moves
 *                                        or deletes, the record(s), COMMIT
 *
 * Why no group for a push or a pop of one list: the record decides what
 * the list is, and positions outside [head, tail) are never read. A push
 * whose record did not reach the log before a crash left entries outside
 * the range, invisible; the next push at that end writes the same
 * position again (the tree replaces it), or the sweeper deletes it with
 * the list. A pop's record goes first, so its entries are outside the
 * range before they are deleted. The log is durable in order within a
 * lane, so after a crash the list is the one some prefix of these writes
 * made: all of a change or none. A group would add a COMMIT record and
 * an undo copy per change to every push and pop.
 */
#include <errno.h>
#include <string.h>

#include "kv_list.h"

/* ---- positions ---------------------------------------------------------- */

#define POS_KEY 18u   /* a position's tree key: [0xFF][id]['l'][pos] */

void kv_list_pos_key(struct kv_key *mk, uint64_t id, int64_t pos)
{
	uint64_t v = (uint64_t)pos ^ (1ull << 63);     /* ordered as numbers */
	mk->db = 0;
	mk->longkey = false;
	kv_member_prefix(mk->t, id, KV_LIST_ELEM);
	for (int i = 17; i >= 10; i--, v >>= 8)
		mk->t[i] = (uint8_t)v;
	mk->tlen = POS_KEY;
	mk->p = mk->t + 10;
	mk->len = 8;
}

bool kv_list_elem_key(const uint8_t *t, uint32_t tlen)
{
	return tlen == POS_KEY && t[0] == KV_PFX_MEMBER && t[9] == KV_LIST_ELEM;
}

static int64_t pos_of(const uint8_t *t)
{
	return (int64_t)(kv_be64(t + 10) ^ (1ull << 63));
}

static void touched(struct kv *kv, struct kv_list *l)
{
	kv_touched(kv, &l->key, KV_TOUCH_WRITTEN);
}

/* ---- the record --------------------------------------------------------- */

int kv_list_open(struct kv *kv, struct kv_list *l, bool read)
{
	l->depth = 0;
	l->group = l->dirty = false;
	if (kv_lookup(kv, &l->key, &l->o, read))
		return -ENOENT;
	if (l->o.type != KV_LIST)
		return -EMEDIUMTYPE;
	l->stored = true;
	l->slot = INT64_MIN;
	return 0;
}

void kv_list_new(struct kv *kv, struct kv_list *l)
{
	kv_coll_new(kv, &l->o, KV_LIST);
	l->stored = false;
	l->slot = INT64_MIN;
	l->depth = 0;
	l->group = l->dirty = false;
}

/* The record as the DRAM copy says: written (the key's deadline kept), or
 * the key deleted when no element is left. */
static int save(struct kv *kv, struct kv_list *l)
{
	int r = 0;
	if (l->o.coll.count == 0) {
		if (l->stored && (r = kv_remove(kv, &l->key)) >= 0) {
			l->stored = false;
			r = 0;
		}
	} else if ((r = kv_coll_save(kv, &l->key, &l->o)) == 0) {
		l->stored = true;
	}
	if (r == 0)
		l->dirty = false;
	return r;
}

int kv_list_begin(struct kv *kv, struct kv_list *l, uint64_t bytes, bool group)
{
	if (l->depth++)
		return 0;
	l->was = l->o.coll;
	l->was_stored = l->stored;
	l->dirty = false;
	/* A new list's elements lie under an id nothing names until its
	 * record is written: one group, so a crash leaves none of them. */
	l->group = group || !l->stored;
	if (!l->group)
		return 0;
	if (bytes)
		kv_admit(kv, bytes);     /* no room can be made inside a group */
	int r = kv_begin(kv);
	if (r) {
		l->depth = 0;
		l->group = false;
	}
	return r;
}

int kv_list_end(struct kv *kv, struct kv_list *l, int r)
{
	if (!l->depth || --l->depth)
		return r;
	if (r == 0 && l->dirty)
		r = save(kv, l);
	if (l->group) {
		if (r == 0)
			r = kv_commit(kv);
		else
			kv_abort(kv);
		l->group = false;
	}
	if (r) {
		l->o.coll = l->was;
		l->stored = l->was_stored;
		l->dirty = false;
	}
	return r;
}

/* ---- elements ----------------------------------------------------------- */

int kv_list_get_pos(struct kv *kv, uint64_t id, int64_t pos, struct paste_extent *ext,
		    uint32_t *n, uint32_t *len, uint64_t *big)
{
	struct kv_key mk;
	kv_list_pos_key(&mk, id, pos);
	return kv_elem_lookup(kv, &mk, ext, n, len, big);
}

int kv_list_get(struct kv *kv, const struct kv_list *l, uint64_t i, struct paste_extent *ext,
		uint32_t *n, uint32_t *len, uint64_t *big)
{
	if (i >= l->o.coll.count)
		return -ENOENT;
	int r = kv_list_get_pos(kv, l->o.coll.id, l->o.coll.head + (int64_t)i, ext, n, len, big);
	return r == -ENOENT ? -EBADMSG : r;
}

/* Position pos of l gets the value: extents (val NULL; big: a record of
 * a value in chunks, moved) or bytes. */
static int put_at(struct kv *kv, const struct kv_list *l, int64_t pos, const struct paste_extent *ext,
		  uint32_t n, bool big, const void *val, size_t len)
{
	struct kv_key mk;
	kv_list_pos_key(&mk, l->o.coll.id, pos);
	if (!val)
		return kv_member_put_tag(kv, &mk, big ? KV_TAG_BIG : 0, ext, n);
	if (len > kv_max_value(kv))
		return -EFBIG;
	return kv_member_put_bytes(kv, &mk, val, len);
}

/* One position more at end e: the one just written. */
static void grow(struct kv_list *l, enum kv_end e)
{
	struct kv_coll *c = &l->o.coll;
	if (e == KV_HEAD)
		c->head--;
	else
		c->tail++;
	c->count++;
	l->dirty = true;
}

static int push(struct kv *kv, struct kv_list *l, enum kv_end e, const struct paste_extent *ext,
		uint32_t n, bool big, const void *val, size_t len)
{
	const struct kv_coll *c = &l->o.coll;
	int r = put_at(kv, l, e == KV_HEAD ? c->head - 1 : c->tail, ext, n, big, val, len);
	if (r == 0)
		grow(l, e);
	return r;
}

int kv_list_push(struct kv *kv, struct kv_list *l, enum kv_end e, const struct paste_extent *ext,
		 uint32_t n, bool big)
{
	return push(kv, l, e, ext, n, big, NULL, 0);
}

int kv_list_push_bytes(struct kv *kv, struct kv_list *l, enum kv_end e, const void *p, size_t len)
{
	/* An empty element is an entry of no extents: "bytes" all the same. */
	return push(kv, l, e, NULL, 0, false, p ? p : "", len);
}

/* A gathered body as extents held or, small, as bytes packed; released. */
static int body_do(struct kv *kv, struct paste_body *b, int (*fn)(struct kv *, struct kv_list *, int64_t,
		   const struct paste_extent *, uint32_t, const void *, size_t), struct kv_list *l,
		   int64_t arg)
{
	int r;
	if (b->error) {
		/* Its bytes were dropped: the store was below its reserve.
		 * Make room for the next write; this one is refused. */
		kv_make_room(kv, b->len);
		r = -ENOSPC;
	} else if (b->len <= KV_PACK_MAX && b->n == 1) {
		r = fn(kv, l, arg, NULL, 0, paste_store_buf(kv->store, b->ext[0].buf) + b->ext[0].off,
		       b->ext[0].len);
	} else {
		r = fn(kv, l, arg, b->ext, b->n, NULL, 0);
	}
	paste_body_release(b, kv->store);
	return r;
}

static int push_fn(struct kv *kv, struct kv_list *l, int64_t e, const struct paste_extent *ext,
		   uint32_t n, const void *val, size_t len)
{
	return push(kv, l, (enum kv_end)e, ext, n, false, val ? val : (ext ? NULL : ""), len);
}

int kv_list_push_body(struct kv *kv, struct kv_list *l, enum kv_end e, struct paste_body *b)
{
	return body_do(kv, b, push_fn, l, e);
}

static int set_fn(struct kv *kv, struct kv_list *l, int64_t i, const struct paste_extent *ext,
		  uint32_t n, const void *val, size_t len)
{
	if (i < 0 || (uint64_t)i >= l->o.coll.count)
		return -ENOENT;
	/* An old value in chunks is buried with the put, in one group (not
	 * in the slot LINSERT opened: it holds a moved neighbour's copy). */
	struct paste_extent old[PASTE_BTREE_MAX_EXTENTS];
	uint32_t on, olen;
	uint64_t far = 0;
	if (kv->far_lists && l->o.coll.head + i != l->slot)
		kv_list_get(kv, l, (uint64_t)i, old, &on, &olen, &far);
	l->slot = INT64_MIN;
	int r = far ? kv_begin(kv) : 0;
	if (r)
		return r;
	r = put_at(kv, l, l->o.coll.head + i, ext, n, false, val ? val : (ext ? NULL : ""), len);
	if (far) {
		if (r == 0)
			r = kv_elem_bury(kv, far);
		r = r ? (kv_abort(kv), r) : kv_commit(kv);
	}
	if (r == 0 && !l->group)
		touched(kv, l);         /* one entry changed: no record to write */
	return r;
}

int kv_list_set(struct kv *kv, struct kv_list *l, uint64_t i, const struct paste_extent *ext,
		uint32_t n)
{
	return set_fn(kv, l, (int64_t)i, ext, n, NULL, 0);
}

int kv_list_set_bytes(struct kv *kv, struct kv_list *l, uint64_t i, const void *p, size_t len)
{
	return set_fn(kv, l, (int64_t)i, NULL, 0, p ? p : "", len);
}

int kv_list_set_body(struct kv *kv, struct kv_list *l, uint64_t i, struct paste_body *b)
{
	return body_do(kv, b, set_fn, l, (int64_t)i);
}

/* ---- taking and deleting ------------------------------------------------ */

int kv_list_take(struct kv *kv, struct kv_list *l, enum kv_end e, uint64_t k, int64_t *pos)
{
	struct kv_coll *c = &l->o.coll;
	if (!k || k > c->count)
		return -EINVAL;
	if (e == KV_HEAD) {
		*pos = c->head;
		c->head += (int64_t)k;
	} else {
		c->tail -= (int64_t)k;
		*pos = c->tail;
	}
	c->count -= k;
	l->dirty = true;
	/* Outside a group the record goes first: the elements are out of
	 * the list before their entries are deleted. */
	return l->group ? 0 : save(kv, l);
}

/* Delete the entries of positions [from, to) of id. */
static int del_range(struct kv *kv, uint64_t id, int64_t from, int64_t to)
{
	struct kv_key lo, hi;
	while (from < to) {
		int64_t end = to - from > PASTE_BTREE_RANGE_MAX ? from + PASTE_BTREE_RANGE_MAX : to;
		kv_list_pos_key(&lo, id, from);
		int r;
		if (end == from + 1) {
			r = kv_tree_del(kv, lo.t, lo.tlen);
			if (r == -ENOENT)
				r = 0;
		} else {
			kv_list_pos_key(&hi, id, end);
			r = paste_btree_delrange(kv->tree, lo.t, lo.tlen, hi.t, hi.tlen, NULL, NULL);
			if (r == -ENOSPC && !kv->group_depth && kv_make_room(kv, 0))
				r = paste_btree_delrange(kv->tree, lo.t, lo.tlen, hi.t, hi.tlen, NULL, NULL);
		}
		if (r)
			return r;
		from = end;
	}
	return 0;
}

int kv_list_drop(struct kv *kv, const struct kv_list *l, int64_t from, int64_t to)
{
	const struct kv_coll *c = &l->o.coll;
	if (c->count == 0)
		return 0;               /* the key goes: its grave takes them */
	/* Never a position the list holds now (LMOVE of a list onto itself
	 * may have written one again). */
	if (to <= c->head || from >= c->tail)
		return del_range(kv, c->id, from, to);
	int r = from < c->head ? del_range(kv, c->id, from, c->head) : 0;
	int r2 = to > c->tail ? del_range(kv, c->id, c->tail, to) : 0;
	return r ? r : r2;
}

int kv_list_bury(struct kv *kv, uint64_t id, int64_t from, int64_t to)
{
	struct kv_list_walk w;
	kv_list_walk_pos(kv, &w, id, from, to, false);
	int r = 0;
	while (r == 0 && kv_list_walk_next(kv, &w) == 1)
		if (w.big)
			r = kv_elem_bury(kv, w.big);
	return r;
}

int kv_list_trim(struct kv *kv, struct kv_list *l, uint64_t start, uint64_t stop)
{
	struct kv_coll *c = &l->o.coll;
	int64_t head = c->head, tail = c->tail;
	if (start > stop || start >= c->count) {
		c->head = c->tail;
		c->count = 0;
	} else {
		if (stop >= c->count)
			stop = c->count - 1;
		c->head = head + (int64_t)start;
		c->tail = head + (int64_t)stop + 1;
		c->count = stop - start + 1;
	}
	if (c->head == head && c->tail == tail)
		return 0;
	l->dirty = true;
	/* Elements in chunks among the trimmed: their graves go with the
	 * record, in one group (an emptied list's go with its grave). */
	bool far = kv->far_lists && c->count, g = far && !l->group;
	int r = g ? kv_begin(kv) : 0;
	if (r == 0 && !l->group)
		r = save(kv, l);
	if (r == 0 && far && (r = kv_list_bury(kv, c->id, head, c->head)) == 0)
		r = kv_list_bury(kv, c->id, c->tail, tail);
	if (g)
		r = r ? (kv_abort(kv), r) : kv_commit(kv);
	if (r)
		return r;
	(void)kv_list_drop(kv, l, head, c->head);    /* left outside: harmless */
	(void)kv_list_drop(kv, l, c->tail, tail);
	return 0;
}

/* ---- moves in the middle ------------------------------------------------ */

/* Element at position from moves to position to (a put of its extents:
 * no byte copied). */
static int move(struct kv *kv, const struct kv_list *l, int64_t to, const struct kv_list_walk *w)
{
	return put_at(kv, l, to, w->ext, w->n, w->big != 0, NULL, 0);
}

/* Elements [a, b) (indexes) move by one position (-1: toward the head,
 * walked forward; +1: toward the tail, walked back): each lands where its
 * neighbour was, already read. */
static int shift(struct kv *kv, const struct kv_list *l, uint64_t a, uint64_t b, int by)
{
	struct kv_list_walk w;
	const struct kv_coll *c = &l->o.coll;
	kv_list_walk_pos(kv, &w, c->id, c->head + (int64_t)a, c->head + (int64_t)b, by > 0);
	int g;
	while ((g = kv_list_walk_next(kv, &w)) == 1) {
		int r = move(kv, l, w.at + by, &w);
		if (r)
			return r;
	}
	return g;
}

int kv_list_open_slot(struct kv *kv, struct kv_list *l, uint64_t i)
{
	struct kv_coll *c = &l->o.coll;
	if (i > c->count)
		return -EINVAL;
	bool down = i <= c->count - i;          /* the head side is the shorter */
	int r = down ? shift(kv, l, 0, i, -1) : shift(kv, l, i, c->count, 1);
	if (r == 0) {
		grow(l, down ? KV_HEAD : KV_TAIL);
		l->slot = c->head + (int64_t)i;
	}
	return r;
}

int kv_list_remove_at(struct kv *kv, struct kv_list *l, const uint64_t *idx, uint64_t k)
{
	struct kv_coll *c = &l->o.coll;
	if (!k)
		return 0;
	if (k > c->count || idx[k - 1] >= c->count)
		return -EINVAL;
	int64_t head = c->head, tail = c->tail;
	/* Survivors to move: those after the first removed one (toward the
	 * head), or those before the last (toward the tail). */
	uint64_t up = (c->count - 1 - idx[0]) - (k - 1), down = idx[k - 1] - (k - 1);
	bool back = down < up;
	int r = 0, g = 0;
	if (c->count > k) {
		/* Walk from the first removed one toward the far end (or back
		 * from the last one); each survivor lands at `at`, the next
		 * place not yet filled, and the removed are skipped. */
		struct kv_list_walk w;
		uint64_t m = back ? k - 1 : 0;
		int64_t at = back ? head + (int64_t)idx[k - 1] : head + (int64_t)idx[0];
		if (back)
			kv_list_walk_pos(kv, &w, c->id, head, at + 1, true);
		else
			kv_list_walk_pos(kv, &w, c->id, at, tail, false);
		while (r == 0 && (g = kv_list_walk_next(kv, &w)) == 1) {
			uint64_t j = (uint64_t)(w.at - head);
			if (m < k && idx[m] == j) {        /* removed */
				if (w.big)
					r = kv_elem_bury(kv, w.big);
				if (back)
					m = m ? m - 1 : k;   /* k: none left */
				else
					m++;
				continue;
			}
			if (w.at != at)
				r = move(kv, l, at, &w);
			at += back ? -1 : 1;
		}
		if (r == 0 && g < 0)
			r = g;
		if (r == 0 && back) {
			c->head += (int64_t)k;
			r = del_range(kv, c->id, head, c->head);
		} else if (r == 0) {
			c->tail -= (int64_t)k;
			r = del_range(kv, c->id, c->tail, tail);
		}
	}
	if (r)
		return r;
	c->count -= k;
	if (c->count == 0)
		c->head = c->tail;
	l->dirty = true;
	return 0;
}

/* ---- walks -------------------------------------------------------------- */

void kv_list_walk_pos(struct kv *kv, struct kv_list_walk *w, uint64_t id, int64_t from, int64_t to,
		      bool back)
{
	struct kv_key k;
	kv_list_pos_key(&k, id, back ? to : from);   /* back: the greatest key below it */
	memcpy(w->prefix, k.t, sizeof(w->prefix));
	w->back = back;
	w->from = from;
	w->to = to;
	paste_btree_cursor_init(&w->c, kv->tree, k.t, k.tlen);
}

void kv_list_walk_init(struct kv *kv, const struct kv_list *l, struct kv_list_walk *w, uint64_t i)
{
	const struct kv_coll *c = &l->o.coll;
	kv_list_walk_pos(kv, w, c->id, c->head + (int64_t)(i < c->count ? i : c->count), c->tail,
			 false);
}

int kv_list_walk_next(struct kv *kv, struct kv_list_walk *w)
{
	if (w->from >= w->to)
		return 0;
	const uint8_t *t;
	uint32_t tlen;
	int g;
	if (w->back) {
		w->at = --w->to;
		g = paste_btree_cursor_prev(&w->c, &t, &tlen, w->ext, &w->n, &w->len);
	} else {
		w->at = w->from++;
		g = paste_btree_cursor_next(&w->c, &t, &tlen, w->ext, &w->n, &w->len);
	}
	if (g != 1 || tlen != 18 || memcmp(t, w->prefix, sizeof(w->prefix)) != 0 ||
	    pos_of(t) != w->at ||
	    kv_elem_decode(kv, paste_btree_cursor_attr(&w->c)->tag, w->ext, w->n, &w->len, &w->big))
		return -EBADMSG;
	return 1;
}
