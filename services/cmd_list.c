/*
 * cmd_list.c - pkvs's list commands (pkvs_resp.h) over kv_list.h: LPUSH,
 * RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LREM,
 * LTRIM, LINSERT, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the blocking BLPOP,
 * BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP (cmd_block.h), with Redis 7.0's
 * replies and errors in RESP2 and RESP3 (t_list.c's order of checks).
 *
 * Values: an element over KV_PACK_MAX bytes that landed in a packet
 * buffer stays there, zero copy (kv_arg_hold); smaller ones are packed.
 * Replies that carry elements are built with kv_out (kv_out.h): small
 * ones copied into the reply, large ones sent from the buffers they lie
 * in. A popped element's entry is deleted after its reply was queued
 * (its buffers stay held until the pop is durable: the reply leaves with
 * that barrier).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "kv_list.h"
#include "kv_notify.h"
#include "kv_out.h"
#include "kv_repl.h"

/* ------------------------------------------------------------ helpers */

static void reply_errno(struct resp_ctx *x, int r)
{
	struct kv *kv = pkvs_kv(x->ss);
	if (r == -EFBIG && !server_store_failed(x->w))
		resp_error(x, "ERR value too large (pkvs's limit for a list element: %" PRIu64 " bytes)",
			   kv_max_value(kv));
	else
		kv_reply_errno(x, r);
}

static void wrongtype(struct resp_ctx *x)
{
	resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

/* Elements a[from..to) are within --max-value: false after replying;
 * *bytes their sum (what a push copies in at most). */
static bool elems_ok(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		     uint32_t from, uint32_t to, uint64_t *bytes)
{
	*bytes = 0;
	for (uint32_t i = from; i < to; i++) {
		if (a[i].len > KV_PACK_MAX && a[i].len > kv_max_value(kv)) {
			reply_errno(x, -EFBIG);
			return false;
		}
		*bytes += a[i].len;
	}
	return true;
}

/* Open the list named by a: 0, -ENOENT (absent), -EINVAL (replied:
 * WRONGTYPE, or a key over pkvs's limit). */
static int open_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		     struct kv_list *l, bool read)
{
	if (!kv_arg_key(x, kv, a, &l->key))
		return -EINVAL;
	int r = kv_list_open(kv, l, read);
	if (r == -EMEDIUMTYPE) {
		wrongtype(x);
		return -EINVAL;
	}
	return r;
}

/* Redis's getRangeLongFromObjectOrReply: an integer in [min, max]; msg
 * (NULL: Redis's defaults) is the error for anything else. */
static bool arg_range(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t min, int64_t max,
		      const char *msg, int64_t *v)
{
	if (paste_resp_arg_i64(a, v)) {
		resp_error(x, "ERR %s", msg ? msg : "value is not an integer or out of range");
		return false;
	}
	if (*v >= min && *v <= max)
		return true;
	if (msg)
		resp_error(x, "ERR %s", msg);
	else
		resp_error(x, "ERR value is out of range, value must between %" PRId64 " and %" PRId64,
			   min, max);
	return false;
}

/* Argument v pushed at end e (set: element i set instead, LSET and
 * LINSERT), held where it landed or copied. */
static int put_arg(struct resp_ctx *x, struct kv *kv, struct kv_list *l, bool set, uint64_t i,
		   enum kv_end e, const struct paste_resp_arg *v)
{
	struct paste_body b;
	int r = kv_arg_hold(x, kv, v, &b);
	if (r < 0)
		return r;
	if (r)
		return set ? kv_list_set_body(kv, l, i, &b) : kv_list_push_body(kv, l, e, &b);
	return set ? kv_list_set_bytes(kv, l, i, v->p, v->len)
		   : kv_list_push_bytes(kv, l, e, v->p, v->len);
}

static const char *pop_event(enum kv_end e)
{
	return e == KV_HEAD ? "lpop" : "rpop";
}

static const char *push_event(enum kv_end e)
{
	return e == KV_HEAD ? "lpush" : "rpush";
}

/* A list emptied by a change: its key went ("del" after the change's own
 * event, as Redis emits them). */
static void notify_gone(const struct kv_list *l)
{
	if (!l->o.coll.count)
		kv_notify(KV_NOTIFY_GENERIC, "del", &l->key);
}

/* LEFT or RIGHT: false after Redis's syntax error. */
static bool arg_end(struct resp_ctx *x, const struct paste_resp_arg *a, enum kv_end *e)
{
	if (paste_resp_arg_eq(a, "LEFT"))
		*e = KV_HEAD;
	else if (paste_resp_arg_eq(a, "RIGHT"))
		*e = KV_TAIL;
	else {
		resp_error(x, "ERR syntax error");
		return false;
	}
	return true;
}

/* The elements at positions [from, to) of list id, in order or back, as
 * bulks; taken: they leave the list (a pop), and those in chunks are
 * buried. A damaged list (a position missing) ends the connection: part
 * of the reply may be queued. */
static void out_elems(struct kv *kv, struct kv_out *o, uint64_t id, int64_t from, int64_t to,
		      bool back, bool taken)
{
	struct kv_list_walk w;
	kv_list_walk_pos(kv, &w, id, from, to, back);
	int g = 0;
	while (!o->r && (g = kv_list_walk_next(kv, &w)) == 1) {
		kv_out_elem(o, kv, w.ext, w.n, w.len, w.big);
		if (taken && w.big)
			(void)kv_elem_bury(kv, w.big);   /* failed: the store failed */
	}
	if (g < 0 && !o->r) {
		o->r = -EBADMSG;
		resp_close(o->x);
	}
}

enum { POP_ARRAY = 1, POP_KEY = 2 };

/* Take k elements off end e of l and reply them to o in pop order: a
 * bulk, or (POP_ARRAY) an array of them, after (POP_KEY) the list's name
 * in an array of two ([key, element], [key, [elements]]). 0, or the error
 * (nothing taken, nothing replied). */
static int pop(struct kv *kv, struct kv_list *l, enum kv_end e, uint64_t k, unsigned how,
	       struct kv_out *o)
{
	int64_t pos;
	/* Once the store holds elements in chunks, a pop is one group: its
	 * record and their graves (out_elems) together. */
	int r = kv_list_begin(kv, l, 0, kv->far_lists);
	if (r == 0 && (r = kv_list_take(kv, l, e, k, &pos)) == 0) {
		const struct kv_key *key = &l->key;
		if (how & POP_KEY) {
			kv_out_array(o, 2);
			kv_out_bulk(o, key->longkey ? (const void *)key->p : key->t + 1,
				    key->longkey ? key->len : key->tlen - 1u);
		}
		if (how & POP_ARRAY)
			kv_out_array(o, k);
		out_elems(kv, o, l->o.coll.id, pos, pos + (int64_t)k, e == KV_TAIL, true);
		(void)kv_list_drop(kv, l, pos, pos + (int64_t)k);   /* left outside: harmless */
		kv_notify(KV_NOTIFY_LIST, pop_event(e), key);
		notify_gone(l);
	}
	return kv_list_end(kv, l, r);
}

/* [key, [elements]] (count >= 0: LMPOP, BLMPOP) or [key, element]
 * (BLPOP, BRPOP) off end e of the opened list l. */
static int pop_with_key(struct kv *kv, struct kv_list *l, enum kv_end e, int64_t count,
			struct kv_out *o)
{
	uint64_t k = count < 0 ? 1 : (uint64_t)count;
	if (k > l->o.coll.count)
		k = l->o.coll.count;
	return pop(kv, l, e, k, POP_KEY | (count >= 0 ? POP_ARRAY : 0), o);
}

/* Move the element at end `from` of s to end `to` of d (d may be s), in
 * one group; *ext the element (valid until the next kv_pass; *big: in
 * chunks, kv_elem). */
static int move_one(struct kv *kv, struct kv_list *s, struct kv_list *d, enum kv_end from,
		    enum kv_end to, struct paste_extent *ext, uint32_t *n, uint32_t *len, uint64_t *big)
{
	int64_t pos;
	int r = kv_begin(kv);
	if (r)
		return r;
	if ((r = kv_list_begin(kv, s, 0, true)) != 0) {
		kv_abort(kv);
		return r;
	}
	if (d != s && (r = kv_list_begin(kv, d, 0, true)) != 0) {
		kv_list_end(kv, s, r);
		kv_abort(kv);
		return r;
	}
	r = kv_list_take(kv, s, from, 1, &pos);
	if (r == 0 && (r = kv_list_get_pos(kv, s->o.coll.id, pos, ext, n, len, big)) == -ENOENT)
		r = -EBADMSG;
	if (r == 0)
		r = kv_list_push(kv, d, to, ext, *n, *big != 0);
	if (r == 0)
		r = kv_list_drop(kv, s, pos, pos + 1);
	if (d != s)
		r = kv_list_end(kv, d, r);
	r = kv_list_end(kv, s, r);
	if (r == 0 && (r = kv_commit(kv)) == 0) {
		kv_notify(KV_NOTIFY_LIST, push_event(to), &d->key);      /* Redis's order */
		kv_notify(KV_NOTIFY_LIST, pop_event(from), &s->key);
		notify_gone(s);
		return 0;
	}
	kv_abort(kv);
	return r;
}

/* ------------------------------------------------------------ pushes */

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: the length. */
static void cmd_push(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_end e = (a[0].p[0] | 0x20) == 'l' ? KV_HEAD : KV_TAIL;
	bool xx = a[0].len == 6;
	struct kv_list l;
	uint64_t bytes;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -EINVAL || !elems_ok(x, kv, a, 2, n, &bytes))
		return;
	if (r == -ENOENT) {
		if (xx) {
			resp_int(x, 0);
			return;
		}
		kv_list_new(kv, &l);
	}
	r = kv_list_begin(kv, &l, bytes, false);
	for (uint32_t i = 2; r == 0 && i < n; i++)
		r = put_arg(x, kv, &l, false, 0, e, &a[i]);
	r = kv_list_end(kv, &l, r);
	if (r) {
		reply_errno(x, r);
		return;
	}
	resp_int(x, (int64_t)l.o.coll.count);
	kv_notify(KV_NOTIFY_LIST, push_event(e), &l.key);
}

/* LINSERT key BEFORE|AFTER pivot element: the length, -1 when the pivot
 * is not there, 0 for no key. */
static void cmd_linsert(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	bool after = paste_resp_arg_eq(&a[2], "AFTER");
	if (!after && !paste_resp_arg_eq(&a[2], "BEFORE")) {
		resp_error(x, "ERR syntax error");
		return;
	}
	struct kv_list l;
	uint64_t bytes;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -ENOENT)
		resp_int(x, 0);
	if (r || !elems_ok(x, kv, a, 4, 5, &bytes))
		return;
	struct kv_list_walk w;
	kv_list_walk_init(kv, &l, &w, 0);
	int g;
	while ((g = kv_list_walk_next(kv, &w)) == 1 &&
	       !kv_elem_equal(kv, w.ext, w.n, w.len, w.big, a[3].p, a[3].len))
		;
	if (g <= 0) {
		if (g < 0)
			kv_reply_errno(x, g);
		else
			resp_int(x, -1);
		return;
	}
	uint64_t i = (uint64_t)(w.at - l.o.coll.head) + after;
	r = kv_list_begin(kv, &l, bytes, true);
	if (r == 0)
		r = kv_list_open_slot(kv, &l, i);
	if (r == 0)
		r = put_arg(x, kv, &l, true, i, KV_HEAD, &a[4]);
	r = kv_list_end(kv, &l, r);
	if (r) {
		reply_errno(x, r);
		return;
	}
	resp_int(x, (int64_t)l.o.coll.count);
	kv_notify(KV_NOTIFY_LIST, "linsert", &l.key);
}

/* ------------------------------------------------------------ pops */

/* LPOP, RPOP key [count]: an element (null for no key), or with a count
 * an array of at most count (a null array for no key). */
static void cmd_pop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_end e = (a[0].p[0] | 0x20) == 'l' ? KV_HEAD : KV_TAIL;
	int64_t count = 1;
	if (n > 3) {
		resp_arity_error(x, &a[0]);
		return;
	}
	if (n == 3 && !arg_range(x, &a[2], 0, INT64_MAX, "value is out of range, must be positive",
				 &count))
		return;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -ENOENT) {
		char b[8];
		resp_send(x, b, (size_t)(n == 3 ? paste_resp_put_null_array(b, sizeof(b), x->r->proto)
						 : paste_resp_put_null(b, sizeof(b), x->r->proto)));
	}
	if (r)
		return;
	if (n == 3 && count == 0) {
		resp_send(x, "*0\r\n", 4);
		return;
	}
	uint64_t k = (uint64_t)count < l.o.coll.count ? (uint64_t)count : l.o.coll.count;
	struct kv_out o;
	kv_out_init(&o, x);
	r = pop(kv, &l, e, k, n == 3 ? POP_ARRAY : 0, &o);
	if (r)
		reply_errno(x, r);
	kv_out_end(&o);
}

/* The keys of LMPOP and BLMPOP: numkeys at a[at], the keys, LEFT|RIGHT,
 * [COUNT count]: false after replying the error. */
static bool mpop_args(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t at,
		      int64_t *nkeys, enum kv_end *e, int64_t *count)
{
	if (!arg_range(x, &a[at], 1, INT64_MAX, "numkeys should be greater than 0", nkeys))
		return false;
	if (*nkeys >= (int64_t)n - at - 1) {
		resp_error(x, "ERR syntax error");
		return false;
	}
	uint32_t w = at + 1 + (uint32_t)*nkeys;
	if (!arg_end(x, &a[w], e))
		return false;
	*count = -1;
	for (uint32_t i = w + 1; i < n; i++) {
		if (*count == -1 && i + 1 < n && paste_resp_arg_eq(&a[i], "COUNT")) {
			if (!arg_range(x, &a[++i], 1, INT64_MAX, "count should be greater than 0", count))
				return false;
		} else {
			resp_error(x, "ERR syntax error");
			return false;
		}
	}
	if (*count == -1)
		*count = 1;
	return true;
}

/* The first of keys[0..nkeys) that holds a list, popped into o: 1, 0
 * (none does), or -EINVAL (replied: WRONGTYPE, an error). */
static int pop_first(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *keys,
		     uint32_t nkeys, enum kv_end e, int64_t count)
{
	for (uint32_t i = 0; i < nkeys; i++) {
		struct kv_list l;
		int r = open_list(x, kv, &keys[i], &l, false);
		if (r == -ENOENT)
			continue;
		if (r)
			return -EINVAL;
		struct kv_out o;
		kv_out_init(&o, x);
		r = pop_with_key(kv, &l, e, count, &o);
		if (r)
			reply_errno(x, r);
		kv_out_end(&o);
		return r ? -EINVAL : 1;
	}
	return 0;
}

static void reply_null_array(struct resp_ctx *x)
{
	char b[8];
	resp_send(x, b, (size_t)paste_resp_put_null_array(b, sizeof(b), x->r->proto));
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]. */
static void cmd_lmpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t nkeys, count;
	enum kv_end e;
	if (!mpop_args(x, a, n, 1, &nkeys, &e, &count))
		return;
	if (pop_first(x, kv, &a[2], (uint32_t)nkeys, e, count) == 0)
		reply_null_array(x);
}

/* ------------------------------------------------------------ reads */

static void cmd_llen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, true);
	if (r != -EINVAL)
		resp_int(x, r ? 0 : (int64_t)l.o.coll.count);
}

/* Index v (negative: from the end) of a list of count elements: false
 * when outside it. */
static bool index_of(int64_t v, uint64_t count, uint64_t *i)
{
	if (v < 0)
		v += (int64_t)count;
	if (v < 0 || (uint64_t)v >= count)
		return false;
	*i = (uint64_t)v;
	return true;
}

static void cmd_lindex(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, true);
	if (r == -ENOENT)
		resp_null(x);
	int64_t v;
	uint64_t i;
	if (r || !kv_arg_int(x, &a[2], &v))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	uint64_t big;
	if (!index_of(v, l.o.coll.count, &i)) {
		resp_null(x);
	} else if ((r = kv_list_get(kv, &l, i, ext, &en, &len, &big)) != 0) {
		kv_reply_errno(x, r);
	} else {
		struct kv_out o;
		kv_out_init(&o, x);
		kv_out_elem(&o, kv, ext, en, len, big);
		kv_out_end(&o);
	}
}

static void cmd_lset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -ENOENT)
		resp_error(x, "ERR no such key");
	int64_t v;
	uint64_t i, bytes;
	if (r || !kv_arg_int(x, &a[2], &v))
		return;
	if (!index_of(v, l.o.coll.count, &i)) {
		resp_error(x, "ERR index out of range");
		return;
	}
	if (!elems_ok(x, kv, a, 3, 4, &bytes))
		return;
	r = put_arg(x, kv, &l, true, i, KV_HEAD, &a[3]);
	if (r) {
		reply_errno(x, r);
		return;
	}
	resp_ok(x);
	kv_notify(KV_NOTIFY_LIST, "lset", &l.key);
}

/* start and stop (negative: from the end) of a list of count elements
 * as Redis clips them: false for an empty range. */
static bool range_of(int64_t start, int64_t stop, uint64_t count, uint64_t *from, uint64_t *to)
{
	int64_t len = (int64_t)count;
	if (start < 0)
		start = len + start;
	if (stop < 0)
		stop = len + stop;
	if (start < 0)
		start = 0;
	if (start > stop || start >= len)
		return false;
	if (stop >= len)
		stop = len - 1;
	*from = (uint64_t)start;
	*to = (uint64_t)stop;
	return true;
}

static void cmd_lrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t start, stop;
	if (!kv_arg_int(x, &a[2], &start) || !kv_arg_int(x, &a[3], &stop))
		return;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, true);
	uint64_t from, to;
	if (r == -ENOENT || (r == 0 && !range_of(start, stop, l.o.coll.count, &from, &to))) {
		resp_send(x, "*0\r\n", 4);
		return;
	}
	if (r)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, to - from + 1);
	int64_t head = l.o.coll.head;
	out_elems(kv, &o, l.o.coll.id, head + (int64_t)from, head + (int64_t)to + 1, false, false);
	kv_out_end(&o);
}

static void cmd_ltrim(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t start, stop;
	if (!kv_arg_int(x, &a[2], &start) || !kv_arg_int(x, &a[3], &stop))
		return;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -ENOENT)
		resp_ok(x);
	if (r)
		return;
	uint64_t from = 1, to = 0;               /* empty unless the range has elements */
	range_of(start, stop, l.o.coll.count, &from, &to);
	r = kv_list_begin(kv, &l, 0, false);
	if (r == 0)
		r = kv_list_trim(kv, &l, from, to);
	r = kv_list_end(kv, &l, r);
	if (r) {
		reply_errno(x, r);
		return;
	}
	resp_ok(x);
	kv_notify(KV_NOTIFY_LIST, "ltrim", &l.key);
	notify_gone(&l);
}

/* Indexes found by a walk (LREM, LPOS), in a growing array. */
struct hits {
	uint64_t *v;
	uint64_t n, cap;
};

static bool hit_add(struct hits *h, uint64_t i)
{
	if (h->n == h->cap) {
		uint64_t cap = h->cap ? 2 * h->cap : 16;
		uint64_t *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return false;
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = i;
	return true;
}

/* LREM key count element: removes the first count equal to element (from
 * the tail when count < 0; all when 0). */
static void cmd_lrem(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t count;
	if (!kv_arg_int(x, &a[2], &count))
		return;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, false);
	if (r == -ENOENT)
		resp_int(x, 0);
	if (r)
		return;
	bool back = count < 0;
	uint64_t want = back ? (uint64_t)-(count + 1) + 1 : (uint64_t)count;
	struct hits h = { 0 };
	struct kv_list_walk w;
	kv_list_walk_pos(kv, &w, l.o.coll.id, l.o.coll.head, l.o.coll.tail, back);
	int g;
	while ((!want || h.n < want) && (g = kv_list_walk_next(kv, &w)) == 1)
		if (kv_elem_equal(kv, w.ext, w.n, w.len, w.big, a[3].p, a[3].len) &&
		    !hit_add(&h, (uint64_t)(w.at - l.o.coll.head))) {
			g = -ENOMEM;
			break;
		}
	r = g < 0 ? g : 0;
	if (r == 0 && h.n) {
		if (back)                        /* found tail first: ascending for remove_at */
			for (uint64_t i = 0, j = h.n - 1; i < j; i++, j--) {
				uint64_t t = h.v[i];
				h.v[i] = h.v[j];
				h.v[j] = t;
			}
		r = kv_list_begin(kv, &l, 0, true);
		if (r == 0)
			r = kv_list_remove_at(kv, &l, h.v, h.n);
		r = kv_list_end(kv, &l, r);
	}
	if (r) {
		reply_errno(x, r);
	} else {
		resp_int(x, (int64_t)h.n);
		if (h.n) {
			kv_notify(KV_NOTIFY_LIST, "lrem", &l.key);
			notify_gone(&l);
		}
	}
	free(h.v);
}

/* LPOS key element [RANK rank] [COUNT num] [MAXLEN len]. */
static void cmd_lpos(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t rank = 1, count = -1, maxlen = 0;
	for (uint32_t i = 3; i < n; i++) {
		bool more = i + 1 < n;
		if (more && paste_resp_arg_eq(&a[i], "RANK")) {
			if (!kv_arg_int(x, &a[++i], &rank))
				return;
			if (rank == 0) {
				resp_error(x, "ERR RANK can't be zero: use 1 to start from the first match, "
					   "2 from the second ... or use negative to start from the end of "
					   "the list");
				return;
			}
		} else if (more && paste_resp_arg_eq(&a[i], "COUNT")) {
			if (!arg_range(x, &a[++i], 0, INT64_MAX, "COUNT can't be negative", &count))
				return;
		} else if (more && paste_resp_arg_eq(&a[i], "MAXLEN")) {
			if (!arg_range(x, &a[++i], 0, INT64_MAX, "MAXLEN can't be negative", &maxlen))
				return;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	bool back = rank < 0;
	/* Redis negates the rank; its most negative value stays negative
	 * there, so every match is at or past it. */
	uint64_t from = rank == INT64_MIN ? 1 : (uint64_t)(back ? -rank : rank);
	bool unbounded = rank == INT64_MIN;
	struct kv_list l;
	int r = open_list(x, kv, &a[1], &l, true);
	if (r == -ENOENT) {
		if (count != -1)
			resp_send(x, "*0\r\n", 4);
		else
			resp_null(x);
	}
	if (r)
		return;
	struct hits h = { 0 };
	struct kv_list_walk w;
	kv_list_walk_pos(kv, &w, l.o.coll.id, l.o.coll.head, l.o.coll.tail, back);
	uint64_t scanned = 0, matches = 0;
	int g;
	while ((maxlen == 0 || scanned < (uint64_t)maxlen) && (g = kv_list_walk_next(kv, &w)) == 1) {
		scanned++;
		if (!kv_elem_equal(kv, w.ext, w.n, w.len, w.big, a[2].p, a[2].len) || ++matches < from)
			continue;
		if (!hit_add(&h, (uint64_t)(w.at - l.o.coll.head))) {
			g = -ENOMEM;
			break;
		}
		if (count == -1 || (count && !unbounded && matches - from + 1 >= (uint64_t)count))
			break;
	}
	if (g < 0) {
		kv_reply_errno(x, g);
	} else if (count != -1) {
		struct kv_out o;
		kv_out_init(&o, x);
		kv_out_array(&o, h.n);
		for (uint64_t i = 0; i < h.n; i++)
			kv_out_int(&o, (int64_t)h.v[i]);
		kv_out_end(&o);
	} else if (h.n) {
		resp_int(x, (int64_t)h.v[0]);
	} else {
		resp_null(x);
	}
	free(h.v);
}

/* ------------------------------------------------------------ LMOVE */

/* LMOVE src dst from to, RPOPLPUSH src dst (and BLMOVE, BRPOPLPUSH when
 * src holds an element): the element moved, null when src is absent. */
static void lmove(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, enum kv_end from,
		  enum kv_end to, struct kv_list *s)
{
	struct kv_list dl, *d = s;
	if (!kv_arg_key(x, kv, &a[2], &dl.key))
		return;
	if (dl.key.tlen != s->key.tlen || memcmp(dl.key.t, s->key.t, dl.key.tlen) != 0 ||
	    (dl.key.longkey && (dl.key.len != s->key.len || memcmp(dl.key.p, s->key.p, s->key.len)))) {
		d = &dl;
		int r = kv_list_open(kv, d, false);
		if (r == -EMEDIUMTYPE) {
			wrongtype(x);
			return;
		}
		if (r == -ENOENT)
			kv_list_new(kv, d);
	}
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	uint64_t big;
	int r = move_one(kv, s, d, from, to, ext, &en, &len, &big);
	if (r) {
		reply_errno(x, r);
		return;
	}
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_elem(&o, kv, ext, en, len, big);
	kv_out_end(&o);
}

static void cmd_lmove(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_end from = KV_TAIL, to = KV_HEAD;            /* RPOPLPUSH */
	if (n == 5 && (!arg_end(x, &a[3], &from) || !arg_end(x, &a[4], &to)))
		return;
	struct kv_list s;
	int r = open_list(x, kv, &a[1], &s, false);
	if (r == -ENOENT)
		resp_null(x);
	if (r == 0)
		lmove(x, kv, a, from, to, &s);
}

/* ------------------------------------------------------------ blocking */

/* What a blocked BLPOP, BRPOP or BLMPOP takes. */
struct bpop {
	enum kv_end e;
	int64_t count;                  /* -1: one element, [key, element] */
};

static bool serve_pop(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const void *arg)
{
	const struct bpop *p = arg;
	struct kv_list l = { .key = *k };
	if (kv_list_open(kv, &l, false) || !l.o.coll.count)
		return false;
	struct kv_out o;
	kv_out_init(&o, x);
	uint32_t mark = kv_repl_active ? kv_repl_serve_mark() : 0;
	uint64_t had = l.o.coll.count;
	int r = pop_with_key(kv, &l, p->e, p->count, &o);
	if (r)
		reply_errno(x, r);
	else if (kv_repl_active)                /* replicas get LPOP/RPOP (kv_repl.h) */
		kv_repl_served_pop(mark, k, p->e == KV_HEAD ? "LPOP" : "RPOP",
				   p->count < 0 ? -1 : (int64_t)(had < (uint64_t)p->count ? had : (uint64_t)p->count));
	kv_out_end(&o);
	return true;
}

/* BLPOP, BRPOP key [key ...] timeout: [key, element] of the first key
 * that holds a list, else block. */
static void cmd_bpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct bpop p = { (a[0].p[1] | 0x20) == 'l' ? KV_HEAD : KV_TAIL, -1 };
	uint64_t ms;
	if (!kv_block_timeout(x, &a[n - 1], &ms))
		return;
	int r = pop_first(x, kv, &a[1], n - 2, p.e, p.count);
	if (r)
		return;
	if (!kv_block_allowed(x, kv)) {
		reply_null_array(x);
		return;
	}
	struct kv_block_req req = { KV_LIST, serve_pop, &p, sizeof(p) };
	kv_block(x, kv, &a[1], n - 2, ms, &req);
}

/* BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]. */
static void cmd_blmpop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t nkeys;
	struct bpop p;
	uint64_t ms;
	if (!mpop_args(x, a, n, 2, &nkeys, &p.e, &p.count) || !kv_block_timeout(x, &a[1], &ms))
		return;
	int r = pop_first(x, kv, &a[3], (uint32_t)nkeys, p.e, p.count);
	if (r)
		return;
	if (!kv_block_allowed(x, kv)) {
		reply_null_array(x);
		return;
	}
	struct kv_block_req req = { KV_LIST, serve_pop, &p, sizeof(p) };
	kv_block(x, kv, &a[3], (uint32_t)nkeys, ms, &req);
}

/* What a blocked BLMOVE or BRPOPLPUSH takes: the ends, and dst's name. */
struct bmove {
	enum kv_end from, to;
	bool rpoplpush;                 /* BRPOPLPUSH (replicas get RPOPLPUSH) */
	size_t dlen;
	uint8_t dst[];
};

static bool serve_move(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const void *arg)
{
	const struct bmove *m = arg;
	struct kv_list s = { .key = *k };
	if (kv_list_open(kv, &s, false) || !s.o.coll.count)
		return false;
	/* lmove's argument layout: a[1] the source (found), a[2] dst. */
	struct paste_resp_arg a[3] = { { NULL, 0 }, { NULL, 0 }, { (const char *)m->dst, m->dlen } };
	uint32_t mark = kv_repl_active ? kv_repl_serve_mark() : 0;
	lmove(x, kv, a, m->from, m->to, &s);
	if (kv_repl_active)
		kv_repl_served_move(mark, k, m->dst, m->dlen,
				    m->rpoplpush ? NULL : m->from == KV_HEAD ? "left" : "right",
				    m->to == KV_HEAD ? "left" : "right");
	return true;
}

/* BLMOVE src dst from to timeout, BRPOPLPUSH src dst timeout. */
static void cmd_blmove(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	enum kv_end from = KV_TAIL, to = KV_HEAD;            /* BRPOPLPUSH */
	if (n == 6 && (!arg_end(x, &a[3], &from) || !arg_end(x, &a[4], &to)))
		return;
	uint64_t ms;
	if (!kv_block_timeout(x, &a[n - 1], &ms))
		return;
	struct kv_list s;
	int r = open_list(x, kv, &a[1], &s, false);
	if (r == 0) {
		lmove(x, kv, a, from, to, &s);
		return;
	}
	if (r != -ENOENT)
		return;
	if (!kv_block_allowed(x, kv)) {
		resp_null(x);
		return;
	}
	if (a[2].len > kv_max_key(kv)) {
		kv_arg_key(x, kv, &a[2], &s.key);       /* its error */
		return;
	}
	struct bmove *m = malloc(sizeof(*m) + a[2].len);
	if (!m) {
		resp_error(x, "ERR out of memory");
		return;
	}
	m->from = from;
	m->to = to;
	m->rpoplpush = n == 4;
	m->dlen = a[2].len;
	memcpy(m->dst, a[2].p, a[2].len);
	struct kv_block_req req = { KV_LIST, serve_move, m, sizeof(*m) + a[2].len };
	kv_block(x, kv, &a[1], 1, ms, &req);
	free(m);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_list[] = {
	{ "lpush", -3, "write denyoom fast", "list", "Prepend elements to a list", cmd_push, 1, 1, 1 },
	{ "rpush", -3, "write denyoom fast", "list", "Append elements to a list", cmd_push, 1, 1, 1 },
	{ "lpushx", -3, "write denyoom fast", "list", "Prepend elements to a list that exists", cmd_push, 1, 1, 1 },
	{ "rpushx", -3, "write denyoom fast", "list", "Append elements to a list that exists", cmd_push, 1, 1, 1 },
	{ "lpop", -2, "write fast", "list", "Remove and return the first elements of a list", cmd_pop, 1, 1, 1 },
	{ "rpop", -2, "write fast", "list", "Remove and return the last elements of a list", cmd_pop, 1, 1, 1 },
	{ "llen", 2, "readonly fast", "list", "The length of a list", cmd_llen, 1, 1, 1 },
	{ "lrange", 4, "readonly", "list", "A range of a list's elements", cmd_lrange, 1, 1, 1 },
	{ "lindex", 3, "readonly", "list", "A list's element by its index", cmd_lindex, 1, 1, 1 },
	{ "lset", 4, "write denyoom", "list", "Set a list's element by its index", cmd_lset, 1, 1, 1 },
	{ "lrem", 4, "write", "list", "Remove the elements equal to a value from a list", cmd_lrem, 1, 1, 1 },
	{ "ltrim", 4, "write", "list", "Keep a range of a list's elements only", cmd_ltrim, 1, 1, 1 },
	{ "linsert", 5, "write denyoom", "list", "Insert an element before or after another in a list", cmd_linsert, 1, 1, 1 },
	{ "lpos", -3, "readonly", "list", "The indexes of the elements equal to a value in a list", cmd_lpos, 1, 1, 1 },
	{ "lmove", 5, "write denyoom", "list", "Pop an element from a list and push it onto another", cmd_lmove, 1, 2, 1 },
	{ "rpoplpush", 3, "write denyoom", "list", "Pop a list's last element and push it onto another's head", cmd_lmove, 1, 2, 1 },
	{ "lmpop", -4, "write", "list", "Pop elements from the first of several lists that has any", cmd_lmpop, 0, 0, 0 },
	{ "blpop", -3, "write noscript blocking", "list", "Pop a list's first element, or wait for one", cmd_bpop, 1, -2, 1 },
	{ "brpop", -3, "write noscript blocking", "list", "Pop a list's last element, or wait for one", cmd_bpop, 1, -2, 1 },
	{ "blmove", 6, "write denyoom noscript blocking", "list", "LMOVE, or wait for an element to move", cmd_blmove, 1, 2, 1 },
	{ "brpoplpush", 4, "write denyoom noscript blocking", "list", "RPOPLPUSH, or wait for an element to move", cmd_blmove, 1, 2, 1 },
	{ "blmpop", -5, "write blocking", "list", "LMPOP, or wait for an element", cmd_blmpop, 0, 0, 0 },
	{ 0 }
};
