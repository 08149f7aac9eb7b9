/*
 * pkvs_front.h - what pkvs's two front ends share: the one key-value
 * store (services/kv.h) behind both, opened by whichever front end's
 * service opens first, the service hooks both tables begin with, and
 * the counters as /stats JSON and /metrics samples.
 *
 *   server/http.c + services/pkvs_http.c    PUT/GET/HEAD/DELETE /kv/<key>, GET /kv?...
 *   server/resp.c + services/pkvs_resp.c    the Redis protocol; commands in cmd_*.c
 *                          |
 *                   services/kv.c           the tree, values, counters
 */
#ifndef PASTE_SERVICES_PKVS_FRONT_H
#define PASTE_SERVICES_PKVS_FRONT_H

#include "kv.h"
#include "server.h"

/* One per process, shared by the front ends (each passes the same handle
 * as its service config): the first open opens the store's tree, the
 * last close closes it. */
struct kv_handle {
	struct kv_config cfg;
	struct kv *kv;
	uint32_t refs;
	bool banner_done;               /* the first front end printed it */
	bool kv_started;                /* kv_start ran */
	uint64_t started_ms;            /* for INFO uptime */
};

/* The struct service_base hooks both front ends share: cfg is the
 * struct kv_handle. */
int pkvs_svc_open(struct server *s, const void *cfg, void **state, struct paste_error *err);
void pkvs_svc_close(struct server *s, void *state);
int pkvs_svc_started(struct server *s, void *state, struct paste_error *err);
void pkvs_svc_banner(struct server *s, void *state);
void pkvs_svc_pass(struct worker *w, void *state);
/* When the next pass is due for the store's own work (active expiry). */
uint64_t pkvs_svc_wake(struct worker *w, void *state);
/* The .base of both front ends' tables; conn: the front end's slot part. */
#define PKVS_SERVICE_BASE(conn) { .name = "kv", .conn_size = sizeof(conn), .open = pkvs_svc_open, \
				  .close = pkvs_svc_close, .banner = pkvs_svc_banner, \
				  .started = pkvs_svc_started, .pass = pkvs_svc_pass, \
				  .wake = pkvs_svc_wake }

static inline struct kv *pkvs_kv(void *service_state)
{
	return ((struct kv_handle *)service_state)->kv;
}

/* /stats members (each followed by ','): keys, counters, checkpoints. */
size_t pkvs_stats_json(struct kv *kv, char *out, size_t at, size_t cap);
/* GET /metrics samples of the tree and the counters (server/metrics.h). */
size_t pkvs_metrics(struct server *s, void *state, char *out, size_t at, size_t cap);

/* The front ends. Each takes a struct kv_handle * as its config. */
extern const struct http_service pkvs_http_service;

#endif
