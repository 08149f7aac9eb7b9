/*
 * test_services.c - the rpc and wal services (services/rpc.c, wal.c) behind the
 * real HTTP protocol and server over loopback, both engines: replies byte
 * for byte, the WAL's routes (through a spy that wraps log_service's ops
 * and records what route returned), body collection held or copied and
 * its /stats gauge, a body dropped mid-way giving its buffers back, 413
 * at the head under --max-held, and what a connection slot costs in each
 * mode.
 */
#include <inttypes.h>

#include "server_fixture.h"
#include "services.h"

static struct rpc_config rpc_cfg = { .body_len = 64 };
static struct log_config wal_cfg;
static const struct http_config rpc_hc = { .max_body = 1 << 20, .service = &rpc_service,
					   .service_cfg = &rpc_cfg };

/* log_service with route and open spied on. */
static int last_route;
static void *wal_ss;
static struct server *wal_srv;

static int spy_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	int r = log_service.base.open(s, cfg, state, err);
	wal_ss = *state;
	wal_srv = s;
	return r;
}

static int spy_route(struct http_ctx *x, const struct paste_http_req *req)
{
	return last_route = log_service.route(x, req);
}

static struct http_service spy;
static struct http_config wal_hc = { .max_body = 1 << 20, .service = &spy, .service_cfg = &wal_cfg };

/* ---- slot sizes ------------------------------------------------------ */

static void test_sizes(void)
{
	uint32_t rpc = server_conn_size(&http_proto, &rpc_hc);
	uint32_t wal = server_conn_size(&http_proto, &(struct http_config){ .service = &log_service });
	/* rpc: the server's and the protocol's parts only, no extents */
	CHECK_EQ(rpc_service.base.conn_size, 0);
	CHECK_EQ(rpc, SRV_ALIGN(sizeof(struct srv_conn)) + SRV_ALIGN(sizeof(struct http_conn)));
	CHECK(rpc <= 96);
	CHECK(rpc < sizeof(struct paste_extent) * PASTE_WAL_MAX_EXTENTS);
	/* wal: plus the body's extents */
	CHECK(wal >= rpc + sizeof(struct paste_body));
	CHECK(wal <= rpc + SRV_ALIGN(sizeof(struct paste_body) + 16));
	printf("conn_data per slot: rpc %u bytes, wal %u bytes\n", rpc, wal);
}

/* ---- rpc ------------------------------------------------------------- */

#define RPC_HEAD "HTTP/1.1 200 OK\r\nServer: test\r\nContent-Type: text/plain\r\n"

static void test_rpc(enum paste_engine e)
{
	struct fixture f;
	char buf[8192], want[512], x64[65];
	memset(x64, 'x', 64);
	x64[64] = 0;
	if (fx_open(&f, e, &rpc_hc, "svc-rpc", NULL)) {
		CHECK(!"server open");
		return;
	}
	int fd = fx_client(&f);
	/* keep-alive 1.1: the prebuilt reply */
	snprintf(want, sizeof(want), RPC_HEAD "Content-Length: 64\r\n\r\n%s", x64);
	fx_send(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", 28);
	fx_read(&f, fd, buf, sizeof(buf), strlen(want), 2000, NULL);
	CHECK(!strcmp(buf, want));
	/* HEAD: the length, no body; a POST body is read and dropped */
	const char *two = "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nPOST /y HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
	snprintf(want, sizeof(want), RPC_HEAD "Content-Length: 64\r\n\r\n"
		 RPC_HEAD "Content-Length: 64\r\n\r\n%s", x64);
	fx_send(fd, two, strlen(two));
	fx_read(&f, fd, buf, sizeof(buf), strlen(want), 2000, NULL);
	CHECK(!strcmp(buf, want));
	/* 1.0 keep-alive is told; 1.0 without it is closed */
	snprintf(want, sizeof(want), RPC_HEAD "Connection: keep-alive\r\nContent-Length: 64\r\n\r\n%s"
		 RPC_HEAD "Connection: close\r\nContent-Length: 64\r\n\r\n%s", x64, x64);
	const char *ten = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n";
	fx_send(fd, ten, strlen(ten));
	bool closed;
	fx_read(&f, fd, buf, sizeof(buf), 1 << 20, 2000, &closed);
	CHECK(closed && !strcmp(buf, want));
	close(fd);
	/* /stats: the log members at zero, one schema in every mode */
	fd = fx_client(&f);
	fx_send(fd, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n", 32);
	fx_replies(&f, fd, buf, sizeof(buf), 1, false, 2000);
	CHECK(strstr(buf, "\"mode\":\"rpc\"") && strstr(buf, "\"requests\":6,") &&
	      strstr(buf, "\"log_records\":0,\"log_first_lsn\":0,\"log_last_lsn\":0,\"body_bufs\":0,"
			  "\"timeouts\":0"));
	close(fd);
	fx_close(&f);
}

/* ---- wal ------------------------------------------------------------- */

static uint64_t body_bufs(void)
{
	char buf[256];
	size_t n = spy.stats(wal_srv, wal_ss, buf, 0, sizeof(buf) - 1);
	buf[n] = 0;
	const char *p = strstr(buf, "\"body_bufs\":");
	return p ? strtoull(p + 12, NULL, 10) : UINT64_MAX;
}

static void wal_request(struct fixture *f, int fd, const char *req, size_t len, char *buf,
			size_t cap)
{
	fx_send(fd, req, len);
	fx_replies(f, fd, buf, cap, 1, !strncmp(req, "HEAD ", 5), 2000);
}

static void test_wal_routes(struct fixture *f)
{
	static const struct { const char *req; int route; const char *status; } cases[] = {
		{ "GET /log/1 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_GET, " 200 OK\r\n" },
		{ "HEAD /log/1 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_GET, " 200 OK\r\n" },
		{ "GET /log/99 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_GET, " 404 Not Found\r\n" },
		{ "GET /log/x1 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_NOT_FOUND, " 404 Not Found\r\n" },
		{ "GET /logs HTTP/1.1\r\nHost: x\r\n\r\n", LOG_NOT_FOUND, " 404 Not Found\r\n" },
		{ "GET / HTTP/1.1\r\nHost: x\r\n\r\n", LOG_NOT_FOUND, " 404 Not Found\r\n" },
		{ "GET /log HTTP/1.1\r\nHost: x\r\n\r\n", LOG_BAD_METHOD, " 405 Method Not Allowed\r\n" },
		{ "POST /log/1 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_BAD_METHOD, " 405 Method Not Allowed\r\n" },
		{ "GET /log?upto=1 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_BAD_METHOD, " 405 Method Not Allowed\r\n" },
		{ "DELETE /log?upto=x HTTP/1.1\r\nHost: x\r\n\r\n", LOG_BAD_REQUEST, " 400 Bad Request\r\n" },
		{ "DELETE /log?upto=0 HTTP/1.1\r\nHost: x\r\n\r\n", LOG_TRUNCATE, " 200 OK\r\n" },
		{ "POST /log HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", LOG_APPEND, " 201 Created\r\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[4096];
		int fd = fx_client(f);
		last_route = -1;
		wal_request(f, fd, cases[i].req, strlen(cases[i].req), buf, sizeof(buf));
		CHECK_EQ(last_route, cases[i].route);
		CHECK(!strncmp(buf + 8, cases[i].status, strlen(cases[i].status)));
		if (strncmp(buf + 8, cases[i].status, strlen(cases[i].status)))
			fprintf(stderr, "%s-> %s\n", cases[i].req, buf);
		close(fd);
	}
	fx_pump(f, 3);
}

static void test_wal(enum paste_engine e, bool copy)
{
	struct fixture f;
	char buf[8192];
	wal_cfg = (struct log_config){ .copy = copy, .max_held = 8 * 2048 };
	if (fx_open(&f, e, &wal_hc, "svc-wal", NULL)) {
		CHECK(!"server open");
		return;
	}
	int fd = fx_client(&f);
	const char *post = "POST /log HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
	wal_request(&f, fd, post, strlen(post), buf, sizeof(buf));
	CHECK(!strcmp(buf, "HTTP/1.1 201 Created\r\nServer: test\r\nContent-Type: text/plain\r\n"
			   "Content-Length: 2\r\nX-Paste-LSN: 1\r\nLocation: /log/1\r\n\r\n1\n"));
	wal_request(&f, fd, "GET /log/1 HTTP/1.1\r\nHost: x\r\n\r\n", 32, buf, sizeof(buf));
	CHECK(!strcmp(buf, "HTTP/1.1 200 OK\r\nServer: test\r\nContent-Type: application/octet-stream\r\n"
			   "Content-Length: 5\r\nX-Paste-LSN: 1\r\n\r\nhello"));
	close(fd);
	test_wal_routes(&f);

	/* A body trickling in: held (or copied) read by read, counted in
	 * body_bufs while it is open, logged whole. */
	fd = fx_client(&f);
	const char *head = "POST /log HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n";
	fx_send(fd, head, strlen(head));
	fx_pump(&f, 3);
	const char *parts[] = { "abc", "defg", "hijkl" };
	for (int i = 0; i < 3; i++) {
		fx_send(fd, parts[i], strlen(parts[i]));
		if (i < 2)
			fx_read(&f, fd, buf, sizeof(buf), 1 << 20, 50, NULL);   /* no reply yet */
		else
			fx_replies(&f, fd, buf, sizeof(buf), 1, false, 2000);
		if (i == 1)
			CHECK_EQ(body_bufs(), copy || e != PASTE_ENGINE_URING ? 1 : 2);
	}
	CHECK(strstr(buf, " 201 Created\r\n") && strstr(buf, "X-Paste-LSN: 3\r\n"));
	CHECK_EQ(body_bufs(), 0);
	wal_request(&f, fd, "GET /log/3 HTTP/1.1\r\nHost: x\r\n\r\n", 32, buf, sizeof(buf));
	CHECK(strstr(buf, "\r\n\r\nabcdefghijkl") != NULL);

	/* Dropped mid-body: the buffers go back at once. */
	fx_send(fd, head, strlen(head));
	fx_send(fd, "xy", 2);
	fx_pump(&f, 5);
	CHECK_EQ(body_bufs(), 1);
	close(fd);
	fx_pump(&f, 5);
	CHECK_EQ(body_bufs(), 0);

	/* Over --max-held (8 buffers): 413 at the head, nothing read. */
	fd = fx_client(&f);
	snprintf(buf, sizeof(buf), "POST /log HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 8 * 2048 + 1);
	wal_request(&f, fd, buf, strlen(buf), buf, sizeof(buf));
	CHECK(!strncmp(buf, "HTTP/1.1 413 ", 13) && strstr(buf, "Connection: close\r\n"));
	close(fd);

	/* Truncate everything: the log's buffers are free again. */
	fd = fx_client(&f);
	const char *del = "DELETE /log?upto=100 HTTP/1.1\r\nHost: x\r\n\r\n";
	wal_request(&f, fd, del, strlen(del), buf, sizeof(buf));
	CHECK(strstr(buf, "\r\n\r\n{\"truncated\":3}\n") != NULL);
	close(fd);
	fx_pump(&f, 5);
	struct paste_port_stats ps;
	paste_port_stats(f.w->port, &ps);
	/* every buffer in use is one the port owns while free: nothing leaked */
	CHECK_EQ(paste_store_nheld(f.s->store), ps.ring_free + ps.cached);
	fx_close(&f);
}

int main(void)
{
	struct paste_error err;
	spy = log_service;
	spy.base.open = spy_open;
	spy.route = spy_route;
	test_sizes();
	bool uring = paste_uring_probe(&err) == 0;
	test_rpc(PASTE_ENGINE_EPOLL);
	test_wal(PASTE_ENGINE_EPOLL, false);
	test_rpc(PASTE_ENGINE_EPOLL_BATCH);
	test_wal(PASTE_ENGINE_EPOLL_BATCH, false);
	if (uring) {
		test_rpc(PASTE_ENGINE_URING);
		test_wal(PASTE_ENGINE_URING, false);
		test_wal(PASTE_ENGINE_URING, true);
	} else {
		printf("skipping the uring half: %s\n", err.msg);
	}
	return check_done();
}
