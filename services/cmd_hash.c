/*
 * cmd_hash.c - pkvs's hash commands (pkvs_resp.h) over kv_hash.h: HSET,
 * HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HEXISTS, HSTRLEN, HGETALL,
 * HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HSCAN, HRANDFIELD, with Redis
 * 7.0's replies and errors in RESP2 and RESP3.
 *
 * Values: a field's value over KV_PACK_MAX bytes that landed in a packet
 * buffer stays there, zero copy, as a SET's does (kv_arg_hold); smaller
 * ones are packed densely. Replies that carry values (HGET, HMGET,
 * HGETALL, HVALS, HSCAN, HRANDFIELD) are built in a small buffer with the
 * small values copied in, and each large value is sent from the buffers
 * it lies in (kv_out.h).
 *
 * Order: fields come in the tree's order (bytes; a name over 400 bytes by
 * its first 375 and then its digest), not Redis's insertion or hash
 * order; Redis promises none.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_hash.h"
#include "kv_notify.h"
#include "kv_out.h"
#include "pkvs_resp.h"

/* ------------------------------------------------------------ arguments */

int kv_arg_hold(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *v,
		struct paste_body *b)
{
	const struct paste_event *ev = x->ev;
	if (!ev || ev->buf == PASTE_NO_BUF || v->len <= KV_PACK_MAX ||
	    v->p < (const char *)ev->data || v->p + v->len > (const char *)ev->data + ev->len)
		return 0;
	kv_body_idle(b);
	if (paste_body_begin(b, &kv->bc, kv->store, v->len))
		return -EFBIG;
	kv_admit(kv, v->len);
	paste_body_feed(b, &kv->bc, x->w->port, ev, (uint32_t)(v->p - (const char *)ev->data),
			(uint32_t)v->len);
	return 1;
}

/* Field f of h to argument v, held where it landed or copied. */
static int set_arg(struct resp_ctx *x, struct kv *kv, struct kv_hash *h, const struct paste_resp_arg *f,
		   const struct paste_resp_arg *v, bool *created)
{
	struct paste_body b;
	int r = kv_arg_hold(x, kv, v, &b);
	if (r < 0)
		return r;
	if (r)
		return kv_hash_set_body(kv, h, f->p, f->len, &b, created);
	return kv_hash_set_bytes(kv, h, f->p, f->len, v->p, v->len, created);
}

/* kv_reply_errno, but for what a field's entry cannot hold. */
static void reply_errno(struct resp_ctx *x, int r)
{
	struct kv *kv = pkvs_kv(x->ss);
	if (r == -EFBIG && !server_store_failed(x->w))
		resp_error(x, "ERR value too large (pkvs's limit for a hash field: %" PRIu64 " bytes)",
			   kv_max_value(kv));
	else if (r == -ENAMETOOLONG && !server_store_failed(x->w))
		resp_error(x, "ERR field name too long (pkvs's limit: a name over %u bytes and its "
			   "value share one entry of at most %u store buffers)", KV_INLINE,
			   PASTE_BTREE_MAX_EXTENTS);
	else
		kv_reply_errno(x, r);
}

static bool field_ok(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *f)
{
	if (f->len <= kv_max_key(kv))
		return true;
	resp_error(x, "ERR field length %zu is over %zu bytes (pkvs's limit)", f->len, kv_max_key(kv));
	return false;
}

/* Open the hash named by a[1]: 0, -ENOENT (absent; with create a new one
 * and 0), -EINVAL (replied: WRONGTYPE, or a key over pkvs's limit). The
 * field a[2] (when the command has one: n > 2) is looked ahead. */
static int open_hash(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		     struct kv_hash *h, bool create, bool read)
{
	if (!kv_arg_key(x, kv, &a[1], &h->key))
		return -EINVAL;
	if (n > 2)
		kv_hash_prefetch(kv, &h->key, a[2].p, a[2].len);
	int r = kv_hash_open(kv, h, read);
	if (r == -EMEDIUMTYPE) {
		resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
		return -EINVAL;
	}
	if (r == -ENOENT && create) {
		kv_hash_new(kv, h);
		return 0;
	}
	return r;
}

/* ------------------------------------------------------------ writes */

/* HSET key field value [field value ...]; HMSET the same, answering OK. */
static void cmd_hset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n % 2) {
		resp_arity_error(x, &a[0]);
		return;
	}
	uint64_t bytes = 0;
	for (uint32_t i = 2; i < n; i += 2) {
		if (!field_ok(x, kv, &a[i]))
			return;
		if (a[i + 1].len > KV_PACK_MAX && a[i + 1].len > kv_max_value(kv)) {
			reply_errno(x, -EFBIG);
			return;
		}
		bytes += a[i].len + a[i + 1].len;
	}
	struct kv_hash h;
	if (open_hash(x, kv, a, n, &h, true, false))
		return;
	int64_t created = 0;
	int r;
	bool c;
	if (n == 4) {
		r = set_arg(x, kv, &h, &a[2], &a[3], &c);
		created = c;
	} else {
		r = kv_hash_begin(kv, &h, bytes);
		for (uint32_t i = 2; r == 0 && i < n; i += 2) {
			r = set_arg(x, kv, &h, &a[i], &a[i + 1], &c);
			created += c;
		}
		r = kv_hash_end(kv, &h, r);
	}
	if (r == 0)
		kv_notify(KV_NOTIFY_HASH, "hset", &h.key);
	if (r)
		reply_errno(x, r);
	else if (a[0].len > 1 && (a[0].p[1] == 'm' || a[0].p[1] == 'M'))
		resp_ok(x);
	else if (created <= 1)
		resp_send(x, created ? ":1\r\n" : ":0\r\n", 4);   /* the usual answers, made once */
	else
		resp_int(x, created);
}

static void cmd_hsetnx(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	if (!field_ok(x, kv, &a[2]))
		return;
	struct kv_hash h;
	if (open_hash(x, kv, a, n, &h, true, false))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	uint64_t big;
	if (kv_hash_get(kv, &h, a[2].p, a[2].len, ext, &en, &len, &big) == 0) {
		resp_int(x, 0);
		return;
	}
	int r = set_arg(x, kv, &h, &a[2], &a[3], NULL);
	if (r == 0)
		kv_notify(KV_NOTIFY_HASH, "hset", &h.key);
	if (r)
		reply_errno(x, r);
	else
		resp_int(x, 1);
}

static void cmd_hdel(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_hash h;
	int r = open_hash(x, kv, a, n, &h, false, false);
	if (r) {
		if (r == -ENOENT)
			resp_int(x, 0);
		return;
	}
	int64_t deleted = 0;
	if (n == 3) {
		r = a[2].len <= KV_MAX_KEY ? kv_hash_del(kv, &h, a[2].p, a[2].len) : 0;
		deleted = r > 0;
	} else {
		r = kv_hash_begin(kv, &h, 0);
		for (uint32_t i = 2; r >= 0 && i < n && h.o.coll.count; i++) {
			r = a[i].len <= KV_MAX_KEY ? kv_hash_del(kv, &h, a[i].p, a[i].len) : 0;
			deleted += r > 0;
		}
		r = kv_hash_end(kv, &h, r < 0 ? r : 0);
	}
	if (r >= 0 && deleted) {
		kv_notify(KV_NOTIFY_HASH, "hdel", &h.key);
		if (!h.o.coll.count)
			kv_notify(KV_NOTIFY_GENERIC, "del", &h.key);   /* the last field went */
	}
	if (r < 0)
		reply_errno(x, r);
	else
		resp_int(x, deleted);
}

bool kv_ld_parse(const char *s, size_t len, long double *out)
{
	char buf[KV_LD_CHARS];
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	char *end;
	errno = 0;
	long double v = strtold(buf, &end);
	if (isspace((unsigned char)buf[0]) || *end || (size_t)(end - buf) != len ||
	    (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
	    errno == EINVAL || isnan(v))
		return false;
	*out = v;
	return true;
}

int kv_ld_format(char *out, size_t cap, long double v)
{
	int l = snprintf(out, cap, "%.17Lf", v);
	if (l < 0 || (size_t)l >= cap)
		return -1;
	if (strchr(out, '.')) {
		while (out[l - 1] == '0')
			l--;
		if (out[l - 1] == '.')
			l--;
	}
	if (l == 2 && out[0] == '-' && out[1] == '0') {
		out[0] = '0';
		l = 1;
	}
	out[l] = 0;
	return l;
}

/* A field's value read into buf (at most cap - 1 bytes, NUL-ended): its
 * length, or -1 when absent, -2 when longer. */
static long read_field(struct kv *kv, struct kv_hash *h, const struct paste_resp_arg *f, char *buf,
		       size_t cap)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	uint64_t big;
	if (kv_hash_get(kv, h, f->p, f->len, ext, &en, &len, &big))
		return -1;
	if (len >= cap || big)
		return -2;
	paste_store_read(kv->store, ext, en, 0, buf, len);
	buf[len] = 0;
	return (long)len;
}

/* HINCRBY's and HINCRBYFLOAT's field: h opened (or a new one), the
 * value read into num as read_field does; -3 when replied (an error). */
static long incr_field(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       struct kv_hash *h, char *num, size_t cap)
{
	if (!field_ok(x, kv, &a[2]) || open_hash(x, kv, a, 3, h, true, false))
		return -3;
	return read_field(kv, h, &a[2], num, cap);
}

/* The new value num[0..len) set, and replied as an integer (iv) or a bulk. */
static void incr_done(struct resp_ctx *x, struct kv *kv, struct kv_hash *h,
		      const struct paste_resp_arg *f, const char *num, int len, const int64_t *iv)
{
	int r = kv_hash_set_bytes(kv, h, f->p, f->len, num, (size_t)len, NULL);
	if (r == 0)
		kv_notify(KV_NOTIFY_HASH, iv ? "hincrby" : "hincrbyfloat", &h->key);
	if (r)
		reply_errno(x, r);
	else if (iv)
		resp_int(x, *iv);
	else
		resp_bulk(x, num, (size_t)len);
}

static void cmd_hincrby(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t by, v = 0;
	if (paste_resp_arg_i64(&a[3], &by)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	struct kv_hash h;
	char num[24];
	long l = incr_field(x, kv, a, &h, num, sizeof(num));
	if (l == -3)
		return;
	struct paste_resp_arg cur = { num, l < 0 ? 0 : (size_t)l };
	if (l != -1 && (l < 0 || paste_resp_arg_i64(&cur, &v))) {
		resp_error(x, "ERR hash value is not an integer");
		return;
	}
	if ((by < 0 && v < 0 && by < INT64_MIN - v) || (by > 0 && v > 0 && by > INT64_MAX - v)) {
		resp_error(x, "ERR increment or decrement would overflow");
		return;
	}
	v += by;
	incr_done(x, kv, &h, &a[2], num, paste_resp_put_i64_text(num, sizeof(num), v), &v);
}

static void cmd_hincrbyfloat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)n;
	long double by, v = 0;
	if (!kv_ld_parse(a[3].p, a[3].len, &by)) {
		resp_error(x, "ERR value is not a valid float");
		return;
	}
	if (isnan(by) || isinf(by)) {
		resp_error(x, "ERR value is NaN or Infinity");
		return;
	}
	struct kv_hash h;
	char num[KV_LD_CHARS];
	long l = incr_field(x, kv, a, &h, num, sizeof(num));
	if (l == -3)
		return;
	if (l != -1 && (l < 0 || !kv_ld_parse(num, (size_t)l, &v))) {
		resp_error(x, "ERR hash value is not a float");
		return;
	}
	v += by;
	if (isnan(v) || isinf(v)) {
		resp_error(x, "ERR increment would produce NaN or Infinity");
		return;
	}
	int len = kv_ld_format(num, sizeof(num), v);
	if (len < 0)
		resp_error(x, "ERR value is out of range");
	else
		incr_done(x, kv, &h, &a[2], num, len, NULL);
}

/* ------------------------------------------------------------ reads */

/* Field f of h (r: how opening h went) as a bulk, or null. */
static void out_get(struct kv_out *o, struct kv *kv, struct kv_hash *h, int r,
		    const struct paste_resp_arg *f)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	uint64_t big;
	if (r || f->len > KV_MAX_KEY || kv_hash_get(kv, h, f->p, f->len, ext, &en, &len, &big))
		kv_out_null(o);
	else
		kv_out_elem(o, kv, ext, en, len, big);
}

/* HGET (a bulk), HMGET (an array of them). */
static void cmd_hget(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_hash h;
	int r = open_hash(x, kv, a, n, &h, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	bool many = a[0].len == 5;                /* HMGET */
	if (many)
		kv_out_array(&o, n - 2);
	for (uint32_t i = 2; i < n && !o.r; i++)
		out_get(&o, kv, &h, r, &a[i]);
	kv_out_end(&o);
}

/* HLEN, HEXISTS, HSTRLEN: a number, 0 for an absent key. */
static void cmd_hlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_hash h;
	int r = open_hash(x, kv, a, n, &h, false, true);
	if (r == -EINVAL)
		return;
	if (r) {
		resp_int(x, 0);
		return;
	}
	if (n == 2) {
		resp_int(x, (int64_t)h.o.coll.count);
		return;
	}
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len = 0;
	uint64_t big;
	bool has = a[2].len <= KV_MAX_KEY &&
		   kv_hash_get(kv, &h, a[2].p, a[2].len, ext, &en, &len, &big) == 0;
	resp_int(x, (a[0].p[1] | 0x20) == 'e' ? has : (int64_t)(has ? len : 0));   /* HEXISTS, HSTRLEN */
}

enum { H_NAMES = 1, H_VALUES = 2 };

/* One field as a reply wants it: its name, its value, or both (a pair of
 * its own in RESP3 when `pair`). */
static void out_field(struct kv_out *o, struct kv *kv, unsigned what, bool pair, const uint8_t *name,
		      size_t nlen, const struct paste_extent *ext, uint32_t en, uint32_t len, uint64_t big)
{
	if (pair && what == (H_NAMES | H_VALUES) && kv_out_proto(o) == 3)
		kv_out_array(o, 2);
	if (what & H_NAMES)
		kv_out_bulk(o, name, nlen);
	if (what & H_VALUES)
		kv_out_elem(o, kv, ext, en, len, big);
}

static void out_walked(struct kv_out *o, struct kv *kv, unsigned what, bool pair,
		       const struct kv_hash_walk *w)
{
	out_field(o, kv, what, pair, w->name, w->nlen, w->ext, w->n, w->len, w->big);
}

/* HGETALL (a map), HKEYS, HVALS (arrays). */
static void cmd_hgetall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	unsigned what = a[0].len == 7 ? H_NAMES | H_VALUES :
			(a[0].p[1] | 0x20) == 'k' ? H_NAMES : H_VALUES;
	struct kv_hash h;
	int r = open_hash(x, kv, a, n, &h, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	uint64_t count = r ? 0 : h.o.coll.count;
	if (what == (H_NAMES | H_VALUES))
		kv_out_map(&o, count);
	else
		kv_out_array(&o, count);
	struct kv_hash_walk w;
	if (count && (r = kv_hash_walk_init(kv, &h, &w, NULL, 0)) != 0) {
		resp_error(x, "ERR %s", strerror(-r));
		return;
	}
	/* The record's count was sent first: exactly that many follow. */
	for (uint64_t i = 0; i < count && !o.r; i++) {
		if (kv_hash_walk_next(kv, &w) != 1) {
			resp_close(x);                  /* a damaged hash: end the reply unfinished */
			return;
		}
		out_walked(&o, kv, what, false, &w);
	}
	kv_out_end(&o);
}

/* ------------------------------------------------------------ HSCAN */

/* Cursors: as SCAN's (cmd_keyspace.c), a number naming where the last
 * call stopped (the tree key of the first field it did not return), kept
 * for the last HSCAN_SLOTS calls. */
#define HSCAN_SLOTS 256u
static struct hscan_slot {
	uint64_t id;
	uint16_t tlen;
	uint8_t t[PASTE_BTREE_MAX_KEY];
} hscans[HSCAN_SLOTS];
static uint64_t hscan_next = 1;

static void cmd_hscan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	uint64_t cursor;
	if (!kv_arg_cursor(&a[2], &cursor)) {
		resp_error(x, "ERR invalid cursor");
		return;
	}
	struct kv_hash h;
	int r = open_hash(x, kv, a, 2, &h, false, true);
	if (r == -EINVAL)
		return;
	if (r) {
		resp_send(x, "*2\r\n$1\r\n0\r\n*0\r\n", 15);
		return;
	}
	int64_t count;
	const struct paste_resp_arg *match;
	if (!kv_arg_scan(x, a, n, 3, &count, &match))
		return;
	struct kv_hash_walk w;
	/* A hash Redis would keep as a listpack is answered whole, cursor 0,
	 * whatever the cursor and COUNT, as Redis answers it. */
	bool whole = kv_hash_small(kv, &h.o);
	struct hscan_slot *from = NULL;
	if (!whole && cursor) {
		from = &hscans[cursor % HSCAN_SLOTS];
		if (from->id != cursor || !kv_hash_walk_at(kv, &h, &w, from->t, from->tlen)) {
			resp_error(x, "ERR invalid cursor (pkvs keeps the last %u HSCAN cursors)",
				   HSCAN_SLOTS);
			return;
		}
	} else if ((r = kv_hash_walk_init(kv, &h, &w, NULL, 0)) != 0) {
		resp_error(x, "ERR %s", strerror(-r));
		return;
	}
	uint64_t steps = whole ? UINT64_MAX : (uint64_t)count;
	/* Two walks over the same fields: the first counts what matches and
	 * finds where the next call begins, the second sends (the count
	 * goes first, and large values are sent from their buffers). */
	struct kv_hash_walk w2 = w;
	uint64_t seen = 0, found = 0, next = 0;
	while (kv_hash_walk_next(kv, &w) == 1) {
		if (seen == steps) {
			next = hscan_next++;
			struct hscan_slot *s = &hscans[next % HSCAN_SLOTS];
			uint32_t tlen;
			const uint8_t *t = kv_hash_walk_pos(&w, &tlen);
			s->id = next;
			s->tlen = (uint16_t)tlen;
			memcpy(s->t, t, tlen);
			break;
		}
		seen++;
		found += !match || kv_glob(match->p, match->len, w.name, w.nlen);
	}
	struct kv_out o;
	kv_out_init(&o, x);
	char num[24];
	kv_out_array(&o, 2);
	kv_out_bulk(&o, num, (size_t)snprintf(num, sizeof(num), "%" PRIu64, next));
	kv_out_array(&o, found * 2);
	for (uint64_t i = 0; i < seen && !o.r; i++) {
		if (kv_hash_walk_next(kv, &w2) != 1) {
			resp_close(x);                  /* a damaged hash: end the reply unfinished */
			return;
		}
		if (!match || kv_glob(match->p, match->len, w2.name, w2.nlen))
			out_walked(&o, kv, H_NAMES | H_VALUES, false, &w2);
	}
	kv_out_end(&o);
}

/* ------------------------------------------------------------ HRANDFIELD */

/* Picks with repetition, answered in the order drawn: at most PICK_BATCH
 * at a time (Redis's HRANDFIELD_RANDOM_SAMPLE_LIMIT), each batch one walk
 * in index order, skipping from pick to pick a leaf of the tree at a time,
 * that copies the picked names and notes their values' extents. */
#define PICK_BATCH 1000u

struct pick {
	uint64_t at;                    /* field index */
	uint32_t slot;                  /* the order drawn */
};

struct picked {
	size_t name, nlen;              /* in the names buffer */
	uint32_t ext, en, len;          /* in the extents array */
	uint64_t big;                   /* in chunks (kv_elem) */
};

static int pick_cmp(const void *a, const void *b)
{
	const struct pick *p = a, *q = b;
	return p->at < q->at ? -1 : p->at > q->at;
}

static int pick_batch(struct kv_out *o, struct kv *kv, struct kv_hash *h, uint32_t m, unsigned what,
		      struct pick *picks, struct picked *got, struct reasm *names,
		      struct paste_extent **exts, size_t *ecap)
{
	uint64_t size = h->o.coll.count;
	for (uint32_t i = 0; i < m; i++)
		picks[i] = (struct pick){ kv_rand_below(size), i };
	qsort(picks, m, sizeof(*picks), pick_cmp);
	struct kv_hash_walk w;
	int r = kv_hash_walk_init(kv, h, &w, NULL, 0);
	if (r)
		return r;
	names->len = 0;
	size_t ne = 0;
	uint64_t at = 0;                        /* the index the next field has */
	for (uint32_t j = 0; j < m;) {
		uint64_t want = picks[j].at;
		if (kv_hash_walk_skip(&w, want - at) != want - at || kv_hash_walk_next(kv, &w) != 1)
			return -EBADMSG;
		at = want + 1;
		size_t noff = names->len;
		if (reasm_append(names, w.name, w.nlen))
			return -ENOMEM;
		if (ne + w.n > *ecap) {
			size_t cap = 2 * (ne + w.n) + 64;
			struct paste_extent *e = realloc(*exts, cap * sizeof(*e));
			if (!e)
				return -ENOMEM;
			*exts = e;
			*ecap = cap;
		}
		if (w.n)                        /* (an empty value: *exts may be NULL yet) */
			memcpy(*exts + ne, w.ext, w.n * sizeof(*w.ext));
		for (; j < m && picks[j].at == want; j++)
			got[picks[j].slot] = (struct picked){ noff, w.nlen, (uint32_t)ne, w.n, w.len, w.big };
		ne += w.n;
	}
	for (uint32_t i = 0; i < m && !o->r; i++)
		out_field(o, kv, what, true, (const uint8_t *)names->p + got[i].name, got[i].nlen,
			  *exts + got[i].ext, got[i].en, got[i].len, got[i].big);
	return 0;
}

/* Count drawn with repetition (a negative count, or 1). */
static int rand_repeat(struct kv_out *o, struct kv *kv, struct kv_hash *h, uint64_t count,
		       unsigned what)
{
	uint32_t m = count < PICK_BATCH ? (uint32_t)count : PICK_BATCH;
	struct pick *picks = malloc(m * sizeof(*picks));
	struct picked *got = malloc(m * sizeof(*got));
	struct reasm names = { 0 };
	struct paste_extent *exts = NULL;
	size_t ecap = 0;
	int r = picks && got ? 0 : -ENOMEM;
	while (r == 0 && count && !o->r) {
		uint32_t b = count < m ? (uint32_t)count : m;
		r = pick_batch(o, kv, h, b, what, picks, got, &names, &exts, &ecap);
		count -= b;
	}
	free(picks);
	free(got);
	free(exts);
	reasm_free(&names);
	return r;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t p = *(const uint64_t *)a, q = *(const uint64_t *)b;
	return p < q ? -1 : p > q;
}

/* Count distinct fields of the hash's size, count < size, every subset
 * alike likely, answered in the tree's order. Against most of the hash
 * (count over a third of it, Redis's HRANDFIELD_SUB_STRATEGY_MUL) one
 * walk takes each field with the chance still needed over the fields
 * still to come (selection sampling); against a few, count distinct
 * indexes are drawn and the walk skips from one to the next. */
static int rand_distinct(struct kv_out *o, struct kv *kv, struct kv_hash *h, uint64_t count,
			 unsigned what)
{
	struct kv_hash_walk w;
	int r = kv_hash_walk_init(kv, h, &w, NULL, 0);
	if (r)
		return r;
	uint64_t size = h->o.coll.count;
	if (count * 3 > size) {
		for (uint64_t left = size; count && !o->r;) {
			if (kv_hash_walk_next(kv, &w) != 1)
				return -EBADMSG;
			if (kv_rand_below(left--) < count) {
				out_walked(o, kv, what, true, &w);
				count--;
			}
		}
		return 0;
	}
	uint64_t *pick = malloc(count * sizeof(*pick));
	if (!pick)
		return -ENOMEM;
	/* Draws until count differ: a repeat is drawn again. */
	for (uint64_t k = 0; k < count;) {
		for (uint64_t i = k; i < count; i++)
			pick[i] = kv_rand_below(size);
		qsort(pick, count, sizeof(*pick), u64_cmp);
		k = 1;
		for (uint64_t i = 1; i < count; i++)
			if (pick[i] != pick[k - 1])
				pick[k++] = pick[i];
	}
	uint64_t at = 0;
	for (uint64_t i = 0; i < count && !o->r && r == 0; i++) {
		if (kv_hash_walk_skip(&w, pick[i] - at) != pick[i] - at || kv_hash_walk_next(kv, &w) != 1)
			r = -EBADMSG;
		else
			out_walked(o, kv, what, true, &w);
		at = pick[i] + 1;
	}
	free(pick);
	return r;
}

/* HRANDFIELD key [count [WITHVALUES]]: Redis's rules. No count: one
 * field's name (null for no key). A count of 0 or no key: an empty array.
 * A negative count -n: n fields drawn with repetition, in the order
 * drawn. A positive count n: n distinct fields (all when n >= the size).
 * WITHVALUES: name and value flat (RESP2) or as pairs (RESP3). */
static void cmd_hrandfield(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	int64_t l = 0;
	bool withvalues = false;
	if (n >= 3) {
		if (paste_resp_arg_i64(&a[2], &l)) {
			resp_error(x, "ERR value is not an integer or out of range");
			return;
		}
		if (l < -INT64_MAX) {
			resp_error(x, "ERR value is out of range, value must between %" PRId64 " and %" PRId64,
				   -INT64_MAX, INT64_MAX);
			return;
		}
		if (n > 4 || (n == 4 && !paste_resp_arg_eq(&a[3], "WITHVALUES"))) {
			resp_error(x, "ERR syntax error");
			return;
		}
		withvalues = n == 4;
		if (withvalues && (l < -INT64_MAX / 2 || l > INT64_MAX / 2)) {
			resp_error(x, "ERR value is out of range");
			return;
		}
	}
	struct kv_hash h;
	int r = open_hash(x, kv, a, 2, &h, false, true);
	if (r == -EINVAL)
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	if (n == 2) {
		if (r) {
			resp_null(x);
			return;
		}
		r = rand_repeat(&o, kv, &h, 1, H_NAMES);
	} else if (r || l == 0) {
		resp_send(x, "*0\r\n", 4);
		return;
	} else {
		unsigned what = withvalues ? H_NAMES | H_VALUES : H_NAMES;
		uint64_t size = h.o.coll.count, count = l < 0 ? (uint64_t)-l : (uint64_t)l;
		bool repeat = l < 0 || count == 1;
		uint64_t replies = repeat ? count : count < size ? count : size;
		kv_out_array(&o, withvalues && kv_out_proto(&o) == 2 ? 2 * replies : replies);
		if (repeat)
			r = rand_repeat(&o, kv, &h, count, what);
		else
			r = rand_distinct(&o, kv, &h, replies, what);
	}
	if (r && !o.r) {
		/* Part of the reply may be queued: it cannot be answered. */
		resp_close(x);
		return;
	}
	kv_out_end(&o);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_hash[] = {
	{ "hset", -4, "write denyoom fast", "hash", "Writes one or more fields of a hash, creating it; answers how many fields are new.", cmd_hset, 1, 1, 1 },
	{ "hsetnx", 4, "write denyoom fast", "hash", "Writes a field of a hash only when the field is not there yet.", cmd_hsetnx, 1, 1, 1 },
	{ "hmset", -4, "write denyoom fast", "hash", "Writes one or more fields of a hash, as HSET, answering OK.", cmd_hset, 1, 1, 1 },
	{ "hget", 3, "readonly fast", "hash", "Reads one field's value (nil when the field or the key is missing).", cmd_hget, 1, 1, 1 },
	{ "hmget", -3, "readonly fast", "hash", "Reads the values of the fields named, nil for each one missing.", cmd_hget, 1, 1, 1 },
	{ "hdel", -3, "write fast", "hash", "Removes fields of a hash (the key with its last field); answers how many were there.", cmd_hdel, 1, 1, 1 },
	{ "hlen", 2, "readonly fast", "hash", "How many fields a hash has (0 when the key is missing).", cmd_hlen, 1, 1, 1 },
	{ "hexists", 3, "readonly fast", "hash", "1 when the hash has the field, else 0.", cmd_hlen, 1, 1, 1 },
	{ "hstrlen", 3, "readonly fast", "hash", "The length in bytes of a field's value (0 when it is missing).", cmd_hlen, 1, 1, 1 },
	{ "hgetall", 2, "readonly", "hash", "Every field of a hash with its value, in byte order of the names.", cmd_hgetall, 1, 1, 1 },
	{ "hkeys", 2, "readonly", "hash", "The names of every field of a hash, in byte order.", cmd_hgetall, 1, 1, 1 },
	{ "hvals", 2, "readonly", "hash", "The values of every field of a hash, in byte order of the names.", cmd_hgetall, 1, 1, 1 },
	{ "hincrby", 4, "write denyoom fast", "hash", "Adds an integer to a field holding one (a missing field counts as 0).", cmd_hincrby, 1, 1, 1 },
	{ "hincrbyfloat", 4, "write denyoom fast", "hash", "Adds a decimal number to a field holding one (a missing field counts as 0).", cmd_hincrbyfloat, 1, 1, 1 },
	{ "hscan", -3, "readonly", "hash", "Walks the fields of a hash a few at a time from a cursor (MATCH, COUNT).", cmd_hscan, 1, 1, 1 },
	{ "hrandfield", -2, "readonly", "hash", "One or more fields picked at random, distinct or (a negative count) with repeats, with their values on WITHVALUES.", cmd_hrandfield, 1, 1, 1 },
	{ 0 }
};
