/*
 * phttpd_wal.c - phttpd's durable log mode.
 *
 *   POST /log              append the body; 201 + X-Paste-LSN once durable
 *   GET /log/<lsn>         the stored bytes, sent from the held buffers
 *   DELETE /log?upto=<lsn> truncate; frees the buffers
 *
 * Zero copy (the uring engine without --copy): every packet buffer that
 * carries body bytes is held where it landed and named in the record by
 * (buffer, offset, length). The epoll engine and --copy copy the body into
 * fresh store buffers instead: the paper's baseline and its "copy" bar.
 * Either way the record and data are flushed now and made durable by the
 * port's one barrier per batch before the 201 leaves.
 *
 * --max-held bounds the store space one unfinished body pins: held reads
 * pin a whole buffer each however few bytes they carry, so a body
 * trickling in tiny reads is held in place only while the buffers held so
 * far plus a dense copy of the rest fit in the limit; after that the rest
 * is copied densely (whole buffers filled). A body whose dense copy alone
 * does not fit is refused with 413 at its head (wal_max_body).
 *
 * Once the store has failed (phttpd.c) nothing here acknowledges: a
 * DURABLE send the port refuses with -EIO becomes a 503.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phttpd.h"

/* Free buffers kept back from requests so the port can always refill its
 * ring, so a full store still receives the DELETE that empties it. */
#define RESERVE_BUFS 256u

uint64_t wal_max_body(const struct server *srv)
{
	uint64_t bs = paste_store_geom(srv->store)->buf_size;
	uint64_t cap = (uint64_t)PASTE_WAL_MAX_EXTENTS * bs;
	if (srv->max_held && srv->max_held / bs * bs < cap)
		cap = srv->max_held / bs * bs;
	return cap < srv->max_body ? cap : srv->max_body;
}

static bool parse_lsn(const char *p, uint32_t n, uint64_t *out)
{
	if (!n || n > 20)
		return false;
	uint64_t v = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return true;
}

void wal_route(struct server *srv, struct hconn *h, const struct paste_http_req *req)
{
	(void)srv;
	const char *t = req->target;
	uint32_t n = req->target_len;
	enum paste_http_method m = req->method;
	h->route = ROUTE_NOT_FOUND;
	if (n < 4 || memcmp(t, "/log", 4))
		return;
	if (n == 4) {
		h->route = m == PASTE_HTTP_POST ? ROUTE_LOG_APPEND : ROUTE_BAD_METHOD;
	} else if (t[4] == '/') {
		if (m != PASTE_HTTP_GET && m != PASTE_HTTP_HEAD)
			h->route = ROUTE_BAD_METHOD;
		else if (parse_lsn(t + 5, n - 5, &h->arg))
			h->route = ROUTE_LOG_GET;
	} else if (n > 10 && !memcmp(t + 4, "?upto=", 6)) {
		if (m != PASTE_HTTP_DELETE)
			h->route = ROUTE_BAD_METHOD;
		else if (parse_lsn(t + 10, n - 10, &h->arg))
			h->route = ROUTE_LOG_TRUNCATE;
		else
			h->route = ROUTE_BAD_REQUEST;
	}
}

void wal_release(struct worker *w, struct hconn *h)
{
	for (uint32_t i = 0; i < h->next; i++)
		paste_store_unref(w->srv->store, h->ext[i].buf, false);
	gauge_add(&w->body_bufs, -(int64_t)h->next);
	h->next = 0;
	h->copying = false;
}

static void body_fail(struct worker *w, struct hconn *h, uint16_t status)
{
	wal_release(w, h);
	h->failed = true;
	h->fail_status = status;
}

void wal_body(struct worker *w, struct hconn *h, const struct paste_event *ev,
	      uint32_t pos, uint32_t len)
{
	struct server *srv = w->srv;
	struct paste_store *st = srv->store;
	uint32_t bs = paste_store_geom(st)->buf_size;
	if (h->failed)
		return;   /* read and dropped; the reply says why */
	if (!srv->copy && ev->buf != PASTE_NO_BUF && h->next < PASTE_WAL_MAX_EXTENTS) {
		/* Hold in place while the extents left can still take the rest
		 * of the body densely copied (a body trickling in tiny reads
		 * would otherwise run out of extents), and while the buffers
		 * held plus that dense copy stay within --max-held. */
		uint64_t rest = h->body_left - len;
		uint64_t room = (uint64_t)(PASTE_WAL_MAX_EXTENTS - h->next - 1) * bs;
		uint64_t pinned = ((uint64_t)h->next + 1 + (rest + bs - 1) / bs) * bs;
		if (room >= rest && (!srv->max_held || pinned <= srv->max_held) &&
		    paste_store_nfree(st) >= RESERVE_BUFS) {
			paste_port_hold(w->port, ev);
			gauge_add(&w->body_bufs, 1);
			h->ext[h->next++] = (struct paste_extent){ ev->buf, ev->off + pos, len };
			h->copying = false;
			return;
		}
	}
	while (len) {
		struct paste_extent *e = h->next ? &h->ext[h->next - 1] : NULL;
		if (!h->copying || e->len == bs) {
			uint32_t idx;
			if (h->next == PASTE_WAL_MAX_EXTENTS || paste_store_nfree(st) < RESERVE_BUFS ||
			    paste_store_alloc(st, &idx, 1) != 1) {
				body_fail(w, h, 507);
				return;
			}
			gauge_add(&w->body_bufs, 1);
			h->ext[h->next++] = (struct paste_extent){ idx, 0, 0 };
			h->copying = true;
			e = &h->ext[h->next - 1];
		}
		uint32_t n = bs - e->len < len ? bs - e->len : len;
		memcpy(paste_store_buf(st, e->buf) + e->len, ev->data + pos, n);
		e->len += n;
		pos += n;
		len -= n;
	}
}

static void finish_append(struct worker *w, uint32_t conn, struct hconn *h)
{
	struct server *srv = w->srv;
	if (h->failed) {
		reply_simple(w, conn, h, h->fail_status, "text/plain", "store full\n", 11, NULL, 0);
		return;
	}
	uint64_t lsn = 0;
	int r = paste_wal_append(srv->wal, w->id, w->persist, h->ext, h->next, &lsn);
	wal_release(w, h);     /* the log took its own references */
	if (r < 0 && store_failed(w)) {
		reply_failed(w, conn, h);
		return;
	}
	if (r == -ENOSPC) {
		reply_simple(w, conn, h, 507, "text/plain", "log full\n", 9, NULL, 0);
		return;
	}
	if (r < 0) {
		char msg[96];
		int n = snprintf(msg, sizeof(msg), "append failed: %s\n", strerror(-r));
		reply_simple(w, conn, h, 500, "text/plain", msg, (size_t)n, NULL, 0);
		return;
	}
	char body[32], extra[96];
	size_t n = put_u64(body, 0, sizeof(body), lsn);
	body[n++] = '\n';
	size_t e = put_str(extra, 0, sizeof(extra) - 1, "X-Paste-LSN: ");
	e = put_u64(extra, e, sizeof(extra) - 1, lsn);
	e = put_str(extra, e, sizeof(extra) - 1, "\r\nLocation: /log/");
	e = put_u64(extra, e, sizeof(extra) - 1, lsn);
	extra[e] = 0;
	/* The 201 leaves only after the port's barrier made body and record
	 * durable (one fence or group commit for the whole batch); if the
	 * store failed meanwhile the port refuses it (or, if already queued,
	 * discards it and closes the connection). */
	if (reply_simple(w, conn, h, 201, "text/plain", body, n, extra, PASTE_SEND_DURABLE) == -EIO)
		reply_failed(w, conn, h);
}

static void finish_get(struct worker *w, uint32_t conn, struct hconn *h)
{
	struct paste_extent ext[PASTE_WAL_MAX_EXTENTS];
	uint32_t n, len;
	if (paste_wal_read(w->srv->wal, h->arg, ext, &n, &len)) {
		reply_simple(w, conn, h, 404, "text/plain", "no such record\n", 15, NULL, 0);
		return;
	}
	char head[256], extra[48];
	size_t e = put_str(extra, 0, sizeof(extra) - 1, "X-Paste-LSN: ");
	extra[put_u64(extra, e, sizeof(extra) - 1, h->arg)] = 0;
	int hl = reply_head(head, sizeof(head), h, 200, "application/octet-stream", len, extra);
	/* DURABLE: a record appended in this same batch is not readable
	 * before it is acknowledged (no dirty reads). */
	bool failed = paste_port_send(w->port, conn, head, (size_t)hl, PASTE_SEND_DURABLE) == -EIO;
	for (uint32_t i = 0; i < n; i++) {
		if (!h->head_only && !failed)   /* the send takes its own pin */
			paste_port_send_store(w->port, conn, ext[i].buf, ext[i].off, ext[i].len,
					      PASTE_SEND_DURABLE);
		paste_store_unref(w->srv->store, ext[i].buf, false);
	}
	if (failed)
		reply_failed(w, conn, h);
	else if (!h->keep_alive)
		paste_port_close_conn(w->port, conn);
}

void wal_finish(struct worker *w, uint32_t conn, struct hconn *h)
{
	switch (h->route) {
	case ROUTE_LOG_APPEND:
		finish_append(w, conn, h);
		break;
	case ROUTE_LOG_GET:
		finish_get(w, conn, h);
		break;
	case ROUTE_LOG_TRUNCATE: {
		int64_t dropped = paste_wal_truncate(w->srv->wal, h->arg, w->persist);
		if (dropped < 0 && store_failed(w)) {
			reply_failed(w, conn, h);
			break;
		}
		char body[64];
		int n = dropped < 0 ? snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", strerror((int)-dropped))
				    : snprintf(body, sizeof(body), "{\"truncated\":%" PRId64 "}\n", dropped);
		reply_simple(w, conn, h, dropped < 0 ? 500 : 200, "application/json", body, (size_t)n,
			     NULL, 0);
		break;
	}
	default:
		break;
	}
}
