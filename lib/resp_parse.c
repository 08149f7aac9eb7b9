/* resp_parse.c - Redis protocol request parser: zero copy, incremental, bounded.
 *
 * The server calls paste_resp_parse on everything a connection has received
 * since its previous command. The first byte picks the form, as in Redis:
 *
 *  - '*': multibulk, "*N\r\n" then N times "$L\r\n<L bytes>\r\n". The parser
 *    remembers where it stopped (the start of a "*N"/"$L" line, or the
 *    start of a bulk's data with its length), so bulk data is never looked
 *    at and a line is looked at again only while it is incomplete (<= 22
 *    bytes). Arguments found by earlier calls are not kept (their pointers
 *    may be stale: the caller may have moved the bytes), so the argv array
 *    can be shared by every connection of a thread; when the command
 *    completes they are found again from their "$L" lines, O(argc) once.
 *    Every decision depends only on the bytes before the point where it is
 *    made, so any split of the input gives the one-shot answer; the one
 *    exception is by design: a last bulk that is not all in streams
 *    (PASTE_RESP_STREAM), so where it streams depends on the split.
 *
 *  - anything else: inline, one line split like sdssplitargs (quotes and
 *    escapes; NUL is an ordinary byte here). The search for the LF resumes
 *    where the previous call's stopped.
 *
 * Stricter than Redis in one place: the two bytes after bulk data, and the
 * end of a "*N"/"$L" line, must be CRLF (Redis skips two bytes unread).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include "paste.h"
#include "hex_internal.h"

enum { ST_IDLE = 0, ST_INLINE, ST_LINE, ST_DATA };

/* The longest "*N\r\n" / "$L\r\n" line: a sign, 19 digits, CRLF. */
#define MAX_NUMBER_LINE 23u

void paste_resp_parser_init(struct paste_resp_parser *ps, const struct paste_resp_config *cfg)
{
	memset(ps, 0, sizeof(*ps));
	if (cfg)
		ps->cfg = *cfg;
	struct paste_resp_config *c = &ps->cfg;
	if (!c->max_args)
		c->max_args = PASTE_RESP_DEFAULT_MAX_ARGS;
	if (!c->max_inline)
		c->max_inline = PASTE_RESP_DEFAULT_MAX_INLINE;
	if (!c->max_command)
		c->max_command = PASTE_RESP_DEFAULT_MAX_COMMAND;
	if (c->max_command > INT_MAX)
		c->max_command = INT_MAX;
	if (c->max_inline > INT_MAX)
		c->max_inline = INT_MAX;
	if (!c->max_bulk)
		c->max_bulk = PASTE_RESP_DEFAULT_MAX_BULK;
	if (!c->stream_min)
		c->stream_min = PASTE_RESP_DEFAULT_STREAM_MIN;
}

void paste_resp_parser_reset(struct paste_resp_parser *ps)
{
	ps->bulk_len = 0;
	ps->pos = ps->nargs = ps->argc = 0;
	ps->state = ST_IDLE;
	ps->crlf = 0;
}

/* The number of a "*N\r\n" or "$L\r\n" line starting at p[at] (the type
 * byte, already checked), read as Redis's string2ll reads it: optional
 * '-', then 0 or a digit 1-9 and more digits, no overflow; then CRLF.
 * Returns 1 (*v, *end just past the LF), 0 when p[at..w) is a valid but
 * incomplete prefix, -1 when it cannot become a valid line. */
static int number_full(const char *p, size_t at, size_t w, int64_t *v, size_t *end)
{
	size_t i = at + 1;
	bool neg = i < w && p[i] == '-';
	i += neg;
	size_t first = i;
	uint64_t x = 0;
	/* Eighteen digits cannot overflow: only longer numbers pay the check
	 * (a header's number is parsed for every argument of every command). */
	size_t quick = w - i > 18 ? i + 18 : w;
	while (i < quick && (unsigned char)(p[i] - '0') <= 9)
		x = x * 10 + (unsigned)(p[i++] - '0');
	for (; i < w && (unsigned char)(p[i] - '0') <= 9; i++) {
		unsigned d = (unsigned)(p[i] - '0');
		if (x > ((uint64_t)INT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	size_t nd = i - first;
	if (nd && p[first] == '0' && (neg || nd > 1))
		return -1;                            /* "01", "-0" */
	if (i >= w)
		return 0;
	if (p[i] != '\r' || !nd)
		return -1;
	if (i + 1 >= w)
		return 0;
	if (p[i + 1] != '\n')
		return -1;
	*v = neg ? -(int64_t)x : (int64_t)x;
	*end = i + 2;
	return 1;
}

/* Most headers are 1 to 4 digits with their CRLF in the buffer: read
 * inline; anything else (a sign, a leading 0, longer, split) goes to
 * number_full. A command's every argument has one. */
static inline int number_line(const char *p, size_t at, size_t w, int64_t *v, size_t *end)
{
	size_t i = at + 1;
	if (w - i >= 6 && (unsigned char)(p[i] - '1') < 9) {
		uint64_t x = (unsigned)(p[i] - '0');
		size_t j = i + 1;
		for (; j < i + 4 && (unsigned char)(p[j] - '0') <= 9; j++)
			x = x * 10 + (unsigned)(p[j] - '0');
		if (p[j] == '\r' && p[j + 1] == '\n') {
			*v = (int64_t)x;
			*end = j + 2;
			return 1;
		}
	}
	return number_full(p, at, w, v, end);
}

/* Redis's isspace() between words (C locale). */
static inline bool is_blank(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* What ends an unquoted word (sdssplitargs: SP, LF, CR, HTAB). */
static inline bool is_sep(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}


/* Unquoting state for one word written into the scratch area. */
struct unq {
	char *out;
	size_t n, cap;
};

static inline bool put(struct unq *u, char c)
{
	if (u->n >= u->cap)
		return false;
	u->out[u->n++] = c;
	return true;
}

/* The rest of a word that holds a quote, from s[*i] (a quote or an
 * ordinary byte), appended to u. */
static int unquote_word(const char *s, size_t n, size_t *i, struct unq *u)
{
	size_t k = *i;
	while (k < n && !is_sep((unsigned char)s[k])) {
		char q = s[k];
		if (q != '"' && q != '\'') {
			if (!put(u, q))
				return PASTE_RESP_E_SCRATCH;
			k++;
			continue;
		}
		for (k++;; k++) {
			if (k >= n)
				return PASTE_RESP_E_QUOTES;
			char c = s[k];
			int hi, lo;
			if (c == q) {
				/* A closing quote ends the word: a blank or the
				 * line end must follow it. */
				if (k + 1 < n && !is_blank((unsigned char)s[k + 1]))
					return PASTE_RESP_E_QUOTES;
				*i = k + 1;
				return 0;
			}
			if (c == '\\' && k + 1 < n && q == '\'') {
				if (s[k + 1] == '\'')
					c = s[++k];
			} else if (c == '\\' && k + 3 < n && s[k + 1] == 'x' &&
				   (hi = hex_digit((unsigned char)s[k + 2])) >= 0 &&
				   (lo = hex_digit((unsigned char)s[k + 3])) >= 0) {
				c = (char)(hi * 16 + lo);
				k += 3;
			} else if (c == '\\' && k + 1 < n) {
				switch (s[++k]) {
				case 'n': c = '\n'; break;
				case 'r': c = '\r'; break;
				case 't': c = '\t'; break;
				case 'b': c = '\b'; break;
				case 'a': c = '\a'; break;
				default:  c = s[k]; break;
				}
			}
			if (!put(u, c))
				return PASTE_RESP_E_SCRATCH;
		}
	}
	*i = k;
	return 0;
}

/* Split the line s[0..n) (no LF, no final CR) into words. */
static int split_inline(const char *s, size_t n, struct paste_resp_cmd *cmd, uint32_t cap)
{
	struct unq u = { cmd->scratch, 0, cmd->scratch ? cmd->scratch_cap : 0 };
	size_t i = 0;
	uint32_t argc = 0;

	for (;;) {
		while (i < n && is_blank((unsigned char)s[i]))
			i++;
		if (i == n)
			break;
		if (argc >= cap)
			return PASTE_RESP_E_TOO_MANY_ARGS;
		size_t start = i;
		while (i < n && !is_sep((unsigned char)s[i]) && s[i] != '"' && s[i] != '\'')
			i++;
		struct paste_resp_arg *a = &cmd->argv[argc++];
		if (i == n || is_sep((unsigned char)s[i])) {
			a->p = s + start;     /* zero copy */
			a->len = i - start;
			continue;
		}
		size_t from = u.n;
		if (i - start > u.cap - u.n)
			return PASTE_RESP_E_SCRATCH;
		if (i > start)
			memcpy(u.out + u.n, s + start, i - start);
		u.n += i - start;
		int r = unquote_word(s, n, &i, &u);
		if (r)
			return r;
		a->p = u.out ? u.out + from : s + start;   /* no scratch: only "" or '' */
		a->len = u.n - from;
	}
	cmd->argc = argc;
	return 0;
}

static int parse_inline(struct paste_resp_parser *ps, const char *p, size_t len,
			struct paste_resp_cmd *cmd, uint32_t cap)
{
	size_t limit = ps->cfg.max_inline;
	size_t w = len < limit ? len : limit;
	size_t from = ps->pos <= w ? ps->pos : 0;
	const char *lf = from < w ? memchr(p + from, '\n', w - from) : NULL;

	if (!lf) {
		if (len >= limit)
			return PASTE_RESP_E_INLINE_TOO_BIG;
		ps->pos = (uint32_t)w;
		return PASTE_RESP_MORE;
	}
	size_t end = (size_t)(lf - p), n = end;
	if (n && p[n - 1] == '\r')
		n--;
	int r = split_inline(p, n, cmd, cap);
	if (r)
		return r;
	cmd->used = (uint32_t)(end + 1);
	cmd->is_inline = true;
	return PASTE_RESP_CMD;
}

/* Find arguments 0..k-1 again (checked by earlier calls) from the "*N"
 * line on, and check that they end where the earlier calls stopped: at
 * `at`, or, when they stopped in a bulk's data, at the "$L" line whose
 * data starts at `at`. -1 if the bytes do not say what they said then (the
 * caller broke the same-prefix contract). */
static int rewalk(uint32_t nargs, const char *p, size_t w, uint32_t k,
		  size_t at, bool in_data, uint64_t bulk_len, struct paste_resp_arg *argv)
{
	int64_t v;
	size_t pos, end;
	if (number_line(p, 0, w, &v, &pos) != 1 || v != (int64_t)nargs)
		return -1;
	for (uint32_t i = 0; i < k; i++) {
		if (pos >= w || p[pos] != '$' || number_line(p, pos, w, &v, &end) != 1 ||
		    v < 0 || (uint64_t)v > w - end || w - end - (uint64_t)v < 2)
			return -1;
		argv[i].p = p + end;
		argv[i].len = (size_t)v;
		pos = end + (size_t)v + 2;
	}
	if (!in_data)
		return pos == at ? 0 : -1;
	return pos < w && p[pos] == '$' && number_line(p, pos, w, &v, &end) == 1 &&
	       end == at && v >= 0 && (uint64_t)v == bulk_len ? 0 : -1;
}

static int parse_mbulk(struct paste_resp_parser *ps, const char *p, size_t len,
		       struct paste_resp_cmd *cmd, uint32_t cap)
{
	const struct paste_resp_config *c = &ps->cfg;
	size_t limit = c->max_command;
	size_t w = len < limit ? len : limit;
	int64_t v;
	size_t end;
	int r;

	if (ps->pos > w) {                 /* fewer bytes than last time */
		paste_resp_parser_reset(ps);
		ps->state = ST_LINE;
	}
	uint32_t first = ps->argc;         /* arguments found by earlier calls */
	size_t pos = ps->pos, start = ps->pos;
	bool start_in_data = ps->state == ST_DATA;
	uint64_t start_len = ps->bulk_len;

	if (ps->nargs == 0) {
		r = number_line(p, 0, w, &v, &end);
		if (r == 0)
			goto more;
		if (r < 0)
			return PASTE_RESP_E_MBULK_LEN;
		if (v <= 0) {                 /* "*0", "*-1": nothing to run */
			cmd->used = (uint32_t)end;
			return PASTE_RESP_CMD;
		}
		if (v > INT32_MAX)            /* Redis's bound, and its words for it */
			return PASTE_RESP_E_MBULK_LEN;
		if ((uint64_t)v > cap)
			return PASTE_RESP_E_TOO_MANY_ARGS;
		ps->nargs = (uint32_t)v;
		pos = end;
	} else if (ps->nargs > cap) {      /* argv_cap shrank since */
		return PASTE_RESP_E_TOO_MANY_ARGS;
	}

	while (ps->argc < ps->nargs) {
		if (ps->state != ST_DATA) {
			if (pos >= w)
				goto more;
			if (p[pos] != '$') {
				ps->bad = (uint8_t)p[pos];
				return PASTE_RESP_E_DOLLAR;
			}
			r = number_line(p, pos, w, &v, &end);
			if (r == 0)
				goto more;
			if (r < 0 || v < 0)
				return PASTE_RESP_E_BULK_LEN;
			if ((uint64_t)v > c->max_bulk)
				return PASTE_RESP_E_BULK_TOO_BIG;
			pos = end;
			ps->bulk_len = (uint64_t)v;
			ps->state = ST_DATA;
			uint64_t need = (uint64_t)pos + ps->bulk_len + 2;
			if (ps->argc + 1 == ps->nargs && c->stream_min != PASTE_RESP_NO_STREAM &&
			    (ps->bulk_len >= c->stream_min || need > w)) {
				if (start && rewalk(ps->nargs, p, w, first, start, start_in_data, start_len,
						   cmd->argv))
					goto restart;
				struct paste_resp_arg *a = &cmd->argv[ps->argc];
				a->p = NULL;
				a->len = (size_t)ps->bulk_len;
				cmd->argc = ps->nargs;
				cmd->used = (uint32_t)pos;
				return PASTE_RESP_STREAM;
			}
			if (need > limit)
				return PASTE_RESP_E_TOO_BIG;
		}
		size_t bl = (size_t)ps->bulk_len;   /* <= limit here */
		if (bl + 2 > w - pos)
			goto more;
		if (p[pos + bl] != '\r' || p[pos + bl + 1] != '\n')
			return PASTE_RESP_E_BULK_CRLF;
		cmd->argv[ps->argc].p = p + pos;
		cmd->argv[ps->argc].len = bl;
		ps->argc++;
		pos += bl + 2;
		ps->state = ST_LINE;
	}
	if (start && rewalk(ps->nargs, p, w, first, start, start_in_data, start_len, cmd->argv))
		goto restart;
	cmd->argc = ps->nargs;
	cmd->used = (uint32_t)pos;
	return PASTE_RESP_CMD;

more:
	if (len >= limit)
		return PASTE_RESP_E_TOO_BIG;
	ps->pos = (uint32_t)pos;
	return PASTE_RESP_MORE;

restart:
	/* Not the bytes the earlier calls saw: parse them afresh (no rewalk
	 * then, so this recursion is one level deep). */
	paste_resp_parser_reset(ps);
	ps->state = ST_LINE;
	return parse_mbulk(ps, p, len, cmd, cap);
}

int paste_resp_parse(struct paste_resp_parser *ps, const char *p, size_t len,
		     struct paste_resp_cmd *cmd)
{
	if (!ps->cfg.max_args)             /* a zeroed parser: the defaults */
		paste_resp_parser_init(ps, NULL);
	uint32_t cap = ps->cfg.max_args;
	if (!cmd->argv)
		cap = 0;
	else if (cmd->argv_cap < cap)
		cap = cmd->argv_cap;

	cmd->argc = 0;
	cmd->used = 0;
	cmd->is_inline = false;
	if (ps->state == ST_IDLE) {
		if (len == 0)
			return PASTE_RESP_MORE;
		ps->state = p[0] == '*' ? ST_LINE : ST_INLINE;
		ps->pos = 0;
	}
	int r = ps->state == ST_INLINE ? parse_inline(ps, p, len, cmd, cap)
				       : parse_mbulk(ps, p, len, cmd, cap);
	if (r != PASTE_RESP_MORE)
		paste_resp_parser_reset(ps);   /* the next command starts afresh */
	if (r < 0)
		cmd->argc = 0;
	return r;
}

/* The peek's number: "<t><digits>\r\n" at p[*at..len) with the type byte
 * t; lax (a leading zero passes), as a wrong guess costs only a wasted
 * prefetch, and at most 18 digits, so no overflow. *at moves past it. */
static inline bool peek_number(const char *p, size_t len, size_t *at, char t, size_t *v)
{
	size_t i = *at + 1, x = 0;
	if (*at >= len || p[*at] != t)
		return false;
	for (; i < len && i - *at <= 18 && p[i] >= '0' && p[i] <= '9'; i++)
		x = x * 10 + (size_t)(p[i] - '0');
	if (i == *at + 1 || i + 1 >= len || p[i] != '\r' || p[i + 1] != '\n')
		return false;
	*at = i + 2;
	*v = x;
	return true;
}

/* One "$L\r\n<L bytes>" at p[*at..len), all in: its bytes; *at moves
 * past them and their CRLF's place (not checked: the parser will). */
static inline const char *peek_bulk(const char *p, size_t len, size_t *at, size_t *n)
{
	if (!peek_number(p, len, at, '$', n) || *n > len - *at)
		return NULL;
	const char *b = p + *at;
	*at += *n + 2;
	return b;
}

bool paste_resp_peek_key(const char *p, size_t len, const char **key, size_t *klen)
{
	size_t at = 0, nargs, n;
	if (!peek_number(p, len, &at, '*', &nargs) || nargs < 2 || !peek_bulk(p, len, &at, &n))
		return false;
	const char *k = peek_bulk(p, len, &at, &n);
	if (!k)
		return false;
	*key = k;
	*klen = n;
	return true;
}

int paste_resp_stream_crlf(struct paste_resp_parser *ps, const char *p, size_t len)
{
	size_t i = 0;
	if (!ps->crlf) {
		if (len == 0)
			return 0;
		if (p[0] != '\r')
			return PASTE_RESP_E_BULK_CRLF;
		ps->crlf = 1;
		i = 1;
	}
	if (i >= len)
		return 0;
	ps->crlf = 0;
	return p[i] == '\n' ? (int)i + 1 : PASTE_RESP_E_BULK_CRLF;
}

const char *paste_resp_strerror(int code)
{
	switch (code) {
	case PASTE_RESP_E_MBULK_LEN:      return "Protocol error: invalid multibulk length";
	case PASTE_RESP_E_TOO_MANY_ARGS:  return "Protocol error: too many arguments";
	case PASTE_RESP_E_DOLLAR:         return "Protocol error: expected '$'";
	case PASTE_RESP_E_BULK_LEN:       return "Protocol error: invalid bulk length";
	case PASTE_RESP_E_BULK_TOO_BIG:   return "Protocol error: invalid bulk length";
	case PASTE_RESP_E_BULK_CRLF:      return "Protocol error: expected CRLF after bulk data";
	case PASTE_RESP_E_TOO_BIG:        return "Protocol error: too big multibulk request";
	case PASTE_RESP_E_INLINE_TOO_BIG: return "Protocol error: too big inline request";
	case PASTE_RESP_E_QUOTES:         return "Protocol error: unbalanced quotes in request";
	case PASTE_RESP_E_SCRATCH:        return "Protocol error: too big inline request";
	default:                          return "Unknown error";
	}
}

static inline unsigned char upper(unsigned char c)
{
	return c >= 'a' && c <= 'z' ? (unsigned char)(c - 'a' + 'A') : c;
}

bool paste_resp_arg_eq(const struct paste_resp_arg *a, const char *name)
{
	if (!a->p)
		return false;
	for (size_t i = 0; i < a->len; i++)
		if (name[i] == '\0' || upper((unsigned char)a->p[i]) != upper((unsigned char)name[i]))
			return false;
	return name[a->len] == '\0';
}

int paste_resp_lookup(const struct paste_resp_arg *a, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n && i <= INT_MAX; i++)
		if (paste_resp_arg_eq(a, names[i]))
			return (int)i;
	return -1;
}

int paste_resp_arg_i64(const struct paste_resp_arg *a, int64_t *v)
{
	const char *s = a->p;
	size_t n = a->len, i = 0;
	bool neg = false;
	uint64_t x = 0, max = INT64_MAX;

	if (!s || n == 0 || n > 20)
		return -EINVAL;
	if (s[0] == '-') {
		neg = true;
		max = (uint64_t)INT64_MAX + 1;
		i = 1;
	}
	if (i == n || s[i] < '0' || s[i] > '9' || (s[i] == '0' && (n > i + 1 || neg)))
		return -EINVAL;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (max - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*v = neg ? -(int64_t)(x - 1) - 1 : (int64_t)x;
	return 0;
}
