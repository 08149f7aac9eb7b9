/* fuzz_resp.c - libFuzzer target for the RESP request parser.
 *
 * The input is what a client sent on one connection. A driver reads it
 * the way a server does: parse, run each command, collect a streamed last
 * argument (PASTE_RESP_STREAM) from the bytes that follow and check its
 * CRLF with paste_resp_stream_crlf, until an error or the end. It runs
 * three times: the input in one piece, in three hash-chosen chunks, and
 * one byte per call. All three must see the same commands (same
 * arguments, same bytes, same end offsets; a streamed argument counts as
 * the bytes collected for it) and end the same way (the same error, or
 * waiting for more). Every pointer must lie in the bytes handed over or
 * in the scratch area; the one-shot and chunked runs parse exact-size
 * copies so ASan sees any read past them. Inline commands are also split
 * by a plain reference of sdssplitargs's rules and compared. The look
 * ahead (paste_resp_peek_key) must name the parser's second argument
 * whenever the parser found one in the same bytes. Limits are
 * the defaults, then small hash-chosen ones so every limit is reachable
 * by short inputs. Seeds: fuzz/corpus/resp/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paste.h"

#define ARGV_CAP 1024
#define END_MORE 1000   /* the input ended with a command incomplete */

static struct paste_resp_arg argv_buf[ARGV_CAP];

static void fail(const char *why, size_t at)
{
	fprintf(stderr, "fuzz_resp: %s (command at offset %zu)\n", why, at);
	abort();
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* What a run saw: a hash over every command and how the run ended. */
struct trace {
	uint64_t h;
	uint32_t ncmds;
	int end;              /* PASTE_RESP_E_* or END_MORE */
};

static void *dup_exact(const uint8_t *p, size_t n)
{
	void *c = malloc(n ? n : 1);
	if (!c)
		abort();
	memcpy(c, p, n);
	return c;
}

static bool is_blank(uint8_t c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* sdssplitargs, char by char as Redis writes it, into out (words as
 * len-prefixed bytes). Returns the word count, or -1 (unbalanced). */
static int ref_split(const uint8_t *s, size_t n, uint8_t *out, size_t *outlen)
{
	size_t i = 0, o = 0;
	int argc = 0;
	for (;;) {
		while (i < n && is_blank(s[i]))
			i++;
		if (i == n)
			break;
		size_t lenpos = o;
		o += sizeof(size_t);
		int inq = 0, insq = 0, done = 0;
		while (!done) {
			int c = i < n ? s[i] : -1;   /* -1: the line end */
			if (inq) {
				if (c == '\\' && i + 3 < n && s[i + 1] == 'x' &&
				    strchr("0123456789abcdefABCDEF", s[i + 2]) && s[i + 2] &&
				    strchr("0123456789abcdefABCDEF", s[i + 3]) && s[i + 3]) {
					char hex[3] = { (char)s[i + 2], (char)s[i + 3], 0 };
					out[o++] = (uint8_t)strtol(hex, NULL, 16);
					i += 3;
				} else if (c == '\\' && i + 1 < n) {
					i++;
					switch (s[i]) {
					case 'n': out[o++] = '\n'; break;
					case 'r': out[o++] = '\r'; break;
					case 't': out[o++] = '\t'; break;
					case 'b': out[o++] = '\b'; break;
					case 'a': out[o++] = '\a'; break;
					default: out[o++] = s[i]; break;
					}
				} else if (c == '"') {
					if (i + 1 < n && !is_blank(s[i + 1]))
						return -1;
					done = 1;
				} else if (c < 0) {
					return -1;
				} else {
					out[o++] = (uint8_t)c;
				}
			} else if (insq) {
				if (c == '\\' && i + 1 < n && s[i + 1] == '\'') {
					i++;
					out[o++] = '\'';
				} else if (c == '\'') {
					if (i + 1 < n && !is_blank(s[i + 1]))
						return -1;
					done = 1;
				} else if (c < 0) {
					return -1;
				} else {
					out[o++] = (uint8_t)c;
				}
			} else {
				switch (c) {
				case ' ': case '\n': case '\r': case '\t': case -1:
					done = 1;
					break;
				case '"': inq = 1; break;
				case '\'': insq = 1; break;
				default: out[o++] = (uint8_t)c; break;
				}
			}
			if (i < n)
				i++;
		}
		size_t wl = o - lenpos - sizeof(size_t);
		memcpy(out + lenpos, &wl, sizeof(wl));
		argc++;
	}
	*outlen = o;
	return argc;
}

struct setup {
	struct paste_resp_config cfg;
	uint32_t argv_cap;
	uint32_t scratch_cap;
};

/* Check one CMD/STREAM result of a parse of in[0..len) (a copy at base)
 * against the limits, and against the reference for inline commands. */
static void check_cmd(const struct setup *su, const struct paste_resp_parser *ps, int rc,
		      const struct paste_resp_cmd *cmd, const char *base, size_t len, size_t at)
{
	const struct paste_resp_config *c = &ps->cfg;
	if (cmd->used == 0 || cmd->used > len)
		fail("used out of range", at);
	if (cmd->argc > c->max_args || cmd->argc > su->argv_cap)
		fail("too many arguments returned", at);
	if (cmd->is_inline) {
		if (rc != PASTE_RESP_CMD || cmd->used > c->max_inline || base[cmd->used - 1] != '\n')
			fail("bad inline result", at);
	} else if (cmd->used > c->max_command) {
		fail("multibulk command over max_command", at);
	}
	for (uint32_t i = 0; i < cmd->argc; i++) {
		const struct paste_resp_arg *a = &cmd->argv[i];
		if (!a->p) {
			if (rc != PASTE_RESP_STREAM || i + 1 != cmd->argc)
				fail("NULL argument outside a stream", at);
		} else if (!(a->p >= base && a->p + a->len <= base + cmd->used) &&
			   !(a->p >= cmd->scratch && a->p + a->len <= cmd->scratch + cmd->scratch_cap)) {
			fail("argument outside the input and the scratch area", at);
		}
		if (!cmd->is_inline && a->len > c->max_bulk)
			fail("bulk over max_bulk", at);
	}
	if (cmd->is_inline) {
		size_t n = cmd->used - 1, olen = 0;
		if (n && base[n - 1] == '\r')
			n--;
		uint8_t *ref = malloc(2 * n + 16 * (n + 1) + 1);
		if (!ref)
			abort();
		int argc = ref_split((const uint8_t *)base, n, ref, &olen);
		if (argc != (int)cmd->argc)
			fail("inline split differs from the reference", at);
		size_t o = 0;
		for (uint32_t i = 0; i < cmd->argc; i++) {
			size_t wl;
			memcpy(&wl, ref + o, sizeof(wl));
			o += sizeof(wl);
			if (wl != cmd->argv[i].len || (wl && memcmp(ref + o, cmd->argv[i].p, wl)))
				fail("inline word differs from the reference", at);
			o += wl;
		}
		free(ref);
	}
}

/* paste_resp_peek_key on the bytes the parser just read a command from:
 * when the parser found a second argument in them, the peek names it;
 * when the peek names one, it is the parser's. */
static void check_peek(int rc, const struct paste_resp_cmd *cmd, const char *p, size_t len,
		       size_t at)
{
	const char *key = NULL;
	size_t klen = 0;
	bool g = paste_resp_peek_key(p, len, &key, &klen);
	bool has = !cmd->is_inline && cmd->argc >= 2 && cmd->argv[1].p &&
		   (rc == PASTE_RESP_CMD || rc == PASTE_RESP_STREAM);
	if (has && !g)
		fail("peek missed a command's key", at);
	if (g && has && (key != cmd->argv[1].p || klen != cmd->argv[1].len))
		fail("peek names another key than the parser", at);
	if (g && (key < p || klen > len || key + klen > p + len))
		fail("peek points outside the bytes", at);
}

/* Read the input delivered in chunks ending at cuts[0..ncuts) (the last is
 * its length); copy: parse exact-size copies, else the input in place. */
static struct trace drive(const struct setup *su, const uint8_t *in,
			  const size_t *cuts, int ncuts, bool copy)
{
	struct paste_resp_parser ps;
	struct paste_resp_cmd cmd = { argv_buf, su->argv_cap, NULL, su->scratch_cap, 0, 0, false };
	struct trace t = { 14695981039346656037ull, 0, END_MORE };
	size_t at = 0, avail = 0;
	int chunk = 0;
	char *scratch = malloc(su->scratch_cap ? su->scratch_cap : 1);
	if (!scratch)
		abort();
	cmd.scratch = scratch;
	paste_resp_parser_init(&ps, &su->cfg);

	for (;;) {
		if (avail == at || chunk == 0) {
			if (chunk == ncuts)
				break;
			avail = cuts[chunk++];
			continue;
		}
		size_t len = avail - at;
		const char *p = copy ? dup_exact(in + at, len) : (const char *)in + at;
		int rc = paste_resp_parse(&ps, p, len, &cmd);
		if (rc == PASTE_RESP_MORE) {
			if (ps.pos > len)
				fail("parser position beyond the bytes given", at);
			if (copy)
				free((void *)p);
			if (chunk == ncuts)
				break;
			avail = cuts[chunk++];
			continue;
		}
		if (rc < 0) {
			char out[128];
			if (!strcmp(paste_resp_strerror(rc), "Unknown error") ||
			    paste_resp_put_proto_error(out, sizeof(out), &ps, rc) <= 0)
				fail("error without a message", at);
			t.end = rc;
			if (copy)
				free((void *)p);
			break;
		}
		check_cmd(su, &ps, rc, &cmd, p, len, at);
		check_peek(rc, &cmd, p, len, at);
		/* The command's hash joins the trace only once it is whole. */
		uint64_t ch = fnv(t.h, &cmd.argc, sizeof(cmd.argc));
		ch = fnv(ch, &cmd.is_inline, sizeof(cmd.is_inline));
		for (uint32_t i = 0; i + (rc == PASTE_RESP_STREAM) < cmd.argc; i++) {
			ch = fnv(ch, &cmd.argv[i].len, sizeof(size_t));
			ch = fnv(ch, cmd.argv[i].p, cmd.argv[i].len);
		}
		at += cmd.used;
		if (copy)
			free((void *)p);
		if (rc == PASTE_RESP_STREAM) {
			/* Collect the last argument, then its CRLF. */
			size_t blen = cmd.argv[cmd.argc - 1].len;
			while (avail - at < blen && chunk < ncuts)
				avail = cuts[chunk++];
			if (avail - at < blen)
				break;                       /* ends waiting for data */
			ch = fnv(ch, &blen, sizeof(blen));
			ch = fnv(ch, in + at, blen);
			at += blen;
			int r;
			for (;;) {
				r = paste_resp_stream_crlf(&ps, (const char *)in + at, avail - at);
				if (r != 0)
					break;
				at = avail;                  /* the CR (if any) was taken */
				if (chunk == ncuts)
					break;
				avail = cuts[chunk++];
			}
			if (r == 0)
				break;
			if (r < 0) {
				t.end = r;
				break;
			}
			at += (size_t)r;
		}
		t.h = fnv(ch, &at, sizeof(at));
		t.ncmds++;
	}
	free(scratch);
	return t;
}

static void run(const struct setup *su, const uint8_t *in, size_t n, uint64_t h)
{
	size_t whole[1] = { n };
	struct trace one = drive(su, in, whole, 1, true);

	size_t c1 = (size_t)(h % (n + 1));
	size_t c2 = c1 + (size_t)((h >> 20) % (n - c1 + 1));
	size_t cuts[3] = { c1, c2, n };
	struct trace chunked = drive(su, in, cuts, 3, true);
	if (one.h != chunked.h || one.ncmds != chunked.ncmds || one.end != chunked.end)
		fail("chunked reading differs from one-shot", 0);

	size_t *bytes = malloc((n ? n : 1) * sizeof(size_t));
	if (!bytes)
		abort();
	for (size_t i = 0; i < n; i++)
		bytes[i] = i + 1;
	struct trace bytewise = drive(su, in, bytes, (int)n, false);
	free(bytes);
	if (one.h != bytewise.h || one.ncmds != bytewise.ncmds || one.end != bytewise.end) {
		fprintf(stderr, "one: %u cmds end %d; bytewise: %u cmds end %d\n",
			one.ncmds, one.end, bytewise.ncmds, bytewise.end);
		fail("byte-at-a-time reading differs from one-shot", 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 16)
		return 0;
	uint64_t h = fnv(14695981039346656037ull, data, size);
	struct setup def = { .argv_cap = ARGV_CAP, .scratch_cap = PASTE_RESP_DEFAULT_MAX_INLINE };
	run(&def, data, size, h);

	struct setup small = {
		.cfg = {
			.max_args = 1 + (uint32_t)(h >> 8) % 8,
			.max_inline = 4 + (uint32_t)(h >> 12) % 60,
			.max_command = 8 + (uint32_t)(h >> 18) % 120,
			.max_bulk = (h >> 26) % 64,
			.stream_min = (h >> 32) % 3 == 0 ? PASTE_RESP_NO_STREAM : 1 + (h >> 34) % 16,
		},
		.argv_cap = 1 + (uint32_t)(h >> 40) % 8,
		.scratch_cap = (uint32_t)(h >> 44) % 48,
	};
	run(&small, data, size, h * 31 + 7);
	return 0;
}
