/*
 * kv.h - the key-value core of pkvs: one persistent B+tree (lib/btree*.c)
 * over the packet store, its values, and its counters. It knows nothing
 * of the network: the two front ends (services/pkvs_http.c and
 * services/pkvs_resp.c with the cmd_*.c command families) parse requests,
 * call in here, and do all the talking.
 *
 * Why one thread: the tree is single-owner, and its reads see changes
 * whose log records are not durable yet. Every reply that depends on the
 * tree is therefore sent PASTE_SEND_DURABLE: it leaves behind the same
 * barrier as the change it could reveal, and in one thread that barrier
 * covers every change applied so far. pkvs scales out by sharding
 * (several instances behind twemproxy), as Redis does.
 *
 * Values stay where they landed: a body (HTTP) or a bulk (RESP) is
 * gathered by lib/body.c into extents of held packet buffers, the tree's
 * log record names them, the tree takes its own references, and a GET
 * sends them straight from those buffers (paste_port_send_extents).
 */
#ifndef PASTE_SERVICES_KV_H
#define PASTE_SERVICES_KV_H

#include <stdbool.h>
#include <stdint.h>
#include "paste.h"

/* Values of at most this many bytes are packed densely with other small
 * values (a 64-byte value must not pin a 2 KiB buffer), and a GET copies
 * them into its reply; longer ones stay where they landed. */
#define KV_PACK_MAX PASTE_SEND_COPY_MAX

/* Make a body on the stack idle for paste_body_begin, which wants n and
 * bufs 0 and sets the rest: not `= { 0 }`, a memset of its 64 extents
 * (~20 ns) on every SET. */
static inline void kv_body_idle(struct paste_body *b)
{
	b->n = b->bufs = 0;
}

struct kv_config {
	bool copy;                      /* --copy: values copied into fresh buffers */
	uint64_t max_value;             /* --max-value: larger values are refused */
	struct paste_btree_config tree; /* --checkpoint-*; its lane is the caller's */
};

/* Counters for /stats, /metrics and INFO: plain, since the one thread
 * that owns the tree also answers those. */
struct kv_counters {
	uint64_t sets, gets, dels, hits, misses, scans;
	uint64_t room_calls;            /* writes that found the store full and made room */
};

struct kv {
	struct paste_store *store;
	struct paste_wal *wal;
	struct paste_btree *tree;
	struct paste_body_config bc;
	uint64_t max_value;             /* min(--max-value, what 63 extents can hold) */
	struct kv_counters n;
	uint64_t recovery_ns;           /* paste_btree_open's */
	/* Values copied into the store go here, densely (kv.c). */
	struct paste_append app;
};

/* Buffers a write leaves free: the bodies' reserve (paste_body_config). */
static inline uint32_t kv_reserve(const struct kv *kv)
{
	return kv->bc.reserve ? kv->bc.reserve : PASTE_BODY_DEFAULT_RESERVE;
}

/* At most this many cleaner steps for one write that found no room. */
#define KV_ROOM_STEPS 64u

/* Open the log and the tree on the persist object's lane (recovery runs
 * here), before paste_store_start. 0, or a negative errno with err->msg
 * set; on success err->msg holds what recovery noticed (or is empty). */
int kv_open(struct kv **out, struct paste_store *st, struct paste_persist *p,
	    const struct kv_config *cfg, struct paste_error *err);
void kv_close(struct kv *kv);

/* Once per event-loop pass: releases whose change is durable, and a
 * checkpoint when one is due. A failed checkpoint fails the store (it
 * already has: the error is the store's). */
void kv_pass(struct kv *kv);

/* The largest value a body may carry (for 413 / "-ERR value too big"). */
uint64_t kv_max_value(const struct kv *kv);

/* A value of len bytes is about to be taken into the store (a body
 * begins): if the free buffers would fall below the reserve, make room
 * first (a checkpoint, the cleaner), so that it is refused only when the
 * store is really full. */
void kv_admit(struct kv *kv, uint64_t len);

/* Log and apply SET key = the body's extents; the body is released (the
 * tree took its own references). Returns 0, or a negative errno:
 * -ENOSPC store/log/node area full, -ENAMETOOLONG/-EINVAL bad key, or the
 * store's failure. created (if non-NULL): true when the key was absent. */
int kv_set_body(struct kv *kv, const void *key, uint32_t klen, struct paste_body *b,
		bool *created);
/* SET from bytes in DRAM (RESP values that arrived inside the command,
 * INCR results): up to KV_PACK_MAX bytes packed with other small values,
 * larger ones copied densely into fresh buffers by paste_body_copy (the
 * bodies' reserve applies: -ENOSPC below it). -EFBIG over max_value. */
int kv_set_bytes(struct kv *kv, const void *key, uint32_t klen, const void *val,
		 size_t len, bool *created);
/* DEL: 1 deleted, 0 absent, or a negative errno. */
int kv_del(struct kv *kv, const void *key, uint32_t klen);
/* The value as extents (ext[PASTE_BTREE_MAX_EXTENTS]), counted as a
 * client's read (hits, misses): 0, -ENOENT, -EINVAL. */
int kv_get(struct kv *kv, const void *key, uint32_t klen, struct paste_extent *ext,
	   uint32_t *n, uint32_t *len);
/* Whether key exists, not counted as a read (EXISTS, TYPE, SET NX). */
bool kv_exists(struct kv *kv, const void *key, uint32_t klen);
/* Copy up to cap bytes of a value into out (small values: INCR, GETRANGE). */
size_t kv_copy_value(const struct kv *kv, const struct paste_extent *ext, uint32_t n,
		     uint64_t from, void *out, size_t cap);

#endif
