/* test_resp.c - the RESP parser and reply writers: every command shape,
 * every split of the input (incremental: any split gives the one-shot
 * answer), pipelining, each error, inline quoting, the streamed last
 * argument, the limits at and one past their boundaries, and the exact
 * bytes of every reply writer.
 *
 * Every parse runs on a malloc'd copy of exactly len bytes (a new one per
 * call, so the bytes move between calls as a reassembly buffer's do), so
 * the sanitizer build catches a read past what the caller handed over. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "paste.h"

#define MAXA 64

static struct paste_resp_arg argv_buf[MAXA];
static char scratch[1024];

/* A parse result with the arguments copied out (the input is freed). */
struct got {
	int rc;
	uint32_t used, argc;
	bool inl;
	bool null[MAXA];
	size_t len[MAXA], off[MAXA];
	char blob[16384];
};

static char *copy_of(const char *s, size_t len)
{
	char *c = malloc(len ? len : 1);
	if (!c)
		abort();
	memcpy(c, s, len);
	return c;
}

static void cmd_init(struct paste_resp_cmd *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->argv = argv_buf;
	cmd->argv_cap = MAXA;
	cmd->scratch = scratch;
	cmd->scratch_cap = sizeof(scratch);
}

/* Copy cmd's result out; every pointer must lie in the input or scratch. */
static void snap(int rc, const struct paste_resp_cmd *cmd, const char *in, size_t len,
		 struct got *g)
{
	size_t at = 0;
	memset(g, 0, sizeof(*g));
	g->rc = rc;
	g->used = cmd->used;
	g->argc = cmd->argc;
	g->inl = cmd->is_inline;
	CHECK(cmd->used <= len);
	for (uint32_t i = 0; i < cmd->argc && i < MAXA; i++) {
		const struct paste_resp_arg *a = &cmd->argv[i];
		g->len[i] = a->len;
		g->off[i] = at;
		if (!a->p) {
			g->null[i] = true;
			CHECK(rc == PASTE_RESP_STREAM && i + 1 == cmd->argc);
			continue;
		}
		bool in_input = a->p >= in && a->p + a->len <= in + len;
		bool in_scratch = a->p >= scratch && a->p + a->len <= scratch + sizeof(scratch);
		CHECK(in_input || in_scratch);
		if (at + a->len <= sizeof(g->blob)) {
			memcpy(g->blob + at, a->p, a->len);
			at += a->len;
		}
	}
}

static bool same(const struct got *a, const struct got *b)
{
	if (a->rc != b->rc || a->used != b->used || a->argc != b->argc || a->inl != b->inl)
		return false;
	for (uint32_t i = 0; i < a->argc && i < MAXA; i++)
		if (a->null[i] != b->null[i] || a->len[i] != b->len[i] ||
		    (!a->null[i] && memcmp(a->blob + a->off[i], b->blob + b->off[i], a->len[i])))
			return false;
	return true;
}

/* s[0..n) in two calls: k bytes, then (if it needs more) all n, each call
 * on its own copy. */
static int parse_split(const struct paste_resp_config *cfg, const char *s, size_t k, size_t n,
		       struct got *g)
{
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, cfg);
	cmd_init(&cmd);
	size_t len = k;
	char *c = copy_of(s, len);
	int rc = paste_resp_parse(&ps, c, len, &cmd);
	if (rc == PASTE_RESP_MORE) {
		free(c);
		c = copy_of(s, len = n);
		rc = paste_resp_parse(&ps, c, len, &cmd);
	}
	snap(rc, &cmd, c, len, g);
	free(c);
	return rc;
}

static int parse_cfg(const struct paste_resp_config *cfg, const char *s, size_t n, struct got *g)
{
	return parse_split(cfg, s, n, n, g);
}

static const struct paste_resp_config nostream = { .stream_min = PASTE_RESP_NO_STREAM };

static int parse(const char *s, struct got *g)
{
	return parse_cfg(&nostream, s, strlen(s), g);
}

static bool arg_is(const struct got *g, uint32_t i, const char *s)
{
	return i < g->argc && !g->null[i] && g->len[i] == strlen(s) &&
	       !memcmp(g->blob + g->off[i], s, g->len[i]);
}

/* The one-shot answer must also come from every two-call split and from
 * one byte per call, the bytes moving to a new address on each call. */
static void check_splits(const struct paste_resp_config *cfg, const char *s, size_t n)
{
	static struct got one, g;
	parse_cfg(cfg, s, n, &one);
	bool ok = true;
	for (size_t k = 0; k <= n; k++) {
		parse_split(cfg, s, k, n, &g);
		ok &= same(&one, &g);
	}
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, cfg);
	cmd_init(&cmd);
	int rc = PASTE_RESP_MORE;
	for (size_t k = 0; k <= n && rc == PASTE_RESP_MORE; k++) {
		char *c = copy_of(s, k);
		rc = paste_resp_parse(&ps, c, k, &cmd);
		snap(rc, &cmd, c, k, &g);
		free(c);
	}
	ok &= same(&one, &g);
	if (!ok)
		fprintf(stderr, "split differs for input of %zu bytes: %.40s\n", n, s);
	CHECK(ok);
}

static void test_multibulk(void)
{
	struct got g;
	CHECK_EQ(parse("*1\r\n$4\r\nPING\r\n", &g), PASTE_RESP_CMD);
	CHECK_EQ(g.argc, 1);
	CHECK_EQ(g.used, 14);
	CHECK(!g.inl);
	CHECK(arg_is(&g, 0, "PING"));

	const char *set = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nhello\r\n*1\r\n";
	CHECK_EQ(parse(set, &g), PASTE_RESP_CMD);
	CHECK_EQ(g.used, strlen(set) - 4);
	CHECK(arg_is(&g, 0, "SET") && arg_is(&g, 1, "key") && arg_is(&g, 2, "hello"));

	CHECK_EQ(parse("*2\r\n$3\r\nGET\r\n$0\r\n\r\n", &g), PASTE_RESP_CMD);
	CHECK(arg_is(&g, 1, ""));

	/* Bulk data is binary: CRLF, NUL, '*' and '$' inside are data. */
	static const char bin[] = "*2\r\n$3\r\nSET\r\n$6\r\n\r\n\0*$\n\r\n";
	CHECK_EQ(parse_cfg(&nostream, bin, sizeof(bin) - 1, &g), PASTE_RESP_CMD);
	CHECK_EQ(g.len[1], 6);
	CHECK(!memcmp(g.blob + g.off[1], "\r\n\0*$\n", 6));

	/* "*0" and "*-1" are nothing to run, as in Redis. */
	CHECK_EQ(parse("*0\r\n*1\r\n", &g), PASTE_RESP_CMD);
	CHECK_EQ(g.argc, 0);
	CHECK_EQ(g.used, 4);
	CHECK_EQ(parse("*-1\r\n", &g), PASTE_RESP_CMD);
	CHECK_EQ(g.argc, 0);
	CHECK_EQ(g.used, 5);

	/* Incomplete: more, at every point. */
	const char *cut[] = { "", "*", "*3", "*3\r", "*3\r\n", "*3\r\n$", "*3\r\n$3\r\nSE",
			      "*3\r\n$3\r\nSET\r", "*1\r\n$3\r\nfoo\r" };
	for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++)
		CHECK_EQ(parse(cut[i], &g), PASTE_RESP_MORE);
}

static void test_inline(void)
{
	struct got g;
	CHECK_EQ(parse("PING\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.inl && g.argc == 1 && arg_is(&g, 0, "PING") && g.used == 6);
	CHECK_EQ(parse("PING\n", &g), PASTE_RESP_CMD);
	CHECK(arg_is(&g, 0, "PING") && g.used == 5);
	CHECK_EQ(parse(" \t SET  k\tv \r\nGET k\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 3 && arg_is(&g, 0, "SET") && arg_is(&g, 1, "k") && arg_is(&g, 2, "v"));
	CHECK_EQ(g.used, 14);
	/* Empty and blank lines: nothing to run, the bytes are dropped. */
	CHECK_EQ(parse("\r\nPING\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 0 && g.used == 2 && g.inl);
	CHECK_EQ(parse("\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 0 && g.used == 1);
	CHECK_EQ(parse(" \t\v\f\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 0 && g.used == 6);
	/* A CR inside the line separates words; \v inside a word does not. */
	CHECK_EQ(parse("a\rb c\vd\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 3 && arg_is(&g, 1, "b") && arg_is(&g, 2, "c\vd"));
	CHECK_EQ(parse("PING", &g), PASTE_RESP_MORE);
	CHECK_EQ(parse("PING\r", &g), PASTE_RESP_MORE);
}

static void test_quotes(void)
{
	struct got g;
	CHECK_EQ(parse("SET \"a b\" 'c d'\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 3 && arg_is(&g, 1, "a b") && arg_is(&g, 2, "c d"));
	CHECK_EQ(parse("X \"\\x41\\x6a\\n\\r\\t\\\\\\\"\\b\\a\\z\"\n", &g), PASTE_RESP_CMD);
	CHECK(arg_is(&g, 1, "Aj\n\r\t\\\"\b\az"));
	CHECK_EQ(parse("X \"\\x4\" \"\\xg0\"\n", &g), PASTE_RESP_CMD);   /* not two hex digits */
	CHECK(arg_is(&g, 1, "x4") && arg_is(&g, 2, "xg0"));
	CHECK_EQ(parse("X 'it\\'s' 'a\\nb' ''\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 4 && arg_is(&g, 1, "it's") && arg_is(&g, 2, "a\\nb") && arg_is(&g, 3, ""));
	CHECK_EQ(parse("X foo\"bar baz\" \"\"\n", &g), PASTE_RESP_CMD);   /* quote mid-word */
	CHECK(g.argc == 3 && arg_is(&g, 1, "foobar baz") && arg_is(&g, 2, ""));
	CHECK_EQ(parse("X \"a\"\t'b'\r\n", &g), PASTE_RESP_CMD);
	CHECK(g.argc == 3 && arg_is(&g, 1, "a") && arg_is(&g, 2, "b"));

	const char *bad[] = { "X \"abc\n", "X 'abc\r\n", "X \"a\"b\n", "X 'a'b\n", "X \"abc\\\"\n",
			      "X \"abc\\\n", "\"\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(parse(bad[i], &g), PASTE_RESP_E_QUOTES);

	/* Zero copy for plain words, the scratch area for quoted ones. */
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	const char *line = "SET plain \"q\\x21\"\r\n";
	paste_resp_parser_init(&ps, NULL);
	cmd_init(&cmd);
	CHECK_EQ(paste_resp_parse(&ps, line, strlen(line), &cmd), PASTE_RESP_CMD);
	CHECK(cmd.argv[1].p == line + 4 && cmd.argv[2].p == scratch && cmd.argv[2].len == 2);

	/* No scratch, or too little: refused. Exactly enough: fine. */
	cmd.scratch = NULL;
	CHECK_EQ(paste_resp_parse(&ps, line, strlen(line), &cmd), PASTE_RESP_E_SCRATCH);
	cmd.scratch = scratch;
	cmd.scratch_cap = 1;
	CHECK_EQ(paste_resp_parse(&ps, line, strlen(line), &cmd), PASTE_RESP_E_SCRATCH);
	cmd.scratch_cap = 2;
	CHECK_EQ(paste_resp_parse(&ps, line, strlen(line), &cmd), PASTE_RESP_CMD);
	cmd.scratch_cap = 0;
	CHECK_EQ(paste_resp_parse(&ps, "A B\n", 4, &cmd), PASTE_RESP_CMD);   /* not needed */
}

static void test_errors(void)
{
	struct got g;
	struct paste_resp_parser ps_crlf;
	const char *mbulk[] = { "*x\r\n", "*\r\n", "*1\rx", "*01\r\n", "*-0\r\n", "*+1\r\n",
				"* 1\r\n", "*1 \r\n", "*99999999999999999999\r\n", "*1\n" };
	for (size_t i = 0; i < sizeof(mbulk) / sizeof(mbulk[0]); i++)
		CHECK_EQ(parse(mbulk[i], &g), PASTE_RESP_E_MBULK_LEN);
	const char *bulk[] = { "*1\r\n$-1\r\n", "*1\r\n$x\r\n", "*1\r\n$\r\n", "*1\r\n$01\r\n",
			       "*1\r\n$3\rx", "*1\r\n$99999999999999999999\r\n" };
	for (size_t i = 0; i < sizeof(bulk) / sizeof(bulk[0]); i++)
		CHECK_EQ(parse(bulk[i], &g), PASTE_RESP_E_BULK_LEN);
	CHECK_EQ(parse("*1\r\n$3\r\nfoo\r\r", &g), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(parse("*1\r\n$3\r\nfooxx", &g), PASTE_RESP_E_BULK_CRLF);
	/* Both bytes of each CRLF are checked, the CR too: a bulk one byte
	 * shorter than its data whose next bytes end in an LF, an LF where
	 * the CR belongs, a bare LF after a bulk or a number line. Each with
	 * every split of the input, and streamed (the last bulk's CRLF then
	 * goes through paste_resp_stream_crlf). */
	static const struct { const char *in; int want; } crlf[] = {
		{ "*1\r\n$2\r\nfoo\n", PASTE_RESP_E_BULK_CRLF },
		{ "*1\r\n$3\r\nfoo\n\r", PASTE_RESP_E_BULK_CRLF },
		{ "*1\r\n$3\r\nfoo\n\n", PASTE_RESP_E_BULK_CRLF },
		{ "*2\r\n$2\r\nfoo\n$1\r\nx\r\n", PASTE_RESP_E_BULK_CRLF },
		{ "*2\r\n$3\r\nfoo\n\r$1\r\nx\r\n", PASTE_RESP_E_BULK_CRLF },
		{ "*1\r\n$3\nfoo\r\n", PASTE_RESP_E_BULK_LEN },
		{ "*1\r\n$3\n\nfoo\r\n", PASTE_RESP_E_BULK_LEN },
		{ "*1\r\n$3\r\rfoo\r\n", PASTE_RESP_E_BULK_LEN },
		{ "*2\n$3\r\nfoo\r\n", PASTE_RESP_E_MBULK_LEN },
		{ "*2\n\n$3\r\nfoo\r\n", PASTE_RESP_E_MBULK_LEN },
	};
	for (size_t i = 0; i < sizeof(crlf) / sizeof(crlf[0]); i++) {
		CHECK_EQ(parse(crlf[i].in, &g), crlf[i].want);
		check_splits(&nostream, crlf[i].in, strlen(crlf[i].in));
	}
	const struct paste_resp_config stream1 = { .stream_min = 1 };
	CHECK_EQ(parse_cfg(&stream1, "*1\r\n$2\r\nfoo\n", 13, &g), PASTE_RESP_STREAM);
	CHECK_EQ(g.used, 8);
	paste_resp_parser_init(&ps_crlf, &stream1);
	CHECK_EQ(paste_resp_stream_crlf(&ps_crlf, "o\n", 2), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(paste_resp_stream_crlf(&ps_crlf, "\n\r", 2), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(paste_resp_stream_crlf(&ps_crlf, "\r", 1), 0);
	CHECK_EQ(paste_resp_stream_crlf(&ps_crlf, "\r", 1), PASTE_RESP_E_BULK_CRLF);

	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	char out[128];
	paste_resp_parser_init(&ps, &nostream);
	cmd_init(&cmd);
	CHECK_EQ(paste_resp_parse(&ps, "*2\r\n$3\r\nfoo\r\n:1\r\n", 17, &cmd), PASTE_RESP_E_DOLLAR);
	int n = paste_resp_put_proto_error(out, sizeof(out), &ps, PASTE_RESP_E_DOLLAR);
	CHECK(n > 0 && !memcmp(out, "-ERR Protocol error: expected '$', got ':'\r\n", (size_t)n));
	CHECK_EQ(paste_resp_parse(&ps, "*1\r\n\n", 5, &cmd), PASTE_RESP_E_DOLLAR);
	n = paste_resp_put_proto_error(out, sizeof(out), &ps, PASTE_RESP_E_DOLLAR);
	CHECK(n > 0 && !memcmp(out, "-ERR Protocol error: expected '$', got '\\x0a'\r\n", (size_t)n));
	n = paste_resp_put_proto_error(out, sizeof(out), NULL, PASTE_RESP_E_MBULK_LEN);
	CHECK(n > 0 && !memcmp(out, "-ERR Protocol error: invalid multibulk length\r\n", (size_t)n));

	/* Redis's texts where Redis refuses the same input. */
	CHECK(!strcmp(paste_resp_strerror(PASTE_RESP_E_BULK_LEN), "Protocol error: invalid bulk length"));
	CHECK(!strcmp(paste_resp_strerror(PASTE_RESP_E_BULK_TOO_BIG), "Protocol error: invalid bulk length"));
	CHECK(!strcmp(paste_resp_strerror(PASTE_RESP_E_INLINE_TOO_BIG), "Protocol error: too big inline request"));
	CHECK(!strcmp(paste_resp_strerror(PASTE_RESP_E_QUOTES), "Protocol error: unbalanced quotes in request"));
	for (int e = PASTE_RESP_E_SCRATCH; e <= PASTE_RESP_E_MBULK_LEN; e++)
		CHECK(!strncmp(paste_resp_strerror(e), "Protocol error: ", 16));
	CHECK(!strcmp(paste_resp_strerror(0), "Unknown error"));
	CHECK(!strcmp(paste_resp_strerror(-11), "Unknown error"));
}

static void test_limits(void)
{
	struct got g;
	struct paste_resp_config c = { .max_args = 3, .max_bulk = 5, .max_inline = 10,
				       .max_command = 40, .stream_min = PASTE_RESP_NO_STREAM };
	CHECK_EQ(parse_cfg(&c, "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", 25, &g), PASTE_RESP_CMD);
	CHECK_EQ(parse_cfg(&c, "*4\r\n", 4, &g), PASTE_RESP_E_TOO_MANY_ARGS);
	CHECK_EQ(parse_cfg(&c, "a b c\n", 6, &g), PASTE_RESP_CMD);
	CHECK_EQ(parse_cfg(&c, "a b c d\n", 8, &g), PASTE_RESP_E_TOO_MANY_ARGS);
	CHECK_EQ(parse_cfg(&c, "*1\r\n$5\r\n", 8, &g), PASTE_RESP_MORE);
	CHECK_EQ(parse_cfg(&c, "*1\r\n$6\r\n", 8, &g), PASTE_RESP_E_BULK_TOO_BIG);
	/* max_inline counts the line with its LF. */
	CHECK_EQ(parse_cfg(&c, "123456789\n", 10, &g), PASTE_RESP_CMD);
	CHECK_EQ(parse_cfg(&c, "123456789", 9, &g), PASTE_RESP_MORE);
	CHECK_EQ(parse_cfg(&c, "1234567890", 10, &g), PASTE_RESP_E_INLINE_TOO_BIG);
	CHECK_EQ(parse_cfg(&c, "1234567890\n", 11, &g), PASTE_RESP_E_INLINE_TOO_BIG);
	/* max_command: 40 bytes exactly is fine; a bulk that cannot fit is
	 * refused at its "$L" line, a line crossing the limit when it does. */
	const char *fits = "*2\r\n$5\r\naaaaa\r\n$5\r\nbbbbb\r\n";        /* 26 */
	CHECK_EQ(parse_cfg(&c, fits, strlen(fits), &g), PASTE_RESP_CMD);
	c.max_bulk = 100;
	const char *forty = "*2\r\n$5\r\naaaaa\r\n$18\r\nbbbbbbbbbbbbbbbbbb\r\n";
	CHECK_EQ(strlen(forty), 40);
	CHECK_EQ(parse_cfg(&c, forty, 40, &g), PASTE_RESP_CMD);
	CHECK_EQ(parse_cfg(&c, "*2\r\n$5\r\naaaaa\r\n$19\r\n", 20, &g), PASTE_RESP_E_TOO_BIG);
	CHECK_EQ(parse_cfg(&c, "*2\r\n$5\r\naaaaa\r\n$18\r\n", 20, &g), PASTE_RESP_MORE);
	c.max_command = 18;
	CHECK_EQ(parse_cfg(&c, "*2\r\n$5\r\naaaaa\r\n$18", 18, &g), PASTE_RESP_E_TOO_BIG);
	CHECK_EQ(parse_cfg(&c, "*2\r\n$5\r\naaaaa\r\n$1", 17, &g), PASTE_RESP_MORE);

	/* The caller's argv capacity caps max_args. */
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, NULL);
	cmd_init(&cmd);
	cmd.argv_cap = 2;
	CHECK_EQ(paste_resp_parse(&ps, "*3\r\n", 4, &cmd), PASTE_RESP_E_TOO_MANY_ARGS);
	CHECK_EQ(paste_resp_parse(&ps, "a b c\n", 6, &cmd), PASTE_RESP_E_TOO_MANY_ARGS);
	CHECK_EQ(paste_resp_parse(&ps, "a b\n", 4, &cmd), PASTE_RESP_CMD);

	/* A zeroed parser has the defaults. */
	struct paste_resp_parser z;
	memset(&z, 0, sizeof(z));
	CHECK_EQ(paste_resp_parse(&z, "PING\r\n", 6, &cmd), PASTE_RESP_CMD);
	CHECK_EQ(z.cfg.max_inline, PASTE_RESP_DEFAULT_MAX_INLINE);
	CHECK_EQ(z.cfg.stream_min, PASTE_RESP_DEFAULT_STREAM_MIN);
}

static void test_incremental(void)
{
	static const char mset[] =
		"*12\r\n$4\r\nMSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nk2\r\n$2\r\nv2\r\n$2\r\nk3\r\n"
		"$2\r\nv3\r\n$2\r\nk4\r\n$2\r\nv4\r\n$2\r\nk5\r\n$2\r\nv5\r\n$1\r\nx\r\n";
	const char *in[] = {
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nhello\r\n",
		"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n", mset,
		"*0\r\n", "*-1\r\n", "PING\r\n", "PING\n", "\r\n", "  \r\n",
		"SET \"a \\x41\\\"\" 'b\\'c' d\r\n", "*2\r\n$3\r\nfoo\r\n:1\r\n", "*2\r\n$3\r\nfoo\r\r",
		"*1x", "*1\r\n$-3\r\n", "X \"unbalanced\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nGET",
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		check_splits(&nostream, in[i], strlen(in[i]));
	/* Limits under every split too. */
	struct paste_resp_config c = { .max_args = 2, .max_bulk = 4, .max_inline = 8,
				       .max_command = 24, .stream_min = PASTE_RESP_NO_STREAM };
	const char *lim[] = { "*3\r\n", "*2\r\n$5\r\n", "*2\r\n$4\r\nabcd\r\n$4\r\nefgh\r\n",
			      "a b c\n", "1234567\n", "12345678\n", "*2\r\n$4\r\nabcd\r\n$4\r\nef" };
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++)
		check_splits(&c, lim[i], strlen(lim[i]));

	/* Resuming does not rescan: the parser stands at the bulk's data. */
	static char big[3000];
	size_t h = (size_t)snprintf(big, sizeof(big), "*2\r\n$3\r\nGET\r\n$2000\r\n");
	memset(big + h, 'v', 2000);
	memcpy(big + h + 2000, "\r\n", 2);
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, &nostream);
	cmd_init(&cmd);
	CHECK_EQ(paste_resp_parse(&ps, big, h + 100, &cmd), PASTE_RESP_MORE);
	CHECK_EQ(ps.pos, h);
	CHECK_EQ(ps.argc, 1);
	CHECK_EQ(ps.bulk_len, 2000);
	CHECK_EQ(paste_resp_parse(&ps, big, h + 2002, &cmd), PASTE_RESP_CMD);
	CHECK(cmd.argc == 2 && cmd.argv[0].p == big + 8 && cmd.argv[1].p == big + h &&
	      cmd.argv[1].len == 2000);
	CHECK_EQ(cmd.used, h + 2002);

	/* Fewer bytes than last time (a broken contract): parsed afresh. */
	paste_resp_parser_init(&ps, &nostream);
	CHECK_EQ(paste_resp_parse(&ps, big, h + 100, &cmd), PASTE_RESP_MORE);
	CHECK_EQ(paste_resp_parse(&ps, big, 10, &cmd), PASTE_RESP_MORE);
	CHECK_EQ(paste_resp_parse(&ps, big, h + 2002, &cmd), PASTE_RESP_CMD);
	CHECK(cmd.argc == 2 && cmd.argv[1].len == 2000);
	/* Other bytes than last time: parsed afresh, no read out of bounds. */
	paste_resp_parser_init(&ps, &nostream);
	CHECK_EQ(paste_resp_parse(&ps, "*2\r\n$3\r\nGET\r\n$1\r\n", 17, &cmd), PASTE_RESP_MORE);
	CHECK_EQ(paste_resp_parse(&ps, "*2\r\n$9\r\nGET\r\n$1\r\nx\r\n", 20, &cmd), PASTE_RESP_E_BULK_CRLF);
}

static void test_pipelined(void)
{
	const char *in = "*1\r\n$4\r\nPING\r\nPING\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
			 "*0\r\nECHO \"x y\"\n*1\r\n$4\r\nQUIT\r\n*1\r\n$3\r\nG";
	const char *want[] = { "PING", "PING", "", "GET", "", "ECHO", "QUIT" };
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, NULL);
	cmd_init(&cmd);
	size_t at = 0, n = strlen(in), k = 0;
	int rc;
	while ((rc = paste_resp_parse(&ps, in + at, n - at, &cmd)) == PASTE_RESP_CMD) {
		CHECK(k < 7 && (cmd.argc ? paste_resp_arg_eq(&cmd.argv[0], want[k]) : !*want[k]));
		if (k == 5)
			CHECK(cmd.argc == 2 && cmd.argv[1].len == 3 && !memcmp(cmd.argv[1].p, "x y", 3));
		at += cmd.used;
		k++;
	}
	CHECK_EQ(k, 7);
	/* The last command's last bulk is not all in: it streams. */
	CHECK_EQ(rc, PASTE_RESP_STREAM);
	CHECK_EQ(n - at, 9);
	CHECK(cmd.argc == 1 && cmd.argv[0].p == NULL && cmd.argv[0].len == 3 && cmd.used == 8);
}

static void test_stream(void)
{
	static char buf[8192];
	struct paste_resp_parser ps;
	struct got one, g;
	size_t h = (size_t)snprintf(buf, sizeof(buf), "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5000\r\n");
	memset(buf + h, 'v', 5000);
	memcpy(buf + h + 5000, "\r\n", 2);
	size_t n = h + 5002;

	/* Big last bulk: the head as soon as its "$L" line is in, whatever
	 * follows and wherever the input was split. */
	CHECK_EQ(parse_cfg(NULL, buf, n, &one), PASTE_RESP_STREAM);
	CHECK(one.argc == 3 && one.used == h && arg_is(&one, 0, "SET") && arg_is(&one, 1, "key"));
	CHECK(one.null[2] && one.len[2] == 5000);
	bool ok = true;
	for (size_t k = 0; k <= n; k++) {
		ok &= (parse_cfg(NULL, buf, k, &g) == PASTE_RESP_MORE) == (k < h);
		parse_split(NULL, buf, k, n, &g);
		ok &= same(&one, &g);
	}
	CHECK(ok);

	/* Below stream_min: whole when it is all in, streamed when not. */
	struct paste_resp_config c = { .stream_min = 5001 };
	CHECK_EQ(parse_cfg(&c, buf, n, &g), PASTE_RESP_CMD);
	CHECK(g.argc == 3 && g.len[2] == 5000 && !g.null[2]);
	CHECK_EQ(parse_cfg(&c, buf, n - 1, &g), PASTE_RESP_STREAM);   /* the LF missing */
	CHECK(g.used == h && g.null[2]);
	CHECK_EQ(parse_cfg(&c, buf, h, &g), PASTE_RESP_STREAM);
	CHECK_EQ(parse_cfg(&c, buf, h - 1, &g), PASTE_RESP_MORE);
	/* The limit on a contiguous command does not apply to the streamed
	 * data, only to the head. */
	c.max_command = (uint32_t)h + 10;
	CHECK_EQ(parse_cfg(&c, buf, n, &g), PASTE_RESP_STREAM);
	c.max_command = (uint32_t)h;
	CHECK_EQ(parse_cfg(&c, buf, n, &g), PASTE_RESP_STREAM);
	c.max_command = (uint32_t)h - 1;
	CHECK_EQ(parse_cfg(&c, buf, n, &g), PASTE_RESP_E_TOO_BIG);
	/* Over max_bulk: refused, streamed or not. */
	c.max_command = 0;
	c.max_bulk = 4999;
	CHECK_EQ(parse_cfg(&c, buf, n, &g), PASTE_RESP_E_BULK_TOO_BIG);

	/* A big bulk that is not the last argument: whole or nothing. */
	h = (size_t)snprintf(buf, sizeof(buf), "*5\r\n$4\r\nMSET\r\n$2\r\nk1\r\n$5000\r\n");
	memset(buf + h, 'v', 5000);
	n = h + 5000;
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n$2\r\nk2\r\n$2\r\nv2\r\n");
	CHECK_EQ(parse_cfg(NULL, buf, n - 1, &g), PASTE_RESP_STREAM);   /* the last is small */
	CHECK_EQ(parse_cfg(NULL, buf, n - 4, &g), PASTE_RESP_STREAM);
	CHECK_EQ(parse_cfg(NULL, buf, h + 10, &g), PASTE_RESP_MORE);
	CHECK_EQ(parse_cfg(NULL, buf, n, &g), PASTE_RESP_CMD);
	CHECK(g.argc == 5 && g.len[2] == 5000 && arg_is(&g, 4, "v2"));
	c = (struct paste_resp_config){ .max_command = 4096 };
	CHECK_EQ(parse_cfg(&c, buf, h, &g), PASTE_RESP_E_TOO_BIG);   /* known at "$5000" */
	CHECK_EQ(parse_cfg(&nostream, buf, n, &g), PASTE_RESP_CMD);
	CHECK_EQ(parse_cfg(&nostream, buf, n - 1, &g), PASTE_RESP_MORE);

	/* The CRLF after streamed data, whole or split. */
	paste_resp_parser_init(&ps, NULL);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\r\n*1", 4), 2);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "", 0), 0);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\r", 1), 0);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "", 0), 0);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\nX", 2), 1);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "x\n", 2), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\rx", 2), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\n", 1), PASTE_RESP_E_BULK_CRLF);
	CHECK_EQ(paste_resp_stream_crlf(&ps, "\r\n", 2), 2);
}

#define PUT(expr, want) do { \
	memset(out, '#', sizeof(out)); \
	int n_ = (expr); \
	CHECK_EQ(n_, (int)(sizeof(want) - 1)); \
	CHECK(n_ > 0 && !memcmp(out, want, sizeof(want) - 1) && out[n_] == '#'); \
} while (0)

/* Numbers at every digit count, where the parser's short path (1 to 4
 * digits) ends and the full one begins: lengths and counts read right,
 * each also with every split; the invalid ones refused either way. */
static void test_numbers(void)
{
	static const uint32_t lens[] = { 0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 1023, 1024,
					 9998, 9999, 10000, 10001, 65536 };
	static char cmd[70000];
	static struct got g;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		int h = snprintf(cmd, sizeof(cmd), "*2\r\n$3\r\nSET\r\n$%u\r\n", lens[i]);
		memset(cmd + h, 'v', lens[i]);
		memcpy(cmd + h + lens[i], "\r\n", 2);
		size_t n = (size_t)h + lens[i] + 2;
		CHECK_EQ(parse_cfg(&nostream, cmd, n, &g), PASTE_RESP_CMD);
		CHECK(g.argc == 2 && g.len[1] == lens[i] && g.used == n);
		if (lens[i] <= 1024)
			check_splits(&nostream, cmd, n);
	}
	for (uint32_t k = 1; k <= MAXA; k = k < 9 ? k + 1 : k + 7) {
		size_t n = (size_t)snprintf(cmd, sizeof(cmd), "*%u\r\n", k);
		for (uint32_t i = 0; i < k; i++)
			n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "$1\r\nx\r\n");
		CHECK_EQ(parse_cfg(&nostream, cmd, n, &g), PASTE_RESP_CMD);
		CHECK_EQ(g.argc, k);
		check_splits(&nostream, cmd, n);
	}
	static const char *const bad[] = { "*1\r\n$00\r\n", "*1\r\n$-0\r\n", "*1\r\n$0123\r\n",
					   "*1\r\n$12a\r\n", "*1\r\n$1234\n\r\n", "*1\r\n$1234\rx\n",
					   "*1\r\n$12345\rx" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(parse(bad[i], &g), PASTE_RESP_E_BULK_LEN);
		check_splits(&nostream, bad[i], strlen(bad[i]));
	}
	CHECK_EQ(parse("*1\r\n$1234\r", &g), PASTE_RESP_MORE);
	CHECK_EQ(parse("*1\r\n$12345", &g), PASTE_RESP_MORE);
	CHECK_EQ(parse("*0012\r\n", &g), PASTE_RESP_E_MBULK_LEN);

	/* The writers' digits, at each power of ten and beside it. */
	char out[32], want[32];
	for (uint64_t p = 1; p; p = p <= UINT64_MAX / 10 ? p * 10 : 0)
		for (int d = -1; d <= 1; d++) {
			int64_t v = (int64_t)(p + (uint64_t)d);
			if (p + (uint64_t)d > (uint64_t)INT64_MAX)
				continue;
			for (int sign = 1; sign >= -1; sign -= 2) {
				int w = snprintf(want, sizeof(want), ":%lld\r\n", (long long)(sign * v));
				CHECK_EQ(paste_resp_put_int(out, sizeof(out), sign * v), w);
				CHECK(!memcmp(out, want, (size_t)w));
				w = snprintf(want, sizeof(want), "%lld", (long long)(sign * v));
				CHECK_EQ(paste_resp_put_i64_text(out, sizeof(out), sign * v), w);
				CHECK(!memcmp(out, want, (size_t)w));
				CHECK_EQ(paste_resp_put_i64_text(out, (size_t)w - 1, sign * v), -ENOBUFS);
				w = snprintf(want, sizeof(want), "$%llu\r\n", (unsigned long long)v);
				CHECK_EQ(paste_resp_put_bulk_head(out, sizeof(out), (uint64_t)v), w);
				CHECK(!memcmp(out, want, (size_t)w));
			}
		}
	CHECK_EQ(paste_resp_put_bulk_head(out, sizeof(out), UINT64_MAX), 23);
	CHECK(!memcmp(out, "$18446744073709551615\r\n", 23));
	CHECK_EQ(paste_resp_put_bulk_head(out, 6, 1024), -ENOBUFS);
	CHECK_EQ(paste_resp_put_i64_text(out, sizeof(out), INT64_MIN), 20);
	CHECK(!memcmp(out, "-9223372036854775808", 20));
}

static void test_writers(void)
{
	char out[64];
	size_t cap = sizeof(out);
	PUT(paste_resp_put_simple(out, cap, "OK"), "+OK\r\n");
	PUT(paste_resp_put_simple(out, cap, "a\r\nb"), "+a  b\r\n");
	PUT(paste_resp_put_error(out, cap, "ERR unknown command 'x\n'"), "-ERR unknown command 'x '\r\n");
	PUT(paste_resp_put_int(out, cap, 0), ":0\r\n");
	PUT(paste_resp_put_int(out, cap, -42), ":-42\r\n");
	PUT(paste_resp_put_int(out, cap, INT64_MIN), ":-9223372036854775808\r\n");
	PUT(paste_resp_put_int(out, cap, INT64_MAX), ":9223372036854775807\r\n");
	PUT(paste_resp_put_bulk_head(out, cap, 1048576), "$1048576\r\n");
	PUT(paste_resp_put_bulk(out, cap, "hello", 5), "$5\r\nhello\r\n");
	PUT(paste_resp_put_bulk(out, cap, NULL, 0), "$0\r\n\r\n");
	PUT(paste_resp_put_array(out, cap, 3), "*3\r\n");
	PUT(paste_resp_put_null(out, cap, 2), "$-1\r\n");
	PUT(paste_resp_put_null(out, cap, 3), "_\r\n");
	PUT(paste_resp_put_null_array(out, cap, 2), "*-1\r\n");
	PUT(paste_resp_put_null_array(out, cap, 3), "_\r\n");
	PUT(paste_resp_put_map(out, cap, 3, 2), "%2\r\n");
	PUT(paste_resp_put_map(out, cap, 2, 2), "*4\r\n");
	PUT(paste_resp_put_set(out, cap, 3, 7), "~7\r\n");
	PUT(paste_resp_put_set(out, cap, 2, 7), "*7\r\n");
	PUT(paste_resp_put_push(out, cap, 3, 3), ">3\r\n");
	PUT(paste_resp_put_push(out, cap, 2, 3), "*3\r\n");
	PUT(paste_resp_put_double(out, cap, 3, 1.5), ",1.5\r\n");
	PUT(paste_resp_put_double(out, cap, 3, 0.1), ",0.1\r\n");
	PUT(paste_resp_put_double(out, cap, 3, -3.0), ",-3\r\n");
	PUT(paste_resp_put_double_text(out, cap, 3, "1e+17", 5), ",1e+17\r\n");
	PUT(paste_resp_put_double_text(out, cap, 2, "1e+17", 5), "$5\r\n1e+17\r\n");
	CHECK_EQ(paste_resp_put_double_text(out, 7, 3, "1e+17", 5), -ENOBUFS);
	PUT(paste_resp_put_double(out, cap, 3, 1e300), ",1e+300\r\n");
	PUT(paste_resp_put_double(out, cap, 3, INFINITY), ",inf\r\n");
	PUT(paste_resp_put_double(out, cap, 3, -INFINITY), ",-inf\r\n");
	PUT(paste_resp_put_double(out, cap, 3, NAN), ",nan\r\n");
	PUT(paste_resp_put_double(out, cap, 2, 1.5), "$3\r\n1.5\r\n");
	PUT(paste_resp_put_double(out, cap, 3, 0.30000000000000004), ",0.30000000000000004\r\n");
	PUT(paste_resp_put_bool(out, cap, 3, true), "#t\r\n");
	PUT(paste_resp_put_bool(out, cap, 3, false), "#f\r\n");
	PUT(paste_resp_put_bool(out, cap, 2, true), ":1\r\n");
	PUT(paste_resp_put_verbatim(out, cap, 3, "txt", "hello", 5), "=9\r\ntxt:hello\r\n");
	PUT(paste_resp_put_verbatim(out, cap, 2, "txt", "hello", 5), "$5\r\nhello\r\n");
	CHECK_EQ(paste_resp_put_verbatim(out, cap, 3, "text", "x", 1), -EINVAL);
	PUT(paste_resp_put_proto_error(out, cap, NULL, PASTE_RESP_E_QUOTES),
	    "-ERR Protocol error: unbalanced quotes in request\r\n");

	/* Exactly enough room, and one byte less: -ENOBUFS, nothing written. */
	CHECK_EQ(paste_resp_put_bulk(out, 11, "hello", 5), 11);
	memset(out, '#', sizeof(out));
	CHECK_EQ(paste_resp_put_bulk(out, 10, "hello", 5), -ENOBUFS);
	CHECK_EQ(paste_resp_put_simple(out, 4, "OK"), -ENOBUFS);
	CHECK_EQ(paste_resp_put_int(out, 3, 10), -ENOBUFS);
	CHECK_EQ(paste_resp_put_null(out, 2, 3), -ENOBUFS);
	CHECK_EQ(paste_resp_put_double(out, 5, 3, 1.5), -ENOBUFS);
	CHECK_EQ(paste_resp_put_double(out, 8, 2, 1.5), -ENOBUFS);
	CHECK_EQ(paste_resp_put_bool(out, 3, 3, true), -ENOBUFS);
	CHECK_EQ(paste_resp_put_verbatim(out, 14, 3, "txt", "hello", 5), -ENOBUFS);
	CHECK_EQ(paste_resp_put_array(out, 0, 1), -ENOBUFS);
	CHECK_EQ(paste_resp_put_proto_error(out, 10, NULL, PASTE_RESP_E_BULK_LEN), -ENOBUFS);
	bool untouched = true;
	for (size_t i = 0; i < sizeof(out); i++)
		untouched &= out[i] == '#';
	CHECK(untouched);
	CHECK_EQ(paste_resp_put_bulk(out, cap, "x", (size_t)INT32_MAX), -EOVERFLOW);
}

static void test_helpers(void)
{
	struct paste_resp_arg a = { "sEt", 3 }, none = { NULL, 0 };
	CHECK(paste_resp_arg_eq(&a, "SET"));
	CHECK(paste_resp_arg_eq(&a, "set"));
	CHECK(!paste_resp_arg_eq(&a, "SETX"));
	CHECK(!paste_resp_arg_eq(&a, "SE"));
	CHECK(!paste_resp_arg_eq(&none, ""));
	struct paste_resp_arg nul = { "S\0T", 3 };
	CHECK(!paste_resp_arg_eq(&nul, "S"));
	static const char *const names[] = { "GET", "SET", "DEL", "set" };
	CHECK_EQ(paste_resp_lookup(&a, names, 4), 1);
	struct paste_resp_arg ping = { "PING", 4 };
	CHECK_EQ(paste_resp_lookup(&ping, names, 4), -1);

	struct { const char *s; int rc; int64_t v; } num[] = {
		{ "0", 0, 0 }, { "42", 0, 42 }, { "-7", 0, -7 },
		{ "9223372036854775807", 0, INT64_MAX }, { "-9223372036854775808", 0, INT64_MIN },
		{ "9223372036854775808", -ERANGE, 0 }, { "-9223372036854775809", -ERANGE, 0 },
		{ "", -EINVAL, 0 }, { "-", -EINVAL, 0 }, { "-0", -EINVAL, 0 }, { "01", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 }, { " 1", -EINVAL, 0 }, { "1 ", -EINVAL, 0 }, { "1x", -EINVAL, 0 },
		{ "123456789012345678901", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
		struct paste_resp_arg x = { num[i].s, strlen(num[i].s) };
		int64_t v = 12345;
		int rc = paste_resp_arg_i64(&x, &v);
		CHECK_EQ(rc, num[i].rc);
		CHECK(rc || v == num[i].v);
	}
}

/* peek on an exact-size copy: true and the key's offset and length, or
 * false. */
static bool peek(const char *s, size_t len, size_t *off, size_t *klen)
{
	char *c = copy_of(s, len);
	const char *key;
	bool ok = paste_resp_peek_key(c, len, &key, klen);
	if (ok)
		*off = (size_t)(key - c);
	free(c);
	return ok;
}

/* paste_resp_peek_key: the key of a command whose first two arguments are
 * in, nothing otherwise; and on every prefix of a pipeline, whatever it
 * says agrees with what the parser then finds. */
static void test_peek(void)
{
	size_t off = 0, klen = 0;
	const char *get = "*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n";
	CHECK(peek(get, strlen(get), &off, &klen));
	CHECK(off == 17 && klen == 5);
	/* The key is all in, its CRLF not yet: still a guess worth making. */
	CHECK(peek(get, strlen(get) - 2, &off, &klen) && off == 17 && klen == 5);
	CHECK(!peek(get, strlen(get) - 3, &off, &klen));   /* the key is not all in */
	CHECK(!peek(get, 16, &off, &klen));                /* "$5\r" */
	/* A SET whose value is still arriving has its key. */
	const char *set = "*3\r\n$3\r\nSET\r\n$3\r\nabc\r\n$1024\r\nxx";
	CHECK(peek(set, strlen(set), &off, &klen) && off == 17 && klen == 3);
	/* An empty key is a key; a one-argument command has none. */
	CHECK(peek("*2\r\n$3\r\nGET\r\n$0\r\n\r\n", 19, &off, &klen) && off == 17 && klen == 0);
	CHECK(!peek("*1\r\n$4\r\nPING\r\n", 14, &off, &klen));
	CHECK(!peek("*0\r\n", 4, &off, &klen));
	CHECK(!peek("*-1\r\n", 5, &off, &klen));
	CHECK(!peek("", 0, &off, &klen));
	/* Inline commands and bad framing: no guess. */
	CHECK(!peek("GET key\r\n", 9, &off, &klen));
	CHECK(!peek("*2\r\n+3\r\nGET\r\n$1\r\nk\r\n", 20, &off, &klen));
	CHECK(!peek("*2\r\n$3\r\nGET\r\n:1\r\nk\r\n", 20, &off, &klen));
	CHECK(!peek("*2\n$3\r\nGET\r\n$1\r\nk\r\n", 19, &off, &klen));
	CHECK(!peek("*2\r\n$-1\r\n$1\r\nk\r\n", 16, &off, &klen));
	CHECK(!peek("*2\r\n$\r\nGET\r\n$1\r\nk\r\n", 19, &off, &klen));
	/* A length past what is in, and one too long to be a number we read. */
	CHECK(!peek("*2\r\n$3\r\nGET\r\n$9\r\nabc\r\n", 22, &off, &klen));
	CHECK(!peek("*2\r\n$3\r\nGET\r\n$9999999999999999999999\r\nk", 40, &off, &klen));

	/* Every prefix of a pipeline of generated commands: a guess names
	 * exactly the parser's argv[1] whenever the parser completes the
	 * command, and the whole command always gets its guess. */
	char in[4096];
	size_t n = 0, cmds = 0;
	uint64_t x = 88172645463325252ull;
	while (n < sizeof(in) - 200) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned argc = 1 + (unsigned)(x % 4), klen_w = (unsigned)(x >> 8) % 40;
		n += (size_t)sprintf(in + n, "*%u\r\n$3\r\nGET\r\n", argc);
		for (unsigned i = 1; i < argc; i++) {
			unsigned l = i == 1 ? klen_w : (unsigned)(x >> (12 + i)) % 20;
			n += (size_t)sprintf(in + n, "$%u\r\n", l);
			for (unsigned j = 0; j < l; j++)
				in[n++] = (char)('a' + (x >> j) % 26);
			in[n++] = '\r';
			in[n++] = '\n';
		}
		cmds++;
	}
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd;
	paste_resp_parser_init(&ps, NULL);
	cmd_init(&cmd);
	size_t at = 0, agreed = 0;
	for (size_t k = 0; k < cmds; k++) {
		int rc = paste_resp_parse(&ps, in + at, n - at, &cmd);
		CHECK_EQ(rc, PASTE_RESP_CMD);
		for (size_t len = 0; len <= cmd.used; len++) {
			bool g = peek(in + at, len, &off, &klen);
			if (g && cmd.argc >= 2)
				CHECK(in + at + off == cmd.argv[1].p && klen == cmd.argv[1].len);
			if (g)
				CHECK(cmd.argc >= 2);
			if (len == cmd.used && cmd.argc >= 2) {
				CHECK(g);
				agreed++;
			}
		}
		at += cmd.used;
	}
	CHECK_EQ(at, n);
	CHECK(agreed > cmds / 2);
}

int main(void)
{
	test_multibulk();
	test_inline();
	test_quotes();
	test_errors();
	test_limits();
	test_incremental();
	test_pipelined();
	test_peek();
	test_stream();
	test_numbers();
	test_writers();
	test_helpers();
	return check_done();
}
