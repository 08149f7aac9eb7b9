/*
 * kv_rdb_load.c - reading Redis's RDB format (kv_rdb.h): RESTORE's
 * payloads and a primary's whole file, in the plain encodings and Redis
 * 7.0's compact ones (integer and LZF strings, intsets, ziplists,
 * listpacks, quicklists). A value is decoded whole before anything is
 * written.
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
#include "kv_zset.h"
#include "pkvs_resp.h"

static bool take(struct kv_rdb_rd *d, size_t n, const uint8_t **out)
{
	if (d->bad || n > d->len - d->at) {
		d->bad = true;
		return false;
	}
	*out = d->p + d->at;
	d->at += n;
	return true;
}

static uint64_t get_le(struct kv_rdb_rd *d, int bytes)
{
	const uint8_t *q;
	uint64_t v = 0;
	if (!take(d, (size_t)bytes, &q))
		return 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | q[i];
	return v;
}

static uint8_t get_u8(struct kv_rdb_rd *d)
{
	return (uint8_t)get_le(d, 1);
}

/* RDB's length at p[*at..len) (kv_rdb.h); the reader's errors stick in
 * d->bad, so a caller checks once after a run of reads. */
static uint64_t get_len(struct kv_rdb_rd *d, bool *enc)
{
	uint64_t v = 0;
	if (enc)
		*enc = false;
	if (d->bad || kv_rdb_len_decode(d->p, d->len, &d->at, &v, enc)) {
		d->bad = true;
		return 0;
	}
	return v;
}

int kv_rdb_len_decode(const uint8_t *p, size_t len, size_t *at, uint64_t *out, bool *enc)
{
	if (enc)
		*enc = false;
	if (*at >= len)
		return -EBADMSG;
	uint8_t c = p[*at];
	switch (c >> 6) {
	case 0:
		*out = c & 0x3f;
		*at += 1;
		return 0;
	case 1:
		if (len - *at < 2)
			return -EBADMSG;
		*out = (uint64_t)(c & 0x3f) << 8 | p[*at + 1];
		*at += 2;
		return 0;
	case 3:
		if (!enc)
			return -EBADMSG;
		*enc = true;
		*out = c & 0x3f;
		*at += 1;
		return 0;
	}
	if (c != 0x80 && c != 0x81)
		return -EBADMSG;
	size_t k = c == 0x80 ? 4 : 8;
	if (len - *at < 1 + k)
		return -EBADMSG;
	uint64_t v = 0;
	for (size_t i = 1; i <= k; i++)
		v = v << 8 | p[*at + i];
	*out = v;
	*at += 1 + k;
	return 0;
}

/* LZF's decompression (the format liblzf writes and Redis stores): a
 * literal run or a back reference per control byte. */
static bool lzf_decode(const uint8_t *in, size_t ilen, uint8_t *out, size_t olen)
{
	size_t i = 0, o = 0;
	while (i < ilen) {
		uint32_t ctrl = in[i++];
		if (ctrl < 32) {
			ctrl++;
			if (i + ctrl > ilen || o + ctrl > olen)
				return false;
			memcpy(out + o, in + i, ctrl);
			i += ctrl;
			o += ctrl;
			continue;
		}
		size_t len = ctrl >> 5;
		if (len == 7) {
			if (i >= ilen)
				return false;
			len += in[i++];
		}
		if (i >= ilen)
			return false;
		size_t back = ((ctrl & 0x1f) << 8) + in[i++] + 1;
		len += 2;
		if (back > o || o + len > olen)
			return false;
		for (size_t k = 0; k < len; k++, o++)
			out[o] = out[o - back];
	}
	return o == olen;
}

/* A string: points into the input (*mem NULL) or into a malloc'd copy
 * (*mem, the caller frees it). */
static bool get_str(struct kv_rdb_rd *d, const uint8_t **p, size_t *n, uint8_t **mem, char num[24])
{
	bool enc;
	*mem = NULL;
	uint64_t l = get_len(d, &enc);
	if (d->bad)
		return false;
	if (!enc) {
		*n = (size_t)l;
		return take(d, (size_t)l, p);
	}
	if (l <= 2) {
		int bytes = 1 << l;
		uint64_t u = get_le(d, bytes);
		int64_t v = bytes == 1 ? (int8_t)u : bytes == 2 ? (int16_t)u : (int32_t)u;
		*n = (size_t)snprintf(num, 24, "%lld", (long long)v);
		*p = (const uint8_t *)num;
		return !d->bad;
	}
	if (l != 3) {
		d->bad = true;
		return false;
	}
	uint64_t clen = get_len(d, NULL), ulen = get_len(d, NULL);
	const uint8_t *c;
	/* Every failure sticks in d->bad: a caller reading a run of
	 * elements checks only that, and must not skip this one. */
	if (d->bad || ulen > KV_STRING_MAX || !take(d, (size_t)clen, &c)) {
		d->bad = true;
		return false;
	}
	if (!(*mem = malloc(ulen ? ulen : 1)) || !lzf_decode(c, clen, *mem, ulen)) {
		free(*mem);
		*mem = NULL;
		d->bad = true;
		return false;
	}
	*p = *mem;
	*n = (size_t)ulen;
	return true;
}

int kv_rdb_str_decode(const uint8_t *p, size_t len, size_t *at, const uint8_t **s, size_t *n,
		      uint8_t **mem, char num[24])
{
	struct kv_rdb_rd d = { p, len, *at, false };
	if (!get_str(&d, s, n, mem, num))
		return -EBADMSG;
	*at = d.at;
	return 0;
}

/* The reader's steps for kv_rdb_stream.c. */
bool kv_rdb_rd_take(struct kv_rdb_rd *d, size_t n, const uint8_t **out)
{
	return take(d, n, out);
}

uint64_t kv_rdb_rd_le(struct kv_rdb_rd *d, int bytes)
{
	return get_le(d, bytes);
}

uint64_t kv_rdb_rd_len(struct kv_rdb_rd *d)
{
	return get_len(d, NULL);
}

bool kv_rdb_rd_str(struct kv_rdb_rd *d, const uint8_t **p, size_t *n, uint8_t **mem, char num[24])
{
	return get_str(d, p, n, mem, num);
}

/* A decoded value: strings side by side (els), and a sorted set's
 * scores. */
struct elems {
	struct kv_rdb_buf bytes;
	size_t *off, *len;
	double *score;
	uint64_t n, cap;
	bool oom;
};

static void el_add(struct elems *e, const void *p, size_t n)
{
	if (e->n == e->cap) {
		uint64_t cap = e->cap ? e->cap * 2 : 64;
		size_t *o = realloc(e->off, cap * sizeof(*o)), *l = o ? realloc(e->len, cap * sizeof(*l)) : NULL;
		if (o)
			e->off = o;
		if (l)
			e->len = l;
		if (!o || !l) {
			e->oom = true;
			return;
		}
		e->cap = cap;
	}
	e->off[e->n] = e->bytes.len;
	e->len[e->n++] = n;
	kv_rdb_put(&e->bytes, p, n);
}

static void el_int(struct elems *e, int64_t v)
{
	char num[24];
	el_add(e, num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)v));
}

static void el_free(struct elems *e)
{
	kv_rdb_free(&e->bytes);
	free(e->off);
	free(e->len);
	free(e->score);
}

/* A little-endian signed integer of `bytes` bytes (1 to 8). */
static int64_t le_signed(const uint8_t *p, int bytes)
{
	uint64_t u = 0;
	for (int k = bytes - 1; k >= 0; k--)
		u = u << 8 | p[k];
	int sh = 64 - 8 * bytes;
	return sh ? (int64_t)(u << sh) >> sh : (int64_t)u;
}

/* A string holding a compact encoding, decoded by fn. */
static bool blob(struct kv_rdb_rd *d, struct elems *e,
		 bool (*fn)(const uint8_t *, size_t, struct elems *))
{
	const uint8_t *p;
	size_t n;
	uint8_t *mem;
	char num[24];
	if (!get_str(d, &p, &n, &mem, num))
		return false;
	bool ok = fn(p, n, e);
	free(mem);
	if (!ok)
		d->bad = true;
	return ok;
}

static bool whole(const uint8_t *p, size_t n, struct elems *e)
{
	el_add(e, p, n);
	return true;
}

/* A plain string: one element. */
static bool el_str(struct kv_rdb_rd *d, struct elems *e)
{
	return blob(d, e, whole);
}

/* A listpack element's back length: how many bytes Redis's
 * lpEncodeBacklen gives an element of el bytes. */
static size_t lp_backlen(size_t el)
{
	return el <= 127 ? 1 : el < 16383 ? 2 : el < 2097151 ? 3 : el < 268435455 ? 4 : 5;
}

int kv_rdb_lp_next(const uint8_t *p, size_t len, size_t *at, struct kv_rdb_lpel *e)
{
	size_t i = *at;
	if (i >= len)
		return -EBADMSG;
	uint8_t c = p[i];
	if (c == 0xFF)
		return 0;
	size_t hl, sl = 0;
	e->isint = true;
	e->v = 0;
	if (c < 0x80) {
		e->v = c, hl = 1;
	} else if ((c & 0xC0) == 0x80) {
		e->isint = false, hl = 1, sl = c & 0x3f;
	} else if ((c & 0xE0) == 0xC0) {
		if (i + 1 >= len)
			return -EBADMSG;
		e->v = (c & 0x1f) << 8 | p[i + 1], hl = 2;
		if (e->v >= 1 << 12)
			e->v -= 1 << 13;
	} else if ((c & 0xF0) == 0xE0) {
		if (i + 1 >= len)
			return -EBADMSG;
		e->isint = false, hl = 2, sl = (size_t)(c & 0x0f) << 8 | p[i + 1];
	} else if (c == 0xF0) {
		if (i + 4 >= len)
			return -EBADMSG;
		e->isint = false, hl = 5;
		sl = (size_t)p[i + 1] | (size_t)p[i + 2] << 8 | (size_t)p[i + 3] << 16 |
		     (size_t)p[i + 4] << 24;
	} else if (c >= 0xF1 && c <= 0xF4) {
		int bytes = c == 0xF1 ? 2 : c == 0xF2 ? 3 : c == 0xF3 ? 4 : 8;
		if (i + (size_t)bytes >= len)
			return -EBADMSG;
		e->v = le_signed(p + i + 1, bytes);
		hl = 1 + (size_t)bytes;
	} else {
		return -EBADMSG;
	}
	size_t el = hl + sl, bl = lp_backlen(el);
	if (len - i <= el + bl)                 /* the terminator follows */
		return -EBADMSG;
	/* The back length, read as Redis reads it: from its last byte
	 * backward, 7 bits a byte while the high bit says more follow. */
	uint64_t back = 0;
	for (size_t k = 0; k < bl; k++) {
		uint8_t b = p[i + el + bl - 1 - k];
		back |= (uint64_t)(b & 127) << (7 * k);
		if (!(b & 128) != (k == bl - 1))
			return -EBADMSG;
	}
	if (back != el)
		return -EBADMSG;
	e->s = p + i + hl;
	e->len = sl;
	*at = i + el + bl;
	return 1;
}

bool kv_rdb_lp_ok(const uint8_t *p, size_t len, uint32_t count)
{
	if (len < 7)
		return false;
	uint32_t n = (uint32_t)(p[4] | p[5] << 8);
	return (p[0] | p[1] << 8 | p[2] << 16 | (size_t)p[3] << 24) == len && p[len - 1] == 0xFF &&
	       (n == 0xFFFF || n == count);
}

/* A listpack's entries. */
static bool lp_decode(const uint8_t *p, size_t len, struct elems *e)
{
	if (len < 7)
		return false;
	size_t i = 6;
	uint32_t count = 0;
	struct kv_rdb_lpel el;
	int r;
	while ((r = kv_rdb_lp_next(p, len, &i, &el)) == 1) {
		if (el.isint)
			el_int(e, el.v);
		else
			el_add(e, el.s, el.len);
		count++;
	}
	return r == 0 && i == len - 1 && kv_rdb_lp_ok(p, len, count);
}

/* A ziplist's entries. */
static bool zl_decode(const uint8_t *p, size_t len, struct elems *e)
{
	if (len < 11)
		return false;
	size_t i = 10;
	while (i < len && p[i] != 0xFF) {
		i += p[i] == 0xFE ? 5 : 1;          /* the previous entry's length */
		if (i >= len)
			return false;
		uint8_t c = p[i];
		size_t hl = 1, sl = 0;
		int bytes = 0;
		switch (c >> 6) {
		case 0:
			sl = c & 0x3f;
			break;
		case 1:
			if (i + 1 >= len)
				return false;
			hl = 2, sl = (size_t)(c & 0x3f) << 8 | p[i + 1];
			break;
		case 2:
			if (i + 4 >= len)
				return false;
			hl = 5;
			sl = (size_t)p[i + 1] << 24 | (size_t)p[i + 2] << 16 | (size_t)p[i + 3] << 8 | p[i + 4];
			break;
		default:
			bytes = c == 0xC0 ? 2 : c == 0xD0 ? 4 : c == 0xE0 ? 8 : c == 0xF0 ? 3 : c == 0xFE ? 1 : 0;
			if (!bytes) {
				if (c < 0xF1 || c > 0xFD)
					return false;
				el_int(e, (c & 0x0f) - 1);
				i += 1;
				continue;
			}
		}
		if (bytes) {
			if (i + (size_t)bytes >= len)
				return false;
			el_int(e, le_signed(p + i + 1, bytes));
			i += 1 + (size_t)bytes;
			continue;
		}
		if (i + hl + sl > len)
			return false;
		el_add(e, p + i + hl, sl);
		i += hl + sl;
	}
	return i < len;
}

static bool intset_decode(const uint8_t *p, size_t len, struct elems *e)
{
	if (len < 8)
		return false;
	uint32_t w = (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24);
	uint32_t n = (uint32_t)(p[4] | p[5] << 8 | p[6] << 16 | (uint32_t)p[7] << 24);
	if ((w != 2 && w != 4 && w != 8) || (len - 8) / w < n)
		return false;
	for (uint32_t i = 0; i < n; i++)
		el_int(e, le_signed(p + 8 + (size_t)i * w, (int)w));
	return true;
}


static bool scores_from_strings(struct elems *e)
{
	if (e->n % 2)
		return false;
	if (!(e->score = malloc((e->n / 2 + 1) * sizeof(double))))
		return false;
	for (uint64_t i = 0; i < e->n / 2; i++) {
		char b[64];
		size_t l = e->len[2 * i + 1];
		if (l >= sizeof(b))
			return false;
		/* While every element is empty, bytes.p is NULL (NULL + 0: undefined). */
		if (l)
			memcpy(b, e->bytes.p + e->off[2 * i + 1], l);
		b[l] = 0;
		char *end;
		e->score[i] = strtod(b, &end);
		if (*end || isnan(e->score[i]))
			return false;
	}
	return true;
}

/* Value of RDB type t into e; *type the pkvs type. */
static bool get_value(struct kv_rdb_rd *d, uint8_t t, struct elems *e, enum kv_type *type)
{
	uint64_t n;
	switch (t) {
	case T_STRING:
		*type = KV_STRING;
		return el_str(d, e);
	case T_LIST:
	case T_SET:
		*type = t == T_LIST ? KV_LIST : KV_SET;
		n = get_len(d, NULL);
		for (uint64_t i = 0; i < n && !d->bad; i++)
			el_str(d, e);
		return !d->bad;
	case T_HASH:
		*type = KV_HASH;
		n = get_len(d, NULL);
		for (uint64_t i = 0; i < n && !d->bad; i++)
			el_str(d, e), el_str(d, e);
		return !d->bad;
	case T_ZSET:
	case T_ZSET_2:
		*type = KV_ZSET;
		n = get_len(d, NULL);
		if (d->bad || n > d->len || !(e->score = malloc((n + 1) * sizeof(double))))
			return false;
		for (uint64_t i = 0; i < n && !d->bad; i++) {
			el_str(d, e);
			if (t == T_ZSET_2) {
				uint64_t u = get_le(d, 8);
				memcpy(&e->score[i], &u, 8);
			} else {
				uint8_t l = get_u8(d);
				const uint8_t *q;
				char b[256];
				if (l == 253) {
					e->score[i] = NAN;
				} else if (l == 254 || l == 255) {
					e->score[i] = l == 254 ? INFINITY : -INFINITY;
				} else if (take(d, l, &q)) {
					memcpy(b, q, l);
					b[l] = 0;
					e->score[i] = strtod(b, NULL);
				}
			}
			if (isnan(e->score[i]))
				d->bad = true;
		}
		return !d->bad;
	case T_SET_INTSET:
		*type = KV_SET;
		return blob(d, e, intset_decode);
	case T_SET_LISTPACK:
		*type = KV_SET;
		return blob(d, e, lp_decode);
	case T_LIST_ZIPLIST:
		*type = KV_LIST;
		return blob(d, e, zl_decode);
	case T_HASH_ZIPLIST:
	case T_HASH_LISTPACK:
		*type = KV_HASH;
		return blob(d, e, t == T_HASH_ZIPLIST ? zl_decode : lp_decode) && e->n % 2 == 0;
	case T_ZSET_ZIPLIST:
	case T_ZSET_LISTPACK:
		*type = KV_ZSET;
		return blob(d, e, t == T_ZSET_ZIPLIST ? zl_decode : lp_decode) && scores_from_strings(e);
	case T_LIST_QUICKLIST:
	case T_LIST_QUICKLIST_2:
		*type = KV_LIST;
		n = get_len(d, NULL);
		for (uint64_t i = 0; i < n && !d->bad; i++) {
			uint64_t container = t == T_LIST_QUICKLIST ? 2 : get_len(d, NULL);
			if (container == 1)
				el_str(d, e);
			else if (container == 2)
				blob(d, e, t == T_LIST_QUICKLIST ? zl_decode : lp_decode);
			else
				d->bad = true;
		}
		return !d->bad;
	}
	return false;
}

/* Key k gets the decoded value e of type. */
static int write_value(struct kv *kv, struct kv_key *k, enum kv_type type, struct elems *e,
		       int64_t expire_ms)
{
	if (type == KV_STRING)
		return kv_put_bytes(kv, k, KV_STRING, e->bytes.p, e->len[0], expire_ms, NULL);
	struct kv_cbuild b;
	int r = kv_cbuild_begin(kv, &b, type);
	if (r)
		return r;
	b.o.expire_ms = expire_ms;
	const uint8_t *base = e->bytes.p ? e->bytes.p : (const uint8_t *)"";   /* all empty: no buffer */
	for (uint64_t i = 0; i < e->n && !r;) {
		const uint8_t *p = base + e->off[i];
		size_t len = e->len[i];
		if (type == KV_LIST) {
			uint8_t pos[8];
			uint64_t v = i ^ (1ull << 63);
			for (int j = 7; j >= 0; j--, v >>= 8)
				pos[j] = (uint8_t)v;
			r = kv_cbuild_put(kv, &b, KV_LIST_ELEM, NULL, 0, pos, 8, p, len);
			b.o.coll.count++;
			i++;
		} else if (type == KV_SET) {
			r = kv_cbuild_put(kv, &b, KV_SET_MEMBER, NULL, 0, p, len, NULL, 0);
			b.o.coll.count++;
			i++;
		} else if (type == KV_HASH) {
			r = kv_cbuild_put(kv, &b, 'f', NULL, 0, p, len, base + e->off[i + 1], e->len[i + 1]);
			b.o.coll.count++;
			i += 2;
		} else {
			r = kv_zbuild_add(kv, &b, p, len, e->score[i]);
			i++;
		}
	}
	if (type == KV_LIST) {
		b.o.coll.head = 0;
		b.o.coll.tail = (int64_t)b.o.coll.count;
	}
	return kv_cbuild_end(kv, &b, k, r);
}

/* A sorted set read from a listpack or ziplist: member, score pairs;
 * the scores were parsed into score[i / 2]: make them one per member. */
static void zset_pack(struct elems *e, enum kv_type type, uint8_t t)
{
	if (type != KV_ZSET || (t != T_ZSET_ZIPLIST && t != T_ZSET_LISTPACK))
		return;
	for (uint64_t i = 0; i < e->n / 2; i++) {
		e->off[i] = e->off[2 * i];
		e->len[i] = e->len[2 * i];
	}
	e->n /= 2;
}

/* The value of RDB type t at d decoded whole into e (nothing written):
 * 0, -EBADMSG or -ENOMEM. */
static int decode_one(struct kv_rdb_rd *d, uint8_t t, struct elems *e, enum kv_type *type)
{
	if (!get_value(d, t, e, type) || d->bad)
		return -EBADMSG;
	if (e->oom || e->bytes.oom)
		return -ENOMEM;
	zset_pack(e, *type, t);
	if (*type == KV_STRING && e->n != 1)
		return -EBADMSG;
	return 0;
}

/* The value at d decoded, then (unless skip) written to k; whole: it
 * must end the input. */
static int restore_one(struct kv *kv, struct kv_key *k, struct kv_rdb_rd *d, uint8_t t,
		       int64_t expire_ms, bool skip, bool whole)
{
	if (t == T_STREAM_LISTPACKS || t == T_STREAM_LISTPACKS_2) {
		struct kv_rdb_stream *s = NULL;
		int r = kv_rdb_stream_decode(d, t, &s);
		if (!r && whole && d->at != d->len)
			r = -EBADMSG;
		if (!r && !skip)
			r = kv_rdb_stream_write(kv, k, s, expire_ms);
		kv_rdb_stream_free(s);
		return r;
	}
	struct elems e = { 0 };
	enum kv_type type = KV_STRING;
	int r = decode_one(d, t, &e, &type);
	if (!r && whole && d->at != d->len)
		r = -EBADMSG;
	if (!r && !skip)
		r = write_value(kv, k, type, &e, expire_ms);
	el_free(&e);
	return r;
}

/* The whole payload (type byte, value, nothing after it) is decoded and
 * checked before the key is written: a bad payload leaves k as it was. */
int kv_rdb_restore(struct kv *kv, struct kv_key *k, const uint8_t *p, size_t len, int64_t expire_ms)
{
	struct kv_rdb_rd d = { .p = p, .len = len };
	uint8_t t = get_u8(&d);
	if (d.bad)
		return -EBADMSG;
	return restore_one(kv, k, &d, t, expire_ms, false, true);
}

/* One walk over the RDB body from its header to OP_EOF; each value is
 * decoded, and written only when apply. */
static int load_pass(struct kv *kv, const uint8_t *p, size_t len, bool apply)
{
	struct kv_rdb_rd d = { .p = p, .len = len, .at = 9 };
	uint32_t db = 0;
	int64_t exp = KV_NO_TTL;
	int r = 0;
	while (!r && !d.bad) {
		uint8_t t = get_u8(&d);
		const uint8_t *q;
		size_t n;
		uint8_t *mem;
		char num[24];
		switch (t) {
		case OP_EOF:
			return 0;
		case OP_AUX:
			for (int i = 0; i < 2 && get_str(&d, &q, &n, &mem, num); i++)
				free(mem);
			continue;
		case OP_RESIZEDB:
			get_len(&d, NULL);
			get_len(&d, NULL);
			continue;
		case OP_SELECTDB:
			db = (uint32_t)get_len(&d, NULL);
			if (db >= kv->ndbs)
				r = -EBADMSG;
			continue;
		case OP_EXPIRE_MS:
			exp = (int64_t)get_le(&d, 8);
			continue;
		case OP_EXPIRE:
			exp = (int64_t)get_le(&d, 4) * 1000;
			continue;
		case OP_FREQ:
			get_u8(&d);
			continue;
		case OP_IDLE:
			get_len(&d, NULL);
			continue;
		case OP_FUNCTION2:
			if (get_str(&d, &q, &n, &mem, num))
				free(mem);
			continue;
		case OP_MODULE_AUX:
			r = -EBADMSG;
			continue;
		}
		if (!get_str(&d, &q, &n, &mem, num) || n > kv_max_key(kv)) {
			free(mem);
			r = -EBADMSG;
			break;
		}
		struct kv_key k;
		kv_key_init(kv, &k, db, q, n);
		bool skip = !apply || (exp != KV_NO_TTL && exp <= kv->now_ms);
		r = restore_one(kv, &k, &d, t, exp, skip, false);
		free(mem);
		exp = KV_NO_TTL;
	}
	return r ? r : -EBADMSG;
}

/* The whole file is decoded and checked first (nothing written); only a
 * good one replaces the data set. What can still fail after the flush is
 * the store itself (-ENOMEM, -ENOSPC, -EIO): the caller says so. */
int kv_rdb_load(struct kv *kv, const uint8_t *p, size_t len)
{
	if (len < 9 + 1 || memcmp(p, "REDIS", 5))
		return -EBADMSG;
	int ver = atoi((const char *)p + 5);
	if (ver < 1 || ver > (int)KV_RDB_VERSION)
		return -EBADMSG;
	if (ver >= 5 && len >= 17) {
		uint64_t want = 0;
		for (int i = 7; i >= 0; i--)
			want = want << 8 | p[len - 8 + (size_t)i];
		if (want && kv_crc64(0, p, len - 8) != want)
			return -EBADMSG;
	}
	int r = load_pass(kv, p, len, false);
	if (!r)
		r = kv_flushall(kv);
	if (!r && (r = load_pass(kv, p, len, true)))
		r = r == -EBADMSG ? -EIO : r;  /* checked above: not the file */
	return r;
}
