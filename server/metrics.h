/*
 * metrics.h - Prometheus text exposition of the server's counters
 * (server/metrics.c) and helpers services use to add their own.
 */
#ifndef PASTE_SERVER_METRICS_H
#define PASTE_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "server.h"

/* Each appends at out[at..cap) and returns the new end (cap when full). */
size_t metrics_put(char *out, size_t at, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* "# HELP", "# TYPE" and one sample without labels. */
size_t metrics_one(char *out, size_t at, size_t cap, const char *name, const char *type,
		   const char *help, uint64_t value);
/* The server's own: replies by status, requests, batches, events,
 * syscalls, fences, group commits, the barrier latency histogram,
 * buffers, connections, timeouts, refusals and paused connections, the
 * failed store. */
size_t metrics_server(struct worker *w, char *out, size_t at, size_t cap);

#endif
