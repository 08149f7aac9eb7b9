/* resp_reply.c - RESP2/RESP3 reply writers.
 *
 * Each writer measures its reply first and writes it only if it fits, so a
 * caller appending replies to an output buffer never sends half of one:
 *
 *     int n = paste_resp_put_bulk(out + at, cap - at, v, vlen);
 *     if (n < 0) ... flush `out` and retry, or send the value separately
 *     else at += n;
 *
 * RESP3 types are written for a RESP2 client the way Redis writes them
 * (a map as a flat array of 2n elements, a set as an array, a double as a
 * bulk string, a boolean as 1/0, null as $-1 or *-1).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paste.h"

/* Room for the longest header: a type byte, '-', 20 digits, CRLF. */
#define NUM_MAX 24

/* Write a decimal u64 (with a '-' when neg) at p; returns its length.
 * In place from the last digit, two digits per division: a header is
 * formatted for every value a reply carries. */
static size_t fmt_u64(char *p, uint64_t v, bool neg)
{
	static const char pairs[] = "00010203040506070809101112131415161718192021222324"
				    "25262728293031323334353637383940414243444546474849"
				    "50515253545556575859606162636465666768697071727374"
				    "75767778798081828384858687888990919293949596979899";
	size_t n = 1;
	for (uint64_t t = v; t >= 10; t /= 10)
		n++;
	if (neg)
		*p++ = '-';
	char *e = p + n;
	for (; v >= 100; v /= 100) {
		e -= 2;
		memcpy(e, pairs + 2 * (v % 100), 2);
	}
	if (v >= 10) {
		e -= 2;
		memcpy(e, pairs + 2 * v, 2);
	} else {
		*--e = (char)('0' + v);
	}
	return n + neg;
}

/* "<type><number>\r\n" */
static int put_num(char *out, size_t cap, char type, uint64_t mag, bool neg)
{
	char buf[NUM_MAX];
	char *o = cap >= NUM_MAX ? out : buf;   /* room: no copy */
	size_t n = 0;
	o[n++] = type;
	n += fmt_u64(o + n, mag, neg);
	o[n++] = '\r';
	o[n++] = '\n';
	if (n > cap)
		return -ENOBUFS;
	if (o != out)
		memcpy(out, buf, n);
	return (int)n;
}

/* |v|, INT64_MIN's included. */
static uint64_t magnitude(int64_t v)
{
	return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
}

static int put_i64(char *out, size_t cap, char type, int64_t v)
{
	return put_num(out, cap, type, magnitude(v), v < 0);
}

/* "<type>s\r\n" with CR and LF in s turned into spaces (as Redis does for
 * errors), so the reply stays one line whatever s holds. */
static int put_line(char *out, size_t cap, char type, const char *s)
{
	size_t n = strlen(s);
	if (n > (size_t)INT_MAX - 3)
		return -EOVERFLOW;
	if (n + 3 > cap)
		return -ENOBUFS;
	out[0] = type;
	for (size_t i = 0; i < n; i++)
		out[1 + i] = s[i] == '\r' || s[i] == '\n' ? ' ' : s[i];
	out[n + 1] = '\r';
	out[n + 2] = '\n';
	return (int)n + 3;
}

int paste_resp_put_simple(char *out, size_t cap, const char *s)
{
	return put_line(out, cap, '+', s);
}

int paste_resp_put_error(char *out, size_t cap, const char *s)
{
	return put_line(out, cap, '-', s);
}

int paste_resp_put_int(char *out, size_t cap, int64_t v)
{
	return put_i64(out, cap, ':', v);
}

int paste_resp_put_i64_text(char *out, size_t cap, int64_t v)
{
	char buf[NUM_MAX];
	size_t n = fmt_u64(buf, magnitude(v), v < 0);
	if (n > cap)
		return -ENOBUFS;
	memcpy(out, buf, n);
	return (int)n;
}

int paste_resp_put_bulk_head(char *out, size_t cap, uint64_t len)
{
	return put_num(out, cap, '$', len, false);
}

/* "<prefix>$n\r\n" header, then the n bytes of p, then CRLF. */
static int put_bulk_with(char *out, size_t cap, const char *prefix, size_t plen,
			 const void *p, size_t n)
{
	char head[NUM_MAX];
	size_t body = plen + n;
	if (n > (size_t)INT_MAX - NUM_MAX - plen)
		return -EOVERFLOW;
	int h = put_num(head, sizeof(head), '$', body, false);
	size_t total = (size_t)h + body + 2;
	if (total > (size_t)INT_MAX)
		return -EOVERFLOW;
	if (total > cap)
		return -ENOBUFS;
	memcpy(out, head, (size_t)h);
	memcpy(out + h, prefix, plen);
	if (n)
		memcpy(out + h + plen, p, n);
	out[total - 2] = '\r';
	out[total - 1] = '\n';
	return (int)total;
}

int paste_resp_put_bulk(char *out, size_t cap, const void *p, size_t n)
{
	return put_bulk_with(out, cap, "", 0, p, n);
}

int paste_resp_put_array(char *out, size_t cap, uint64_t n)
{
	return put_num(out, cap, '*', n, false);
}

static int put_lit(char *out, size_t cap, const char *s, size_t n)
{
	if (n > cap)
		return -ENOBUFS;
	memcpy(out, s, n);
	return (int)n;
}

int paste_resp_put_null(char *out, size_t cap, int proto)
{
	return proto == 3 ? put_lit(out, cap, "_\r\n", 3) : put_lit(out, cap, "$-1\r\n", 5);
}

int paste_resp_put_null_array(char *out, size_t cap, int proto)
{
	return proto == 3 ? put_lit(out, cap, "_\r\n", 3) : put_lit(out, cap, "*-1\r\n", 5);
}

int paste_resp_put_map(char *out, size_t cap, int proto, uint64_t n)
{
	if (proto == 3)
		return put_num(out, cap, '%', n, false);
	if (n > UINT64_MAX / 2)
		return -EOVERFLOW;
	return put_num(out, cap, '*', 2 * n, false);
}

int paste_resp_put_set(char *out, size_t cap, int proto, uint64_t n)
{
	return put_num(out, cap, proto == 3 ? '~' : '*', n, false);
}

int paste_resp_put_push(char *out, size_t cap, int proto, uint64_t n)
{
	return put_num(out, cap, proto == 3 ? '>' : '*', n, false);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as d (17 always
 * does); inf, -inf, nan as Redis writes them. The decimal point is '.'
 * whatever the locale. Returns the length (< 32). */
static size_t fmt_double(char *buf, double d)
{
	if (isnan(d))
		return (size_t)snprintf(buf, 32, "nan");
	if (isinf(d))
		return (size_t)snprintf(buf, 32, d > 0 ? "inf" : "-inf");
	int n = 0;
	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(buf, 32, "%.*g", prec, d);
		if (prec == 17 || strtod(buf, NULL) == d)
			break;
	}
	for (int i = 0; i < n; i++)
		if (buf[i] == ',')
			buf[i] = '.';
	return (size_t)n;
}

int paste_resp_put_double_text(char *out, size_t cap, int proto, const char *num, size_t n)
{
	if (proto != 3)
		return paste_resp_put_bulk(out, cap, num, n);
	if (n > (size_t)INT_MAX - 3)
		return -EOVERFLOW;
	if (n + 3 > cap)
		return -ENOBUFS;
	out[0] = ',';
	memcpy(out + 1, num, n);
	out[n + 1] = '\r';
	out[n + 2] = '\n';
	return (int)n + 3;
}

int paste_resp_put_double(char *out, size_t cap, int proto, double d)
{
	char num[32];
	return paste_resp_put_double_text(out, cap, proto, num, fmt_double(num, d));
}

int paste_resp_put_bool(char *out, size_t cap, int proto, bool b)
{
	if (proto == 3)
		return put_lit(out, cap, b ? "#t\r\n" : "#f\r\n", 4);
	return put_lit(out, cap, b ? ":1\r\n" : ":0\r\n", 4);
}

int paste_resp_put_verbatim(char *out, size_t cap, int proto, const char *fmt,
			    const void *p, size_t n)
{
	if (!fmt || strlen(fmt) != 3)
		return -EINVAL;
	if (proto != 3)
		return paste_resp_put_bulk(out, cap, p, n);
	char prefix[4] = { fmt[0], fmt[1], fmt[2], ':' };
	int r = put_bulk_with(out, cap, prefix, 4, p, n);
	if (r > 0)
		out[0] = '=';
	return r;
}

int paste_resp_put_proto_error(char *out, size_t cap, const struct paste_resp_parser *ps,
			       int code)
{
	char msg[96];
	const char *what = paste_resp_strerror(code);
	if (code == PASTE_RESP_E_DOLLAR && ps) {
		unsigned char c = ps->bad;
		if (c >= 0x20 && c < 0x7f)
			snprintf(msg, sizeof(msg), "ERR %s, got '%c'", what, c);
		else
			snprintf(msg, sizeof(msg), "ERR %s, got '\\x%02x'", what, c);
	} else {
		snprintf(msg, sizeof(msg), "ERR %s", what);
	}
	return put_line(out, cap, '-', msg);
}
