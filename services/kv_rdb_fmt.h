/*
 * kv_rdb_fmt.h - RDB's type and opcode numbers, and what the writer
 * (kv_rdb.c), the reader (kv_rdb_load.c) and streams (kv_rdb_stream.c)
 * share.
 */
#ifndef PASTE_SERVICES_KV_RDB_FMT_H
#define PASTE_SERVICES_KV_RDB_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "kv_rdb.h"

/* RDB's types and opcodes (Redis's rdb.h numbers: a format, not code). */
enum {
	T_STRING = 0, T_LIST = 1, T_SET = 2, T_ZSET = 3, T_HASH = 4, T_ZSET_2 = 5,
	T_HASH_ZIPMAP = 9, T_LIST_ZIPLIST = 10, T_SET_INTSET = 11, T_ZSET_ZIPLIST = 12,
	T_HASH_ZIPLIST = 13, T_LIST_QUICKLIST = 14, T_STREAM_LISTPACKS = 15, T_HASH_LISTPACK = 16,
	T_ZSET_LISTPACK = 17, T_LIST_QUICKLIST_2 = 18, T_STREAM_LISTPACKS_2 = 19, T_SET_LISTPACK = 20,
	OP_FUNCTION2 = 0xF5, OP_MODULE_AUX = 0xF7, OP_IDLE = 0xF8, OP_FREQ = 0xF9, OP_AUX = 0xFA,
	OP_RESIZEDB = 0xFB, OP_EXPIRE_MS = 0xFC, OP_EXPIRE = 0xFD, OP_SELECTDB = 0xFE, OP_EOF = 0xFF,
};

/* The reader's place in p[0..len); its first error sticks in bad, so a
 * caller checks once after a run of reads (kv_rdb_load.c): take n raw
 * bytes, a little-endian number of `bytes` bytes, a length, a string
 * (kv_rdb_str_decode's *p, *n, *mem and num). */
struct kv_rdb_rd {
	const uint8_t *p;
	size_t len, at;
	bool bad;
};
bool kv_rdb_rd_take(struct kv_rdb_rd *d, size_t n, const uint8_t **out);
uint64_t kv_rdb_rd_le(struct kv_rdb_rd *d, int bytes);
uint64_t kv_rdb_rd_len(struct kv_rdb_rd *d);
bool kv_rdb_rd_str(struct kv_rdb_rd *d, const uint8_t **p, size_t *n, uint8_t **mem, char num[24]);

/* A listpack element: an integer (isint, v) or a string s[0..len). */
struct kv_rdb_lpel {
	bool isint;
	int64_t v;
	const uint8_t *s;
	size_t len;
};
/* The element at lp[*i..len) (after the 6-byte header): 1 with *e and *i
 * past it (its back length checked), 0 at the terminator, -EBADMSG. */
int kv_rdb_lp_next(const uint8_t *lp, size_t len, size_t *i, struct kv_rdb_lpel *e);
/* Does listpack p[0..len) say it is len bytes, end in its terminator
 * and hold count elements (or an unknown number)? */
bool kv_rdb_lp_ok(const uint8_t *p, size_t len, uint32_t count);

/* Is s[0..n) an integer as Redis's string2ll reads one ("0", or an
 * optional '-' and digits without a leading zero, in int64 range)? *v its
 * value. A listpack holds such a string as an integer (kv_rdb.c). */
bool kv_rdb_strtoll(const uint8_t *s, size_t n, int64_t *v);
/* Room for element n of the array *arr (of *cap elements of size bytes,
 * malloc'd; doubled when full): false when out of memory. */
bool kv_rdb_grow(void *arr, size_t *cap, size_t n, size_t size);

/* Streams as RDB_TYPE_STREAM_LISTPACKS (15) or _2 (19) (kv_rdb_stream.c;
 * kv_rdb.c writes them). decode: the value of type t at d whole into *out
 * (nothing written; *out set even on failure): 0, -EBADMSG, -ENOMEM.
 * write: key k gets it, as kv_rdb_restore. free: NULL is fine. */
struct kv_rdb_stream;
int kv_rdb_stream_decode(struct kv_rdb_rd *d, uint8_t t, struct kv_rdb_stream **out);
int kv_rdb_stream_write(struct kv *kv, struct kv_key *k, const struct kv_rdb_stream *s,
			int64_t expire_ms);
void kv_rdb_stream_free(struct kv_rdb_stream *s);

#endif
