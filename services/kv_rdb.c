/*
 * kv_rdb.c - Redis's RDB format for pkvs's keys (kv_rdb.h): the CRC and
 * writing the plain encodings (DUMP, the snapshot a replica loads);
 * reading is kv_rdb_load.c.
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
