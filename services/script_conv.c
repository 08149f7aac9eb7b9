/*
 * script_conv.c - RESP on the Lua side (script_lua.h): a command's reply
 * turned into Lua values for redis.call (Redis's rules, RESP2 and RESP3),
 * a script's Lua value turned into the reply its client gets (in the
 * client's protocol), Redis's error tables, and the growable buffer
 * replies are written to. The engine (script_lua.c) calls these; the
 * unit tests call them alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "script_lua.h"

/* ------------------------------------------------------------ buffers */

void sl_buf_put(struct sl_buf *b, const void *p, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->oom = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void sl_buf_free(struct sl_buf *b)
{
	free(b->p);
	*b = (struct sl_buf){ 0 };
}

static void buf_printf(struct sl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct sl_buf *b, const char *fmt, ...)
{
	char s[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	sl_buf_put(b, s, n < (int)sizeof(s) ? (size_t)n : sizeof(s) - 1);
}

void sl_buf_line(struct sl_buf *b, const char *s, size_t n)
{
	size_t at = b->len;
	sl_buf_put(b, s, n);
	for (size_t i = at; !b->oom && i < b->len; i++)
		if (b->p[i] == '\r' || b->p[i] == '\n')
			b->p[i] = ' ';
}

/* ------------------------------------------------------------ errors */

/* The error table Redis builds (luaPushErrorBuff): "-CODE msg" or a bare
 * msg (code ERR); {err="CODE msg"} with CR and LF trimmed from msg's ends. */
void sl_push_error(lua_State *L, const char *s, size_t n)
{
	const char *code = "ERR", *msg = s;
	size_t clen = 3, mlen = n;
	if (n && s[0] == '-') {
		const char *sp = memchr(s, ' ', n);
		if (!sp) {
			msg = s + 1;
			mlen = n - 1;
		} else {
			code = s + 1;
			clen = (size_t)(sp - s - 1);
			msg = sp + 1;
			mlen = n - (size_t)(sp + 1 - s);
		}
	}
	while (mlen && (msg[0] == '\r' || msg[0] == '\n')) {
		msg++;
		mlen--;
	}
	while (mlen && (msg[mlen - 1] == '\r' || msg[mlen - 1] == '\n'))
		mlen--;
	lua_newtable(L);
	lua_pushstring(L, "err");
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	luaL_addlstring(&b, code, clen);
	luaL_addchar(&b, ' ');
	luaL_addlstring(&b, msg, mlen);
	luaL_pushresult(&b);
	lua_rawset(L, -3);
}

/* ------------------------------------------------------------ RESP -> Lua */

/* One line from p (up to CRLF): its length, or -1 when cut. */
static long line_len(const char *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (p[i] == '\r' && p[i + 1] == '\n')
			return (long)i;
	return -1;
}

static bool parse_ll(const char *p, size_t n, long long *v)
{
	char b[32];
	if (!n || n >= sizeof(b))
		return false;
	memcpy(b, p, n);
	b[n] = 0;
	char *end;
	errno = 0;
	*v = strtoll(b, &end, 10);
	return !errno && *end == 0;
}

static void table_field(lua_State *L, const char *k, const char *v, size_t n)
{
	lua_pushstring(L, k);
	lua_pushlstring(L, v, n);
	lua_rawset(L, -3);
}

size_t sl_push_reply(lua_State *L, const char *p, size_t n)
{
	if (n < 3 || !lua_checkstack(L, 6))
		return 0;
	long ll = line_len(p + 1, n - 1);
	if (ll < 0)
		return 0;
	const char *s = p + 1;
	size_t sl = (size_t)ll, used = (size_t)ll + 3;
	long long v;
	switch (p[0]) {
	case '+':
		lua_newtable(L);
		table_field(L, "ok", s, sl);
		return used;
	case '-':
		sl_push_error(L, p, sl + 1);
		lua_pushstring(L, "ignore_error_stats_update");
		lua_pushboolean(L, 1);
		lua_rawset(L, -3);
		return used;
	case ':':
		if (!parse_ll(s, sl, &v))
			return 0;
		lua_pushnumber(L, (lua_Number)v);
		return used;
	case '_':
		lua_pushnil(L);
		return used;
	case '#':
		lua_pushboolean(L, sl == 1 && s[0] == 't');
		return used;
	case ',': {
		char b[64];
		size_t k = sl < sizeof(b) - 1 ? sl : sizeof(b) - 1;
		memcpy(b, s, k);
		b[k] = 0;
		lua_newtable(L);
		lua_pushstring(L, "double");
		lua_pushnumber(L, strtod(b, NULL));
		lua_rawset(L, -3);
		return used;
	}
	case '(':
		lua_newtable(L);
		table_field(L, "big_number", s, sl);
		return used;
	case '$':
	case '=': {
		if (!parse_ll(s, sl, &v))
			return 0;
		if (v < 0) {
			lua_pushboolean(L, 0);
			return used;
		}
		if ((uint64_t)v + 2 > n - used)
			return 0;
		const char *d = p + used;
		if (p[0] == '$') {
			lua_pushlstring(L, d, (size_t)v);
		} else {
			lua_newtable(L);
			lua_pushstring(L, "verbatim_string");
			lua_newtable(L);
			if (v >= 4) {
				table_field(L, "format", d, 3);
				table_field(L, "string", d + 4, (size_t)v - 4);
			} else {
				table_field(L, "string", d, (size_t)v);
			}
			lua_rawset(L, -3);
		}
		return used + (size_t)v + 2;
	}
	case '*':
	case '>':
	case '~':
	case '%':
	case '|': {
		if (!parse_ll(s, sl, &v))
			return 0;
		if (v < 0) {
			lua_pushboolean(L, 0);
			return used;
		}
		if (p[0] == '|') {            /* attributes: read and dropped */
			for (long long i = 0; i < 2 * v; i++) {
				size_t k = sl_push_reply(L, p + used, n - used);
				if (!k)
					return 0;
				lua_pop(L, 1);
				used += k;
			}
			size_t k = sl_push_reply(L, p + used, n - used);
			return k ? used + k : 0;
		}
		bool map = p[0] == '%', set = p[0] == '~';
		lua_newtable(L);
		if (map || set) {
			lua_pushstring(L, map ? "map" : "set");
			lua_newtable(L);
		}
		for (long long i = 0; i < v; i++) {
			if (!map && !set)
				lua_pushnumber(L, (lua_Number)(i + 1));
			size_t k = sl_push_reply(L, p + used, n - used);
			if (!k)
				return 0;
			used += k;
			if (map) {
				k = sl_push_reply(L, p + used, n - used);
				if (!k)
					return 0;
				used += k;
			} else if (set) {
				lua_pushboolean(L, 1);
			}
			if (lua_isnil(L, -2))
				lua_pop(L, 2);   /* a nil key cannot be stored */
			else
				lua_rawset(L, -3);
		}
		if (map || set)
			lua_rawset(L, -3);
		return used;
	}
	default:
		return 0;
	}
}

/* ------------------------------------------------------------ Lua -> RESP */

static void put_null(struct sl_buf *out, int cproto)
{
	sl_buf_put(out, cproto == 3 ? "_\r\n" : "$-1\r\n", cproto == 3 ? 3 : 5);
}

static void put_bulk(struct sl_buf *out, const char *s, size_t n)
{
	buf_printf(out, "$%zu\r\n", n);
	sl_buf_put(out, s, n);
	sl_buf_put(out, "\r\n", 2);
}

/* Lua's number as Redis's (long long) cast does on x86-64: out of range
 * and NaN give the most negative one. */
static long long to_ll(lua_Number d)
{
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return INT64_MIN;
	return (long long)d;
}

static void put_double(struct sl_buf *out, double d, int cproto)
{
	char b[64];
	int n;
	if (isinf(d))
		n = snprintf(b, sizeof(b), "%s", d > 0 ? "inf" : "-inf");
	else if (isnan(d))
		n = snprintf(b, sizeof(b), "nan");
	else
		n = snprintf(b, sizeof(b), "%.17g", d);
	if (cproto == 3) {
		sl_buf_put(out, ",", 1);
		sl_buf_put(out, b, (size_t)n);
		sl_buf_put(out, "\r\n", 2);
	} else {
		put_bulk(out, b, (size_t)n);
	}
}

/* t[key] of the table at the top, raw: pushed, its type returned. */
static int raw_field(lua_State *L, const char *key)
{
	lua_pushstring(L, key);
	lua_rawget(L, -2);
	return lua_type(L, -1);
}

static void reply_value(lua_State *L, struct sl_buf *out, int cproto, int sproto);

static void reply_table(lua_State *L, struct sl_buf *out, int cproto, int sproto)
{
	if (raw_field(L, "err") == LUA_TSTRING) {
		size_t n;
		const char *s = lua_tolstring(L, -1, &n);
		sl_buf_put(out, "-", 1);
		sl_buf_line(out, s, n);
		sl_buf_put(out, "\r\n", 2);
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	if (raw_field(L, "ok") == LUA_TSTRING) {
		size_t n;
		const char *s = lua_tolstring(L, -1, &n);
		sl_buf_put(out, "+", 1);
		sl_buf_line(out, s, strnlen(s, n));
		sl_buf_put(out, "\r\n", 2);
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	if (raw_field(L, "double") == LUA_TNUMBER) {
		put_double(out, lua_tonumber(L, -1), cproto);
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	if (raw_field(L, "big_number") == LUA_TSTRING) {
		size_t n;
		const char *s = lua_tolstring(L, -1, &n);
		struct sl_buf t = { 0 };
		sl_buf_line(&t, s, n);
		if (cproto == 3) {
			sl_buf_put(out, "(", 1);
			sl_buf_put(out, t.p, t.len);
			sl_buf_put(out, "\r\n", 2);
		} else {
			put_bulk(out, t.p ? t.p : "", t.len);
		}
		sl_buf_free(&t);
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	if (raw_field(L, "verbatim_string") == LUA_TTABLE) {
		if (raw_field(L, "format") == LUA_TSTRING) {
			const char *fmt = lua_tostring(L, -1);
			lua_pop(L, 1);
			if (raw_field(L, "string") == LUA_TSTRING) {
				size_t n;
				const char *s = lua_tolstring(L, -1, &n);
				if (cproto == 3) {
					char f[4] = "   ";
					memcpy(f, fmt, strnlen(fmt, 3));
					buf_printf(out, "=%zu\r\n%s:", n + 4, f);
					sl_buf_put(out, s, n);
					sl_buf_put(out, "\r\n", 2);
				} else {
					put_bulk(out, s, n);
				}
				lua_pop(L, 2);
				return;
			}
		}
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	int kind = raw_field(L, "map") == LUA_TTABLE ? 1 : 0;
	if (!kind) {
		lua_pop(L, 1);
		kind = raw_field(L, "set") == LUA_TTABLE ? 2 : 0;
	}
	if (kind) {
		uint64_t count = 0;
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			lua_pop(L, 1);
			count++;
		}
		if (kind == 1)
			buf_printf(out, cproto == 3 ? "%%%" PRIu64 "\r\n" : "*%" PRIu64 "\r\n",
				   cproto == 3 ? count : 2 * count);
		else
			buf_printf(out, "%c%" PRIu64 "\r\n", cproto == 3 ? '~' : '*', count);
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			/* table, key, value */
			if (kind == 1) {
				lua_pushvalue(L, -2);
				reply_value(L, out, cproto, sproto);   /* the key */
				reply_value(L, out, cproto, sproto);   /* the value */
			} else {
				lua_pop(L, 1);
				lua_pushvalue(L, -1);
				reply_value(L, out, cproto, sproto);
			}
		}
		lua_pop(L, 1);
		return;
	}
	lua_pop(L, 1);
	/* An array: elements 1.. up to the first nil. */
	uint64_t count = 0;
	for (;; count++) {
		lua_rawgeti(L, -1, (int)count + 1);
		bool nil = lua_isnil(L, -1);
		lua_pop(L, 1);
		if (nil)
			break;
	}
	buf_printf(out, "*%" PRIu64 "\r\n", count);
	for (uint64_t j = 1; j <= count; j++) {
		lua_rawgeti(L, -1, (int)j);
		reply_value(L, out, cproto, sproto);
	}
}

static void reply_value(lua_State *L, struct sl_buf *out, int cproto, int sproto)
{
	/* A table can hold itself: Redis answers what fits Lua's stack and
	 * then this error for the rest. */
	if (!lua_checkstack(L, 4)) {
		static const char e[] = "-ERR reached lua stack limit\r\n";
		sl_buf_put(out, e, sizeof(e) - 1);
		lua_pop(L, 1);
		return;
	}
	switch (lua_type(L, -1)) {
	case LUA_TSTRING: {
		size_t n;
		const char *s = lua_tolstring(L, -1, &n);
		put_bulk(out, s, n);
		break;
	}
	case LUA_TBOOLEAN:
		if (sproto == 2) {
			if (lua_toboolean(L, -1))
				sl_buf_put(out, ":1\r\n", 4);
			else
				put_null(out, cproto);
		} else if (cproto == 3) {
			sl_buf_put(out, lua_toboolean(L, -1) ? "#t\r\n" : "#f\r\n", 4);
		} else {
			sl_buf_put(out, lua_toboolean(L, -1) ? ":1\r\n" : ":0\r\n", 4);
		}
		break;
	case LUA_TNUMBER:
		buf_printf(out, ":%lld\r\n", to_ll(lua_tonumber(L, -1)));
		break;
	case LUA_TTABLE:
		reply_table(L, out, cproto, sproto);
		break;
	default:
		put_null(out, cproto);
	}
	lua_pop(L, 1);
}

void sl_reply_value(lua_State *L, struct sl_buf *out, int caller_proto, int script_proto)
{
	reply_value(L, out, caller_proto, script_proto);
}
