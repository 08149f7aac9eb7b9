/*
 * kv.h - the key-value store behind pkvs's front ends: one persistent
 * B+tree (lib/btree*.c) over the store, shared by the HTTP service
 * (services/kv_http.c) and the Redis-protocol commands
 * (services/kv_resp.c), which live in one thread of one process.
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
 * sends them straight from those buffers (paste_port_send_store).
 */
#ifndef PASTE_SERVICES_KV_H
#define PASTE_SERVICES_KV_H

#include <stdbool.h>
#include <stdint.h>
#include "paste.h"
#include "http.h"
#include "server.h"

/* Values of at most this many bytes are packed densely with other small
 * values (a 64-byte value must not pin a 2 KiB buffer), and a GET copies
 * them into its reply; longer ones stay where they landed. */
#define KV_PACK_MAX 512u

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
	struct paste_btree_config tree; /* --checkpoint-* */
};

/* Counters for /stats and INFO (the owning thread writes, others read). */
struct kv_counters {
	_Atomic uint64_t sets, gets, dels, hits, misses, scans;
};

struct kv {
	struct paste_store *store;
	struct paste_wal *wal;
	struct paste_btree *tree;
	struct paste_body_config bc;
	uint64_t max_value;             /* min(--max-value, what 63 extents can hold) */
	struct kv_counters n;
	uint64_t started_ms;            /* for INFO uptime */
	uint64_t recovery_ns;           /* paste_btree_open's */
	/* Small values are copied densely here (kv.c): a buffer holding one
	 * reference of ours until it is full (PASTE_NO_BUF: none yet). */
	uint32_t pack_buf, pack_used;
};

/* One per process, shared by the front ends (each passes the same handle
 * as its service config): the first kv_acquire opens the tree, the last
 * kv_release closes it. */
struct kv_handle {
	struct kv_config cfg;
	struct kv *kv;
	uint32_t refs;
	bool banner_done;               /* the first front end printed it */
};

/* Open the log and the tree on worker 0's lane (recovery runs here), or
 * take another reference. 0, or a negative errno with err->msg set. */
int kv_acquire(struct kv_handle *h, struct server *s, struct paste_error *err);
void kv_release(struct kv_handle *h);
/* Start-up lines (once per process): keys, recovery time, value limit. */
void kv_banner(struct server *s, struct kv_handle *h);

/* Once per event-loop pass: releases whose change is durable, and a
 * checkpoint when one is due. A failed checkpoint fails the store (it
 * already has: the error is the store's). */
void kv_pass(struct kv *kv, struct worker *w);

/* The largest value a body may carry (for 413 / "-ERR value too big"). */
uint64_t kv_max_value(const struct kv *kv);

/* Log and apply SET key = the body's extents; the body is released (the
 * tree took its own references). Returns 0, or a negative errno:
 * -ENOSPC store/log/node area full, -ENAMETOOLONG/-EINVAL bad key, or the
 * store's failure. created (if non-NULL): true when the key was absent. */
int kv_set_body(struct kv *kv, const void *key, uint32_t klen, struct paste_body *b,
		bool *created);
/* SET from bytes in DRAM (RESP values that arrived inside the command,
 * INCR results): up to 512 bytes packed with other small values,
 * larger ones copied densely into fresh buffers by paste_body_copy (the
 * bodies' reserve applies: -ENOSPC below it). -EFBIG over max_value. */
int kv_set_bytes(struct kv *kv, const void *key, uint32_t klen, const void *val,
		 size_t len, bool *created);
/* DEL: 1 deleted, 0 absent, or a negative errno. */
int kv_del(struct kv *kv, const void *key, uint32_t klen);
/* The value as extents (ext[PASTE_BTREE_MAX_EXTENTS]): 0, -ENOENT, -EINVAL. */
int kv_get(struct kv *kv, const void *key, uint32_t klen, struct paste_extent *ext,
	   uint32_t *n, uint32_t *len);
/* Copy up to cap bytes of a value into out (small values: INCR, GETRANGE). */
size_t kv_copy_value(const struct kv *kv, const struct paste_extent *ext, uint32_t n,
		     uint64_t from, void *out, size_t cap);
/* Queue bytes [from, from + len) of the value on conn, durable-gated: zero
 * copy, or (512 bytes or less) copied, which is cheaper than a pin. 0, or
 * -EIO once the store failed (nothing more queued). */
int kv_send_value(struct worker *w, uint32_t conn, const struct paste_extent *ext,
		  uint32_t n, uint64_t from, uint64_t len);

/* The struct service_base hooks both front ends share (kv_http_service's
 * and kv_resp_service's): cfg is the struct kv_handle. */
int kv_svc_open(struct server *s, const void *cfg, void **state, struct paste_error *err);
void kv_svc_close(struct server *s, void *state);
void kv_svc_banner(struct server *s, void *state);
void kv_svc_pass(struct worker *w, void *state);
/* The .base of both front ends' tables; conn: the front end's slot part. */
#define KV_SERVICE_BASE(conn) { .name = "kv", .conn_size = sizeof(conn), .open = kv_svc_open, \
				.close = kv_svc_close, .banner = kv_svc_banner, .pass = kv_svc_pass }

/* /stats members (each followed by ','): keys, counters, checkpoints. */
size_t kv_stats_json(struct kv *kv, char *out, size_t at, size_t cap);

/* GET /metrics samples of the tree (server/metrics.h). */
size_t kv_metrics(struct server *s, void *state, char *out, size_t at, size_t cap);

/* The front ends. Each takes a struct kv_handle * as its config. */
extern const struct http_service kv_http_service;

#endif
