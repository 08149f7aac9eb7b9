/* bench/pload's RESP2 reply framer (--resp): every reply type, nested and
 * null arrays, a pipelined stream split at every byte offset and fed one
 * byte at a time, the bounds, and malformed input as a protocol error
 * (never a crash). And the request-file check (commands per file). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pload_resp.h"

struct seen {
	int type;
	bool null;
	size_t end;               /* stream offset just past the reply */
};

/* Feed s[0..len) in pieces of at most `piece` bytes (0: one piece), or
 * split once at `split` (when piece == 0). Returns replies found, or -1 on a
 * protocol error (*err_at: its stream offset). */
static int run(const char *s, size_t len, size_t piece, size_t split, struct seen *out, int max,
               size_t *err_at)
{
	struct pload_resp p;
	pload_resp_init(&p);
	int n = 0;
	size_t off = 0;
	while (off < len) {
		size_t chunk = piece ? piece : (off < split ? split - off : len - off);
		if (chunk > len - off)
			chunk = len - off;
		/* An exact-size copy so ASan sees any read past the piece. */
		char *buf = malloc(chunk ? chunk : 1);
		memcpy(buf, s + off, chunk);
		size_t pos = 0;
		while (pos < chunk) {
			size_t used = 0;
			int r = pload_resp_feed(&p, buf + pos, chunk - pos, &used);
			if (r < 0) {
				if (err_at)
					*err_at = off + pos + used;
				free(buf);
				return -1;
			}
			CHECK(used <= chunk - pos);
			pos += used;
			if (r == 0) {
				CHECK_EQ(pos, chunk);
				break;
			}
			CHECK(used > 0);
			if (n < max)
				out[n] = (struct seen){ p.type, p.null, off + pos };
			n++;
		}
		free(buf);
		off += chunk;
	}
	return n;
}

static int whole(const char *s, struct seen *out, int max)
{
	return run(s, strlen(s), 0, 0, out, max, NULL);
}

/* One reply: complete exactly at its end, and each proper prefix needs more. */
static void one(const char *s, int type, bool null)
{
	struct seen got[4];
	size_t len = strlen(s);
	CHECK_EQ(whole(s, got, 4), 1);
	CHECK_EQ(got[0].type, type);
	CHECK_EQ(got[0].null, null);
	CHECK_EQ(got[0].end, len);
	for (size_t n = 0; n < len; n++) {
		struct pload_resp p;
		size_t used = 99;
		pload_resp_init(&p);
		CHECK_EQ(pload_resp_feed(&p, s, n, &used), 0);
		CHECK_EQ(used, n);
	}
}

static void test_types(void)
{
	one("+OK\r\n", '+', false);
	one("+\r\n", '+', false);
	one("-ERR unknown command 'FOO'\r\n", '-', false);
	one(":0\r\n", ':', false);
	one(":1000\r\n", ':', false);
	one(":-42\r\n", ':', false);
	one(":9223372036854775807\r\n", ':', false);
	one(":-9223372036854775808\r\n", ':', false);
	one("$5\r\nhello\r\n", '$', false);
	one("$0\r\n\r\n", '$', false);
	one("$4\r\n\r\n\r\n\r\n", '$', false);          /* CRLFs inside a bulk are data */
	one("$-1\r\n", '$', true);
	one("*-1\r\n", '*', true);
	one("*0\r\n", '*', false);
	one("*2\r\n$3\r\nfoo\r\n:7\r\n", '*', false);
	one("*3\r\n$-1\r\n*-1\r\n*0\r\n", '*', false);  /* null elements: not a null reply */
	one("*2\r\n*2\r\n+a\r\n-b\r\n*1\r\n*1\r\n$1\r\nx\r\n", '*', false);
	one("*1\r\n*1\r\n*1\r\n*0\r\n", '*', false);

	/* The deepest nesting allowed, and one more. */
	char deep[4 * (PLOAD_RESP_MAX_DEPTH + 2) + 8];
	size_t n = 0;
	for (int i = 0; i < PLOAD_RESP_MAX_DEPTH; i++)
		n += (size_t)sprintf(deep + n, "*1\r\n");
	strcpy(deep + n, ":1\r\n");
	one(deep, '*', false);
	memmove(deep + 4, deep, strlen(deep) + 1);
	memcpy(deep, "*1\r\n", 4);
	struct seen got[2];
	size_t at = 0;
	CHECK_EQ(run(deep, strlen(deep), 0, 0, got, 2, &at), -1);
	CHECK_EQ(at, 4 * PLOAD_RESP_MAX_DEPTH + 3);     /* the LF of the 33rd header */

	/* The largest bulk header is accepted (its payload is still to come). */
	struct pload_resp p;
	size_t used;
	pload_resp_init(&p);
	CHECK_EQ(pload_resp_feed(&p, "$536870912\r\nab", 14, &used), 0);
	pload_resp_init(&p);
	CHECK_EQ(pload_resp_feed(&p, "*2147483647\r\n", 13, &used), 0);
}

/* A pipelined stream of every type: the same replies at the same offsets
 * whether it arrives whole, split at any offset, or a byte at a time. */
static void test_splits(void)
{
	const char *s = "+OK\r\n-ERR wrong type\r\n:123\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n*0\r\n"
	                "$0\r\n\r\n*3\r\n$1\r\na\r\n*2\r\n:1\r\n-no\r\n$-1\r\n+PONG\r\n"
	                ":-1\r\n$10\r\n0123456789\r\n";
	size_t len = strlen(s);
	struct seen ref[16], got[16];
	int n = whole(s, ref, 16);
	CHECK_EQ(n, 12);
	static const char types[] = "+-:$$**$*+:$";
	for (int i = 0; i < 12; i++)
		CHECK_EQ(ref[i].type, types[i]);
	CHECK(ref[4].null && ref[5].null && !ref[6].null && !ref[8].null);
	CHECK_EQ(ref[n - 1].end, len);
	for (size_t split = 0; split <= len; split++) {
		memset(got, 0, sizeof got);
		CHECK_EQ(run(s, len, 0, split, got, 16, NULL), n);
		for (int i = 0; i < n; i++) {
			CHECK_EQ(got[i].type, ref[i].type);
			CHECK_EQ(got[i].null, ref[i].null);
			CHECK_EQ(got[i].end, ref[i].end);
		}
	}
	for (size_t piece = 1; piece <= 7; piece++) {
		CHECK_EQ(run(s, len, piece, 0, got, 16, NULL), n);
		for (int i = 0; i < n; i++)
			CHECK_EQ(got[i].end, ref[i].end);
	}
	/* Many replies in one feed: the caller gets them one at a time. */
	char many[17 * 1000 + 1];
	for (int i = 0; i < 1000; i++)
		memcpy(many + 17 * i, "$10\r\nxxxxxxxxxx\r\n", 17);
	many[17000] = 0;
	CHECK_EQ(whole(many, NULL, 0), 1000);
}

static void bad(const char *s, size_t len, size_t want_at)
{
	struct seen got[8];
	size_t at = (size_t)-1;
	CHECK_EQ(run(s, len, 0, 0, got, 8, &at), -1);
	CHECK_EQ(at, want_at);
	/* split anywhere: still an error, at the same byte */
	for (size_t split = 0; split <= len; split++) {
		at = (size_t)-1;
		CHECK_EQ(run(s, len, 0, split, got, 8, &at), -1);
		CHECK_EQ(at, want_at);
	}
}

static void test_malformed(void)
{
#define BAD(lit, at) bad(lit, sizeof(lit) - 1, at)
	BAD("?\r\n", 0);
	BAD("OK\r\n", 0);
	BAD("_\r\n", 0);                              /* RESP3 null */
	BAD("%1\r\n+a\r\n+b\r\n", 0);                 /* RESP3 map */
	BAD("\r\n", 0);
	BAD("+OK\n", 3);                              /* bare LF */
	BAD("+O\nK\r\n", 2);
	BAD("+OK\rX", 4);                             /* CR without LF */
	BAD(":\r\n", 1);
	BAD(":-\r\n", 2);
	BAD(":12a\r\n", 3);
	BAD(": 1\r\n", 1);
	BAD(":+1\r\n", 1);
	BAD(":12345678901234567890\r\n", 20);         /* 20 digits */
	BAD(":9223372036854775808\r\n", 21);          /* past INT64_MAX: at the LF */
	BAD(":-9223372036854775809\r\n", 22);
	BAD("$-2\r\n", 4);
	BAD("$-0\r\n", 4);
	BAD("$--1\r\n", 2);
	BAD("$536870913\r\n", 11);                    /* over 512 MiB */
	BAD("$3\r\nabcX\r\n", 7);                     /* no CRLF after the payload */
	BAD("$3\r\nabc\rX", 8);
	BAD("$3\r\nab\r\n\r\n", 7);                   /* bulk longer than announced */
	BAD("*-2\r\n", 4);
	BAD("*2147483648\r\n", 12);
	BAD("*2\r\n+a\r\nX\r\n", 8);                  /* a bad element */
	BAD("+OK\r\n+OK\r\nnope", 10);               /* good replies, then junk */
#undef BAD
	/* a line longer than the bound */
	size_t len = PLOAD_RESP_MAX_LINE + 10;
	char *lng = malloc(len);
	lng[0] = '-';
	memset(lng + 1, 'e', len - 1);
	struct seen got[1];
	for (size_t split = 0; split <= len; split += 4099) {
		size_t at = 0;
		CHECK_EQ(run(lng, len, 0, split, got, 1, &at), -1);
		CHECK_EQ(at, 1 + PLOAD_RESP_MAX_LINE);
	}
	memcpy(lng + 1 + PLOAD_RESP_MAX_LINE, "\r\n", 2);   /* the longest accepted */
	for (size_t split = 0; split <= len; split += 4099) {
		CHECK_EQ(run(lng, PLOAD_RESP_MAX_LINE + 3, 0, split, got, 1, NULL), 1);
		CHECK_EQ(got[0].type, '-');
	}
	free(lng);

	/* Failed stays failed, until init. */
	struct pload_resp p;
	size_t used;
	pload_resp_init(&p);
	CHECK_EQ(pload_resp_feed(&p, "!", 1, &used), -1);
	CHECK_EQ(pload_resp_feed(&p, "+OK\r\n", 5, &used), -1);
	CHECK_EQ(used, 0);
	pload_resp_init(&p);
	CHECK_EQ(pload_resp_feed(&p, "+OK\r\n", 5, &used), 1);
	CHECK_EQ(used, 5);
	CHECK_EQ(pload_resp_feed(&p, "", 0, &used), 0);
	CHECK_EQ(used, 0);

	/* Random bytes: any verdict, never a crash or an offset out of range. */
	unsigned seed = 12345;
	char junk[64];
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(round % 64);
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			static const char alphabet[] = "+-:$*\r\n0123456789-x";
			junk[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
		}
		pload_resp_init(&p);
		size_t pos = 0;
		for (;;) {
			int r = pload_resp_feed(&p, junk + pos, n - pos, &used);
			CHECK(used <= n - pos);
			pos += used;
			if (r != 1 || pos == n)
				break;
		}
	}
}

static void test_commands(void)
{
#define CMDS(lit) pload_resp_commands(lit, sizeof(lit) - 1)
	CHECK_EQ(CMDS("*1\r\n$4\r\nPING\r\n"), 1);
	CHECK_EQ(CMDS("*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n"), 1);
	CHECK_EQ(CMDS("*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n"
	              "*1\r\n$4\r\nPING\r\n"), 3);
	CHECK_EQ(CMDS("*2\r\n$3\r\nSET\r\n$0\r\n\r\n"), 1);          /* an empty argument */
	CHECK_EQ(CMDS("*1\r\n$4\r\n\r\n\r\n\r\n"), 1);                    /* CRLF in an argument */
	CHECK_EQ(CMDS(""), -1);
	CHECK_EQ(CMDS("PING\r\n"), -1);                               /* inline */
	CHECK_EQ(CMDS("*0\r\n"), -1);
	CHECK_EQ(CMDS("*-1\r\n"), -1);
	CHECK_EQ(CMDS("*1\r\n$-1\r\n"), -1);
	CHECK_EQ(CMDS("*1\r\n:1\r\n"), -1);
	CHECK_EQ(CMDS("*1\r\n*1\r\n$1\r\na\r\n"), -1);
	CHECK_EQ(CMDS("*1\r\n$4\r\nPING\r\n\r\n"), -1);               /* trailing bytes */
	CHECK_EQ(CMDS("*1\r\n$4\r\nPING\r\n*1"), -1);
	CHECK_EQ(CMDS("*1\r\n$4\r\nPING"), -1);                       /* cut short */
	CHECK_EQ(CMDS("*1\r\n$4\r\nPINGXX"), -1);
	CHECK_EQ(CMDS("*1\n$4\r\nPING\r\n"), -1);
	CHECK_EQ(CMDS("*1\r\n$99999999999\r\nPING\r\n"), -1);
	const char *two = "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
	for (size_t n = 0; n < strlen(two); n++)
		CHECK_EQ(pload_resp_commands(two, n), n == 14 ? 1 : -1);
#undef CMDS
}

int main(void)
{
	test_types();
	test_splits();
	test_malformed();
	test_commands();
	return check_done();
}
