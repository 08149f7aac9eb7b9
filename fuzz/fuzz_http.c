/* fuzz_http.c - libFuzzer target for the request-head parser.
 *
 * The input is what a client sent on one connection. Each request in it is
 * parsed three ways: in one call, in two or three chunks (cut where a hash
 * of the input says), and one byte per call. All three must give the same
 * answer and the same fields; a head must end with LF inside the limit;
 * every pointer must lie inside the bytes handed over. Chunks are copied to
 * buffers of exactly their length so ASan sees any read past them. The
 * whole input is parsed under the default limits and under small ones
 * (also hash-chosen) so the 431 and 413 paths are reached by short inputs.
 * The target's parts (path, query, host) must lie inside the input too
 * (the path may be the parser's static "/"), and an HTTP/1.1 request that
 * passes must have named its host.
 * Seeds are plain requests: fuzz/corpus/http/.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paste.h"

#define MAX_PIPELINED 16

struct outcome {
	int rc;
	struct paste_http_req req;   /* pointers rebased onto the original input */
};

static void fail(const char *why, size_t at)
{
	fprintf(stderr, "fuzz_http: %s (request at offset %zu)\n", why, at);
	abort();
}

/* FNV-1a: the cut points and limits depend on the input, deterministically,
 * so a crash reproduces from its file alone. */
static uint64_t hash_of(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static bool inside(const char *p, uint32_t n, const char *base, size_t len)
{
	return p >= base && p + n <= base + len;
}

/* The static "/" of an absolute-form target without a path. */
static bool static_root(const char *p, uint32_t n, const char *base, size_t len)
{
	return n == 1 && p[0] == '/' && !inside(p, n, base, len);
}

static void check_pointers(const struct paste_http_req *r, const char *base, size_t len, size_t at)
{
	if (!inside(r->method_str, r->method_len, base, len) ||
	    !inside(r->target, r->target_len, base, len) ||
	    !(inside(r->path, r->path_len, base, len) || static_root(r->path, r->path_len, base, len)) ||
	    (r->query && !inside(r->query, r->query_len, base, len)) ||
	    (r->host && !inside(r->host, r->host_len, base, len)) ||
	    (!r->query && r->query_len) || (!r->host && r->host_len))
		fail("pointer outside the input", at);
}

static const char *rebase(const char *p, const char *copy, size_t len, const char *in)
{
	return p && p >= copy && p <= copy + len ? in + (p - copy) : p;
}

/* Parse the input delivered as chunks ending at cuts[0..ncuts) (the last
 * is its length), each call on an exact-size copy. */
static struct outcome parse_chunked(const struct paste_http_parser *proto, const char *in,
				    const size_t *cuts, int ncuts, size_t at)
{
	struct paste_http_parser ps = *proto;
	struct outcome o = { 0 };
	for (int i = 0; i < ncuts && o.rc == 0; i++) {
		size_t len = cuts[i];
		char *copy = malloc(len ? len : 1);
		if (!copy)
			abort();
		memcpy(copy, in, len);
		o.rc = paste_http_parse(&ps, copy, len, &o.req);
		if (o.rc == 0 && ps.scanned > len)
			fail("scanned beyond the bytes given", at);
		if (o.rc > 0) {
			check_pointers(&o.req, copy, len, at);
			o.req.method_str = in + (o.req.method_str - copy);
			o.req.target = in + (o.req.target - copy);
			o.req.path = rebase(o.req.path, copy, len, in);
			o.req.query = rebase(o.req.query, copy, len, in);
			o.req.host = rebase(o.req.host, copy, len, in);
		}
		free(copy);
	}
	return o;
}

static struct outcome parse_bytewise(const struct paste_http_parser *proto, const char *in,
				     size_t n)
{
	struct paste_http_parser ps = *proto;
	struct outcome o = { 0 };
	for (size_t len = 0; len <= n && o.rc == 0; len++)
		o.rc = paste_http_parse(&ps, in, len, &o.req);
	return o;
}

static bool same(const struct outcome *a, const struct outcome *b)
{
	if (a->rc != b->rc)
		return false;
	if (a->rc <= 0)
		return true;
	const struct paste_http_req *x = &a->req, *y = &b->req;
	return x->method == y->method && x->method_str == y->method_str &&
	       x->method_len == y->method_len && x->target == y->target &&
	       x->target_len == y->target_len && x->version_minor == y->version_minor &&
	       x->path == y->path && x->path_len == y->path_len && x->query == y->query &&
	       x->query_len == y->query_len && x->host == y->host && x->host_len == y->host_len &&
	       x->keep_alive == y->keep_alive && x->has_content_length == y->has_content_length &&
	       x->content_length == y->content_length && x->head_len == y->head_len &&
	       x->nheaders == y->nheaders;
}

static void check_result(const struct paste_http_parser *ps, const struct outcome *o,
			 const char *in, size_t n, size_t at)
{
	uint32_t max_head = ps->max_head ? ps->max_head : 8192;
	if (o->rc > 0) {
		const struct paste_http_req *r = &o->req;
		if ((uint32_t)o->rc != r->head_len || r->head_len > n || r->head_len > max_head)
			fail("head length out of range", at);
		if (in[r->head_len - 1] != '\n')
			fail("head does not end with LF", at);
		if (r->method_len == 0 || r->target_len == 0 || r->version_minor > 1 ||
		    r->nheaders > 100 || r->content_length > ps->max_body ||
		    (!r->has_content_length && r->content_length))
			fail("field out of range", at);
		if (r->version_minor == 1 && !r->host)
			fail("HTTP/1.1 request without a host", at);
		if (r->path_len == 0 && !(r->method_len == 7 && !memcmp(r->method_str, "CONNECT", 7)))
			fail("empty path but for CONNECT", at);
	} else if (o->rc < 0) {
		int s = -o->rc;
		if (s != 400 && s != 413 && s != 431 && s != 501 && s != 505)
			fail("unexpected status", at);
		if (!strcmp(paste_http_reason(o->rc), "Unknown"))
			fail("status without a reason phrase", at);
	} else if (n >= max_head) {
		fail("need-more with max_head bytes in hand", at);
	}
}

/* Walk the pipelined requests of in[0..n) under one set of limits. */
static void run(uint32_t max_head, uint64_t max_body, const char *in, size_t n, uint64_t h)
{
	struct paste_http_parser proto;
	paste_http_parser_init(&proto, max_head, max_body);
	size_t at = 0;
	for (int k = 0; k < MAX_PIPELINED && at <= n; k++) {
		const char *p = in + at;
		size_t len = n - at;
		size_t whole_cut[1] = { len };
		struct outcome one = parse_chunked(&proto, p, whole_cut, 1, at);
		check_result(&proto, &one, p, len, at);

		size_t c1 = (size_t)(h % (len + 1));
		size_t c2 = c1 + (size_t)((h >> 20) % (len - c1 + 1));
		size_t cuts[3] = { c1, c2, len };
		struct outcome chunked = parse_chunked(&proto, p, cuts, 3, at);
		if (!same(&one, &chunked))
			fail("chunked parse differs from one-shot", at);

		struct outcome bytewise = parse_bytewise(&proto, p, len);
		if (!same(&one, &bytewise))
			fail("byte-at-a-time parse differs from one-shot", at);

		if (one.rc <= 0 || one.req.content_length > len - one.req.head_len)
			return;
		at += one.req.head_len + one.req.content_length;
		h = h * 31 + 7;
	}
}

/* paste_http_unescape against a decoder written another way (sscanf),
 * on the whole input as a target, into a hash-chosen capacity. */
static void check_unescape(const uint8_t *data, size_t size, uint64_t h)
{
	char *in = malloc(size ? size : 1);
	uint8_t *out = malloc(size + 1), *ref = malloc(size + 1);
	if (!in || !out || !ref)
		abort();
	memcpy(in, data, size);
	size_t cap = (size_t)(h % (size + 2));
	int64_t want = 0;
	for (size_t i = 0; i < size && want >= 0; i++) {
		unsigned v;
		char hex[3] = { 0 };
		v = (uint8_t)in[i];
		if (in[i] == '%') {
			if (i + 2 < size)
				memcpy(hex, in + i + 1, 2);
			if (!(i + 2 < size && strspn(hex, "0123456789abcdefABCDEF") == 2 &&
			      sscanf(hex, "%2x", &v) == 1)) {
				want = -EINVAL;
				break;
			}
			i += 2;
		}
		if (want == (int64_t)cap) {   /* the first problem in input order wins */
			want = -ENOSPC;
			break;
		}
		ref[want++] = (uint8_t)v;
	}
	int64_t got = paste_http_unescape(in, size, out, cap);
	if (got != want || (got > 0 && memcmp(out, ref, (size_t)got) != 0))
		fail("paste_http_unescape disagrees with the reference decoder", 0);
	free(in);
	free(out);
	free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t h = hash_of(data, size);
	run(0, 0, (const char *)data, size, h);
	run(16 + (uint32_t)((h >> 40) % 240), 1 + (h >> 50) % 64, (const char *)data, size, h);
	check_unescape(data, size, h);
	return 0;
}
