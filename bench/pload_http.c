/* See pload_http.h. Linear in the head's length; no allocation. */
#include "pload_http.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static const char *find_crlfcrlf(const char *buf, size_t len)
{
	for (size_t i = 0; i + 3 < len; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
			return buf + i;
	return NULL;
}

static bool header_is(const char *line, size_t len, const char *name, const char **value,
                      size_t *vlen)
{
	size_t n = strlen(name);
	if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
		return false;
	const char *v = line + n + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*value = v;
	*vlen = (size_t)(end - v);
	return true;
}

int pload_parse_response(const char *buf, size_t len, struct pload_response *r)
{
	const char *eoh = find_crlfcrlf(buf, len);
	if (!eoh) {
		/* A head that cannot be a response is reported at once. */
		size_t n = len < 5 ? len : 5;
		return memcmp(buf, "HTTP/", n) == 0 ? 0 : -1;
	}
	const char *line = buf, *head_end = eoh + 2;   /* include the last header's CRLF */
	const char *eol = memchr(line, '\r', (size_t)(head_end - line));
	/* "HTTP/1.x SSS" followed by a space or the end of the line */
	if (!eol || eol - line < 12 || memcmp(line, "HTTP/1.", 7) != 0 ||
	    (line[7] != '0' && line[7] != '1') || line[8] != ' ' || eol[1] != '\n')
		return -1;
	int status = 0;
	for (int i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		status = status * 10 + (line[i] - '0');
	}
	if (status < 100 || (eol - line > 12 && line[12] != ' '))
		return -1;

	bool have_len = false;
	uint64_t clen = 0;
	for (line = eol + 2; line < head_end; line = eol + 2) {
		eol = memchr(line, '\r', (size_t)(head_end - line));
		if (!eol || eol[1] != '\n' || eol == line)
			return -1;
		const char *v;
		size_t vlen;
		if (header_is(line, (size_t)(eol - line), "Content-Length", &v, &vlen)) {
			uint64_t x = 0;
			if (vlen == 0 || vlen > 15)
				return -1;
			for (size_t i = 0; i < vlen; i++) {
				if (v[i] < '0' || v[i] > '9')
					return -1;
				x = x * 10 + (uint64_t)(v[i] - '0');
			}
			if (have_len && x != clen)
				return -1;
			clen = x;
			have_len = true;
		} else if (header_is(line, (size_t)(eol - line), "Transfer-Encoding", &v, &vlen)) {
			return -1;
		}
	}
	bool no_body = status < 200 || status == 204 || status == 304;
	if (!have_len && !no_body)
		return -1;                 /* close-delimited: not measurable */
	r->status = status;
	r->total = (uint64_t)(eoh + 4 - buf) + (no_body ? 0 : clen);
	return 1;
}

/* Does a comma-separated header value list the token "close"? */
static bool lists_close(const char *v, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		size_t a = i, b = j;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (b - a == 5 && strncasecmp(v + a, "close", 5) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

int pload_request_connection(const char *req, size_t len, size_t *head_len)
{
	const char *eoh = find_crlfcrlf(req, len);
	if (!eoh)
		return -2;
	const char *head_end = eoh + 2, *line = memchr(req, '\n', (size_t)(head_end - req));
	int result = 0;
	if (!line)
		return -2;
	for (line++; line < head_end;) {
		const char *eol = memchr(line, '\r', (size_t)(head_end - line));
		if (!eol || eol[1] != '\n')
			return -2;
		const char *v;
		size_t vlen;
		if (header_is(line, (size_t)(eol - line), "Connection", &v, &vlen) && result >= 0)
			result = lists_close(v, vlen) ? 1 : -1;
		line = eol + 2;
	}
	*head_len = (size_t)(eoh + 4 - req);
	return result;
}
