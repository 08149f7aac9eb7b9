/*
 * kv_rdb.h - Redis's RDB format (version 10, what Redis 7.0 writes and
 * loads) for pkvs's keys: a whole data set as a snapshot (a replica's
 * full synchronization) and one value as DUMP/RESTORE's payload.
 *
 * pkvs writes the plain encodings Redis 7.0 still loads: a string raw, a
 * list as RDB_TYPE_LIST, a set as RDB_TYPE_SET, a sorted set as
 * RDB_TYPE_ZSET_2 (binary scores), a hash as RDB_TYPE_HASH; a stream as
 * Redis 7.0 writes one, RDB_TYPE_STREAM_LISTPACKS_2 (listpack nodes of
 * 100 entries, its groups, pending entries and consumers); an expiry as
 * EXPIRETIME_MS; SELECTDB and RESIZEDB per database; AUX fields; the
 * CRC-64 (Jones polynomial, reflected, as Redis's crc64.c) at the end. It
 * reads those and Redis 7.0's compact ones too (integer and LZF strings,
 * intsets, listpacks, ziplists, quicklists, and streams of Redis 5 and 6's
 * RDB_TYPE_STREAM_LISTPACKS: kv_rdb_stream.c), so a payload or a snapshot
 * of a real Redis loads.
 */
#ifndef PASTE_SERVICES_KV_RDB_H
#define PASTE_SERVICES_KV_RDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

#define KV_RDB_VERSION 10u

/* Redis's CRC-64: crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca. */
uint64_t kv_crc64(uint64_t crc, const void *p, size_t n);

/* A growing buffer (malloc'd); oom remembers a failed growth. */
struct kv_rdb_buf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};
void kv_rdb_put(struct kv_rdb_buf *b, const void *p, size_t n);
/* n in RDB's length encoding (1, 2, 5 or 9 bytes, big-endian beyond 14
 * bits) into out: the bytes written. FUNCTION DUMP's framing uses it too. */
size_t kv_rdb_len_encode(uint8_t out[9], uint64_t n);
/* The length at p[*at..len) into *out, *at moved past it: 0, or -EBADMSG
 * (truncated, or a marker that is no length; *at unchanged). With enc,
 * a special string encoding's marker is taken too: *enc set and *out its
 * number; without, that marker is an error. FUNCTION RESTORE reads with it. */
int kv_rdb_len_decode(const uint8_t *p, size_t len, size_t *at, uint64_t *out, bool *enc);
/* An RDB string at p[*at..len) (plain, an integer, or LZF-compressed as
 * Redis writes them), *at moved past it: *s and *n point into p, or into
 * *mem (a copy the caller frees; NULL when none was made) or num. 0, or
 * -EBADMSG (*at unchanged). */
int kv_rdb_str_decode(const uint8_t *p, size_t len, size_t *at, const uint8_t **s, size_t *n,
		      uint8_t **mem, char num[24]);
void kv_rdb_free(struct kv_rdb_buf *b);
/* A command as RESP (an array of bulks): the replication stream's and
 * MIGRATE's. */
void kv_rdb_put_cmd(struct kv_rdb_buf *b, const struct paste_resp_arg *av, uint32_t n);

/* Key o (kv_lookup's) as its RDB type byte and value. 0, -ENOMEM, or
 * -EBADMSG (a damaged collection). */
int kv_rdb_value(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b);
/* DUMP's payload: the value, the RDB version (2 bytes, little-endian)
 * and the CRC-64 of all that (8 bytes, little-endian). */
int kv_rdb_dump(struct kv *kv, const struct kv_obj *o, struct kv_rdb_buf *b);
/* A DUMP payload's end after b[at..): the RDB version (2 bytes) and the
 * CRC-64 of all from at (8), both little-endian (DUMP, FUNCTION DUMP). */
void kv_rdb_seal(struct kv_rdb_buf *b, size_t at);
/* Is p[0..len) a payload this RDB version reads with a right CRC? */
bool kv_rdb_payload_ok(const uint8_t *p, size_t len);
/* The whole data set, every database, as an RDB file; repl_id and
 * repl_offset go in its AUX fields. Expired keys are left out. */
int kv_rdb_snapshot(struct kv *kv, struct kv_rdb_buf *b, const char *repl_id,
		    uint64_t repl_offset);

/* Key k gets the value of type byte + value p[0..len) (a payload's value
 * part), deadline expire_ms (KV_NO_TTL: none), replacing what it held. 0,
 * -EBADMSG (not a value pkvs reads), -ENOSPC, or the store's failure. */
int kv_rdb_restore(struct kv *kv, struct kv_key *k, const uint8_t *p, size_t len,
		   int64_t expire_ms);
/* A whole RDB file into the store: the file is decoded and checked whole
 * first, then every database flushed and each key written (an expired one
 * skipped). 0; -EBADMSG (damaged: a wrong CRC, an unknown type or opcode,
 * a bad value; nothing was changed); or a write's failure (-ENOSPC, -EIO:
 * the data set was flushed and is partly loaded). */
int kv_rdb_load(struct kv *kv, const uint8_t *p, size_t len);

#endif
