/*
 * kv_stream.c - streams (kv_stream.h): the record, entries, trimming,
 * consumer groups, pending entries and consumers as member entries.
 *
 * What one change writes (each in one group with its COMMIT):
 *   XADD                 the entry, the record (count, last ID, added)
 *   XDEL of an entry     its delete, the record (count, largest deleted)
 *   a delivery           the pending entry, the consumer, the group
 * A trim deletes each entry it removes and writes the record once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_set.h"
#include "kv_stream.h"

static void be64_put(uint8_t *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

void kv_sid_put(uint8_t out[16], struct kv_sid id)
{
	be64_put(out, id.ms);
	be64_put(out + 8, id.seq);
}

struct kv_sid kv_sid_get(const uint8_t in[16])
{
	return (struct kv_sid){ kv_be64(in), kv_be64(in + 8) };
}

int kv_sid_fmt(char *out, struct kv_sid id)
{
	return sprintf(out, "%" PRIu64 "-%" PRIu64, id.ms, id.seq);
}

/* ---- the handle ---------------------------------------------------------- */

int kv_stream_open(struct kv *kv, struct kv_stream *s, bool read)
{
	s->batch = 0;
	s->node_max = 0;
	s->dirty = s->changed = s->deleted = false;
	if (kv_lookup(kv, &s->key, &s->o, read))
		return -ENOENT;
	if (s->o.type != KV_STREAM)
		return -EMEDIUMTYPE;
	s->stored = true;
	return 0;
}

void kv_stream_new(struct kv *kv, struct kv_stream *s)
{
	kv_coll_new(kv, &s->o, KV_STREAM);
	s->batch = 0;
	s->node_max = 0;
	s->dirty = s->changed = s->deleted = false;
	s->stored = false;
}

int kv_stream_begin(struct kv *kv, struct kv_stream *s, uint64_t bytes)
{
	int r = kv_coll_batch(kv, &s->batch, bytes);
	if (r)
		return r > 0 ? 0 : r;
	s->begun = s->o.coll;
	s->begun_stored = s->stored;
	s->dirty = s->changed = false;
	return 0;
}

/* The newest node emptied by deletions: Redis frees it, and the next
 * append opens another. Asked once, at the batch's end or the next
 * append, rather than after each deleted entry. */
static void settle_deleted(struct kv *kv, struct kv_stream *s)
{
	if (!s->deleted)
		return;
	s->deleted = false;
	struct kv_stream_walk w;
	kv_stream_walk_init(kv, &w, s->o.coll.id, (struct kv_sid){ UINT64_MAX, UINT64_MAX }, true);
	if (kv_stream_walk_next(kv, &w) != 1 || w.node != s->o.coll.node)
		s->o.coll.fill = UINT64_MAX;
}

int kv_stream_end(struct kv *kv, struct kv_stream *s, int r)
{
	if (!s->batch || --s->batch)
		return r;
	if (r == 0)
		settle_deleted(kv, s);
	s->deleted = false;
	if (r == 0 && (s->dirty || (!s->stored && s->changed))) {
		r = kv_coll_save(kv, &s->key, &s->o);       /* the key is touched there */
		if (r == 0)
			s->stored = true;
	} else if (r == 0 && s->changed) {
		kv_touched(kv, &s->key, KV_TOUCH_WRITTEN);
	}
	if (r == 0)
		return kv_commit(kv);
	kv_abort(kv);
	s->o.coll = s->begun;
	s->stored = s->begun_stored;
	return r;
}

/* ---- entries ------------------------------------------------------------- */

size_t kv_stream_fields_size(const struct paste_resp_arg *av, uint32_t n)
{
	size_t len = 4;
	for (uint32_t i = 0; i < 2 * n; i++)
		len += 4 + av[i].len;
	return len;
}

static void le32_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t le32_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void kv_stream_fields_encode(uint8_t *out, const struct paste_resp_arg *av, uint32_t n)
{
	le32_put(out, n);
	out += 4;
	for (uint32_t i = 0; i < 2 * n; i++) {
		le32_put(out, (uint32_t)av[i].len);
		if (av[i].len)
			memcpy(out + 4, av[i].p, av[i].len);
		out += 4 + av[i].len;
	}
}

int kv_stream_fields_decode(const uint8_t *p, size_t len, uint32_t *n, kv_stream_field_fn fn,
			    void *arg)
{
	if (len < 4)
		return -EBADMSG;
	uint32_t pairs = le32_get(p);
	size_t at = 4;
	for (uint32_t i = 0; i < pairs; i++) {
		const uint8_t *s[2];
		size_t l[2];
		for (int j = 0; j < 2; j++) {
			if (len - at < 4)
				return -EBADMSG;
			l[j] = le32_get(p + at);
			at += 4;
			if (len - at < l[j])
				return -EBADMSG;
			s[j] = p + at;
			at += l[j];
		}
		if (fn)
			fn(arg, i, s[0], l[0], s[1], l[1]);
	}
	if (at != len)
		return -EBADMSG;
	*n = pairs;
	return 0;
}

static void entry_key(const struct kv *kv, struct kv_key *mk, uint64_t coll, struct kv_sid id)
{
	uint8_t b[16];
	kv_sid_put(b, id);
	kv_member_key(kv, mk, coll, KV_STREAM_ENTRY, b, sizeof(b));
}

int kv_stream_put_entry(struct kv *kv, uint64_t coll, struct kv_sid id, const void *val,
			size_t vlen, uint64_t node)
{
	struct kv_key mk;
	entry_key(kv, &mk, coll, id);
	return kv_member_put_word(kv, &mk, val, vlen, node);
}

int kv_stream_append(struct kv *kv, struct kv_stream *s, struct kv_sid id, const void *val,
		     size_t vlen)
{
	int r = kv_stream_begin(kv, s, vlen);
	if (r)
		return r;
	settle_deleted(kv, s);
	struct kv_coll *c = &s->o.coll;
	uint64_t max = s->node_max ? s->node_max : 100;
	bool open = c->node && c->fill < max;       /* its newest node, unless full or freed */
	r = kv_stream_put_entry(kv, c->id, id, val, vlen, open ? c->node : c->node + 1);
	if (r == 0) {
		if (!open)
			c->node++, c->fill = 0;
		c->fill++;
		c->top_ms = id.ms, c->top_seq = id.seq;
		if (!c->count)
			c->head = (int64_t)c->node, c->tail = 1;       /* the oldest node too */
		else if (c->head == (int64_t)c->node)
			c->tail++;
		s->o.coll.count++;
		s->o.coll.added++;
		s->o.coll.last_ms = id.ms;
		s->o.coll.last_seq = id.seq;
		s->dirty = s->changed = true;
	}
	return kv_stream_end(kv, s, r);
}

int kv_stream_delete(struct kv *kv, struct kv_stream *s, struct kv_sid id)
{
	struct kv_key mk;
	entry_key(kv, &mk, s->o.coll.id, id);
	int r = kv_stream_begin(kv, s, 0);
	if (r)
		return r;
	int got = kv_member_remove(kv, &mk);
	if (got > 0) {
		s->o.coll.count--;
		s->o.coll.head = 0;             /* the oldest node's count: unknown */
		struct kv_sid del = { s->o.coll.del_ms, s->o.coll.del_seq };
		if (kv_sid_cmp(id, del) > 0) {
			s->o.coll.del_ms = id.ms;
			s->o.coll.del_seq = id.seq;
		}
		s->dirty = s->changed = s->deleted = true;
	}
	r = kv_stream_end(kv, s, got < 0 ? got : 0);
	return r ? r : got;
}

/* Extents' bytes into a malloc'd buffer. */
static int read_value(struct kv *kv, const struct paste_extent *ext, uint32_t n, uint32_t len,
		      uint8_t **val, size_t *vlen)
{
	*val = malloc(len ? len : 1);
	if (!*val)
		return -ENOMEM;
	*vlen = paste_store_read(kv->store, ext, n, 0, *val, len);
	return 0;
}

int kv_stream_get(struct kv *kv, const struct kv_stream *s, struct kv_sid id, uint8_t **val,
		  size_t *vlen)
{
	struct kv_key mk;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	entry_key(kv, &mk, s->o.coll.id, id);
	if (kv_member_lookup(kv, &mk, ext, &n, &len))
		return -ENOENT;
	return read_value(kv, ext, n, len, val, vlen);
}

/* The ID after id (false: none, id is the largest). */
static bool sid_next(struct kv_sid *id)
{
	if (++id->seq)
		return true;
	return ++id->ms != 0;
}

void kv_stream_walk_init(struct kv *kv, struct kv_stream_walk *w, uint64_t coll, struct kv_sid from,
			 bool back)
{
	uint8_t t[26];
	uint32_t tlen = kv_member_prefix(w->prefix, coll, KV_STREAM_ENTRY);
	memcpy(t, w->prefix, tlen);
	w->back = back;
	/* Back: the cursor starts below its key, so from the ID after from
	 * (or, from the largest ID, from the next kind). */
	if (back && !sid_next(&from)) {
		t[tlen - 1]++;
	} else {
		kv_sid_put(t + tlen, from);
		tlen += 16;
	}
	paste_btree_cursor_init(&w->c, kv->tree, t, tlen);
}

int kv_stream_walk_next(struct kv *kv, struct kv_stream_walk *w)
{
	(void)kv;
	const uint8_t *t;
	uint32_t tlen;
	int got = w->back ? paste_btree_cursor_prev(&w->c, &t, &tlen, w->ext, &w->n, &w->len)
			  : paste_btree_cursor_next(&w->c, &t, &tlen, w->ext, &w->n, &w->len);
	if (got != 1 || tlen != sizeof(w->prefix) + 16 ||
	    memcmp(t, w->prefix, sizeof(w->prefix)) != 0)
		return got < 0 ? got : 0;
	w->id = kv_sid_get(t + sizeof(w->prefix));
	const struct paste_btree_attr *a = paste_btree_cursor_attr(&w->c);
	w->node = a->has_word ? a->word : 0;
	return 1;
}

int kv_stream_edge(struct kv *kv, const struct kv_stream *s, bool last, struct kv_sid *id)
{
	if (!s->o.coll.count)
		return 0;
	struct kv_stream_walk w;
	kv_stream_walk_init(kv, &w, s->o.coll.id,
			    last ? (struct kv_sid){ UINT64_MAX, UINT64_MAX } : (struct kv_sid){ 0, 0 },
			    last);
	int r = kv_stream_walk_next(kv, &w);
	if (r == 1)
		*id = w.id;
	return r;
}

/* Delete the n oldest entries (whole: their node goes too, and when it is
 * the newest the next append opens another, as Redis frees the node;
 * not whole: the node stays, in Redis even with none of its entries
 * left). */
static int trim_first(struct kv *kv, struct kv_stream *s, uint64_t n, bool whole, uint64_t node)
{
	struct kv_stream_walk w;
	struct kv_coll *c = &s->o.coll;
	int r = 0;
	bool was = paste_btree_deleting(kv->tree, true);
	kv_stream_walk_init(kv, &w, c->id, (struct kv_sid){ 0, 0 }, false);
	for (uint64_t i = 0; i < n && (r = kv_stream_walk_next(kv, &w)) == 1; i++) {
		struct kv_key mk;
		entry_key(kv, &mk, c->id, w.id);
		if ((r = kv_member_remove(kv, &mk)) < 0)
			break;
		c->count--;
		s->dirty = s->changed = true;
	}
	paste_btree_deleting(kv->tree, was);
	if (c->head && (uint64_t)c->tail > n)
		c->tail -= (int64_t)n;
	else
		c->head = 0;
	if (whole && node && node == c->node)
		c->fill = UINT64_MAX;
	return r < 0 ? r : 0;
}

/* The entries of the oldest node: how many, its number, and with last
 * its last entry's ID. The record keeps the count (head: the node, tail:
 * its live entries; head 0: unknown), so a capped stream's XADD does not
 * walk a node to learn that nothing goes; a walk counts it when unknown.
 * An entry without a node is one of its own. */
static uint64_t first_node(struct kv *kv, struct kv_stream *s, uint64_t *node,
			   struct kv_sid *last)
{
	struct kv_coll *c = &s->o.coll;
	struct kv_stream_walk w;
	uint64_t k = 0, at = 0;
	if (c->head && !last) {
		*node = (uint64_t)c->head;
		return (uint64_t)c->tail;
	}
	kv_stream_walk_init(kv, &w, c->id, (struct kv_sid){ 0, 0 }, false);
	while (kv_stream_walk_next(kv, &w) == 1) {
		if (k && (w.node != at || !at))
			break;
		at = w.node;
		if (last)
			*last = w.id;
		k++;
	}
	if (at && k)
		c->head = (int64_t)at, c->tail = (int64_t)k;   /* written with the next change */
	/* Redis bounds a node by its last entry, deleted or not: the newest
	 * node's is the last one appended (XSETID moves the last ID, not it). */
	struct kv_sid top = { c->top_ms, c->top_seq };
	if (last && k && at == c->node && kv_sid_cmp(top, *last) > 0)
		*last = top;
	*node = at;
	return k;
}

uint64_t kv_stream_nodes(struct kv *kv, const struct kv_stream *s)
{
	struct kv_stream_walk w;
	uint64_t first, last;
	if (!s->o.coll.count)
		return 0;
	kv_stream_walk_init(kv, &w, s->o.coll.id, (struct kv_sid){ 0, 0 }, false);
	if (kv_stream_walk_next(kv, &w) != 1)
		return 0;
	first = w.node;
	kv_stream_walk_init(kv, &w, s->o.coll.id, (struct kv_sid){ UINT64_MAX, UINT64_MAX }, true);
	if (kv_stream_walk_next(kv, &w) != 1)
		return 0;
	last = w.node;
	return last >= first && first ? last - first + 1 : s->o.coll.count;
}

/* How many of the oldest entries lie below threshold (at most max). */
static uint64_t below(struct kv *kv, const struct kv_stream *s, struct kv_sid threshold, uint64_t max)
{
	struct kv_stream_walk w;
	uint64_t n = 0;
	kv_stream_walk_init(kv, &w, s->o.coll.id, (struct kv_sid){ 0, 0 }, false);
	while (n < max && kv_stream_walk_next(kv, &w) == 1 && kv_sid_cmp(w.id, threshold) < 0)
		n++;
	return n;
}

int64_t kv_stream_trim(struct kv *kv, struct kv_stream *s, bool minid, uint64_t maxlen,
		       struct kv_sid threshold, bool approx, uint64_t limit)
{
	if (!s->o.coll.count || (!minid && s->o.coll.count <= maxlen))
		return 0;
	uint64_t had = s->o.coll.count, gone = 0;
	int r = kv_stream_begin(kv, s, 0);
	if (r)
		return r;
	/* Redis's streamTrim: whole nodes, oldest first, while what stays
	 * is still over the bound (MAXLEN) or the node lies wholly below it
	 * (MINID) and the limit allows; then, exact, the entries of the next
	 * node that are over or below it. */
	for (;;) {
		struct kv_sid last = { 0, 0 };
		uint64_t node, k = first_node(kv, s, &node, minid ? &last : NULL);
		if (!k)
			break;
		bool all = minid ? kv_sid_cmp(last, threshold) < 0 : s->o.coll.count - k >= maxlen;
		if (all && (!limit || gone + k <= limit)) {
			if ((r = trim_first(kv, s, k, true, node)) < 0)
				break;
			gone += k;
			continue;
		}
		if (!approx && !all) {
			uint64_t n = minid ? below(kv, s, threshold, k) : s->o.coll.count - maxlen;
			r = n ? trim_first(kv, s, n, false, node) : 0;
		}
		break;
	}
	r = kv_stream_end(kv, s, r);
	return r ? r : (int64_t)(had - s->o.coll.count);
}

/* ---- consumer groups ------------------------------------------------------ */

void kv_sgroup_encode(uint8_t out[KV_SGROUP_BYTES], const struct kv_sgroup *g)
{
	kv_sid_put(out, g->last);
	be64_put(out + 16, (uint64_t)g->read);
	be64_put(out + 24, g->num);
	be64_put(out + 32, g->pending);
}

void kv_sgroup_decode(const uint8_t in[KV_SGROUP_BYTES], struct kv_sgroup *g)
{
	g->last = kv_sid_get(in);
	g->read = (int64_t)kv_be64(in + 16);
	g->num = kv_be64(in + 24);
	g->pending = kv_be64(in + 32);
}

/* The tree key of a member named pre[0..plen) + name[0..len); *buf as
 * kv_cset_key's. */
static int part_key(const struct kv *kv, struct kv_key *mk, uint64_t coll, uint8_t kind,
		    const void *pre, uint32_t plen, const void *name, size_t len, uint8_t *stack,
		    size_t cap, uint8_t **buf)
{
	return kv_cset_key(kv, mk, coll, kind, pre, plen, name, len, stack, cap, buf);
}

/* Fixed-size value of member mk into out[0..len): 0, -ENOENT, -EBADMSG. */
static int get_fixed(struct kv *kv, struct kv_key *mk, uint8_t *out, uint32_t len)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, l;
	if (kv_member_lookup(kv, mk, ext, &n, &l))
		return -ENOENT;
	if (l != len)
		return -EBADMSG;
	paste_store_read(kv->store, ext, n, 0, out, len);
	return 0;
}

/* The fixed-size value of member pre + name into out[0..olen): 0,
 * -ENOENT, -EBADMSG. */
static int get_part(struct kv *kv, uint64_t coll, uint8_t kind, const void *pre, uint32_t plen,
		    const void *name, size_t len, uint8_t *out, uint32_t olen)
{
	uint8_t stack[512], *buf;
	struct kv_key mk;
	int r = part_key(kv, &mk, coll, kind, pre, plen, name, len, stack, sizeof(stack), &buf);
	if (r == 0)
		r = get_fixed(kv, &mk, out, olen);
	if (buf != stack)
		free(buf);
	return r;
}

int kv_sgroup_get(struct kv *kv, const struct kv_stream *s, const void *name, size_t len,
		  struct kv_sgroup *g)
{
	uint8_t b[KV_SGROUP_BYTES];
	int r = get_part(kv, s->o.coll.id, KV_STREAM_GROUP, NULL, 0, name, len, b, sizeof(b));
	if (r == 0)
		kv_sgroup_decode(b, g);
	return r;
}

/* Write member pre + name with value val[0..vlen) in the stream's batch. */
static int put_part(struct kv *kv, struct kv_stream *s, uint8_t kind, const void *pre, uint32_t plen,
		    const void *name, size_t len, const void *val, size_t vlen)
{
	uint8_t stack[512], *buf;
	struct kv_key mk;
	int r = part_key(kv, &mk, s->o.coll.id, kind, pre, plen, name, len, stack, sizeof(stack),
			 &buf);
	if (r)
		return r;
	if ((r = kv_stream_begin(kv, s, vlen)) == 0) {
		r = kv_cset_put(kv, &mk, NULL, plen, val, vlen);
		if (r == 0)
			s->changed = true;
		r = kv_stream_end(kv, s, r);
	}
	if (buf != stack)
		free(buf);
	return r;
}

/* Delete member pre + name: 1, 0 (absent), or a failure. */
static int del_part(struct kv *kv, struct kv_stream *s, uint8_t kind, const void *pre, uint32_t plen,
		    const void *name, size_t len)
{
	uint8_t stack[512], *buf;
	struct kv_key mk;
	int r = part_key(kv, &mk, s->o.coll.id, kind, pre, plen, name, len, stack, sizeof(stack),
			 &buf);
	if (r)
		return r;
	int got = 0;
	if ((r = kv_stream_begin(kv, s, 0)) == 0) {
		got = kv_member_remove(kv, &mk);
		if (got > 0)
			s->changed = true;
		r = kv_stream_end(kv, s, got < 0 ? got : 0);
	}
	if (buf != stack)
		free(buf);
	return r ? r : got;
}

int kv_sgroup_put(struct kv *kv, struct kv_stream *s, const void *name, size_t len,
		  const struct kv_sgroup *g)
{
	uint8_t b[KV_SGROUP_BYTES];
	kv_sgroup_encode(b, g);
	return put_part(kv, s, KV_STREAM_GROUP, NULL, 0, name, len, b, sizeof(b));
}

/* Delete every member of kind whose name starts with the 8 bytes of gnum. */
static int del_prefixed(struct kv *kv, uint64_t coll, uint8_t kind, uint64_t gnum)
{
	uint8_t pre[8];
	be64_put(pre, gnum);
	struct kv_cwalk w;
	int r;
	kv_cwalk_init(kv, &w, coll, kind, 8, false, pre, sizeof(pre));
	while ((r = kv_cwalk_next(kv, &w)) == 1 && memcmp(w.pre, pre, 8) == 0) {
		uint8_t t[PASTE_BTREE_MAX_KEY];
		uint32_t tlen = w.tlen;
		memcpy(t, w.t, tlen);
		if ((r = kv_tree_del(kv, t, tlen)) < 0)
			return r;
	}
	return r < 0 ? r : 0;
}

int kv_sgroup_delete(struct kv *kv, struct kv_stream *s, const void *name, size_t len,
		     const struct kv_sgroup *g)
{
	int r = kv_stream_begin(kv, s, 0);
	if (r)
		return r;
	bool was = paste_btree_deleting(kv->tree, true);
	r = del_prefixed(kv, s->o.coll.id, KV_STREAM_PEL, g->num);
	if (r == 0)
		r = del_prefixed(kv, s->o.coll.id, KV_STREAM_CONSUMER, g->num);
	paste_btree_deleting(kv->tree, was);
	if (r == 0) {
		int got = del_part(kv, s, KV_STREAM_GROUP, NULL, 0, name, len);
		r = got < 0 ? got : 0;
	}
	s->changed = true;
	return kv_stream_end(kv, s, r);
}

void kv_sgroup_walk_init(struct kv *kv, struct kv_sgroup_walk *w, uint64_t coll)
{
	kv_members_init(kv, &w->m, coll, KV_STREAM_GROUP, NULL, 0);
	w->longbuf = NULL;
}

int kv_sgroup_walk_next(struct kv *kv, struct kv_sgroup_walk *w)
{
	if (!w->longbuf && !(w->longbuf = malloc(KV_MAX_KEY + 16)))
		return -ENOMEM;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	int r = kv_members_next(kv, &w->m, &w->name, &w->nlen, w->longbuf, ext, &n, &len);
	if (r != 1) {
		free(w->longbuf);
		w->longbuf = NULL;
		return r;
	}
	uint8_t b[KV_SGROUP_BYTES];
	if (len != sizeof(b))
		return -EBADMSG;
	paste_store_read(kv->store, ext, n, 0, b, sizeof(b));
	kv_sgroup_decode(b, &w->g);
	return 1;
}

uint64_t kv_stream_groups(struct kv *kv, const struct kv_stream *s)
{
	struct kv_sgroup_walk w;
	uint64_t n = 0;
	kv_sgroup_walk_init(kv, &w, s->o.coll.id);
	while (kv_sgroup_walk_next(kv, &w) == 1)
		n++;
	free(w.longbuf);
	return n;
}

/* ---- pending entries ------------------------------------------------------ */

size_t kv_spending_encode(uint8_t *out, uint64_t delivered_ms, uint64_t count, const void *consumer,
			  size_t clen)
{
	be64_put(out, delivered_ms);
	be64_put(out + 8, count);
	if (clen)
		memcpy(out + 16, consumer, clen);
	return 16 + clen;
}

static void pel_name(uint8_t out[24], uint64_t gnum, struct kv_sid id)
{
	be64_put(out, gnum);
	kv_sid_put(out + 8, id);
}

/* A pending entry's value ext[0..n) of len bytes into p (its name into
 * p->cbuf). */
static int pending_read(struct kv *kv, const struct paste_extent *ext, uint32_t n, uint32_t len,
			struct kv_spending *p)
{
	uint8_t b[16 + KV_INLINE];
	if (len < 16 || len > sizeof(b))
		return -EBADMSG;
	paste_store_read(kv->store, ext, n, 0, b, len);
	p->delivered_ms = kv_be64(b);
	p->count = kv_be64(b + 8);
	p->clen = len - 16;
	memcpy(p->cbuf, b + 16, p->clen);
	p->consumer = p->cbuf;
	return 0;
}

int kv_spending_get(struct kv *kv, const struct kv_stream *s, uint64_t gnum, struct kv_sid id,
		    struct kv_spending *p)
{
	uint8_t name[24];
	struct kv_key mk;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	pel_name(name, gnum, id);
	kv_member_key(kv, &mk, s->o.coll.id, KV_STREAM_PEL, name, sizeof(name));
	if (kv_member_lookup(kv, &mk, ext, &n, &len))
		return -ENOENT;
	p->id = id;
	return pending_read(kv, ext, n, len, p);
}

int kv_spending_put(struct kv *kv, struct kv_stream *s, uint64_t gnum, const struct kv_sid id,
		    uint64_t delivered_ms, uint64_t count, const void *consumer, size_t clen)
{
	uint8_t name[24], val[16 + KV_INLINE];
	if (clen > KV_INLINE)
		return -ENAMETOOLONG;
	pel_name(name, gnum, id);
	size_t vlen = kv_spending_encode(val, delivered_ms, count, consumer, clen);
	return put_part(kv, s, KV_STREAM_PEL, NULL, 0, name, sizeof(name), val, vlen);
}

int kv_spending_delete(struct kv *kv, struct kv_stream *s, uint64_t gnum, struct kv_sid id)
{
	uint8_t name[24];
	pel_name(name, gnum, id);
	return del_part(kv, s, KV_STREAM_PEL, NULL, 0, name, sizeof(name));
}

/* From `from` up, or (back) from the group's newest entry down. */
static void spending_walk_start(struct kv *kv, struct kv_spending_walk *w, uint64_t coll,
				uint64_t gnum, struct kv_sid from, bool back)
{
	uint8_t t[18 + 17];
	kv_member_prefix(t, coll, KV_STREAM_PEL);
	be64_put(t + 10, gnum);
	memcpy(w->prefix, t, sizeof(w->prefix));
	w->back = back;
	/* Back: the cursor starts below its key, here one byte longer than
	 * any of the group's pending entries' keys, all ones past the prefix. */
	if (back)
		memset(t + 18, 0xFF, 17);
	else
		kv_sid_put(t + 18, from);
	paste_btree_cursor_init(&w->c, kv->tree, t, back ? 18 + 17 : 18 + 16);
}

void kv_spending_walk_init(struct kv *kv, struct kv_spending_walk *w, uint64_t coll, uint64_t gnum,
			   struct kv_sid from)
{
	spending_walk_start(kv, w, coll, gnum, from, false);
}

int kv_spending_walk_next(struct kv *kv, struct kv_spending_walk *w)
{
	const uint8_t *t;
	uint32_t tlen, n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	int got = w->back ? paste_btree_cursor_prev(&w->c, &t, &tlen, ext, &n, &len)
			  : paste_btree_cursor_next(&w->c, &t, &tlen, ext, &n, &len);
	if (got != 1 || tlen != sizeof(w->prefix) + 16 || memcmp(t, w->prefix, sizeof(w->prefix)) != 0)
		return got < 0 ? got : 0;
	w->p.id = kv_sid_get(t + sizeof(w->prefix));
	int r = pending_read(kv, ext, n, len, &w->p);
	return r ? r : 1;
}

int kv_spending_last(struct kv *kv, uint64_t coll, uint64_t gnum, struct kv_sid *id)
{
	struct kv_spending_walk w;
	spending_walk_start(kv, &w, coll, gnum, (struct kv_sid){ 0, 0 }, true);
	int r = kv_spending_walk_next(kv, &w);
	if (r == 1)
		*id = w.p.id;
	return r;
}

/* ---- consumers -------------------------------------------------------------- */

void kv_sconsumer_encode(uint8_t out[KV_SCONSUMER_BYTES], const struct kv_sconsumer *c)
{
	be64_put(out, c->seen_ms);
	be64_put(out + 8, c->pending);
}

static void consumer_decode(const uint8_t in[KV_SCONSUMER_BYTES], struct kv_sconsumer *c)
{
	c->seen_ms = kv_be64(in);
	c->pending = kv_be64(in + 8);
}

int kv_sconsumer_get(struct kv *kv, const struct kv_stream *s, uint64_t gnum, const void *name,
		     size_t len, struct kv_sconsumer *c)
{
	uint8_t pre[8], b[KV_SCONSUMER_BYTES];
	be64_put(pre, gnum);
	int r = get_part(kv, s->o.coll.id, KV_STREAM_CONSUMER, pre, 8, name, len, b, sizeof(b));
	if (r == 0)
		consumer_decode(b, c);
	return r;
}

int kv_sconsumer_put(struct kv *kv, struct kv_stream *s, uint64_t gnum, const void *name,
		     size_t len, const struct kv_sconsumer *c)
{
	uint8_t pre[8], b[KV_SCONSUMER_BYTES];
	be64_put(pre, gnum);
	kv_sconsumer_encode(b, c);
	return put_part(kv, s, KV_STREAM_CONSUMER, pre, 8, name, len, b, sizeof(b));
}

int kv_sconsumer_delete(struct kv *kv, struct kv_stream *s, uint64_t gnum, const void *name,
			size_t len)
{
	uint8_t pre[8];
	be64_put(pre, gnum);
	return del_part(kv, s, KV_STREAM_CONSUMER, pre, 8, name, len);
}

void kv_sconsumer_walk_init(struct kv *kv, struct kv_sconsumer_walk *w, uint64_t coll,
			    uint64_t gnum)
{
	uint8_t pre[8];
	be64_put(pre, gnum);
	w->gnum = gnum;
	kv_cwalk_init(kv, &w->w, coll, KV_STREAM_CONSUMER, 8, false, pre, sizeof(pre));
}

int kv_sconsumer_walk_next(struct kv *kv, struct kv_sconsumer_walk *w)
{
	int r = kv_cwalk_next(kv, &w->w);
	if (r != 1)
		return r;
	if (kv_be64(w->w.pre) != w->gnum)
		return 0;                   /* the next group's consumers */
	if (w->w.len != KV_SCONSUMER_BYTES)
		return -EBADMSG;
	uint8_t b[KV_SCONSUMER_BYTES];
	paste_store_read(kv->store, w->w.ext, w->w.n, 0, b, sizeof(b));
	consumer_decode(b, &w->c);
	w->name = w->w.name;
	w->nlen = w->w.nlen;
	return 1;
}
