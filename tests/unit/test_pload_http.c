/* bench/pload's response parser: status, whole length, refusals, and every
 * split point of a valid response (a head arrives in pieces); and the
 * request's Connection header that --reconnect looks at. */
#include <string.h>

#include "check.h"
#include "pload_http.h"

static int parse(const char *s, struct pload_response *r)
{
	return pload_parse_response(s, strlen(s), r);
}

static int conn_of(const char *req, size_t *head)
{
	return pload_request_connection(req, strlen(req), head);
}

static void test_request_connection(void)
{
	size_t head = 0;
	const char *none = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK_EQ(conn_of(none, &head), 0);
	CHECK_EQ(head, strlen(none));
	const char *body = "POST /log HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
	CHECK_EQ(conn_of(body, &head), 1);
	CHECK_EQ(head, strlen(body) - 3);
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nconnection:  Foo , CLOSE \r\n\r\n", &head), 1);
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", &head), -1);
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", &head), -1);
	/* once another value was seen, a later close does not count */
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", &head), -1);
	CHECK_EQ(conn_of("X-Connection: close\r\n", &head), -2);          /* no complete head */
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nConnection: close\r\n", &head), -2);
	/* a bare LF does not start a header line: no Connection header here */
	CHECK_EQ(conn_of("GET / HTTP/1.1\r\nBad\nConnection: close\r\n\r\n", &head), 0);
	/* every prefix of a complete head is incomplete */
	for (size_t n = 0; n + 1 < strlen(none); n++)
		CHECK_EQ(pload_request_connection(none, n, &head), -2);
}

int main(void)
{
	struct pload_response r;
	const char *ok = "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\n"
	                 "Content-Length: 5\r\nLSN: 7\r\n\r\nlsn 7";
	CHECK_EQ(parse(ok, &r), 1);
	CHECK_EQ(r.status, 201);
	CHECK_EQ(r.total, strlen(ok));

	/* every prefix of the head needs more bytes; the body is not needed */
	size_t head = strstr(ok, "\r\n\r\n") + 4 - ok;
	for (size_t n = 0; n < head; n++)
		CHECK_EQ(pload_parse_response(ok, n, &r), 0);
	for (size_t n = head; n <= strlen(ok); n++) {
		CHECK_EQ(pload_parse_response(ok, n, &r), 1);
		CHECK_EQ(r.total, strlen(ok));
	}

	const char *nf = "HTTP/1.0 404 Not Found\r\ncontent-length:  0 \r\n\r\n";
	CHECK_EQ(parse(nf, &r), 1);
	CHECK_EQ(r.status, 404);
	CHECK_EQ(r.total, strlen(nf));
	CHECK_EQ(parse("HTTP/1.1 204 No Content\r\n\r\n", &r), 1);
	CHECK_EQ(r.total, 27);
	CHECK_EQ(parse("HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", &r), 1);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(parse("HTTP/1.1 507 Insufficient Storage\r\nContent-Length: 1\r\n"
	               "Content-Length: 1\r\n\r\nx", &r), 1);
	CHECK_EQ(r.status, 507);

	/* refused: not measurable or not HTTP */
	CHECK_EQ(parse("HTTP/1.1 200 OK\r\n\r\n", &r), -1);               /* close-delimited */
	CHECK_EQ(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 20x OK\r\nContent-Length: 0\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", &r), -1);
	CHECK_EQ(parse("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", &r), -1);
	CHECK_EQ(parse("SSH-2.0-OpenSSH\r\n", &r), -1);
	CHECK_EQ(parse("HTTX", &r), -1);
	CHECK_EQ(parse("HTT", &r), 0);
	test_request_connection();
	return check_done();
}
