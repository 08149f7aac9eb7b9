/*
 * services.h - what a request means, above the protocols of server/.
 * This folder serves two products:
 *
 *   phttpd (one HTTP service per --mode, this header):
 *     rpc.c           a fixed reply (the paper's RPC figure)
 *     log.c           the durable log: POST/GET/DELETE /log over lib/wal.c
 *   pkvs (the key-value store, pkvs_front.h):
 *     kv.c            the key-value core: tree access, values, counters;
 *                     it includes nothing from server/ and sends nothing
 *     pkvs_front.c    what both front ends share (the store's life, stats)
 *     pkvs_http.c     the HTTP front end: PUT/GET/DELETE /kv/<key>, listing
 *     pkvs_resp.c     the Redis front end: command table, dispatch, streaming
 *     cmd_*.c         the Redis commands, one file per family
 *
 * Each phttpd service is a struct http_service (server/http.h) with a
 * config of its own; main() picks one and passes its config through
 * struct http_config.
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

/* --mode wal: the durable log. POST /log, GET /log/<lsn>, DELETE /log?upto=<lsn>. */
struct log_config {
	bool copy;                  /* --copy: bodies copied into fresh buffers */
	uint64_t max_held;          /* --max-held: store bytes an unfinished body may pin */
};
extern const struct http_service log_service;

/* The log service's handler ids (x->h->route), for tests. */
enum log_route {
	LOG_NOT_FOUND = 0,
	LOG_APPEND,        /* POST /log */
	LOG_GET,           /* GET|HEAD /log/<lsn> */
	LOG_TRUNCATE,      /* DELETE /log?upto=<lsn> */
	LOG_BAD_METHOD,    /* 405 */
	LOG_BAD_REQUEST,   /* 400: DELETE /log?upto=<not a number> */
};

#endif
