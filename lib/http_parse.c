/* http_parse.c - HTTP/1.1 request-head parser: zero copy, incremental, strict.
 *
 * The server calls paste_http_parse on everything a connection has received
 * so far. Until a blank line ends the head, a call only looks for that end
 * (memchr for LF, resuming at ps->scanned), so a head trickling in one byte
 * per call costs O(n) in total, not O(n^2). When the end is there, the head
 * is validated in one pass and req points into the caller's bytes.
 *
 * Strict wherever leniency would let two parsers disagree about where a
 * request ends (request smuggling): obs-fold, whitespace before the colon,
 * a bare CR, conflicting Content-Length values and any Transfer-Encoding
 * but "identity" are refused, never guessed at.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include "paste.h"
#include "hex_internal.h"

#define DEFAULT_MAX_HEAD 8192u
#define DEFAULT_MAX_BODY (1ull << 20)
#define MAX_HEADER_LINES 100u
#define MAX_LEADING_EMPTY_LINES 4

/* tchar of RFC 9110 section 5.6.2 (ALPHA, DIGIT and !#$%&'*+-.^_`|~) as a
 * 128-bit set: one shift and mask per byte, no table in the cache. */
static const uint64_t tchar_set[2] = { 0x03ff6cfa00000000ull, 0x57ffffffc7fffffeull };

static inline bool is_tchar(unsigned char c)
{
	return c < 128 && ((tchar_set[c >> 6] >> (c & 63)) & 1);
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* A request-target byte: anything but SP and CTLs. obs-text (>= 0x80) is
 * let through, as nginx does; the application decides what a path means. */
static inline bool is_target_byte(unsigned char c)
{
	return c > ' ' && c != 0x7f;
}

/* A field-value byte: VCHAR, obs-text, SP, HTAB. Rejects CR, LF and NUL. */
static inline bool is_value_byte(unsigned char c)
{
	return (c >= ' ' && c != 0x7f) || c == '\t';
}

/* ASCII-only case-insensitive equality with a lower-case literal; strcasecmp
 * would follow the locale (Turkish dotless i). */
static bool ieq(const char *s, size_t n, const char *lower)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (lower[i] == '\0' || c != (unsigned char)lower[i])
			return false;
	}
	return lower[n] == '\0';
}

static void trim_ows(const char **s, size_t *n)
{
	while (*n && is_ows((unsigned char)(*s)[0])) {
		(*s)++;
		(*n)--;
	}
	while (*n && is_ows((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

void paste_http_parser_init(struct paste_http_parser *ps, uint32_t max_head, uint64_t max_body)
{
	ps->scanned = 0;
	ps->max_head = max_head ? max_head : DEFAULT_MAX_HEAD;
	ps->max_body = max_body ? max_body : DEFAULT_MAX_BODY;
}

/* What the header fields say about the body and the connection, gathered
 * over all lines and judged once the head is complete. */
struct framing {
	bool conn_close;
	bool conn_keep_alive;
	bool te_unsupported;
	bool expect_continue;
	bool expect_other;
	bool authority_target;   /* absolute- or authority-form: host is the target's */
	const char *host;        /* the Host field's value (NULL: none yet) */
	uint32_t host_len;
};

static enum paste_http_method method_of(const char *m, size_t n)
{
	/* Method names are case-sensitive (RFC 9110 section 9.1). */
	switch (n) {
	case 3:
		if (!memcmp(m, "GET", 3)) return PASTE_HTTP_GET;
		if (!memcmp(m, "PUT", 3)) return PASTE_HTTP_PUT;
		break;
	case 4:
		if (!memcmp(m, "HEAD", 4)) return PASTE_HTTP_HEAD;
		if (!memcmp(m, "POST", 4)) return PASTE_HTTP_POST;
		break;
	case 6:
		if (!memcmp(m, "DELETE", 6)) return PASTE_HTTP_DELETE;
		break;
	}
	return PASTE_HTTP_OTHER;
}

static int parse_version(const char *v, size_t n, struct paste_http_req *req)
{
	if (n != 8 || memcmp(v, "HTTP/", 5) || !is_digit((unsigned char)v[5]) ||
	    v[6] != '.' || !is_digit((unsigned char)v[7]))
		return -400;
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return -505;
	req->version_minor = (uint8_t)(v[7] - '0');
	return 0;
}

/* unreserved / sub-delims of RFC 3986 section 2 (ALPHA DIGIT -._~ and
 * !$&'()*+,;=): what a reg-name holds besides %XX escapes. */
static const uint64_t host_set[2] = { 0x2bff7fd200000000ull, 0x47fffffe87fffffeull };

static inline bool is_host_byte(unsigned char c)
{
	return c < 128 && ((host_set[c >> 6] >> (c & 63)) & 1);
}

static inline bool is_hex(unsigned char c)
{
	return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* RFC 3986 host [ ":" port ]: an IP-literal in brackets (IPv6 or
 * IPvFuture: the same bytes and ':'), or a reg-name (an IPv4 address is
 * one), each byte unreserved, a sub-delim or %XX; port all digits. An
 * empty host is valid in a Host field (RFC 9110 section 7.2), not in a
 * target's authority (need_host). Userinfo ("user@") is refused: its
 * '@' is none of these bytes. */
static bool valid_host_port(const char *s, size_t n, bool need_host)
{
	size_t i = 0;
	if (n && s[0] == '[') {
		for (i = 1; i < n && s[i] != ']'; i++)
			if (!is_host_byte((unsigned char)s[i]) && s[i] != ':' &&
			    !(s[i] == '%' && i + 2 < n && is_hex((unsigned char)s[i + 1]) &&
			      is_hex((unsigned char)s[i + 2])))
				return false;
		if (i == n || i == 1)
			return false;
		i++;
	} else {
		for (; i < n && s[i] != ':'; i++) {
			if (s[i] == '%' && i + 2 < n && is_hex((unsigned char)s[i + 1]) &&
			    is_hex((unsigned char)s[i + 2]))
				i += 2;
			else if (!is_host_byte((unsigned char)s[i]))
				return false;
		}
		if (i == 0 && need_host)
			return false;
	}
	if (i == n)
		return true;
	if (s[i] != ':')
		return false;
	while (++i < n)
		if (!is_digit((unsigned char)s[i]))
			return false;
	return true;
}

/* Path and query of p[0..n) (a path start: '/' or the end), each up to
 * the next '?' or '#'; a fragment belongs to neither. */
static void split_path(const char *p, size_t n, struct paste_http_req *req)
{
	size_t i = 0;
	while (i < n && p[i] != '?' && p[i] != '#')
		i++;
	if (i == 0) {
		static const char root[] = "/";   /* RFC 9110 section 4.2.3 */
		req->path = root;
		req->path_len = 1;
	} else {
		req->path = p;
		req->path_len = (uint32_t)i;
	}
	if (i < n && p[i] == '?') {
		const char *q = p + i + 1;
		const char *hash = memchr(q, '#', n - i - 1);
		req->query = q;
		req->query_len = (uint32_t)(hash ? (size_t)(hash - q) : n - i - 1);
	}
}

/* The four forms of RFC 9112 section 3.2; anything else is 400. The
 * absolute form (what a proxy is sent; an origin server must accept it)
 * names its host in the target, which then takes the place of Host. */
static int parse_target(const char *t, size_t n, struct paste_http_req *req, struct framing *f)
{
	if (t[0] == '/') {                                   /* origin-form */
		split_path(t, n, req);
		return 0;
	}
	if (n == 1 && t[0] == '*') {                         /* asterisk-form */
		req->path = t;
		req->path_len = 1;
		return 0;
	}
	size_t colon = 0;
	while (colon < n && t[colon] != ':' && t[colon] != '/')
		colon++;
	if (colon < n && t[colon] == ':' && n - colon > 2 && t[colon + 1] == '/' &&
	    t[colon + 2] == '/') {                           /* absolute-form */
		/* http and https only: other schemes name no resource here */
		if (!ieq(t, colon, "http") && !ieq(t, colon, "https"))
			return -400;
		const char *a = t + colon + 3;
		size_t an = 0, rest = n - colon - 3;
		while (an < rest && a[an] != '/' && a[an] != '?' && a[an] != '#')
			an++;
		if (!valid_host_port(a, an, true))
			return -400;
		req->host = a;
		req->host_len = (uint32_t)an;
		f->authority_target = true;
		split_path(a + an, rest - an, req);
		return 0;
	}
	/* authority-form, CONNECT's alone: host ":" port, the port required */
	size_t port = n;
	while (port && is_digit((unsigned char)t[port - 1]))
		port--;
	if (req->method_len == 7 && !memcmp(req->method_str, "CONNECT", 7) &&
	    port > 0 && port < n && t[port - 1] == ':' && valid_host_port(t, n, true)) {
		req->path = t + n;
		req->path_len = 0;
		req->host = t;
		req->host_len = (uint32_t)n;
		f->authority_target = true;
		return 0;
	}
	return -400;
}

/* method SP request-target SP HTTP-version, exactly one SP each time:
 * RFC 9112 section 3 allows lenient whitespace, but that is how a proxy
 * and a server come to read different targets. */
static int parse_request_line(const char *s, size_t n, struct paste_http_req *req,
			      struct framing *f)
{
	size_t i = 0;
	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == 0 || i == n || s[i] != ' ')
		return -400;
	req->method_str = s;
	req->method_len = (uint32_t)i;
	req->method = method_of(s, i);

	size_t t = ++i;
	while (i < n && is_target_byte((unsigned char)s[i]))
		i++;
	if (i == t || i == n || s[i] != ' ')
		return -400;
	req->target = s + t;
	req->target_len = (uint32_t)(i - t);
	int rc = parse_version(s + i + 1, n - i - 1, req);
	return rc ? rc : parse_target(req->target, req->target_len, req, f);
}

static int content_length(const char *v, size_t n, struct paste_http_req *req)
{
	uint64_t x = 0;
	if (n == 0)
		return -400;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit((unsigned char)v[i]))
			return -400;
		unsigned d = (unsigned)(v[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -400;
		x = x * 10 + d;
	}
	/* Repeated equal values are harmless (RFC 9112 section 6.3); differing
	 * ones mean we cannot know where the body ends. */
	if (req->has_content_length && req->content_length != x)
		return -400;
	req->has_content_length = true;
	req->content_length = x;
	return 0;
}

static void connection_options(const char *v, size_t n, struct framing *f)
{
	while (n) {
		const char *comma = memchr(v, ',', n);
		size_t elen = comma ? (size_t)(comma - v) : n;
		const char *e = v;
		size_t len = elen;
		trim_ows(&e, &len);
		if (ieq(e, len, "close"))
			f->conn_close = true;
		else if (ieq(e, len, "keep-alive"))
			f->conn_keep_alive = true;
		if (!comma)
			break;
		v += elen + 1;
		n -= elen + 1;
	}
}

/* field-name ":" OWS field-value OWS, in s[0..n) without the line end. */
static int parse_field(const char *s, size_t n, struct paste_http_req *req, struct framing *f)
{
	size_t i = 0;
	/* A leading SP/HTAB (obs-fold), whitespace before the colon or an
	 * empty name all stop here. */
	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == 0 || i == n || s[i] != ':')
		return -400;
	size_t name_len = i;
	const char *v = s + i + 1;
	size_t vlen = n - i - 1;
	for (size_t k = 0; k < vlen; k++)
		if (!is_value_byte((unsigned char)v[k]))
			return -400;
	trim_ows(&v, &vlen);

	if (ieq(s, name_len, "content-length"))
		return content_length(v, vlen, req);
	if (ieq(s, name_len, "transfer-encoding")) {
		if (!ieq(v, vlen, "identity"))
			f->te_unsupported = true;
	} else if (ieq(s, name_len, "connection")) {
		connection_options(v, vlen, f);
	} else if (ieq(s, name_len, "host")) {
		/* One Host, and a valid one (RFC 9112 section 3.2): two could
		 * name two hosts to two parsers. */
		if (f->host || !valid_host_port(v, vlen, false))
			return -400;
		f->host = v;
		f->host_len = (uint32_t)vlen;
	} else if (ieq(s, name_len, "expect")) {
		/* 100-continue is the only expectation HTTP defines. */
		if (ieq(v, vlen, "100-continue"))
			f->expect_continue = true;
		else
			f->expect_other = true;
	}
	return 0;
}

/* Validate the head p[start..end) (end is just past the blank line, which
 * find_head_end guarantees is the first empty line) and fill req. */
static int parse_head(const struct paste_http_parser *ps, const char *p,
		      size_t start, size_t end, struct paste_http_req *req)
{
	const char *line = p + start, *stop = p + end;
	struct framing f = { 0 };
	int rc = 0;

	memset(req, 0, sizeof(*req));
	for (bool first = true;; first = false) {
		const char *lf = memchr(line, '\n', (size_t)(stop - line));
		size_t n = (size_t)(lf - line);
		if (n && line[n - 1] == '\r')
			n--;
		if (first)
			rc = parse_request_line(line, n, req, &f);
		else if (n == 0)
			break;
		else if (++req->nheaders > MAX_HEADER_LINES)
			rc = -431;
		else
			rc = parse_field(line, n, req, &f);
		if (rc)
			return rc;
		line = lf + 1;
	}

	/* HTTP/1.1 names its host (RFC 9112 section 3.2), even when the
	 * target does too; the target's authority then wins. */
	if (req->version_minor == 1 && !f.host)
		return -400;
	if (!f.authority_target && f.host) {
		req->host = f.host;
		req->host_len = f.host_len;
	}
	if (f.te_unsupported)
		return -501;
	uint64_t max_body = ps->max_body ? ps->max_body : DEFAULT_MAX_BODY;
	if (req->content_length > max_body)
		return -413;   /* before any 100 Continue: the final answer, at once */
	if (req->version_minor == 1) {
		if (f.expect_other)
			return -417;
		req->expect_continue = f.expect_continue;
	}
	req->keep_alive = !f.conn_close && (req->version_minor == 1 || f.conn_keep_alive);
	req->head_len = (uint32_t)end;
	return (int)end;
}

/* RFC 9112 section 2.2: a server should ignore at least one empty line
 * (CRLF or LF) before the request line; some clients send one after a
 * POST body. A few are skipped, no more: this runs on every call, so an
 * unbounded skip would make a stream of CRLFs cost O(n^2). */
static size_t leading_empty_lines(const char *p, size_t w)
{
	size_t i = 0;
	for (int lines = 0; lines < MAX_LEADING_EMPTY_LINES; lines++) {
		if (i < w && p[i] == '\n')
			i++;
		else if (i + 1 < w && p[i] == '\r' && p[i + 1] == '\n')
			i += 2;
		else
			break;
	}
	return i;
}

/* Offset just past the first blank line (LF LF or LF CR LF) in p[from..w),
 * or 0 with *resume set to where the next call must search from: an LF too
 * close to w to tell whether a blank line follows it is looked at again. */
static size_t find_head_end(const char *p, size_t from, size_t w, size_t *resume)
{
	size_t i = from;
	for (;;) {
		const char *lf = i < w ? memchr(p + i, '\n', w - i) : NULL;
		if (!lf) {
			*resume = w;
			return 0;
		}
		i = (size_t)(lf - p);
		size_t after = w - i - 1;
		if (after >= 1 && p[i + 1] == '\n')
			return i + 2;
		if (after >= 2 && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
		if (after == 0 || (after == 1 && p[i + 1] == '\r')) {
			*resume = i;
			return 0;
		}
		i++;
	}
}

int paste_http_parse(struct paste_http_parser *ps, const char *p, size_t len,
		     struct paste_http_req *req)
{
	size_t limit = ps->max_head ? ps->max_head : DEFAULT_MAX_HEAD;
	if (limit > INT_MAX)
		limit = INT_MAX;   /* the head length is returned as an int */
	/* Only the first `limit` bytes are searched: a head ending beyond them
	 * is 431 whatever follows, and the search stays bounded. */
	size_t w = len < limit ? len : limit;
	size_t start = leading_empty_lines(p, w);
	int rc;

	if (start < w && !is_tchar((unsigned char)p[start]) &&
	    !(p[start] == '\r' && start + 1 == w)) {
		/* Not a method: a TLS hello or binary junk. Say so now rather
		 * than wait for max_head bytes. */
		rc = -400;
	} else {
		size_t from = ps->scanned > start && ps->scanned <= w ? ps->scanned : start;
		size_t resume = from;
		size_t end = find_head_end(p, from, w, &resume);
		if (end)
			rc = parse_head(ps, p, start, end, req);
		else if (len >= limit)
			rc = -431;
		else {
			ps->scanned = (uint32_t)resume;
			return 0;
		}
	}
	/* The next request starts from scratch even if the caller forgets. */
	ps->scanned = 0;
	return rc;
}

int64_t paste_http_unescape(const char *p, size_t n, uint8_t *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)p[i];
		if (c == '%') {
			int hi = i + 2 < n ? hex_digit((unsigned char)p[i + 1]) : -1;
			int lo = i + 2 < n ? hex_digit((unsigned char)p[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = hi * 16 + lo;
			i += 2;
		}
		if (k == cap)
			return -ENOSPC;
		out[k++] = (uint8_t)c;
	}
	return (int64_t)k;
}

/* Every status RFC 9110 section 15 defines, and 429, 431 (RFC 6585) and
 * 507 (RFC 4918). */
const char *paste_http_reason(int status)
{
	long s = status;   /* long: -INT_MIN would overflow an int */
	switch (s < 0 ? -s : s) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 203: return "Non-Authoritative Information";
	case 204: return "No Content";
	case 205: return "Reset Content";
	case 206: return "Partial Content";
	case 300: return "Multiple Choices";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 305: return "Use Proxy";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 417: return "Expectation Failed";
	case 421: return "Misdirected Request";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	case 507: return "Insufficient Storage";
	default:  return "Unknown";
	}
}
