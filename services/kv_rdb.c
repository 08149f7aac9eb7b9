/*
 * kv_rdb.c - Redis's RDB format for pkvs's keys (kv_rdb.h): the CRC and
 * writing the plain encodings (DUMP, the snapshot a replica loads), and
 * streams as Redis 7.0 writes them (listpack nodes); reading is
 * kv_rdb_load.c (streams: kv_rdb_stream.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_list.h"
#include "kv_rdb.h"
#include "kv_rdb_fmt.h"
#include "kv_stream.h"
#include "kv_zset.h"
#include "pkvs_resp.h"

/* ------------------------------------------------------------ CRC-64 */

/* Jones's polynomial 0xad93d23594c935a9, reflected (input and output),
 * no final xor: a byte at a time through a table of its bit-reversed
 * form, built at the first call. */
uint64_t kv_crc64(uint64_t crc, const void *p, size_t n)
{
	static uint64_t table[256];
	static bool ready;
	if (!ready) {
		const uint64_t poly = 0x95ac9329ac4bc9b5ull;    /* 0xad93d23594c935a9 reversed */
		for (uint32_t i = 0; i < 256; i++) {
			uint64_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ poly : c >> 1;
			table[i] = c;
		}
		ready = true;
	}
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		crc = table[(uint8_t)(crc ^ b[i])] ^ (crc >> 8);
	return crc;
}

/* ------------------------------------------------------------ writing */

static bool reserve(struct kv_rdb_buf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void kv_rdb_put(struct kv_rdb_buf *b, const void *p, size_t n)
{
	if (n && reserve(b, n)) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
}

void kv_rdb_free(struct kv_rdb_buf *b)
{
	free(b->p);
	*b = (struct kv_rdb_buf){ 0 };
}

void kv_rdb_put_cmd(struct kv_rdb_buf *b, const struct paste_resp_arg *av, uint32_t n)
{
	char h[32];
	kv_rdb_put(b, h, (size_t)snprintf(h, sizeof(h), "*%u\r\n", n));
	for (uint32_t i = 0; i < n; i++) {
		kv_rdb_put(b, h, (size_t)snprintf(h, sizeof(h), "$%zu\r\n", av[i].len));
		kv_rdb_put(b, av[i].p, av[i].len);
		kv_rdb_put(b, "\r\n", 2);
	}
}

static void put_u8(struct kv_rdb_buf *b, uint8_t v)
{
	kv_rdb_put(b, &v, 1);
}

static void put_le(struct kv_rdb_buf *b, uint64_t v, int bytes)
{
	uint8_t o[8];
	for (int i = 0; i < bytes; i++, v >>= 8)
		o[i] = (uint8_t)v;
	kv_rdb_put(b, o, (size_t)bytes);
}

/* RDB's length: 6 bits, 14 bits, or a marker and 32 or 64 bits
 * big-endian. */
size_t kv_rdb_len_encode(uint8_t out[9], uint64_t n)
{
	if (n < 64) {
		out[0] = (uint8_t)n;
		return 1;
	}
	if (n < 16384) {
		out[0] = (uint8_t)(0x40 | (n >> 8));
		out[1] = (uint8_t)n;
		return 2;
	}
	int k = n <= UINT32_MAX ? 4 : 8;
	out[0] = k == 4 ? 0x80 : 0x81;
	for (int i = 0; i < k; i++)
		out[1 + i] = (uint8_t)(n >> (8 * (k - 1 - i)));
	return 1u + (size_t)k;
}

static void put_len(struct kv_rdb_buf *b, uint64_t n)
{
	uint8_t o[9];
	kv_rdb_put(b, o, kv_rdb_len_encode(o, n));
}

static void put_str(struct kv_rdb_buf *b, const void *p, size_t n)
{
	put_len(b, n);
	kv_rdb_put(b, p, n);
}

/* A string whose bytes lie in store extents (or in chunks: kv_elem). */
static void put_ext(struct kv *kv, struct kv_rdb_buf *b, const struct paste_extent *ext,
		    uint32_t n, uint32_t len, uint64_t big)
{
	put_len(b, len);
	if (len && reserve(b, len)) {
		kv_elem_read(kv, ext, n, len, big, 0, b->p + b->len, len);
		b->len += len;
	}
}

static int put_coll(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
	uint64_t id = o->coll.id, count = o->coll.count, got = 0;
	int r;
	if (o->type == KV_LIST) {
		put_u8(b, T_LIST);
		put_len(b, count);
		struct kv_list_walk w;
		kv_list_walk_pos(kv, &w, id, o->coll.head, o->coll.tail, false);
		while ((r = kv_list_walk_next(kv, &w)) == 1 && got < count) {
			put_ext(kv, b, w.ext, w.n, w.len, w.big);
			got++;
		}
	} else {
		bool z = o->type == KV_ZSET, h = o->type == KV_HASH;
		put_u8(b, z ? T_ZSET_2 : h ? T_HASH : T_SET);
		put_len(b, count);
		struct kv_cwalk w;
		kv_cwalk_init(kv, &w, id, z ? KV_ZSET_SCORE : h ? 'f' : KV_SET_MEMBER,
			      z ? KV_ZSCORE : 0, false, NULL, 0);
		while ((r = kv_cwalk_next(kv, &w)) == 1 && got < count) {
			put_str(b, w.name, w.nlen);
			uint64_t big;
			if (h && kv_elem_decode(kv, paste_btree_cursor_attr(&w.c)->tag, w.ext, w.n, &w.len,
						&big)) {
				r = -EBADMSG;
				break;
			} else if (h) {
				put_ext(kv, b, w.ext, w.n, w.len, big);
			} else if (z) {
				double d = kv_zwalk_scoreof(&w);
				uint64_t u;
				memcpy(&u, &d, 8);
				put_le(b, u, 8);
			}
			got++;
		}
	}
	if (r < 0 || got != count)
		return -EBADMSG;
	return b->oom ? -ENOMEM : 0;
}

/* ------------------------------------------------------------ streams */

/* A stream as RDB_TYPE_STREAM_LISTPACKS_2 (the format: kv_rdb_stream.c,
 * which reads it): its own nodes (kv_stream.h: a Redis or pkvs that loads
 * it counts the nodes pkvs's XINFO STREAM says, and trims them as the
 * source would), entries without a node number in runs of 100, each
 * node's first fields as its master fields, no deleted entries. A node
 * is cut early only where it would pass 1 GiB of fields and values
 * (STREAM_LISTPACK_MAX_SIZE, what Redis lets a node grow to). */
#define NODE_ENTRIES 100u
#define NODE_BYTES (1u << 30)
#define F_SAMEFIELDS 2

bool kv_rdb_strtoll(const uint8_t *s, size_t n, int64_t *v)
{
	if (n == 0 || n > 20)
		return false;
	if (n == 1 && s[0] == '0') {
		*v = 0;
		return true;
	}
	bool neg = s[0] == '-';
	size_t i = neg;
	if (i == n || s[i] < '1' || s[i] > '9')
		return false;
	uint64_t u = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || u > (UINT64_MAX - 9) / 10)
			return false;
		u = u * 10 + (uint64_t)(s[i] - '0');
	}
	if (u > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
		return false;
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	return true;
}

bool kv_rdb_grow(void *arr, size_t *cap, size_t n, size_t size)
{
	void **a = arr;
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = realloc(*a, c * size);
	if (!p)
		return false;
	*a = p;
	*cap = c;
	return true;
}

/* An ID as Redis's radix tree keys and pending lists hold it: 128 bits
 * big-endian. */
static void put_id(struct kv_rdb_buf *b, struct kv_sid id)
{
	uint8_t o[16];
	for (int i = 0; i < 8; i++) {
		o[i] = (uint8_t)(id.ms >> (56 - 8 * i));
		o[8 + i] = (uint8_t)(id.seq >> (56 - 8 * i));
	}
	kv_rdb_put(b, o, 16);
}

/* A listpack element: its encoding and bytes, then its length again
 * (lpEncodeBacklen's: 7 bits a byte, the first byte the highest and
 * the only one without the continuation bit). */
static void lp_tail(struct kv_rdb_buf *b, const uint8_t *head, size_t hl, const void *s, size_t sl)
{
	kv_rdb_put(b, head, hl);
	kv_rdb_put(b, s, sl);
	size_t el = hl + sl;
	uint8_t o[5];
	int k = el <= 127 ? 1 : el < 16383 ? 2 : el < 2097151 ? 3 : el < 268435455 ? 4 : 5;
	for (int i = k - 1; i >= 0; i--, el >>= 7)
		o[i] = (uint8_t)((el & 127) | (i ? 128 : 0));
	kv_rdb_put(b, o, (size_t)k);
}

static void lp_int(struct kv_rdb_buf *b, int64_t v)
{
	uint8_t h[9];
	size_t hl;
	uint64_t u = (uint64_t)v;
	if (v >= 0 && v <= 127) {
		h[0] = (uint8_t)v, hl = 1;
	} else if (v >= -4096 && v <= 4095) {
		u &= 0x1fff;
		h[0] = (uint8_t)(0xC0 | u >> 8), h[1] = (uint8_t)u, hl = 2;
	} else {
		int bytes = v >= -32768 && v <= 32767 ? 2 : v >= -8388608 && v <= 8388607 ? 3
			    : v >= INT32_MIN && v <= INT32_MAX ? 4 : 8;
		h[0] = bytes == 2 ? 0xF1 : bytes == 3 ? 0xF2 : bytes == 4 ? 0xF3 : 0xF4;
		for (int i = 0; i < bytes; i++, u >>= 8)
			h[1 + i] = (uint8_t)u;
		hl = 1 + (size_t)bytes;
	}
	lp_tail(b, h, hl, NULL, 0);
}

/* A string, as an integer when it reads as one (as lpAppend does). */
static void lp_str(struct kv_rdb_buf *b, const uint8_t *s, size_t n)
{
	int64_t v;
	if (kv_rdb_strtoll(s, n, &v)) {
		lp_int(b, v);
		return;
	}
	uint8_t h[5];
	size_t hl;
	if (n < 64) {
		h[0] = (uint8_t)(0x80 | n), hl = 1;
	} else if (n < 4096) {
		h[0] = (uint8_t)(0xE0 | n >> 8), h[1] = (uint8_t)n, hl = 2;
	} else {
		h[0] = 0xF0, hl = 5;
		for (int i = 0; i < 4; i++)
			h[1 + i] = (uint8_t)(n >> (8 * i));
	}
	lp_tail(b, h, hl, s, n);
}

/* An entry's fields as kv_stream_fields_decode gives them. */
struct fv {
	const uint8_t *f, *v;
	size_t flen, vlen;
};
struct fvs {
	struct fv *a;
	size_t n, cap;
	bool oom;
};

static void fv_add(void *arg, uint32_t i, const uint8_t *f, size_t flen, const uint8_t *v,
		   size_t vlen)
{
	struct fvs *x = arg;
	(void)i;
	if (!kv_rdb_grow(&x->a, &x->cap, x->n, sizeof(*x->a))) {
		x->oom = true;
		return;
	}
	x->a[x->n++] = (struct fv){ f, v, flen, vlen };
}

/* The node being written. */
struct node {
	struct kv_rdb_buf body, lp, master; /* its entries' elements; the listpack; master fields */
	uint64_t elems;                     /* elements in body */
	uint32_t live, nmaster;
	struct kv_sid id;                   /* master ID: its first entry's */
	uint64_t num;                       /* pkvs's node number of its entries (0: none) */
	uint64_t nodes;                     /* nodes written */
};

/* The node as key and listpack into out. */
static int node_flush(struct node *nd, struct kv_rdb_buf *out)
{
	if (!nd->live)
		return 0;
	struct kv_rdb_buf *lp = &nd->lp;
	lp->len = 0;
	kv_rdb_put(lp, "\0\0\0\0\0\0", 6);
	lp_int(lp, nd->live);
	lp_int(lp, 0);
	lp_int(lp, nd->nmaster);
	for (size_t at = 0; at < nd->master.len && !nd->master.oom;) {
		uint32_t l;
		memcpy(&l, nd->master.p + at, 4);
		lp_str(lp, nd->master.p + at + 4, l);
		at += 4 + l;
	}
	lp_int(lp, 0);
	kv_rdb_put(lp, nd->body.p, nd->body.len);
	kv_rdb_put(lp, "\xff", 1);
	if (lp->oom)
		return -ENOMEM;
	if (lp->len > UINT32_MAX)
		return -EFBIG;
	uint64_t el = 4 + nd->nmaster + nd->elems;
	if (el > 0xFFFF)
		el = 0xFFFF;                /* "unknown", as Redis writes a long one */
	for (int i = 0; i < 4; i++)
		lp->p[i] = (uint8_t)(lp->len >> (8 * i));
	lp->p[4] = (uint8_t)el;
	lp->p[5] = (uint8_t)(el >> 8);
	put_len(out, 16);
	put_id(out, nd->id);
	put_str(out, lp->p, lp->len);
	nd->nodes++;
	nd->body.len = nd->master.len = 0;
	nd->elems = nd->live = nd->nmaster = 0;
	return 0;
}

/* Entry id of pkvs's node num, with fields x->a[0..n), into the node (a
 * new one when the entry's node is another, or it is full). */
static int node_add(struct node *nd, struct kv_rdb_buf *out, struct kv_sid id, uint64_t num,
		    const struct fvs *x)
{
	size_t bytes = 0;
	for (size_t i = 0; i < x->n; i++)
		bytes += x->a[i].flen + x->a[i].vlen;
	int r;
	bool full = num != nd->num || (!num && nd->live >= NODE_ENTRIES) ||
		    nd->body.len + nd->master.len + bytes >= NODE_BYTES;
	if (nd->live && full && (r = node_flush(nd, out)))
		return r;
	if (!nd->live) {
		nd->id = id;
		nd->num = num;
		nd->nmaster = (uint32_t)x->n;
		for (size_t i = 0; i < x->n; i++) {
			uint32_t l = (uint32_t)x->a[i].flen;
			kv_rdb_put(&nd->master, &l, 4);
			kv_rdb_put(&nd->master, x->a[i].f, l);
		}
	}
	/* SAMEFIELDS when the fields are the master's, in order. */
	bool same = x->n == nd->nmaster;
	for (size_t i = 0, at = 0; same && i < x->n && !nd->master.oom; i++) {
		uint32_t l;
		memcpy(&l, nd->master.p + at, 4);
		same = l == x->a[i].flen && !memcmp(nd->master.p + at + 4, x->a[i].f, l);
		at += 4 + l;
	}
	struct kv_rdb_buf *b = &nd->body;
	lp_int(b, same ? F_SAMEFIELDS : 0);
	lp_int(b, (int64_t)(id.ms - nd->id.ms));
	lp_int(b, (int64_t)(id.seq - nd->id.seq));
	if (!same)
		lp_int(b, (int64_t)x->n);
	for (size_t i = 0; i < x->n; i++) {
		if (!same)
			lp_str(b, x->a[i].f, x->a[i].flen);
		lp_str(b, x->a[i].v, x->a[i].vlen);
	}
	lp_int(b, (int64_t)(same ? x->n + 3 : 2 * x->n + 4));
	nd->elems += same ? x->n + 4 : 2 * x->n + 5;
	nd->live++;
	return 0;
}

/* The entries as nodes into out: their count into *nodes, the first ID
 * into *first (0-0 when none). */
static int put_entries(struct kv *kv, uint64_t coll, uint64_t count, struct kv_rdb_buf *out,
		       uint64_t *nodes, struct kv_sid *first)
{
	struct node nd = { 0 };
	struct fvs x = { 0 };
	uint8_t *val = NULL;
	size_t cap = 0;
	uint64_t got = 0;
	int r;
	*first = (struct kv_sid){ 0, 0 };
	struct kv_stream_walk w;
	kv_stream_walk_init(kv, &w, coll, (struct kv_sid){ 0, 0 }, false);
	while ((r = kv_stream_walk_next(kv, &w)) == 1) {
		if (w.len > cap) {
			uint8_t *p = realloc(val, w.len);
			if (!p) {
				r = -ENOMEM;
				break;
			}
			val = p, cap = w.len;
		}
		paste_store_read(kv->store, w.ext, w.n, 0, val, w.len);
		uint32_t n;
		x.n = 0;
		if (kv_stream_fields_decode(val, w.len, &n, fv_add, &x)) {
			r = -EBADMSG;
			break;
		}
		if (x.oom) {
			r = -ENOMEM;
			break;
		}
		if (!got++)
			*first = w.id;
		if ((r = node_add(&nd, out, w.id, w.node, &x)))
			break;
	}
	if (r == 0)
		r = node_flush(&nd, out);
	if (r == 0 && got != count)
		r = -EBADMSG;
	if (r == 0 && (nd.body.oom || nd.master.oom))
		r = -ENOMEM;
	*nodes = nd.nodes;
	kv_rdb_free(&nd.body);
	kv_rdb_free(&nd.lp);
	kv_rdb_free(&nd.master);
	free(x.a);
	free(val);
	return r;
}

/* A pending entry as the writer keeps it: its consumer's name lies in a
 * buffer of names (name set once that buffer is whole). */
struct pent {
	struct kv_sid id;
	size_t off, len;
	const uint8_t *name;
};

static int pent_cmp(const void *a, const void *b)
{
	const struct pent *x = a, *y = b;
	size_t l = x->len < y->len ? x->len : y->len;
	int c = l ? memcmp(x->name, y->name, l) : 0;
	if (c || x->len != y->len)
		return c ? c : x->len < y->len ? -1 : 1;
	return kv_sid_cmp(x->id, y->id);
}

/* Group g's pending entries and consumers into out. */
static int put_group(struct kv *kv, uint64_t coll, const struct kv_sgroup *g, struct kv_rdb_buf *out)
{
	struct kv_rdb_buf pel = { 0 }, names = { 0 }, cons = { 0 };
	struct pent *pe = NULL;
	size_t npe = 0, cap = 0;
	int r;
	struct kv_spending_walk pw;
	kv_spending_walk_init(kv, &pw, coll, g->num, (struct kv_sid){ 0, 0 });
	while ((r = kv_spending_walk_next(kv, &pw)) == 1) {
		if (!kv_rdb_grow(&pe, &cap, npe, sizeof(*pe))) {
			r = -ENOMEM;
			break;
		}
		pe[npe++] = (struct pent){ pw.p.id, names.len, pw.p.clen, NULL };
		kv_rdb_put(&names, pw.p.consumer, pw.p.clen);
		put_id(&pel, pw.p.id);
		put_le(&pel, pw.p.delivered_ms, 8);
		put_len(&pel, pw.p.count);
	}
	uint64_t ncons = 0, owned = 0;
	if (r == 0 && !names.oom) {
		for (size_t i = 0; i < npe; i++)
			pe[i].name = names.p + pe[i].off;
		if (npe)
			qsort(pe, npe, sizeof(*pe), pent_cmp);
		/* Each consumer's IDs: its run in pe, by name then ID. */
		struct kv_sconsumer_walk cw;
		kv_sconsumer_walk_init(kv, &cw, coll, g->num);
		while ((r = kv_sconsumer_walk_next(kv, &cw)) == 1) {
			struct pent key = { { 0, 0 }, 0, cw.nlen, cw.name };
			size_t lo = 0, hi = npe;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (pent_cmp(&pe[mid], &key) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			size_t end = lo;
			while (end < npe && pe[end].len == cw.nlen &&
			       (!cw.nlen || !memcmp(pe[end].name, cw.name, cw.nlen)))
				end++;
			put_str(&cons, cw.name, cw.nlen);
			put_le(&cons, cw.c.seen_ms, 8);
			put_len(&cons, end - lo);
			for (size_t i = lo; i < end; i++)
				put_id(&cons, pe[i].id);
			owned += end - lo;
			ncons++;
		}
	}
	/* A pending entry of no consumer: Redis could not load it. */
	if (r == 0 && owned != npe)
		r = -EBADMSG;
	if (r == 0) {
		put_len(out, npe);
		kv_rdb_put(out, pel.p, pel.len);
		put_len(out, ncons);
		kv_rdb_put(out, cons.p, cons.len);
		if (pel.oom || names.oom || cons.oom)
			r = -ENOMEM;
	}
	kv_rdb_free(&pel);
	kv_rdb_free(&names);
	kv_rdb_free(&cons);
	free(pe);
	return r;
}

static int put_stream(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
	const struct kv_coll *c = &o->coll;
	struct kv_rdb_buf nodes = { 0 }, groups = { 0 };
	uint64_t nnodes = 0, ngroups = 0;
	struct kv_sid first;
	int r = put_entries(kv, c->id, c->count, &nodes, &nnodes, &first);
	struct kv_sgroup_walk gw;
	kv_sgroup_walk_init(kv, &gw, c->id);
	while (r == 0 && (r = kv_sgroup_walk_next(kv, &gw)) == 1) {
		put_str(&groups, gw.name, gw.nlen);
		put_len(&groups, gw.g.last.ms);
		put_len(&groups, gw.g.last.seq);
		put_len(&groups, (uint64_t)gw.g.read);      /* -1 (unknown) as Redis: all ones */
		r = put_group(kv, c->id, &gw.g, &groups);
		ngroups++;
	}
	free(gw.longbuf);                               /* left by a stop before the end */
	if (r == 0) {
		put_u8(b, T_STREAM_LISTPACKS_2);
		put_len(b, nnodes);
		kv_rdb_put(b, nodes.p, nodes.len);
		put_len(b, c->count);
		put_len(b, c->last_ms);
		put_len(b, c->last_seq);
		put_len(b, first.ms);
		put_len(b, first.seq);
		put_len(b, c->del_ms);
		put_len(b, c->del_seq);
		put_len(b, c->added);
		put_len(b, ngroups);
		kv_rdb_put(b, groups.p, groups.len);
		if (nodes.oom || groups.oom || b->oom)
			r = -ENOMEM;
	}
	kv_rdb_free(&nodes);
	kv_rdb_free(&groups);
	return r;
}

int kv_rdb_value(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
	if (o->type == KV_STREAM)
		return put_stream(kv, o, b);
	if (kv_is_coll(o->type))
		return put_coll(kv, o, b);
	put_u8(b, T_STRING);
	put_len(b, o->len);
	if (o->len && reserve(b, o->len)) {
		if (kv_value_read(kv, o, 0, b->p + b->len, o->len) != o->len)
			return -EBADMSG;
		b->len += o->len;
	}
	return b->oom ? -ENOMEM : 0;
}

void kv_rdb_seal(struct kv_rdb_buf *b, size_t at)
{
	put_le(b, KV_RDB_VERSION, 2);
	if (!b->oom)
		put_le(b, kv_crc64(0, b->p + at, b->len - at), 8);
}

int kv_rdb_dump(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
	size_t at = b->len;
	int r = kv_rdb_value(kv, o, b);
	if (r)
		return r;
	kv_rdb_seal(b, at);
	return b->oom ? -ENOMEM : 0;
}

bool kv_rdb_payload_ok(const uint8_t *p, size_t len)
{
	if (len < 10)
		return false;
	uint16_t ver = (uint16_t)(p[len - 10] | p[len - 9] << 8);
	if (ver > KV_RDB_VERSION)
		return false;
	uint64_t crc = 0;
	for (int i = 7; i >= 0; i--)
		crc = crc << 8 | p[len - 8 + (size_t)i];
	return kv_crc64(0, p, len - 8) == crc;
}

static void put_aux(struct kv_rdb_buf *b, const char *k, const char *v)
{
	put_u8(b, OP_AUX);
	put_str(b, k, strlen(k));
	put_str(b, v, strlen(v));
}

int kv_rdb_snapshot(struct kv *kv, struct kv_rdb_buf *b, const char *repl_id, uint64_t repl_offset)
{
	char v[64];
	kv_rdb_put(b, "REDIS0010", 9);
	put_aux(b, "redis-ver", PKVS_REDIS_VERSION);
	put_aux(b, "redis-bits", "64");
	snprintf(v, sizeof(v), "%lld", (long long)time(NULL));
	put_aux(b, "ctime", v);
	put_aux(b, "used-mem", "0");
	put_aux(b, "repl-stream-db", "0");
	put_aux(b, "repl-id", repl_id);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)repl_offset);
	put_aux(b, "repl-offset", v);
	put_aux(b, "aof-base", "0");
	uint8_t *longbuf = NULL;
	int r = 0;
	for (uint32_t db = 0; db < kv->ndbs && !r; db++) {
		uint64_t keys = kv_dbsize(kv, db);
		if (!keys)
			continue;
		put_u8(b, OP_SELECTDB);
		put_len(b, db);
		put_u8(b, OP_RESIZEDB);
		put_len(b, keys);
		put_len(b, kv_dbexpires(kv, db));
		if (!longbuf && !(longbuf = malloc(KV_MAX_KEY))) {
			r = -ENOMEM;
			break;
		}
		struct kv_scan s;
		kv_scan_init(kv, &s, db, NULL, 0, false);
		const uint8_t *key;
		size_t klen;
		enum kv_type type;
		int64_t exp;
		while (!r && kv_scan_next(kv, &s, &key, &klen, longbuf, &type, &exp) == 1) {
			struct kv_key k;
			struct kv_obj o;
			kv_key_init(kv, &k, db, key, klen);
			if (kv_lookup(kv, &k, &o, false))
				continue;
			if (o.expire_ms != KV_NO_TTL) {
				put_u8(b, OP_EXPIRE_MS);
				put_le(b, (uint64_t)o.expire_ms, 8);
			}
			/* The type byte comes before the key: written by
			 * kv_rdb_value, moved in front of the key after. */
			size_t at = b->len;
			put_str(b, key, klen);
			size_t kend = b->len;
			r = kv_rdb_value(kv, &o, b);
			if (!r && !b->oom) {
				uint8_t t = b->p[kend];
				memmove(b->p + at + 1, b->p + at, kend - at);
				b->p[at] = t;
			}
		}
	}
	free(longbuf);
	put_u8(b, OP_EOF);
	if (!b->oom)
		put_le(b, kv_crc64(0, b->p, b->len), 8);
	if (!r && b->oom)
		r = -ENOMEM;
	return r;
}
