/*
 * metrics.c - the server's counters in the Prometheus text exposition
 * format (version 0.0.4), for GET /metrics. The same totals as /stats
 * (server_totals), named as a monitoring system expects: counters end in
 * _total, sizes say their unit, latencies are a histogram in seconds.
 * Built per scrape into the caller's buffer: no state, no allocation.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

size_t metrics_put(char *out, size_t at, size_t cap, const char *fmt, ...)
{
	if (at >= cap)
		return at;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out + at, cap - at, fmt, ap);
	va_end(ap);
	if (n < 0)
		return at;
	return (size_t)n < cap - at ? at + (size_t)n : cap;
}

size_t metrics_one(char *out, size_t at, size_t cap, const char *name, const char *type,
		   const char *help, uint64_t value)
{
	return metrics_put(out, at, cap, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n",
			   name, help, name, type, name, value);
}

size_t metrics_server(struct worker *w, char *out, size_t at, size_t cap)
{
	struct server *s = w->srv;
	struct server_totals tt;
	server_totals(w, &tt);
	const struct paste_port_stats *t = &tt.port;
	at = metrics_put(out, at, cap,
		"# HELP paste_replies_total Replies sent, by HTTP status.\n"
		"# TYPE paste_replies_total counter\n");
	for (uint32_t i = 0; i < SRV_NSTATUS; i++) {
		if (i + 1 < SRV_NSTATUS)
			at = metrics_put(out, at, cap, "paste_replies_total{code=\"%u\"} %" PRIu64 "\n",
					 srv_status_codes[i], tt.status[i]);
		else
			at = metrics_put(out, at, cap, "paste_replies_total{code=\"other\"} %" PRIu64 "\n",
					 tt.status[i]);
	}
	at = metrics_one(out, at, cap, "paste_requests_total", "counter",
			 "Requests (HTTP) or commands (Redis protocol) handled.", tt.requests);
	at = metrics_one(out, at, cap, "paste_batches_total", "counter",
			 "Event-loop passes that returned events.", t->polls);
	at = metrics_one(out, at, cap, "paste_events_total", "counter",
			 "Port events (accepts, data, closes) handed to the server.", t->events);
	at = metrics_one(out, at, cap, "paste_syscalls_total", "counter",
			 "System calls the ports issued (io_uring_enter, epoll_wait, read, write, fsync).",
			 t->syscalls);
	at = metrics_one(out, at, cap, "paste_fences_total", "counter",
			 "Persistence fences paid (one per batch with flushed data).", t->fences);
	at = metrics_one(out, at, cap, "paste_group_commits_total", "counter",
			 "Group commits (fdatasync) completed in fsync mode.", t->commits);
	/* Buckets: 2^i microseconds, cumulative, as Prometheus wants. */
	at = metrics_put(out, at, cap,
		"# HELP paste_barrier_seconds Latency of a persistence barrier: a fence, or a group "
		"commit from start to completion.\n# TYPE paste_barrier_seconds histogram\n");
	uint64_t cum = 0;
	for (uint32_t i = 0; i < PASTE_PORT_LAT_BUCKETS; i++) {
		cum += t->barrier_hist[i];
		if (i + 1 < PASTE_PORT_LAT_BUCKETS)
			at = metrics_put(out, at, cap, "paste_barrier_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
					 (double)(1ull << i) * 1e-6, cum);
	}
	at = metrics_put(out, at, cap, "paste_barrier_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
			 "paste_barrier_seconds_sum %.9f\npaste_barrier_seconds_count %" PRIu64 "\n",
			 cum, (double)t->barrier_ns * 1e-9, cum);
	at = metrics_put(out, at, cap,
		"# HELP paste_buffers Packet store buffers by state.\n# TYPE paste_buffers gauge\n"
		"paste_buffers{state=\"free\"} %u\npaste_buffers{state=\"held\"} %u\n"
		"paste_buffers{state=\"total\"} %u\n",
		paste_store_nfree(s->store), tt.bufs_held, paste_store_geom(s->store)->nbufs);
	at = metrics_one(out, at, cap, "paste_connections", "gauge", "Open connections.", t->conns);
	at = metrics_one(out, at, cap, "paste_accepts_total", "counter", "Connections accepted.",
			 t->accepts);
	at = metrics_one(out, at, cap, "paste_receive_bytes_total", "counter", "Bytes received.",
			 t->bytes_in);
	at = metrics_one(out, at, cap, "paste_enobufs_total", "counter",
			 "Receives re-armed after the buffer ring ran dry.", t->enobufs);
	at = metrics_one(out, at, cap, "paste_timeouts_total", "counter",
			 "Connections closed by the header or body timeout.", tt.timeouts);
	at = metrics_one(out, at, cap, "paste_idle_closes_total", "counter",
			 "Idle connections closed by the idle timeout.", tt.idle_closes);
	at = metrics_one(out, at, cap, "paste_refused_connections_total", "counter",
			 "Connections over the connection limit, answered the refusal and closed.",
			 t->refused);
	at = metrics_one(out, at, cap, "paste_paused_connections", "gauge",
			 "Connections not read now: their unsent replies are over the output limit.",
			 t->paused);
	at = metrics_one(out, at, cap, "paste_pauses_total", "counter",
			 "Times a connection's reading was paused by the output limit.", t->pauses);
	at = metrics_one(out, at, cap, "paste_output_limit_bytes", "gauge",
			 "Unsent replies a connection may have before it is no longer read (0: no limit).",
			 s->cfg.max_output);
	at = metrics_one(out, at, cap, "paste_store_failed", "gauge",
			 "1 once the store failed (an I/O error): nothing more is acknowledged.",
			 paste_store_failed(s->store, NULL) ? 1 : 0);
	return at;
}
