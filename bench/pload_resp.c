/* See pload_resp.h. Linear in the bytes fed; no allocation. */
#include "pload_resp.h"

#include <string.h>

enum {
	ST_TYPE,                  /* the first byte of a value */
	ST_LINE,                  /* a simple string or error's text, up to CR */
	ST_NUM0,                  /* the first byte of a number: '-' or a digit */
	ST_DIGITS,                /* digits, up to CR */
	ST_LF,                    /* the LF ending a header line */
	ST_BULK,                  /* a bulk's payload */
	ST_BULK_CR,               /* the CRLF after it */
	ST_BULK_LF,
	ST_FAILED,
};

#define MAX_DIGITS 19u        /* fits a uint64_t; int64 range checked apart */

void pload_resp_init(struct pload_resp *p)
{
	memset(p, 0, sizeof *p);
	p->state = ST_TYPE;
}

/* A value ended (null: it was $-1 or *-1). True when that completes the
 * reply; otherwise the parser waits for the next element. */
static bool value_done(struct pload_resp *p, bool null)
{
	for (;;) {
		p->state = ST_TYPE;
		if (p->depth == 0) {
			p->type = p->top;
			p->null = null;
			return true;
		}
		null = false;
		if (--p->pending[p->depth - 1] > 0)
			return false;
		p->depth--;               /* the array's last element: it is a value */
	}
}

/* The CRLF of a header line arrived: -1 protocol error, 1 the reply is
 * complete, 0 more to read. */
static int header_done(struct pload_resp *p)
{
	switch (p->kind) {
	case '+':
	case '-':
		return value_done(p, false);
	case ':':
		if (p->num > (p->neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
			return -1;
		return value_done(p, false);
	case '$':
		if (p->neg)
			return p->num == 1 ? value_done(p, true) : -1;
		if (p->num > PLOAD_RESP_MAX_BULK)
			return -1;
		p->left = p->num;
		p->state = p->left ? ST_BULK : ST_BULK_CR;
		return 0;
	default:                      /* '*' */
		if (p->neg)
			return p->num == 1 ? value_done(p, true) : -1;
		if (p->num == 0)
			return value_done(p, false);
		if (p->num > PLOAD_RESP_MAX_ARRAY || p->depth == PLOAD_RESP_MAX_DEPTH)
			return -1;
		p->pending[p->depth++] = p->num;
		p->state = ST_TYPE;
		return 0;
	}
}

int pload_resp_feed(struct pload_resp *p, const char *buf, size_t len, size_t *used)
{
	size_t i = 0;
	int r;
	if (p->state == ST_FAILED)
		goto fail;
	while (i < len) {
		unsigned char ch = (unsigned char)buf[i];
		switch (p->state) {
		case ST_TYPE:
			if (ch == '+' || ch == '-')
				p->state = ST_LINE;
			else if (ch == ':' || ch == '$' || ch == '*')
				p->state = ST_NUM0;
			else
				goto fail;
			p->kind = ch;
			if (p->depth == 0)
				p->top = ch;
			p->n = 0;
			p->num = 0;
			p->neg = false;
			i++;
			break;
		case ST_LINE: {
			/* Text without CR or LF, then CRLF. */
			const char *cr = memchr(buf + i, '\r', len - i);
			size_t n = cr ? (size_t)(cr - (buf + i)) : len - i;
			const char *lf = memchr(buf + i, '\n', n);
			if (lf) {
				i = (size_t)(lf - buf);
				goto fail;
			}
			if (n > PLOAD_RESP_MAX_LINE - p->n) {
				i += PLOAD_RESP_MAX_LINE - p->n;   /* the first byte too many */
				goto fail;
			}
			p->n += (uint32_t)n;
			i += n;
			if (cr) {
				p->state = ST_LF;
				i++;
			}
			break;
		}
		case ST_NUM0:
			if (ch == '-') {
				p->neg = true;
				p->state = ST_DIGITS;
				i++;
				break;
			}
			p->state = ST_DIGITS;
			continue;                 /* the same byte as the first digit */
		case ST_DIGITS:
			if (ch >= '0' && ch <= '9') {
				if (++p->n > MAX_DIGITS)
					goto fail;
				p->num = p->num * 10 + (uint64_t)(ch - '0');
			} else if (ch == '\r' && p->n > 0) {
				p->state = ST_LF;
			} else {
				goto fail;
			}
			i++;
			break;
		case ST_LF:
			if (ch != '\n')
				goto fail;
			i++;
			r = header_done(p);
			if (r < 0) {
				i--;
				goto fail;
			}
			if (r > 0) {
				*used = i;
				return 1;
			}
			break;
		case ST_BULK: {
			size_t n = len - i;
			if (n > p->left)
				n = (size_t)p->left;
			p->left -= n;
			i += n;
			if (p->left == 0)
				p->state = ST_BULK_CR;
			break;
		}
		case ST_BULK_CR:
			if (ch != '\r')
				goto fail;
			p->state = ST_BULK_LF;
			i++;
			break;
		case ST_BULK_LF:
			if (ch != '\n')
				goto fail;
			i++;
			if (value_done(p, false)) {
				*used = i;
				return 1;
			}
			break;
		default:
			goto fail;
		}
	}
	*used = len;
	return 0;
fail:
	p->state = ST_FAILED;
	*used = i;
	return -1;
}

/* "<type><digits>\r\n" at *pos: the number (at most 10 digits). */
static bool header(const char *buf, size_t len, size_t *pos, char type, uint64_t *out)
{
	size_t i = *pos, digits = 0;
	uint64_t v = 0;
	if (i >= len || buf[i] != type)
		return false;
	for (i++; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
		if (++digits > 10)
			return false;
		v = v * 10 + (uint64_t)(buf[i] - '0');
	}
	if (digits == 0 || len - i < 2 || buf[i] != '\r' || buf[i + 1] != '\n')
		return false;
	*pos = i + 2;
	*out = v;
	return true;
}

long pload_resp_commands(const char *buf, size_t len)
{
	size_t i = 0;
	long count = 0;
	if (len == 0)
		return -1;
	while (i < len) {
		uint64_t n;
		if (!header(buf, len, &i, '*', &n) || n == 0)
			return -1;
		for (; n; n--) {
			uint64_t b;
			if (!header(buf, len, &i, '$', &b) || len - i < 2 || b > len - i - 2 ||
			    buf[i + b] != '\r' || buf[i + b + 1] != '\n')
				return -1;
			i += (size_t)b + 2;
		}
		count++;
	}
	return count;
}
