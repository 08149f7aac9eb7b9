/*
 * kv_tracking.h - what client-side caching's two halves share: the
 * tracking tables and invalidations (kv_tracking.c) and the CLIENT
 * TRACKING, CACHING, GETREDIR and TRACKINGINFO commands that turn a
 * connection's tracking on and off (cmd_tracking.c). Private to the two;
 * the hooks the rest of pkvs calls are in cmd_tracking.h.
 */
#ifndef PASTE_SERVICES_KV_TRACKING_H
#define PASTE_SERVICES_KV_TRACKING_H

#include "cmd_tracking.h"
#include "reassembly.h"

/* A client's tracking flags. */
enum {
	T_ON = 1u << 0, T_BCAST = 1u << 1, T_OPTIN = 1u << 2, T_OPTOUT = 1u << 3,
	T_CACHING = 1u << 4, T_NOLOOP = 1u << 5, T_BROKEN = 1u << 6,
};

/* A client as the tables name it: its id and its connection's slot. */
struct who {
	uint64_t id;
	uint32_t conn;
};

/* A connection's tracking (kv_resp_conn.track). */
struct kv_tclient {
	uint32_t flags;
	uint64_t redir;                 /* REDIRECT's id; 0: none */
	uint32_t rconn;                 /* ... its connection's slot */
	struct prefix **pfx;            /* BCAST: its prefixes, in byte order */
	uint32_t npfx, cappfx;
};

/* A BCAST prefix: its clients and the keys under it changed since the
 * last pass (struct bkey: kv_tracking.c's). */
struct prefix {
	struct who *cl;                 /* its BCAST clients */
	uint32_t ncl, capcl;
	struct bkey *keys;
	uint32_t nkeys, capkeys;
	struct reasm arena;             /* the keys' bytes */
	size_t len;
	uint8_t p[];
};

static inline struct kv_tclient *tc_of(const struct resp_ctx *x)
{
	return ((const struct kv_resp_conn *)x->sc)->track;
}

/* Client x (tracking c) joins the tracking clients (once; -ENOMEM), and
 * the invalidations of its reads go through the worker and kv it runs on. */
int kv_track_join(struct resp_ctx *x, struct kv *kv, struct kv_tclient *c);
/* Client x listens to prefix p[0..len) (BCAST): 0 or -ENOMEM. */
int kv_track_bcast_add(struct resp_ctx *x, struct kv_tclient *c, const void *p, size_t len);
/* Client x stops tracking: out of the clients and its prefixes. */
void kv_track_disable(struct resp_ctx *x, struct kv_tclient *c);
/* After a change of the clients: the change listener and kv_watch's bit
 * follow whether anybody tracks. */
void kv_track_sync(void);

#endif
