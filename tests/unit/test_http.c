/* test_http.c - the request-head parser: every status it returns, the
 * incremental contract (any split gives the one-shot answer), pipelining,
 * and the limits at and one past their boundaries.
 *
 * Every parse runs on a malloc'd copy of exactly len bytes, so the
 * sanitizer build catches a read past what the caller handed over. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "paste.h"

static char *copy_of(const char *s, size_t len)
{
	char *c = malloc(len ? len : 1);
	if (!c)
		abort();
	memcpy(c, s, len);
	return c;
}

/* A pointer of a parsed request, from the copy c[0..len) onto s: it must
 * lie inside the input, or be NULL (query, host) or the static "/" of an
 * absolute-form target without a path. */
static const char *rebase(const char *p, uint32_t n, const char *c, size_t len, const char *s)
{
	if (!p || (n == 1 && p[0] == '/' && (p < c || p >= c + len)))
		return p;
	CHECK(p >= c && p + n <= c + len);
	return s + (p - c);
}

/* One-shot parse with the given limits (0 = defaults); the pointers in
 * *req are rebased onto s so callers can check them. */
static int parse_lim(const char *s, size_t len, uint32_t max_head, uint64_t max_body,
		     struct paste_http_req *req)
{
	struct paste_http_parser ps;
	paste_http_parser_init(&ps, max_head, max_body);
	char *c = copy_of(s, len);
	int rc = paste_http_parse(&ps, c, len, req);
	if (rc > 0) {
		CHECK(req->method_str >= c && req->method_str + req->method_len <= c + len);
		CHECK(req->target >= c && req->target + req->target_len <= c + len);
		CHECK(req->path != NULL);
		req->method_str = s + (req->method_str - c);
		req->target = s + (req->target - c);
		req->path = rebase(req->path, req->path_len, c, len, s);
		req->query = rebase(req->query, req->query_len, c, len, s);
		req->host = rebase(req->host, req->host_len, c, len, s);
	}
	free(c);
	return rc;
}

static int parse(const char *s, struct paste_http_req *req)
{
	return parse_lim(s, strlen(s), 0, 0, req);
}

static int status_of(const char *s)
{
	struct paste_http_req req;
	return parse(s, &req);
}

static void test_simple_get(void)
{
	const char *s = "GET /index.html?q=1 HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\nNEXT";
	struct paste_http_req req;
	int rc = parse(s, &req);
	CHECK_EQ(rc, strlen(s) - 4);
	CHECK_EQ(req.head_len, rc);
	CHECK_EQ(req.method, PASTE_HTTP_GET);
	CHECK(req.method_str == s && req.method_len == 3);
	CHECK(req.target == s + 4);
	CHECK_EQ(req.target_len, strlen("/index.html?q=1"));
	CHECK_EQ(req.version_minor, 1);
	CHECK(req.keep_alive);
	CHECK(!req.has_content_length);
	CHECK_EQ(req.content_length, 0);
	CHECK_EQ(req.nheaders, 2);
}

static void test_methods(void)
{
	static const struct { const char *line; enum paste_http_method m; } cases[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_GET },
		{ "HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_HEAD },
		{ "POST / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_POST },
		{ "PUT / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_PUT },
		{ "DELETE / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_DELETE },
		{ "get / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_OTHER },     /* case-sensitive */
		{ "PATCH / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_OTHER },
		{ "M-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_OTHER },
		{ "GETX / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_OTHER },
		{ "DELET / HTTP/1.1\r\nHost: h\r\n\r\n", PASTE_HTTP_OTHER },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct paste_http_req req;
		CHECK(parse(cases[i].line, &req) > 0);
		CHECK_EQ(req.method, cases[i].m);
		CHECK_EQ(req.method_len, strchr(cases[i].line, ' ') - cases[i].line);
	}
}

/* Every byte value in a method and in a field name: accepted exactly when
 * it is an RFC 9110 tchar. Checks the bit set in http.c byte by byte. */
static void test_tchar_set(void)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	for (int c = 0; c < 256; c++) {
		bool tchar = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			     (c >= 'A' && c <= 'Z') || (c != 0 && strchr(extra, c));
		char m[] = "GxT / HTTP/1.1\r\nHost: h\r\n\r\n";
		m[1] = (char)c;
		struct paste_http_req req;
		int rc = parse_lim(m, sizeof(m) - 1, 0, 0, &req);
		if (tchar != (rc > 0))
			fprintf(stderr, "method byte 0x%02x\n", c);
		CHECK_EQ(tchar, rc > 0);

		if (c == ':')
			continue;   /* ends a name legitimately */
		char h[] = "GET / HTTP/1.1\r\nAxB: v\r\nHost: h\r\n\r\n";
		h[17] = (char)c;
		rc = parse_lim(h, sizeof(h) - 1, 0, 0, &req);
		if (tchar != (rc > 0))
			fprintf(stderr, "name byte 0x%02x\n", c);
		CHECK_EQ(tchar, rc > 0);
	}
}

static void test_bad_request(void)
{
	static const char *bad[] = {
		" / HTTP/1.1\r\nHost: h\r\n\r\n",                      /* no method */
		"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",                  /* two SP */
		"GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n",                  /* HTAB is not SP */
		"GET HTTP/1.1\r\nHost: h\r\n\r\n",                     /* no target */
		"GET /\r\n\r\n",                            /* HTTP/0.9 style */
		"GET / \r\n\r\n",                           /* empty version */
		"GET / HTTP/1.1 \r\n\r\n",                  /* trailing SP */
		"GET / http/1.1\r\n\r\n",                   /* HTTP-name is case-sensitive */
		"GET / HTTP/11\r\n\r\n",
		"GET / HTTP/1.x\r\n\r\n",
		"GET / HTTP/1.10\r\n\r\n",
		"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n",              /* CTL in target */
		"GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n",              /* DEL in target */
		"GET / HTTP/1.1\rHost: x\r\n\r\n",          /* bare CR ends nothing */
		"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",     /* bare CR in a value */
		"GET / HTTP/1.1\r\nHost: h\r\n\r\r\n\r\n",             /* CR CR LF is not a blank line */
		"GET / HTTP/1.1\r\nHost: x\r\n continued\r\n\r\n",  /* obs-fold */
		"GET / HTTP/1.1\r\nHost: x\r\n\tcontinued\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : x\r\n\r\n",       /* SP before the colon */
		"GET / HTTP/1.1\r\nHost\t: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n",            /* empty name */
		"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\001b\r\n\r\n", /* CTL in a value */
		"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 12a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n",  /* 2^64 */
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n",
		"\x16\x03\x01\x02\x00",                     /* TLS hello: refused at once */
		"\r\r\n",                                   /* bare CR before the request */
		"\x80GET / HTTP/1.1\r\nHost: h\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = status_of(bad[i]);
		if (rc != -400)
			fprintf(stderr, "bad[%zu] gave %d\n", i, rc);
		CHECK_EQ(rc, -400);
	}
	/* A NUL cannot be written in a string literal's middle. */
	static const char nul[] = "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n";
	struct paste_http_req req;
	CHECK_EQ(parse_lim(nul, sizeof(nul) - 1, 0, 0, &req), -400);
}

static void test_version(void)
{
	struct paste_http_req req;
	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &req) > 0);
	CHECK_EQ(req.version_minor, 0);
	CHECK(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
	CHECK_EQ(req.version_minor, 1);
	CHECK_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), -505);
	CHECK_EQ(status_of("GET / HTTP/1.2\r\n\r\n"), -505);
	CHECK_EQ(status_of("GET / HTTP/0.9\r\n\r\n"), -505);
	CHECK_EQ(status_of("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), -505);
	/* The request line is judged before the fields. */
	CHECK_EQ(status_of("GET / HTTP/3.0\r\nBad Name: x\r\n\r\n"), -505);
}

static void test_content_length(void)
{
	struct paste_http_req req;
	CHECK(parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n", &req) > 0);
	CHECK(req.has_content_length);
	CHECK_EQ(req.content_length, 42);
	CHECK(parse("POST /x HTTP/1.1\r\nHost: h\r\ncontent-LENGTH:\t 7 \t\r\n\r\n", &req) > 0);
	CHECK_EQ(req.content_length, 7);
	CHECK(parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", &req) > 0);
	CHECK(req.has_content_length);
	CHECK_EQ(req.content_length, 0);
	/* Equal duplicates (even spelled with leading zeros) are one value. */
	CHECK(parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nCONTENT-LENGTH: 005\r\n\r\n", &req) > 0);
	CHECK_EQ(req.content_length, 5);
	/* Near the name but not it: ignored. */
	CHECK(parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Lengthx: zz\r\nContent-Lengt: zz\r\n\r\n", &req) > 0);
	CHECK(!req.has_content_length);

	const char *max = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n";
	CHECK(parse_lim(max, strlen(max), 0, UINT64_MAX, &req) > 0);
	CHECK(req.content_length == UINT64_MAX);
	CHECK_EQ(parse_lim(max, strlen(max), 0, 0, &req), -413);
}

static void test_body_limit(void)
{
	struct paste_http_req req;
	const char *at = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n";
	const char *past = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 101\r\n\r\n";
	CHECK(parse_lim(at, strlen(at), 0, 100, &req) > 0);
	CHECK_EQ(parse_lim(past, strlen(past), 0, 100, &req), -413);
	/* The default is 1 MiB. */
	CHECK(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048576\r\n\r\n", &req) > 0);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n"), -413);
}

static void test_transfer_encoding(void)
{
	struct paste_http_req req;
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\ntransfer-ENCODING: Chunked\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity, chunked\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), -501);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), -501);
	/* Both a bad framing and a too-large body: the encoding is what we cannot do. */
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 99999999\r\n\r\n"), -501);
	CHECK(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\n", &req) > 0);
	CHECK_EQ(req.content_length, 3);
	CHECK(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  IDENTITY \r\n\r\n", &req) > 0);
}

static void test_expect(void)
{
	struct paste_http_req req;
	CHECK(parse("POST /log HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n", &req) > 0);
	CHECK(req.expect_continue);
	CHECK(parse("POST /log HTTP/1.1\r\nHost: h\r\nexpect:  100-Continue \r\nContent-Length: 9\r\n\r\n", &req) > 0);
	CHECK(req.expect_continue);
	CHECK(parse("POST /log HTTP/1.1\r\nHost: h\r\nContent-Length: 9\r\n\r\n", &req) > 0);
	CHECK(!req.expect_continue);
	/* HTTP/1.0: the expectation is ignored, whatever it says (RFC 9110 10.1.1) */
	CHECK(parse("POST /log HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n", &req) > 0);
	CHECK(!req.expect_continue);
	CHECK(parse("POST /log HTTP/1.0\r\nExpect: teapot\r\n\r\n", &req) > 0);
	/* anything else is an expectation we cannot meet */
	CHECK_EQ(status_of("POST /log HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\nContent-Length: 9\r\n\r\n"), -417);
	CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nExpect:\r\n\r\n"), -417);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, x\r\n\r\n"), -417);
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nExpect: x\r\n\r\n"), -417);
	/* a body over the limit is refused at once, not continued */
	CHECK_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1048577\r\n\r\n"), -413);
}

static bool keep_alive_of(const char *s)
{
	struct paste_http_req req;
	int rc = parse(s, &req);
	CHECK(rc > 0);
	return rc > 0 && req.keep_alive;
}

static void test_keep_alive(void)
{
	CHECK(keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nconnection: CLOSE\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade ,\tclose\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"));
	CHECK(keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nConnection: closed, xclose, close-it\r\n\r\n"));
	CHECK(keep_alive_of("GET / HTTP/1.1\r\nHost: h\r\nX-Connection: close\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.0\r\n\r\n"));
	CHECK(keep_alive_of("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
	CHECK(keep_alive_of("GET / HTTP/1.0\r\nCONNECTION: Keep-Alive\r\n\r\n"));
	CHECK(keep_alive_of("GET / HTTP/1.0\r\nConnection: ,, upgrade,keep-alive ,\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.0\r\nConnection: keep-alives\r\n\r\n"));
	CHECK(!keep_alive_of("GET / HTTP/1.0\r\nConnection:\r\n\r\n"));
}

static void test_line_endings(void)
{
	struct paste_http_req req;
	const char *lf = "GET /lf HTTP/1.1\nHost: x\nContent-Length: 2\n\nhi";
	CHECK_EQ(parse(lf, &req), strlen(lf) - 2);
	CHECK_EQ(req.nheaders, 2);
	CHECK_EQ(req.content_length, 2);
	const char *mixed = "GET / HTTP/1.1\r\nHost: x\nA: b\r\n\n";
	CHECK_EQ(parse(mixed, &req), strlen(mixed));
	CHECK_EQ(req.nheaders, 2);
	CHECK_EQ(parse("GET / HTTP/1.1\nHost: h\n\r\n", &req), 25);
	CHECK_EQ(req.nheaders, 1);
	/* Empty lines before the request line are skipped but counted. */
	const char *lead = "\r\n\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n";
	CHECK_EQ(parse(lead, &req), strlen(lead));
	CHECK(req.method_str == lead + 3);
	CHECK_EQ(req.method, PASTE_HTTP_GET);
	/* At most four, so a stream of CRLFs cannot cost O(n^2). */
	CHECK(parse("\r\n\n\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
	CHECK_EQ(status_of("\r\n\n\r\n\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), -400);
	CHECK_EQ(status_of("\r\n\n\r\n\n\r"), 0);
	CHECK_EQ(status_of("\r\n\n\r\n\n\r\n"), -400);
	/* Values: empty, obs-text, inner whitespace. */
	CHECK(parse("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-T: a \xff\tb\r\n\r\n", &req) > 0);
	CHECK_EQ(req.target_len, 6);
	CHECK_EQ(req.nheaders, 3);
	CHECK(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
	CHECK_EQ(req.target_len, 1);
}

/* Returns the one-shot answer for s[0..len) and checks that every way of
 * delivering it in two calls (split at every byte) gives the same answer,
 * the same fields, and that the first call never errs unless the whole
 * input errs the same way. */
static int check_splits(const char *s, size_t len, uint32_t max_head, uint64_t max_body)
{
	struct paste_http_req one, two;
	int whole = parse_lim(s, len, max_head, max_body, &one);
	int mismatches = 0;
	for (size_t k = 0; k <= len; k++) {
		struct paste_http_parser ps;
		paste_http_parser_init(&ps, max_head, max_body);
		char *a = copy_of(s, k);   /* exactly k bytes: ASan sees over-reads */
		char *c = copy_of(s, len);
		const char *base = a;
		int rc = paste_http_parse(&ps, a, k, &two);
		if (rc == 0) {
			base = c;
			rc = paste_http_parse(&ps, c, len, &two);
		}
		if (rc != whole)
			mismatches++;
		else if (rc > 0 && (two.target - base != one.target - s ||
				    two.path_len != one.path_len || two.query_len != one.query_len ||
				    two.host_len != one.host_len || !two.query != !one.query ||
				    !two.host != !one.host ||
				    (two.query && two.query - base != one.query - s) ||
				    (two.host && two.host - base != one.host - s) ||
				    (two.path >= base && two.path < base + len &&
				     two.path - base != one.path - s) ||
				    two.target_len != one.target_len || two.method != one.method ||
				    two.keep_alive != one.keep_alive ||
				    two.content_length != one.content_length ||
				    two.nheaders != one.nheaders || two.head_len != one.head_len))
			mismatches++;
		free(a);
		free(c);
	}
	CHECK_EQ(mismatches, 0);
	return whole;
}

static void test_every_split(void)
{
	static const char *inputs[] = {
		"GET /index.html HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n",
		"POST /log HTTP/1.0\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\nhello world!",
		"GET / HTTP/1.1\nHost: x\n\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
		"GET / HTTP/2.0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2000000\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n\r\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n\r\nGET /next HTTP/1.1\r\nHost: h\r\n\r\n",
		"\x16\x03\x01",
		"GET / HTTP/1.1\r\nHost: h\r\n",
	};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
		check_splits(inputs[i], strlen(inputs[i]), 0, 0);
	/* And against a small head limit, so 431 is split too. */
	const char *big = "GET /long-target HTTP/1.1\r\nHost: h\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	CHECK_EQ(check_splits(big, strlen(big), 40, 0), -431);
	CHECK(check_splits(big, strlen(big), (uint32_t)strlen(big), 0) > 0);
}

static void test_pipelining(void)
{
	const char *s =
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
		"\r\n"   /* a stray CRLF after a body, as some clients send */
		"DELETE /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
		"GET /partial HTTP/1.1\r\nHost: h\r\n";
	static const struct { enum paste_http_method m; const char *target; bool ka; } want[] = {
		{ PASTE_HTTP_GET, "/a", true },
		{ PASTE_HTTP_POST, "/b", true },
		{ PASTE_HTTP_DELETE, "/c", false },
	};
	struct paste_http_parser ps;
	paste_http_parser_init(&ps, 0, 0);
	size_t off = 0, len = strlen(s);
	for (size_t i = 0; i < 3; i++) {
		struct paste_http_req req;
		int rc = paste_http_parse(&ps, s + off, len - off, &req);
		CHECK(rc > 0);
		if (rc <= 0)
			return;
		CHECK_EQ(req.method, want[i].m);
		CHECK_EQ(req.target_len, strlen(want[i].target));
		CHECK(!memcmp(req.target, want[i].target, req.target_len));
		CHECK_EQ(req.keep_alive, want[i].ka);
		CHECK_EQ(ps.scanned, 0);   /* reset for the next request */
		off += req.head_len + req.content_length;
	}
	struct paste_http_req req;
	CHECK_EQ(paste_http_parse(&ps, s + off, len - off, &req), 0);
}

/* A head of exactly n bytes: the request line, Host, nfields one-letter
 * fields, then one X-Pad field sized to fit. */
static char *head_of_size(size_t n, unsigned nfields)
{
	char *h = malloc(n + 1);
	if (!h)
		abort();
	size_t off = (size_t)sprintf(h, "GET / HTTP/1.1\r\nHost: h\r\n");
	for (unsigned i = 0; i < nfields; i++)
		off += (size_t)sprintf(h + off, "A: b\r\n");
	size_t pad = n - off - 2 - strlen("X-Pad: \r\n");
	off += (size_t)sprintf(h + off, "X-Pad: ");
	memset(h + off, 'p', pad);
	off += pad;
	memcpy(h + off, "\r\n\r\n", 5);
	return h;
}

static void test_head_limit(void)
{
	struct paste_http_req req;
	char *h = head_of_size(200, 0);
	CHECK_EQ(strlen(h), 200);
	CHECK_EQ(parse_lim(h, 200, 200, 0, &req), 200);   /* exactly at the limit */
	CHECK_EQ(parse_lim(h, 200, 199, 0, &req), -431);  /* one past */
	/* Incomplete: 431 as soon as max_head bytes are in, not before. */
	CHECK_EQ(parse_lim(h, 150, 150, 0, &req), -431);
	CHECK_EQ(parse_lim(h, 149, 150, 0, &req), 0);
	CHECK_EQ(parse_lim(h, 199, 199, 0, &req), -431);  /* blank line not inside 199 bytes */
	free(h);

	/* Default 8192. */
	h = head_of_size(8192, 0);
	CHECK_EQ(parse_lim(h, 8192, 0, 0, &req), 8192);
	free(h);
	h = head_of_size(8193, 0);
	CHECK_EQ(parse_lim(h, 8193, 0, 0, &req), -431);
	CHECK_EQ(parse_lim(h, 8191, 0, 0, &req), 0);
	CHECK_EQ(parse_lim(h, 8192, 0, 0, &req), -431);
	free(h);

	/* 100 field lines pass (Host, 98, the pad), 101 do not. */
	h = head_of_size(1000, 98);
	CHECK_EQ(parse_lim(h, 1000, 0, 0, &req), 1000);
	CHECK_EQ(req.nheaders, 100);
	free(h);
	h = head_of_size(1000, 99);
	CHECK_EQ(parse_lim(h, 1000, 0, 0, &req), -431);
	free(h);
}

static void test_one_byte_at_a_time(void)
{
	const char *s = "POST /upload HTTP/1.1\r\nHost: example\r\nContent-Length: 3\n"
			"Connection: keep-alive\r\n\r\n";
	size_t len = strlen(s);
	struct paste_http_parser ps;
	struct paste_http_req req;
	paste_http_parser_init(&ps, 0, 0);
	int rc = 0;
	size_t k;
	for (k = 1; k <= len && rc == 0; k++) {
		uint32_t before = ps.scanned;
		rc = paste_http_parse(&ps, s, k, &req);
		if (rc)
			break;
		/* The search never goes back and never lags more than an LF
		 * (or LF CR) that could still start the blank line. */
		CHECK(ps.scanned >= before);
		CHECK(ps.scanned <= k && ps.scanned + 2 >= k);
	}
	CHECK_EQ(rc, len);
	CHECK_EQ(k, len);
	CHECK_EQ(req.content_length, 3);
	CHECK_EQ(req.nheaders, 3);
	CHECK_EQ(ps.scanned, 0);

	paste_http_parser_init(&ps, 0, 0);
	CHECK_EQ(paste_http_parse(&ps, s, 30, &req), 0);
	CHECK_EQ(ps.scanned, 30);
	/* scanned is honoured: told that the first 27 bytes hold no end of
	 * head, the parser does not look there again. */
	const char *g = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
	paste_http_parser_init(&ps, 0, 0);
	ps.scanned = 27;
	CHECK_EQ(paste_http_parse(&ps, g, 27, &req), 0);
	ps.scanned = 0;
	CHECK_EQ(paste_http_parse(&ps, g, 27, &req), 27);
	/* A zeroed parser (no init) gets the default limits. */
	struct paste_http_parser zero = { 0, 0, 0 };
	CHECK_EQ(paste_http_parse(&zero, s, len, &req), len);
}

static void test_init(void)
{
	struct paste_http_parser ps = { 7, 7, 7 };
	paste_http_parser_init(&ps, 0, 0);
	CHECK_EQ(ps.scanned, 0);
	CHECK_EQ(ps.max_head, 8192);
	CHECK_EQ(ps.max_body, 1 << 20);
	paste_http_parser_init(&ps, 100, 5);
	CHECK_EQ(ps.max_head, 100);
	CHECK_EQ(ps.max_body, 5);
	/* Returning 0 leaves req alone; an empty input needs more bytes. */
	struct paste_http_req req;
	memset(&req, 0xab, sizeof(req));
	CHECK_EQ(paste_http_parse(&ps, "", 0, &req), 0);
	CHECK_EQ(paste_http_parse(&ps, "\r\n\r", 3, &req), 0);
	CHECK_EQ(req.nheaders, 0xabababab);
}

static bool eq(const char *p, uint32_t n, const char *want)
{
	return p && n == strlen(want) && !memcmp(p, want, n);
}

/* Each of v[0..n), put into the request fmt (one %s), is 400, however it
 * is split. */
static void expect_400(const char *fmt, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char r[192];
		snprintf(r, sizeof(r), fmt, v[i]);
		if (status_of(r) != -400)
			fprintf(stderr, "accepted: %s\n", r);
		CHECK_EQ(status_of(r), -400);
		CHECK_EQ(check_splits(r, strlen(r), 0, 0), -400);
	}
}

/* RFC 9112 section 3.2: HTTP/1.1 needs exactly one Host, and a valid one;
 * HTTP/1.0 may leave it out. */
static void test_host(void)
{
	struct paste_http_req req;
	CHECK(parse("GET / HTTP/1.1\r\nHost:  example.com:8080 \r\n\r\n", &req) > 0);
	CHECK(eq(req.host, req.host_len, "example.com:8080"));
	CHECK_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), -400);
	CHECK_EQ(status_of("GET / HTTP/1.1\r\nX-Host: a\r\nHosts: b\r\n\r\n"), -400);
	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &req) > 0);
	CHECK(req.host == NULL && req.host_len == 0);
	/* Two are refused even when they agree, in either version. */
	CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), -400);
	CHECK_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nhOST: a\r\n\r\n"), -400);
	CHECK_EQ(status_of("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), -400);
	static const char *const good[] = {
		"", "h", "example.com", "h:80", "h:", ":80", "127.0.0.1:8080", "[::1]", "[::1]:8080",
		"[fe80::1%25eth0]:80", "[v1.x]", "a%41b", "xn--bcher-kva.example", "!$&'()*+,;=._~-",
	};
	static const char *const bad[] = {
		"a b", "a/b", "a?b", "a#b", "user@h", "u:p@h", "h:8x", "h:80:80", "[::1",
		"[]", "[::1]x", "[::1]:8x", "a[b]", "%zz", "%4", "h\"", "h\\", "h, h", "\xc3\xa9",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char r[128];
		snprintf(r, sizeof(r), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
		int rc = parse(r, &req);
		if (rc <= 0 || !eq(req.host, req.host_len, good[i]))
			fprintf(stderr, "good host %s: %d\n", good[i], rc);
		CHECK(rc > 0 && eq(req.host, req.host_len, good[i]));
	}
	expect_400("GET / HTTP/1.0\r\nHost: %s\r\n\r\n", bad, sizeof(bad) / sizeof(bad[0]));
	/* Every byte in a reg-name: accepted exactly when RFC 3986 allows it
	 * (unreserved, sub-delims; '%' and ':' have their own rules above). */
	for (int c = 1; c < 256; c++) {
		if (c == '%' || c == ':' || c == '\r' || c == '\n')
			continue;
		bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			  (c >= 'A' && c <= 'Z') || strchr("-._~!$&'()*+,;=", c);
		char h[] = "GET / HTTP/1.1\r\nHost: axb\r\n\r\n";
		h[23] = (char)c;
		int rc = parse_lim(h, sizeof(h) - 1, 0, 0, &req);
		if (ok != (rc > 0))
			fprintf(stderr, "host byte 0x%02x\n", c);
		CHECK_EQ(ok, rc > 0);
	}
}

/* The request-target's forms (RFC 9112 section 3.2) taken apart: path,
 * query, host; a fragment belongs to none of them. */
static void test_target_forms(void)
{
	static const struct {
		const char *target, *path, *query, *host;
	} ok[] = {
		{ "/kv/q?x=1#frag", "/kv/q", "x=1", "h" },
		{ "/kv/q#frag?x=1", "/kv/q", NULL, "h" },
		{ "/kv/q?", "/kv/q", "", "h" },
		{ "/?a=b&c", "/", "a=b&c", "h" },
		{ "/a%3Fb?c?d", "/a%3Fb", "c?d", "h" },
		{ "/#", "/", NULL, "h" },
		{ "*", "*", NULL, "h" },
		{ "http://example.com:8080/kv/a?x=1#f", "/kv/a", "x=1", "example.com:8080" },
		{ "HTTPS://H/", "/", NULL, "H" },
		{ "http://h", "/", NULL, "h" },
		{ "http://h?q", "/", "q", "h" },
		{ "http://h#f", "/", NULL, "h" },
		{ "http://[::1]:80/x", "/x", NULL, "[::1]:80" },
	};
	struct paste_http_req req;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char r[160];
		snprintf(r, sizeof(r), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", ok[i].target);
		int rc = parse(r, &req);
		bool good = rc > 0 && eq(req.path, req.path_len, ok[i].path) &&
			    (ok[i].query ? eq(req.query, req.query_len, ok[i].query)
					 : req.query == NULL && req.query_len == 0) &&
			    eq(req.host, req.host_len, ok[i].host) &&
			    eq(req.target, req.target_len, ok[i].target);
		if (!good)
			fprintf(stderr, "target %s: %d\n", ok[i].target, rc);
		CHECK(good);
		CHECK_EQ(check_splits(r, strlen(r), 0, 0), rc);
	}
	/* The absolute form's authority takes the place of Host, which
	 * HTTP/1.1 must still send; HTTP/1.0 need not. */
	CHECK(parse("GET http://a:1/x HTTP/1.1\r\nHost: b:2\r\n\r\n", &req) > 0);
	CHECK(eq(req.host, req.host_len, "a:1"));
	CHECK_EQ(status_of("GET http://a:1/x HTTP/1.1\r\n\r\n"), -400);
	CHECK(parse("GET http://a:1/x HTTP/1.0\r\n\r\n", &req) > 0);
	CHECK(eq(req.host, req.host_len, "a:1") && eq(req.path, req.path_len, "/x"));
	/* CONNECT's authority-form: no path. */
	CHECK(parse("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", &req) > 0);
	CHECK(req.path_len == 0 && eq(req.host, req.host_len, "h:443"));
	static const char *const bad[] = {
		"kv/a", "?x", "#f", "**", "h:443", "ftp://h/x", "file:///x", "mailto:a@b",
		"http:/x", "http:x", "http://", "http:///x", "http://:80/x", "http://u@h/x",
		"http://u:p@h/x", "http://h:8x/", "http://[::1/x", "http://a b/", "://h/x",
	};
	expect_400("GET %s HTTP/1.1\r\nHost: h\r\n\r\n", bad, sizeof(bad) / sizeof(bad[0]));
	CHECK(parse("CONNECT [::1]:443 HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
	CHECK(req.path_len == 0 && eq(req.host, req.host_len, "[::1]:443"));
	static const char *const connect_bad[] = { "h", "h:", "[::1]", "1.2.3.4", ":443", "h:4x" };
	expect_400("CONNECT %s HTTP/1.1\r\nHost: h\r\n\r\n", connect_bad,
		   sizeof(connect_bad) / sizeof(connect_bad[0]));
	CHECK_EQ(status_of("CONNECT u@h:443 HTTP/1.1\r\nHost: h\r\n\r\n"), -400);
}

static void test_reason(void)
{
	static const struct { int status; const char *reason; } cases[] = {
		{ 200, "OK" }, { 201, "Created" }, { 204, "No Content" },
		{ 400, "Bad Request" }, { 404, "Not Found" }, { 405, "Method Not Allowed" },
		{ 408, "Request Timeout" }, { 100, "Continue" }, { 414, "URI Too Long" },
		{ 411, "Length Required" }, { 413, "Content Too Large" }, { 417, "Expectation Failed" },
		{ 431, "Request Header Fields Too Large" }, { 500, "Internal Server Error" },
		{ 501, "Not Implemented" }, { 503, "Service Unavailable" },
		{ 505, "HTTP Version Not Supported" }, { 507, "Insufficient Storage" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(!strcmp(paste_http_reason(cases[i].status), cases[i].reason));
		/* A parse result can be passed as it is. */
		CHECK(!strcmp(paste_http_reason(-cases[i].status), cases[i].reason));
	}
	CHECK(!strcmp(paste_http_reason(0), "Unknown"));
	CHECK(!strcmp(paste_http_reason(418), "Unknown"));
	CHECK(!strcmp(paste_http_reason(INT_MIN), "Unknown"));
	CHECK(!strcmp(paste_http_reason(INT_MAX), "Unknown"));
	/* Every status RFC 9110 section 15 defines has its phrase. */
	static const int rfc9110[] = {
		100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305, 307,
		308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414,
		415, 416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505,
	};
	for (size_t i = 0; i < sizeof(rfc9110) / sizeof(rfc9110[0]); i++) {
		if (!strcmp(paste_http_reason(rfc9110[i]), "Unknown"))
			fprintf(stderr, "no reason for %d\n", rfc9110[i]);
		CHECK(strcmp(paste_http_reason(rfc9110[i]), "Unknown") != 0);
	}
}

/* Percent-decoding: every escape, bad ones at every position, the exact
 * capacity and one byte under it, and input read only within n (the
 * copy is exactly n bytes long). */
static void test_unescape(void)
{
	uint8_t out[16];
	char *in = copy_of("a%41%2f%2F%00+b", 15);
	CHECK_EQ(paste_http_unescape(in, 15, out, sizeof(out)), 7);
	CHECK(memcmp(out, "aA//\0+b", 7) == 0);
	free(in);
	for (int c = 0; c < 256; c++) {
		char esc[4];
		snprintf(esc, sizeof(esc), "%%%02x", c);
		in = copy_of(esc, 3);
		CHECK_EQ(paste_http_unescape(in, 3, out, 1), 1);
		CHECK_EQ(out[0], c);
		free(in);
	}
	static const char *const bad[] = { "%", "%4", "a%4", "%g0", "%0g", "%%41", "x%-1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		in = copy_of(bad[i], strlen(bad[i]));
		CHECK_EQ(paste_http_unescape(in, strlen(bad[i]), out, sizeof(out)), -EINVAL);
		free(in);
	}
	in = copy_of("abc%41", 6);
	CHECK_EQ(paste_http_unescape(in, 6, out, 4), 4);
	CHECK_EQ(paste_http_unescape(in, 6, out, 3), -ENOSPC);
	CHECK_EQ(paste_http_unescape(in, 0, out, 0), 0);
	free(in);
}

int main(void)
{
	test_simple_get();
	test_methods();
	test_tchar_set();
	test_bad_request();
	test_version();
	test_content_length();
	test_body_limit();
	test_transfer_encoding();
	test_expect();
	test_keep_alive();
	test_line_endings();
	test_every_split();
	test_pipelining();
	test_head_limit();
	test_one_byte_at_a_time();
	test_init();
	test_host();
	test_target_forms();
	test_reason();
	test_unescape();
	return check_done();
}
