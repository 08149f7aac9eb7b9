/*
 * script_lua.c - Lua 5.1 as Redis 7.0 runs it (script_lua.h): Debian's
 * liblua5.1 with lua-cjson, lua-bitop and lua-messagepack, the sandbox,
 * the redis.* API, the runs, and SHA-1. The RESP <-> Lua conversions are
 * script_conv.c's.
 *
 * Sandbox. Redis 7.0 patches its Lua with read-only tables; Debian's Lua
 * has none, so the same behaviour is built from metatables. The globals
 * every chunk and function sees are an empty table E whose metatable
 * reads through to the real globals G (kept in the registry) and raises
 * Redis's "Script attempted to access nonexistent global variable" for a
 * name G lacks; every write to E raises "Attempt to modify a readonly
 * table". The library tables (redis, string, math, table, coroutine,
 * cjson, bit, cmsgpack) are read-only proxies of the same kind. rawset and
 * setmetatable refuse a proxy in the same words, rawget, next and pairs
 * see through one. io, os, package, debug, print, dofile, loadfile,
 * getfenv, setfenv and newproxy are not there (the Redis 7.0.15 that
 * Debian ships has none of them either). cmsgpack is Debian's
 * lua-messagepack with Redis's encoding (script_cmsgpack.c); struct is
 * not there: Debian packages none (docs/compat.md, "Scripting").
 *
 * Functions (FUNCTION LOAD) get a Lua state of their own, as in Redis:
 * while a library's code runs, E reads through to a load-time API (only
 * redis.register_function, redis.log and the version), afterwards to G.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <lua-bitop.h>
#include <lua-cjson.h>

#include "script_lua.h"

/* ------------------------------------------------------------ SHA-1 */

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80];
	for (int t = 0; t < 16; t++)
		w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
		       (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
	for (int t = 16; t < 80; t++)
		w[t] = rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int t = 0; t < 80; t++) {
		uint32_t f, k;
		if (t < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (t < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (t < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		uint32_t tmp = rol(a, 5) + f + e + k + w[t];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = tmp;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void sl_sha1_init(struct sl_sha1 *s)
{
	static const uint32_t h0[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
}

void sl_sha1_update(struct sl_sha1 *s, const void *p_, size_t n)
{
	const uint8_t *p = p_;
	size_t have = (size_t)(s->len % 64);
	s->len += n;
	if (have) {
		size_t take = 64 - have < n ? 64 - have : n;
		memcpy(s->block + have, p, take);
		p += take;
		n -= take;
		if (have + take < 64)
			return;
		sha1_block(s->h, s->block);
	}
	for (; n >= 64; p += 64, n -= 64)
		sha1_block(s->h, p);
	memcpy(s->block, p, n);
}

void sl_sha1_final(struct sl_sha1 *s, uint8_t out[20])
{
	uint64_t bits = s->len * 8;
	size_t have = (size_t)(s->len % 64);
	s->block[have++] = 0x80;
	if (have > 56) {
		memset(s->block + have, 0, 64 - have);
		sha1_block(s->h, s->block);
		have = 0;
	}
	memset(s->block + have, 0, 56 - have);
	for (int i = 0; i < 8; i++)
		s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_block(s->h, s->block);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

void sl_sha1_hex(const void *p, size_t n, char out[41])
{
	static const char hex[] = "0123456789abcdef";
	struct sl_sha1 s;
	uint8_t d[20];
	sl_sha1_init(&s);
	sl_sha1_update(&s, p, n);
	sl_sha1_final(&s, d);
	for (int i = 0; i < 20; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[40] = 0;
}

/* ------------------------------------------------------------ flags */

const char *const sl_flag_names[5] = { "no-writes", "allow-oom", "allow-stale", "no-cluster",
				       "allow-cross-slot-keys" };

uint32_t sl_flag(const char *s, size_t n)
{
	for (uint32_t i = 0; i < 5; i++)
		if (strlen(sl_flag_names[i]) == n && !strncasecmp(sl_flag_names[i], s, n))
			return 1u << i;
	return 0;
}

bool sl_split_words(const char *s, size_t n, char words[][512], int max, int *count)
{
	int k = 0;
	size_t i = 0;
	while (i < n) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
			i++;
		if (i >= n)
			break;
		if (k == max)
			return false;
		size_t w = 0;
		char q = 0;
		while (i < n) {
			char c = s[i];
			if (q) {
				if (c == q) {
					q = 0;
					i++;
					if (i < n && s[i] != ' ' && s[i] != '\t')
						return false;
					break;
				}
			} else if (c == '"' || c == '\'') {
				q = c;
				i++;
				continue;
			} else if (c == ' ' || c == '\t' || c == '\r') {
				break;
			}
			if (w + 1 < 512)
				words[k][w++] = c;
			i++;
		}
		if (q)
			return false;
		words[k++][w] = 0;
	}
	*count = k;
	return true;
}

int sl_shebang(const char *body, size_t len, uint32_t *flags, size_t *skip, char *err,
	       size_t errcap)
{
	*flags = SL_EVAL_COMPAT;
	*skip = 0;
	if (len < 2 || body[0] != '#' || body[1] != '!')
		return 0;
	const char *nl = memchr(body, '\n', len);
	if (!nl) {
		snprintf(err, errcap, "Invalid script shebang");
		return -1;
	}
	static char words[32][512];
	int nw = 0;
	if (!sl_split_words(body, (size_t)(nl - body), words, 32, &nw) || nw == 0) {
		snprintf(err, errcap, "Invalid engine in script shebang");
		return -1;
	}
	if (strcmp(words[0], "#!lua")) {
		snprintf(err, errcap, "Unexpected engine in script shebang: %s", words[0]);
		return -1;
	}
	uint32_t f = 0;
	for (int j = 1; j < nw; j++) {
		if (strncmp(words[j], "flags=", 6)) {
			snprintf(err, errcap, "Unknown lua shebang option: %s", words[j]);
			return -1;
		}
		const char *p = words[j] + 6;
		while (*p) {
			size_t l = strcspn(p, ",");
			uint32_t b = 0;
			for (uint32_t i = 0; i < 5; i++)     /* case-sensitive here, as Redis's strcmp */
				if (strlen(sl_flag_names[i]) == l && !strncmp(sl_flag_names[i], p, l))
					b = 1u << i;
			if (!b) {
				snprintf(err, errcap, "Unexpected flag in script shebang: %.*s", (int)l, p);
				return -1;
			}
			f |= b;
			p += l + (p[l] == ',');
		}
	}
	*flags = f;
	*skip = (size_t)(nl - body);
	return 0;
}

/* ------------------------------------------------------------ the engine */

struct sl_engine {
	lua_State *L;
	enum sl_kind kind;
	uint32_t runs;                 /* for the GC step every 50 runs */
};

/* Registry keys: addresses of these. */
static char K_RUN, K_G, K_API, K_RO, K_PROXY, K_LIBAPI, K_LOAD, K_HANDLER, K_MP, K_E;

static void reg_get(lua_State *L, char *key)
{
	lua_pushlightuserdata(L, key);
	lua_rawget(L, LUA_REGISTRYINDEX);
}

static void reg_set(lua_State *L, char *key)   /* pops the value */
{
	lua_pushlightuserdata(L, key);
	lua_insert(L, -2);
	lua_rawset(L, LUA_REGISTRYINDEX);
}

static void *reg_ptr(lua_State *L, char *key)
{
	reg_get(L, key);
	void *p = lua_touserdata(L, -1);
	lua_pop(L, 1);
	return p;
}

static void reg_set_ptr(lua_State *L, char *key, void *p)
{
	if (p)
		lua_pushlightuserdata(L, p);
	else
		lua_pushnil(L);
	reg_set(L, key);
}

static void push_error(lua_State *L, const char *s)
{
	sl_push_error(L, s, strlen(s));
}

static int raise_error(lua_State *L, const char *s)
{
	push_error(L, s);
	return lua_error(L);
}

/* ---- read-only proxies ---- */

static int ro_newindex(lua_State *L)
{
	return luaL_error(L, "Attempt to modify a readonly table");
}

static bool is_ro(lua_State *L, int idx)
{
	if (!lua_istable(L, idx))
		return false;
	idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
	reg_get(L, &K_RO);
	lua_pushvalue(L, idx);
	lua_rawget(L, -2);
	bool ro = lua_toboolean(L, -1);
	lua_pop(L, 2);
	return ro;
}

/* The real table behind proxy at idx pushed (or the value itself). */
static void push_real(lua_State *L, int idx)
{
	idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
	reg_get(L, &K_PROXY);
	lua_pushvalue(L, idx);
	lua_rawget(L, -2);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 2);
		lua_pushvalue(L, idx);
		return;
	}
	lua_remove(L, -2);
}

static void mark_ro(lua_State *L, int idx, int real)
{
	idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
	reg_get(L, &K_RO);
	lua_pushvalue(L, idx);
	lua_pushboolean(L, 1);
	lua_rawset(L, -3);
	lua_pop(L, 1);
	if (real) {
		real = real < 0 ? lua_gettop(L) + real + 1 : real;
		reg_get(L, &K_PROXY);
		lua_pushvalue(L, idx);
		lua_pushvalue(L, real);
		lua_rawset(L, -3);
		lua_pop(L, 1);
	}
}

/* A strict proxy's __index: Redis's error for a name its table lacks. */
static int strict_index(lua_State *L)
{
	lua_pushvalue(L, 2);
	lua_rawget(L, lua_upvalueindex(1));
	if (!lua_isnil(L, -1))
		return 1;
	const char *k = lua_tostring(L, 2);
	return luaL_error(L, "Script attempted to access nonexistent global variable '%s'", k ? k : "?");
}

/* Replace the table at the top with a read-only proxy of it. */
static void make_proxy(lua_State *L, bool strict)
{
	int real = lua_gettop(L);
	lua_newtable(L);                       /* proxy */
	lua_newtable(L);                       /* its metatable */
	lua_pushvalue(L, real);
	if (strict)
		lua_pushcclosure(L, strict_index, 1);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, ro_newindex);
	lua_setfield(L, -2, "__newindex");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);
	mark_ro(L, -1, real);
	lua_replace(L, real);
}

/* The globals' __index: the current API table (G, or the load API). */
static int env_index(lua_State *L)
{
	reg_get(L, &K_API);
	lua_pushvalue(L, 2);
	lua_rawget(L, -2);
	if (!lua_isnil(L, -1))
		return 1;
	if (!lua_isstring(L, 2))
		return luaL_error(L, "Second argument to luaProtectedTableError must be a string or number");
	return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
			  lua_tostring(L, 2));
}

/* ---- the builtins that see through proxies ---- */

static int b_setmetatable(lua_State *L)
{
	if (is_ro(L, 1)) {
		lua_pushstring(L, "Attempt to modify a readonly table");
		return lua_error(L);
	}
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
	return lua_gettop(L);
}

static int b_getmetatable(lua_State *L)
{
	if (is_ro(L, 1)) {
		reg_get(L, &K_E);
		bool e = lua_rawequal(L, 1, -1);
		lua_pop(L, 1);
		if (e)
			reg_get(L, &K_MP);
		else
			lua_pushnil(L);
		return 1;
	}
	if (!lua_getmetatable(L, 1)) {
		luaL_checkany(L, 1);
		lua_pushnil(L);
		return 1;
	}
	luaL_getmetafield(L, 1, "__metatable");
	return 1;
}

static int b_rawset(lua_State *L)
{
	if (is_ro(L, 1)) {
		lua_pushstring(L, "Attempt to modify a readonly table");
		return lua_error(L);
	}
	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checkany(L, 2);
	luaL_checkany(L, 3);
	lua_settop(L, 3);
	lua_rawset(L, 1);
	return 1;
}

static int b_rawget(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checkany(L, 2);
	push_real(L, 1);
	lua_pushvalue(L, 2);
	lua_rawget(L, -2);
	return 1;
}

static int b_next(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 2);
	push_real(L, 1);
	lua_pushvalue(L, 2);
	if (lua_next(L, -2))
		return 2;
	lua_pushnil(L);
	return 1;
}

static int b_pairs(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_pushvalue(L, 1);
	lua_pushnil(L);
	return 3;
}

/* loadstring and load give the chunk the script's globals (E), not the
 * thread's real ones. */
static int b_load(lua_State *L)
{
	size_t n;
	const char *code = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
	if (code && n && code[0] == LUA_SIGNATURE[0]) {
		/* Precompiled chunks bypass every check the compiler makes:
		 * refused, as Redis refuses them. */
		lua_pushnil(L);
		lua_pushstring(L, "binary code loading is disabled");
		return 2;
	}
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
	if (lua_isfunction(L, 1)) {
		reg_get(L, &K_E);
		lua_setfenv(L, 1);
	}
	return lua_gettop(L);
}

/* Redis's pcall: an error table {err=...} comes back as its message. */
static int b_pcall(lua_State *L)
{
	int argc = lua_gettop(L);
	luaL_checkany(L, 1);
	lua_pushboolean(L, 1);
	lua_insert(L, 1);
	if (lua_pcall(L, argc - 1, LUA_MULTRET, 0)) {
		lua_remove(L, 1);
		if (lua_istable(L, -1)) {
			lua_getfield(L, -1, "err");
			if (lua_isstring(L, -1))
				lua_replace(L, -2);
			else
				lua_pop(L, 1);
		}
		lua_pushboolean(L, 0);
		lua_insert(L, 1);
	}
	return lua_gettop(L);
}

/* ---- math.random as Redis's: a 48-bit linear congruential generator
 * (POSIX's lrand48: X = (0x5DEECE66D X + 0xB) mod 2^48, the top 31 bits),
 * so that a seed gives the same sequence everywhere. ---- */

static uint64_t rand48 = 0x1234abcd330eull;
#define RAND48_MAX 2147483647u

static uint32_t lrand48_next(void)
{
	rand48 = (0x5deece66dull * rand48 + 0xb) & ((1ull << 48) - 1);
	return (uint32_t)(rand48 >> 17);
}

static int m_random(lua_State *L)
{
	if (!reg_ptr(L, &K_RUN))
		return luaL_error(L, "math.random can only be called inside a script invocation");
	lua_Number r = (lua_Number)(lrand48_next() % RAND48_MAX) / (lua_Number)RAND48_MAX;
	switch (lua_gettop(L)) {
	case 0:
		lua_pushnumber(L, r);
		break;
	case 1: {
		int u = luaL_checkint(L, 1);
		luaL_argcheck(L, 1 <= u, 1, "interval is empty");
		lua_pushnumber(L, floor(r * u) + 1);
		break;
	}
	case 2: {
		int l = luaL_checkint(L, 1), u = luaL_checkint(L, 2);
		luaL_argcheck(L, l <= u, 2, "interval is empty");
		lua_pushnumber(L, floor(r * (u - l + 1)) + l);
		break;
	}
	default:
		return luaL_error(L, "wrong number of arguments");
	}
	return 1;
}

static int m_randomseed(lua_State *L)
{
	if (!reg_ptr(L, &K_RUN))
		return luaL_error(L, "math.randomseed can only be called inside a script invocation");
	int32_t seed = (int32_t)luaL_checkint(L, 1);
	rand48 = ((uint64_t)(uint32_t)seed << 16) | 0x330e;
	return 0;
}

/* ---- redis.* ---- */

static const char *const REPL_NAMES[] = { "REPL_NONE", "REPL_AOF", "REPL_SLAVE", "REPL_REPLICA", "REPL_ALL" };
static const int REPL_VALUES[] = { 0, 1, 2, 2, 3 };

/* argv of a redis.call from the stack: numbers as "%.17g" (Lua's own
 * conversion loses digits), strings as they are; false when an argument
 * is neither. */
static bool call_args(lua_State *L, int argc, const char **argv, size_t *lens, char *nums)
{
	for (int j = 0; j < argc; j++) {
		if (lua_type(L, j + 1) == LUA_TNUMBER) {
			char *b = nums + 32 * j;
			lens[j] = (size_t)snprintf(b, 32, "%.17g", (double)lua_tonumber(L, j + 1));
			argv[j] = b;
		} else {
			argv[j] = lua_tolstring(L, j + 1, &lens[j]);
			if (!argv[j])
				return false;
		}
	}
	return true;
}

static int generic_call(lua_State *L, bool raise)
{
	struct sl_run *run = reg_ptr(L, &K_RUN);
	if (!run)
		return raise_error(L, "redis.call/pcall can only be called inside a script invocation");
	int argc = lua_gettop(L);
	if (argc == 0) {
		push_error(L, "Please specify at least one argument for this redis lib call");
		return raise ? lua_error(L) : 1;
	}
	/* Arrays kept between calls (one script runs at a time). */
	static const char **argv;
	static size_t *lens;
	static char *nums;
	static int cap;
	if (argc > cap) {
		int c = argc < 64 ? 64 : argc;
		const char **a = realloc(argv, (size_t)c * sizeof(*a));
		if (a)
			argv = a;
		size_t *l = realloc(lens, (size_t)c * sizeof(*l));
		if (l)
			lens = l;
		char *nb = realloc(nums, (size_t)c * 32);
		if (nb)
			nums = nb;
		if (!a || !l || !nb)
			return raise_error(L, "out of memory");
		cap = c;
	}
	if (!call_args(L, argc, argv, lens, nums)) {
		push_error(L, "Lua redis lib command arguments must be strings or integers");
		return raise ? lua_error(L) : 1;
	}
	struct sl_call c = { .argc = argc, .argv = argv, .lens = lens, .proto = run->proto };
	int refused = run->host->call(run->arg, &c);
	/* The arguments go (their strings are not needed any more): the
	 * reply has room on the stack, whatever their number. */
	lua_settop(L, 0);
	if (refused) {
		push_error(L, c.err);
		lua_pushstring(L, "ignore_error_stats_update");
		lua_pushboolean(L, 1);
		lua_rawset(L, -3);
		return raise ? lua_error(L) : 1;
	}
	if (!sl_push_reply(L, c.reply, c.rlen))
		return raise_error(L, "Unparsable reply of a command called from script");
	if (raise && c.rlen && c.reply[0] == '-')
		return lua_error(L);
	return 1;
}

static int r_call(lua_State *L) { return generic_call(L, true); }
static int r_pcall(lua_State *L) { return generic_call(L, false); }

static int r_sha1hex(lua_State *L)
{
	if (lua_gettop(L) != 1)
		return raise_error(L, "wrong number of arguments");
	size_t n = 0;
	const char *s = lua_tolstring(L, 1, &n);
	char hex[41];
	sl_sha1_hex(s ? s : "", s ? n : 0, hex);
	lua_pushstring(L, hex);
	return 1;
}

static int r_error_reply(lua_State *L)
{
	if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
		push_error(L, "wrong number or type of arguments");
		return 1;
	}
	size_t n;
	const char *s = lua_tolstring(L, 1, &n);
	if (n && s[0] == '-') {
		sl_push_error(L, s, n);
	} else {
		luaL_Buffer b;
		luaL_buffinit(L, &b);
		luaL_addchar(&b, '-');
		luaL_addlstring(&b, s, n);
		luaL_pushresult(&b);
		size_t m;
		const char *t = lua_tolstring(L, -1, &m);
		sl_push_error(L, t, m);
	}
	return 1;
}

static int r_status_reply(lua_State *L)
{
	if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
		push_error(L, "wrong number or type of arguments");
		return 1;
	}
	lua_newtable(L);
	lua_pushstring(L, "ok");
	lua_pushvalue(L, -3);
	lua_rawset(L, -3);
	return 1;
}

static int r_log(lua_State *L)
{
	int argc = lua_gettop(L);
	if (argc < 2)
		return raise_error(L, "redis.log() requires two arguments or more.");
	if (!lua_isnumber(L, 1))
		return raise_error(L, "First argument must be a number (log level).");
	int level = (int)lua_tonumber(L, 1);
	if (level < 0 || level > 3)
		return raise_error(L, "Invalid debug level.");
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	bool first = true;
	for (int j = 2; j <= argc; j++) {
		size_t n;
		const char *s = lua_tolstring(L, j, &n);
		if (!s)
			continue;
		if (!first)
			luaL_addchar(&b, ' ');
		first = false;
		/* lua_tolstring may have turned a number into a string in
		 * place: fine, the argument is not used again. */
		luaL_addlstring(&b, s, n);
	}
	luaL_pushresult(&b);
	struct sl_run *run = reg_ptr(L, &K_RUN);
	void *ctx = run ? (void *)run : reg_ptr(L, &K_LOAD);
	size_t n;
	const char *s = lua_tolstring(L, -1, &n);
	if (run && run->host->log)
		run->host->log(run->arg, level, s, n);
	else if (!run && ctx)
		fprintf(stderr, "pkvs: %.*s\n", (int)n, s);
	return 0;
}

static int r_setresp(lua_State *L)
{
	struct sl_run *run = reg_ptr(L, &K_RUN);
	if (!run)
		return raise_error(L, "redis.setresp can only be called inside a script invocation");
	if (lua_gettop(L) != 1)
		return raise_error(L, "redis.setresp() requires one argument.");
	int resp = (int)lua_tonumber(L, 1);
	if (resp != 2 && resp != 3)
		return raise_error(L, "RESP version must be 2 or 3.");
	run->proto = resp;
	return 0;
}

static int r_set_repl(lua_State *L)
{
	struct sl_run *run = reg_ptr(L, &K_RUN);
	if (!run)
		return raise_error(L, "redis.set_repl can only be called inside a script invocation");
	if (lua_gettop(L) != 1)
		return raise_error(L, "redis.set_repl() requires two arguments.");
	int flags = (int)lua_tonumber(L, -1);
	if (flags & ~3)
		return raise_error(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
	run->repl = flags;             /* REPL_AOF means nothing to pkvs (no AOF); the host
					* propagates the script's writes while REPL_REPLICA is set */
	return 0;
}

static int r_replicate_commands(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

static int r_breakpoint(lua_State *L)
{
	lua_pushboolean(L, 0);
	return 1;
}

static int r_debug(lua_State *L)
{
	(void)L;
	return 0;
}

static int r_acl_check_cmd(lua_State *L)
{
	struct sl_run *run = reg_ptr(L, &K_RUN);
	if (!run)
		return raise_error(L, "redis.acl_check_cmd can only be called inside a script invocation");
	int argc = lua_gettop(L);
	if (argc == 0)
		return raise_error(L, "Please specify at least one argument for this redis lib call");
	const char **argv = malloc((size_t)argc * (sizeof(*argv) + sizeof(size_t) + 32));
	if (!argv)
		return raise_error(L, "out of memory");
	size_t *lens = (size_t *)(argv + argc);
	char *nums = (char *)(lens + argc);
	if (!call_args(L, argc, argv, lens, nums)) {
		free(argv);
		return raise_error(L, "Lua redis lib command arguments must be strings or integers");
	}
	struct sl_call c = { .argc = -argc, .argv = argv, .lens = lens };   /* argc < 0: ask only */
	int r = run->host->call(run->arg, &c);
	free(argv);
	if (r < 0)
		return raise_error(L, "Invalid command passed to redis.acl_check_cmd()");
	lua_pushboolean(L, r == 0);      /* 1: the script's user may not (ACL) */
	return 1;
}

/* ---- FUNCTION LOAD's redis.register_function ---- */

struct load_ctx {
	const struct sl_host *host;
	void *arg;
	uint64_t deadline_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int read_flags(lua_State *L, uint32_t *out)
{
	uint32_t f = 0;
	for (int j = 1;; j++) {
		lua_rawgeti(L, -1, j);
		if (lua_isnil(L, -1)) {
			lua_pop(L, 1);
			break;
		}
		size_t n;
		const char *s = lua_isstring(L, -1) ? lua_tolstring(L, -1, &n) : NULL;
		uint32_t b = s ? sl_flag(s, n) : 0;
		lua_pop(L, 1);
		if (!b)
			return -1;
		f |= b;
	}
	*out = f;
	return 0;
}

static int r_register_function(lua_State *L)
{
	struct load_ctx *lc = reg_ptr(L, &K_LOAD);
	if (!lc)
		return raise_error(L, "redis.register_function can only be called on FUNCTION LOAD command");
	int argc = lua_gettop(L);
	if (argc < 1 || argc > 2)
		return raise_error(L, "wrong number of arguments to redis.register_function");
	const char *name = NULL, *desc = NULL;
	size_t nlen = 0, dlen = 0;
	int ref = LUA_NOREF;
	uint32_t flags = 0;
	const char *err = NULL;
	if (argc == 2) {
		if (!lua_isstring(L, 1)) {
			err = "first argument to redis.register_function must be a string";
		} else if (!lua_isfunction(L, 2)) {
			err = "second argument to redis.register_function must be a function";
		} else {
			name = lua_tolstring(L, 1, &nlen);
			ref = luaL_ref(L, LUA_REGISTRYINDEX);
		}
	} else if (!lua_istable(L, 1)) {
		err = "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).";
	} else {
		lua_pushnil(L);
		while (!err && lua_next(L, 1)) {
			if (!lua_isstring(L, -2)) {
				err = "named argument key given to redis.register_function is not a string";
				break;
			}
			const char *key = lua_tostring(L, -2);
			if (!strcasecmp(key, "function_name")) {
				if (!lua_isstring(L, -1))
					err = "function_name argument given to redis.register_function must be a string";
				else
					name = lua_tolstring(L, -1, &nlen);   /* stays alive in the table */
			} else if (!strcasecmp(key, "description")) {
				if (!lua_isstring(L, -1))
					err = "description argument given to redis.register_function must be a string";
				else
					desc = lua_tolstring(L, -1, &dlen);
			} else if (!strcasecmp(key, "callback")) {
				if (!lua_isfunction(L, -1)) {
					err = "callback argument given to redis.register_function must be a function";
				} else {
					if (ref != LUA_NOREF)
						luaL_unref(L, LUA_REGISTRYINDEX, ref);
					ref = luaL_ref(L, LUA_REGISTRYINDEX);
					continue;           /* the value is popped */
				}
			} else if (!strcasecmp(key, "flags")) {
				if (!lua_istable(L, -1))
					err = "flags argument to redis.register_function must be a table representing function flags";
				else if (read_flags(L, &flags))
					err = "unknown flag given";
			} else {
				err = "unknown argument given to redis.register_function";
			}
			lua_pop(L, 1);
		}
		if (!err && !name)
			err = "redis.register_function must get a function name argument";
		if (!err && ref == LUA_NOREF)
			err = "redis.register_function must get a callback argument";
	}
	if (err) {
		if (ref != LUA_NOREF)
			luaL_unref(L, LUA_REGISTRYINDEX, ref);
		return raise_error(L, err);
	}
	char msg[256];
	if (lc->host->register_fn(lc->arg, name, nlen, ref, flags, desc, dlen, msg, sizeof(msg))) {
		luaL_unref(L, LUA_REGISTRYINDEX, ref);
		return raise_error(L, msg);
	}
	return 0;
}

/* ---- building a state ---- */

static void set_fn(lua_State *L, const char *name, lua_CFunction f)
{
	lua_pushcfunction(L, f);
	lua_setfield(L, -2, name);
}

static void set_num(lua_State *L, const char *name, lua_Number v)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, name);
}

static void redis_version(lua_State *L)
{
	set_num(L, "REDIS_VERSION_NUM", 0x07000f);
	lua_pushstring(L, "7.0.15");
	lua_setfield(L, -2, "REDIS_VERSION");
}

static void redis_log_api(lua_State *L)
{
	set_fn(L, "log", r_log);
	set_num(L, "LOG_DEBUG", 0);
	set_num(L, "LOG_VERBOSE", 1);
	set_num(L, "LOG_NOTICE", 2);
	set_num(L, "LOG_WARNING", 3);
}

/* The error handler: Redis's {err=, source=, line=} from whatever was
 * raised, the line being the Lua code's that called the failing C
 * function when a C function raised it. */
static int err_handler(lua_State *L)
{
	lua_Debug ar;
	bool have = lua_getstack(L, 1, &ar) && lua_getinfo(L, "nSl", &ar);
	if (have && ar.what && !strcmp(ar.what, "C"))
		have = lua_getstack(L, 2, &ar) && lua_getinfo(L, "nSl", &ar);
	if (!lua_istable(L, 1)) {
		lua_newtable(L);
		lua_pushstring(L, "err");
		reg_get(L, &K_G);
		lua_getfield(L, -1, "tostring");
		lua_remove(L, -2);
		lua_pushvalue(L, 1);
		lua_call(L, 1, 1);
		lua_pushstring(L, "ERR ");
		lua_insert(L, -2);
		lua_concat(L, 2);
		lua_rawset(L, -3);
		lua_replace(L, 1);
	}
	if (have) {
		lua_pushstring(L, ar.source);
		lua_setfield(L, 1, "source");
		lua_pushnumber(L, ar.currentline);
		lua_setfield(L, 1, "line");
	}
	lua_settop(L, 1);
	return 1;
}

static void lib(lua_State *L, const char *name, lua_CFunction open)
{
	lua_pushcfunction(L, open);
	lua_pushstring(L, name);
	lua_call(L, 1, 0);
}

/* G.name becomes a read-only proxy of itself. */
static void proxy_global(lua_State *L, int g, const char *name)
{
	lua_getfield(L, g, name);
	if (!lua_istable(L, -1)) {
		lua_pop(L, 1);
		return;
	}
	make_proxy(L, false);
	lua_setfield(L, g, name);
}

struct sl_engine *sl_open(enum sl_kind kind)
{
	struct sl_engine *e = calloc(1, sizeof(*e));
	if (!e || !(e->L = luaL_newstate())) {
		free(e);
		return NULL;
	}
	e->kind = kind;
	lua_State *L = e->L;
	lib(L, "", luaopen_base);
	lib(L, LUA_TABLIBNAME, luaopen_table);
	lib(L, LUA_STRLIBNAME, luaopen_string);
	lib(L, LUA_MATHLIBNAME, luaopen_math);
	lua_pushcfunction(L, luaopen_cjson);
	lua_call(L, 0, 1);
	lua_setglobal(L, "cjson");
	lua_pushcfunction(L, luaopen_bit);
	lua_pushstring(L, "bit");
	lua_call(L, 1, 1);
	lua_setglobal(L, "bit");
	lua_pushcfunction(L, sl_luaopen_cmsgpack);
	lua_call(L, 0, 1);
	lua_setglobal(L, "cmsgpack");
	/* The registry's tables of read-only ones and proxies (weak keys). */
	lua_newtable(L);
	lua_newtable(L);
	lua_pushstring(L, "k");
	lua_setfield(L, -2, "__mode");
	lua_setmetatable(L, -2);
	reg_set(L, &K_RO);
	lua_newtable(L);
	lua_newtable(L);
	lua_pushstring(L, "k");
	lua_setfield(L, -2, "__mode");
	lua_setmetatable(L, -2);
	reg_set(L, &K_PROXY);

	lua_pushvalue(L, LUA_GLOBALSINDEX);
	int g = lua_gettop(L);
	static const char *const gone[] = { "print", "dofile", "loadfile", "getfenv", "setfenv",
					    "newproxy", "module", "require" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		lua_pushnil(L);
		lua_setfield(L, g, gone[i]);
	}
	/* The builtins that know proxies. */
	lua_getfield(L, g, "setmetatable");
	lua_pushcclosure(L, b_setmetatable, 1);
	lua_setfield(L, g, "setmetatable");
	set_fn(L, "getmetatable", b_getmetatable);
	set_fn(L, "rawset", b_rawset);
	set_fn(L, "rawget", b_rawget);
	set_fn(L, "next", b_next);
	lua_getfield(L, g, "next");
	lua_pushcclosure(L, b_pairs, 1);
	lua_setfield(L, g, "pairs");
	lua_getfield(L, g, "loadstring");
	lua_pushcclosure(L, b_load, 1);
	lua_setfield(L, g, "loadstring");
	lua_getfield(L, g, "load");
	lua_pushcclosure(L, b_load, 1);
	lua_setfield(L, g, "load");
	set_fn(L, "pcall", b_pcall);
	lua_getfield(L, g, "math");
	set_fn(L, "random", m_random);
	set_fn(L, "randomseed", m_randomseed);
	lua_pop(L, 1);

	/* redis */
	lua_newtable(L);
	set_fn(L, "call", r_call);
	set_fn(L, "pcall", r_pcall);
	redis_log_api(L);
	redis_version(L);
	set_fn(L, "setresp", r_setresp);
	set_fn(L, "sha1hex", r_sha1hex);
	set_fn(L, "error_reply", r_error_reply);
	set_fn(L, "status_reply", r_status_reply);
	set_fn(L, "set_repl", r_set_repl);
	for (size_t i = 0; i < sizeof(REPL_NAMES) / sizeof(REPL_NAMES[0]); i++)
		set_num(L, REPL_NAMES[i], REPL_VALUES[i]);
	set_fn(L, "acl_check_cmd", r_acl_check_cmd);
	if (kind == SL_KIND_EVAL) {
		set_fn(L, "breakpoint", r_breakpoint);
		set_fn(L, "debug", r_debug);
		set_fn(L, "replicate_commands", r_replicate_commands);
	}
	lua_setfield(L, g, "redis");

	lua_pushcfunction(L, err_handler);
	reg_set(L, &K_HANDLER);

	static const char *const libs[] = { "redis", "string", "math", "table", "coroutine", "cjson", "bit",
					    "cmsgpack" };
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		proxy_global(L, g, libs[i]);
	/* The string metatable reads the proxy too: its functions stay as they are. */
	lua_pushstring(L, "");
	if (lua_getmetatable(L, -1)) {
		lua_getfield(L, g, "string");
		lua_setfield(L, -2, "__index");
		lua_pop(L, 1);
	}
	lua_pop(L, 1);

	/* FUNCTION LOAD's API. */
	if (kind == SL_KIND_FUNCTION) {
		lua_newtable(L);                 /* the load-time globals */
		lua_newtable(L);                 /* redis */
		set_fn(L, "register_function", r_register_function);
		redis_log_api(L);
		redis_version(L);
		make_proxy(L, true);
		lua_setfield(L, -2, "redis");
		reg_set(L, &K_LIBAPI);
	}

	/* E, the globals scripts see: empty, reads through to K_API. */
	lua_newtable(L);                         /* E */
	int E = lua_gettop(L);
	lua_newtable(L);                         /* its metatable M */
	int M = lua_gettop(L);
	lua_pushcfunction(L, env_index);
	lua_setfield(L, M, "__index");
	lua_pushcfunction(L, ro_newindex);
	lua_setfield(L, M, "__newindex");
	lua_pushvalue(L, M);
	make_proxy(L, false);                    /* getmetatable(_G): read-only */
	lua_pushvalue(L, -1);
	reg_set(L, &K_MP);
	lua_setfield(L, M, "__metatable");
	lua_setmetatable(L, E);
	mark_ro(L, E, g);                        /* pairs(_G) walks G */
	lua_pushvalue(L, E);
	lua_setfield(L, g, "_G");
	lua_pushvalue(L, E);
	reg_set(L, &K_E);
	lua_pushvalue(L, g);
	reg_set(L, &K_G);
	lua_pushvalue(L, g);
	reg_set(L, &K_API);
	lua_replace(L, LUA_GLOBALSINDEX);        /* E */
	lua_settop(L, 0);
	return e;
}

void sl_close(struct sl_engine *e)
{
	if (!e)
		return;
	lua_close(e->L);
	free(e);
}

size_t sl_memory(const struct sl_engine *e)
{
	return e ? (size_t)lua_gc(e->L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(e->L, LUA_GCCOUNTB, 0)
		 : 0;
}

lua_State *sl_state(struct sl_engine *e)
{
	return e->L;
}

void sl_unref(struct sl_engine *e, int ref)
{
	luaL_unref(e->L, LUA_REGISTRYINDEX, ref);
}

int sl_compile(struct sl_engine *e, const char *code, size_t len, char *err, size_t errcap)
{
	lua_State *L = e->L;
	if (luaL_loadbuffer(L, code, len, "@user_script")) {
		snprintf(err, errcap, "Error compiling script (new function): %s", lua_tostring(L, -1));
		lua_pop(L, 1);
		return -1;
	}
	return luaL_ref(L, LUA_REGISTRYINDEX);
}

#define LOAD_TIMEOUT_NS (500ull * 1000000)   /* Redis's LOAD_TIMEOUT_MS */

static void load_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	struct load_ctx *lc = reg_ptr(L, &K_LOAD);
	if (lc && now_ns() > lc->deadline_ns) {
		lua_sethook(L, load_hook, LUA_MASKLINE, 0);
		raise_error(L, "FUNCTION LOAD timeout");
	}
}

/* Redis's luaExtractErrorInformation's message: a string error's "ERR
 * <it>", a table's err field. */
static void error_message(lua_State *L, char *out, size_t cap)
{
	if (lua_isstring(L, -1)) {
		snprintf(out, cap, "ERR %s", lua_tostring(L, -1));
		return;
	}
	const char *m = NULL;
	if (lua_istable(L, -1)) {
		lua_getfield(L, -1, "err");
		m = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	snprintf(out, cap, "%s", m ? m : "ERR unknown error");
}

int sl_load_library(struct sl_engine *e, const char *code, size_t len, const struct sl_host *host,
		    void *arg, char *err, size_t errcap)
{
	lua_State *L = e->L;
	if (luaL_loadbuffer(L, code, len, "@user_function")) {
		snprintf(err, errcap, "Error compiling function: %s", lua_tostring(L, -1));
		lua_pop(L, 1);
		return -1;
	}
	struct load_ctx lc = { host, arg, now_ns() + LOAD_TIMEOUT_NS };
	reg_set_ptr(L, &K_LOAD, &lc);
	reg_get(L, &K_LIBAPI);
	reg_set(L, &K_API);
	lua_sethook(L, load_hook, LUA_MASKCOUNT, 100000);
	int r = 0;
	if (lua_pcall(L, 0, 0, 0)) {
		char m[400];
		error_message(L, m, sizeof(m));
		snprintf(err, errcap, "Error registering functions: %s", m);
		lua_pop(L, 1);
		r = -1;
	}
	lua_sethook(L, NULL, 0, 0);
	reg_get(L, &K_G);
	reg_set(L, &K_API);
	reg_set_ptr(L, &K_LOAD, NULL);
	return r;
}

/* ------------------------------------------------------------ running */

static void run_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	struct sl_run *run = reg_ptr(L, &K_RUN);
	if (!run)
		return;
	if (!run->killed && !(run->host->interrupt && run->host->interrupt(run->arg)))
		return;
	/* Every line from now on: a pcall cannot swallow the kill. */
	run->killed = true;
	lua_sethook(L, run_hook, LUA_MASKLINE, 0);
	raise_error(L, "Script killed by user with SCRIPT KILL...");
}

static void push_array(lua_State *L, int n, const char *const *v, const size_t *lens)
{
	lua_createtable(L, n, 0);
	for (int j = 0; j < n; j++) {
		lua_pushlstring(L, v[j], lens[j]);
		lua_rawseti(L, -2, j + 1);
	}
}

void sl_run(struct sl_engine *e, struct sl_run *run, int ref, bool eval, int nkeys,
	    const char *const *keys, const size_t *klens, int nargs, const char *const *args,
	    const size_t *alens, struct sl_buf *out, bool *err_reply, bool *counted)
{
	lua_State *L = e->L;
	*err_reply = *counted = false;
	int base = lua_gettop(L);
	reg_set_ptr(L, &K_RUN, run);
	if (run->host->interrupt)
		lua_sethook(L, run_hook, LUA_MASKCOUNT, 100000);
	reg_get(L, &K_HANDLER);
	lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
	int err;
	if (eval) {
		reg_get(L, &K_G);
		push_array(L, nkeys, keys, klens);
		lua_setfield(L, -2, "KEYS");
		push_array(L, nargs, args, alens);
		lua_setfield(L, -2, "ARGV");
		lua_pop(L, 1);
		err = lua_pcall(L, 0, 1, -2);
	} else {
		push_array(L, nkeys, keys, klens);
		push_array(L, nargs, args, alens);
		err = lua_pcall(L, 2, 1, -4);
	}
	/* A GC step every 50 runs rather than Lua's full cycle at once. */
	if (++e->runs == 50) {
		lua_gc(L, LUA_GCSTEP, 50);
		e->runs = 0;
	}
	if (err) {
		if (!lua_istable(L, -1)) {
			const char *m = lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure";
			char b[200];
			int n = snprintf(b, sizeof(b), "-ERR Error running script %s, %.100s", run->name, m);
			sl_buf_line(out, b, (size_t)(n < (int)sizeof(b) ? n : (int)sizeof(b) - 1));
		} else {
			const char *m = NULL, *src = NULL, *line = NULL;
			lua_getfield(L, -1, "err");
			m = lua_tostring(L, -1);
			lua_getfield(L, -2, "source");
			src = lua_tostring(L, -1);
			lua_getfield(L, -3, "line");
			line = lua_tostring(L, -1);
			lua_getfield(L, -4, "ignore_error_stats_update");
			*counted = lua_toboolean(L, -1);
			sl_buf_put(out, "-", 1);
			m = m ? m : "ERR unknown error";
			sl_buf_line(out, m, strlen(m));
			if (line && src) {
				char b[160];
				int n = snprintf(b, sizeof(b), " script: %s, on %s:%s.", run->name, src, line);
				sl_buf_line(out, b, (size_t)(n < (int)sizeof(b) ? n : (int)sizeof(b) - 1));
			}
			lua_pop(L, 4);
		}
		sl_buf_put(out, "\r\n", 2);
		lua_pop(L, 1);
		*err_reply = true;
	} else {
		/* A returned error table is an error reply too. */
		if (lua_istable(L, -1)) {
			lua_pushstring(L, "err");
			lua_rawget(L, -2);
			if (lua_type(L, -1) == LUA_TSTRING) {
				*err_reply = true;
				lua_getfield(L, -2, "ignore_error_stats_update");
				*counted = lua_toboolean(L, -1);
				lua_pop(L, 1);
			}
			lua_pop(L, 1);
		}
		sl_reply_value(L, out, run->caller_proto, run->proto);
	}
	lua_settop(L, base);
	lua_sethook(L, NULL, 0, 0);
	reg_set_ptr(L, &K_RUN, NULL);
}
