/*
 * kv_rdb.c - Redis's RDB format for pkvs's keys (kv_rdb.h): writing the
 * plain encodings, reading those and Redis 7.0's compact ones.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_list.h"
#include "kv_rdb.h"
#include "kv_zset.h"
#include "pkvs_resp.h"

/* RDB's types and opcodes (Redis's rdb.h numbers: a format, not code). */
enum {
	T_STRING = 0, T_LIST = 1, T_SET = 2, T_ZSET = 3, T_HASH = 4, T_ZSET_2 = 5,
	T_HASH_ZIPMAP = 9, T_LIST_ZIPLIST = 10, T_SET_INTSET = 11, T_ZSET_ZIPLIST = 12,
	T_HASH_ZIPLIST = 13, T_LIST_QUICKLIST = 14, T_HASH_LISTPACK = 16,
	T_ZSET_LISTPACK = 17, T_LIST_QUICKLIST_2 = 18, T_SET_LISTPACK = 20,
	OP_FUNCTION2 = 0xF5, OP_MODULE_AUX = 0xF7, OP_IDLE = 0xF8, OP_FREQ = 0xF9, OP_AUX = 0xFA,
	OP_RESIZEDB = 0xFB, OP_EXPIRE_MS = 0xFC, OP_EXPIRE = 0xFD, OP_SELECTDB = 0xFE, OP_EOF = 0xFF,
};

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
static void put_len(struct kv_rdb_buf *b, uint64_t n)
{
	uint8_t o[9];
	if (n < 64) {
		put_u8(b, (uint8_t)n);
	} else if (n < 16384) {
		o[0] = (uint8_t)(0x40 | (n >> 8));
		o[1] = (uint8_t)n;
		kv_rdb_put(b, o, 2);
	} else if (n <= UINT32_MAX) {
		o[0] = 0x80;
		for (int i = 0; i < 4; i++)
			o[1 + i] = (uint8_t)(n >> (24 - 8 * i));
		kv_rdb_put(b, o, 5);
	} else {
		o[0] = 0x81;
		for (int i = 0; i < 8; i++)
			o[1 + i] = (uint8_t)(n >> (56 - 8 * i));
		kv_rdb_put(b, o, 9);
	}
}

static void put_str(struct kv_rdb_buf *b, const void *p, size_t n)
{
	put_len(b, n);
	kv_rdb_put(b, p, n);
}

/* A string whose bytes lie in store extents. */
static void put_ext(struct kv *kv, struct kv_rdb_buf *b, const struct paste_extent *ext,
		    uint32_t n, uint32_t len)
{
	put_len(b, len);
	if (len && reserve(b, len)) {
		paste_store_read(kv->store, ext, n, 0, b->p + b->len, len);
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
			put_ext(kv, b, w.ext, w.n, w.len);
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
			if (h) {
				put_ext(kv, b, w.ext, w.n, w.len);
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

int kv_rdb_value(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
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

int kv_rdb_dump(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b)
{
	size_t at = b->len;
	int r = kv_rdb_value(kv, o, b);
	if (r)
		return r;
	put_le(b, KV_RDB_VERSION, 2);
	if (!b->oom)
		put_le(b, kv_crc64(0, b->p + at, b->len - at), 8);
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

/* ------------------------------------------------------------ reading */

struct rd {
	const uint8_t *p;
	size_t len, at;
	bool bad;
};

static bool take(struct rd *d, size_t n, const uint8_t **out)
{
	if (d->bad || n > d->len - d->at) {
		d->bad = true;
		return false;
	}
	*out = d->p + d->at;
	d->at += n;
	return true;
}

static uint64_t get_le(struct rd *d, int bytes)
{
	const uint8_t *q;
	uint64_t v = 0;
	if (!take(d, (size_t)bytes, &q))
		return 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | q[i];
	return v;
}

static uint8_t get_u8(struct rd *d)
{
	return (uint8_t)get_le(d, 1);
}

/* A length, or (*enc set) a special string encoding's number. */
static uint64_t get_len(struct rd *d, bool *enc)
{
	uint8_t c = get_u8(d);
	if (enc)
		*enc = false;
	switch (c >> 6) {
	case 0:
		return c & 0x3f;
	case 1:
		return (uint64_t)(c & 0x3f) << 8 | get_u8(d);
	case 3:
		if (enc)
			*enc = true;
		else
			d->bad = true;
		return c & 0x3f;
	}
	if (c != 0x80 && c != 0x81) {
		d->bad = true;
		return 0;
	}
	const uint8_t *q;
	int n = c == 0x80 ? 4 : 8;
	uint64_t v = 0;
	if (take(d, (size_t)n, &q))
		for (int i = 0; i < n; i++)
			v = v << 8 | q[i];
	return v;
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
static bool get_str(struct rd *d, const uint8_t **p, size_t *n, uint8_t **mem, char num[24])
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
	if (d->bad || ulen > KV_STRING_MAX || !take(d, (size_t)clen, &c))
		return false;
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
static bool blob(struct rd *d, struct elems *e, bool (*fn)(const uint8_t *, size_t, struct elems *))
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
static bool el_str(struct rd *d, struct elems *e)
{
	return blob(d, e, whole);
}

/* A listpack's entries. */
static bool lp_decode(const uint8_t *p, size_t len, struct elems *e)
{
	if (len < 7)
		return false;
	size_t i = 6;
	while (i < len && p[i] != 0xFF) {
		uint8_t c = p[i];
		size_t hl, sl = 0;
		int64_t v = 0;
		bool isint = true;
		if (c < 0x80) {
			v = c, hl = 1;
		} else if ((c & 0xC0) == 0x80) {
			isint = false, hl = 1, sl = c & 0x3f;
		} else if ((c & 0xE0) == 0xC0) {
			if (i + 1 >= len)
				return false;
			v = (c & 0x1f) << 8 | p[i + 1], hl = 2;
			if (v >= 1 << 12)
				v -= 1 << 13;
		} else if ((c & 0xF0) == 0xE0) {
			if (i + 1 >= len)
				return false;
			isint = false, hl = 2, sl = (size_t)(c & 0x0f) << 8 | p[i + 1];
		} else if (c == 0xF0) {
			if (i + 4 >= len)
				return false;
			isint = false, hl = 5;
			sl = (size_t)p[i + 1] | (size_t)p[i + 2] << 8 | (size_t)p[i + 3] << 16 |
			     (size_t)p[i + 4] << 24;
		} else if (c >= 0xF1 && c <= 0xF4) {
			int bytes = c == 0xF1 ? 2 : c == 0xF2 ? 3 : c == 0xF3 ? 4 : 8;
			if (i + (size_t)bytes >= len)
				return false;
			v = le_signed(p + i + 1, bytes);
			hl = 1 + (size_t)bytes;
		} else {
			return false;
		}
		if (i + hl + sl > len)
			return false;
		if (isint)
			el_int(e, v);
		else
			el_add(e, p + i + hl, sl);
		size_t el = hl + sl;
		i += el + (el < 128 ? 1 : el < 16384 ? 2 : el < 2097152 ? 3 : el < 268435456 ? 4 : 5);
	}
	return i < len;
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
static bool get_value(struct rd *d, uint8_t t, struct elems *e, enum kv_type *type)
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
	const uint8_t *base = e->bytes.p;
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

static int restore_one(struct kv *kv, struct kv_key *k, struct rd *d, uint8_t t, int64_t expire_ms,
		       bool skip)
{
	struct elems e = { 0 };
	enum kv_type type = KV_STRING;
	int r = 0;
	if (!get_value(d, t, &e, &type) || d->bad)
		r = -EBADMSG;
	else if (e.oom || e.bytes.oom)
		r = -ENOMEM;
	else if (!skip) {
		zset_pack(&e, type, t);
		if (type == KV_STRING && e.n != 1)
			r = -EBADMSG;
		else
			r = write_value(kv, k, type, &e, expire_ms);
	}
	el_free(&e);
	return r;
}

int kv_rdb_restore(struct kv *kv, struct kv_key *k, const uint8_t *p, size_t len, int64_t expire_ms)
{
	struct rd d = { .p = p, .len = len };
	uint8_t t = get_u8(&d);
	if (d.bad)
		return -EBADMSG;
	int r = restore_one(kv, k, &d, t, expire_ms, false);
	if (r == 0 && d.at != len)
		r = -EBADMSG;
	return r;
}

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
	int r = kv_flushall(kv);
	if (r)
		return r;
	struct rd d = { .p = p, .len = len, .at = 9 };
	uint32_t db = 0;
	int64_t exp = KV_NO_TTL;
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
		bool skip = exp != KV_NO_TTL && exp <= kv->now_ms;
		r = restore_one(kv, &k, &d, t, exp, skip);
		free(mem);
		exp = KV_NO_TTL;
	}
	return r ? r : -EBADMSG;
}
