/*
 * services.h - the HTTP services phttpd offers, one per --mode. Each is a
 * struct http_service (server/http.h) with a config of its own; main()
 * picks one and passes its config through struct http_config.
 */
#ifndef PASTE_SERVICES_H
#define PASTE_SERVICES_H

#include <stdbool.h>
#include <stdint.h>
#include "http.h"

/* rpc: every request but GET /stats gets 200 and a fixed body (the
 * paper's RPC figure); request bodies are read and dropped. */
struct rpc_config {
	uint32_t body_len;          /* reply body bytes ('x'), --body-len */
};
extern const struct http_service rpc_service;

/* wal: the durable log. POST /log, GET /log/<lsn>, DELETE /log?upto=<lsn>. */
struct wal_config {
	bool copy;                  /* --copy: bodies copied into fresh buffers */
	uint64_t max_held;          /* --max-held: store bytes an unfinished body may pin */
};
extern const struct http_service wal_service;

/* The WAL service's handler ids (x->h->route), for tests. */
enum wal_route {
	WAL_NOT_FOUND = 0,
	WAL_APPEND,        /* POST /log */
	WAL_GET,           /* GET|HEAD /log/<lsn> */
	WAL_TRUNCATE,      /* DELETE /log?upto=<lsn> */
	WAL_BAD_METHOD,    /* 405 */
	WAL_BAD_REQUEST,   /* 400: DELETE /log?upto=<not a number> */
};

#endif
