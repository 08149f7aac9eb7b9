/*
 * script_cmsgpack.c - the cmsgpack table Redis 7.0 gives scripts
 * (script_lua.h): cmsgpack.pack(v...) packs each argument and answers
 * the concatenation; cmsgpack.unpack(s) answers every value s holds;
 * cmsgpack.unpack_one(s [, offset]) and unpack_limit(s, limit
 * [, offset]) answer the offset (0-based) where the next value starts,
 * -1 when s is used up, then the value(s) read.
 *
 * The encoding is Debian's lua-messagepack (MessagePack.lua, pure Lua)
 * with services/script_cmsgpack.lua bending it to what Redis's cmsgpack
 * writes and reads; both are compiled into pkvs as Lua source
 * (meson.build, scripts/embed_lua.py) and loaded into a Lua state when
 * a script first calls cmsgpack there.
 * The functions here are C so that bad arguments get Lua's own "bad
 * argument #n to 'f' (...)" words, as Redis's C functions do.
 */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "script_cmsgpack_lua.h"
#include "script_lua.h"

/* Registry keys: the environment the Lua sources run in, and the
 * encoder and decoder once loaded ({encode, decode}). */
static char K_ENV, K_CODEC;

/* MessagePack.lua's require: the standard libraries it asks for, from
 * the environment (upvalue 1). */
static int mp_require(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	lua_getfield(L, lua_upvalueindex(1), name);
	if (!lua_istable(L, -1))
		return luaL_error(L, "module '%s' not found", name);
	return 1;
}

static void push_codec(lua_State *L, int which);

static int mp_pack(lua_State *L)
{
	int n = lua_gettop(L);
	if (n == 0)
		return luaL_argerror(L, 0, "MessagePack pack needs input.");
	if (!lua_checkstack(L, n))
		return luaL_argerror(L, 0, "Too many arguments for MessagePack pack.");
	push_codec(L, 1);
	lua_insert(L, 1);
	lua_call(L, n, 1);
	return 1;
}

/* Redis's mp_unpack_full: limit 0 and offset 0 read every value and
 * answer no offset. */
static int unpack_full(lua_State *L, lua_Integer limit, lua_Integer offset)
{
	size_t len;
	luaL_checklstring(L, 1, &len);
	int all = !limit && !offset;
	if (offset < 0 || limit < 0)   /* Redis's words, its length where the limit goes too */
		return luaL_error(L, "Invalid request to unpack with offset of %d and limit of %d.",
				  (int)offset, (int)len);
	if ((size_t)offset > len)
		return luaL_error(L, "Start offset %d greater than input length %d.", (int)offset,
				  (int)len);
	push_codec(L, 2);
	lua_pushvalue(L, 1);
	lua_pushinteger(L, offset);
	lua_pushinteger(L, all ? -1 : limit);
	lua_call(L, 3, 3);                     /* next offset, count, values */
	if (lua_isnil(L, -3))                  /* bad input: Redis's words, at the caller's line */
		return luaL_error(L, "%s", lua_tostring(L, -2));
	int t = lua_gettop(L);
	int n = (int)lua_tointeger(L, t - 1);
	if (!all)
		lua_pushvalue(L, t - 2);
	for (int i = 1; i <= n; i++) {
		luaL_checkstack(L, 1, "too many return values at once; use unpack_one or unpack_limit "
			       "instead.");
		lua_rawgeti(L, t, i);
	}
	return n + !all;
}

static int mp_unpack(lua_State *L)
{
	return unpack_full(L, 0, 0);
}

static int mp_unpack_one(lua_State *L)
{
	lua_Integer offset = luaL_optinteger(L, 2, 0);
	if (lua_gettop(L) > 1)
		lua_settop(L, 1);
	return unpack_full(L, 1, offset);
}

static int mp_unpack_limit(lua_State *L)
{
	lua_Integer limit = luaL_checkinteger(L, 2);
	lua_Integer offset = luaL_optinteger(L, 3, 0);
	if (lua_gettop(L) > 1)
		lua_settop(L, 1);
	return unpack_full(L, limit, offset);
}

/* Run Lua source src (chunk name name) in environment env (an index),
 * nargs arguments on the stack above it, nres results. */
static void run_source(lua_State *L, const char *src, size_t len, const char *name, int env,
		       int nargs, int nres)
{
	if (luaL_loadbuffer(L, src, len, name))
		lua_error(L);
	lua_pushvalue(L, env);
	lua_setfenv(L, -2);
	lua_insert(L, -1 - nargs);
	lua_call(L, nargs, nres);
}

/* Push the module's table of decoders by first byte (the upvalue
 * "unpackers" of its unpack_cursor, the module at idx): the adaptation
 * replaces those of the types Redis does not read. */
static void push_decoders(lua_State *L, int idx)
{
	lua_getfield(L, idx, "unpack_cursor");
	for (int i = 1;; i++) {
		const char *name = lua_getupvalue(L, -1, i);
		if (!name)
			luaL_error(L, "MessagePack.lua: no decoder table in unpack_cursor");
		if (!strcmp(name, "unpackers") && lua_istable(L, -1))
			break;
		lua_pop(L, 1);
	}
	lua_remove(L, -2);
}

/* Push the encoder (which 1) or the decoder (2). Both are compiled at
 * a state's first use of cmsgpack, not with the state: compiling the
 * module costs many times the rest of a state's setup, in time and in
 * Lua memory, which scripts that never use it do not pay. */
static void push_codec(lua_State *L, int which)
{
	lua_pushlightuserdata(L, &K_CODEC);
	lua_rawget(L, LUA_REGISTRYINDEX);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_pushlightuserdata(L, &K_ENV);
		lua_rawget(L, LUA_REGISTRYINDEX);
		int env = lua_gettop(L);
		run_source(L, messagepack_lua, sizeof(messagepack_lua) - 1, "=MessagePack", env, 0, 1);
		push_decoders(L, -1);
		run_source(L, cmsgpack_lua, sizeof(cmsgpack_lua) - 1, "=cmsgpack", env, 2, 2);
		lua_createtable(L, 2, 0);
		lua_insert(L, env + 1);
		lua_rawseti(L, env + 1, 2);
		lua_rawseti(L, env + 1, 1);
		lua_remove(L, env);
		lua_pushlightuserdata(L, &K_CODEC);
		lua_pushvalue(L, -2);
		lua_rawset(L, LUA_REGISTRYINDEX);
	}
	lua_rawgeti(L, -1, which);
	lua_remove(L, -2);
}

int sl_luaopen_cmsgpack(lua_State *L)
{
	/* The sources run in a copy of the globals as they are before the
	 * sandbox (the module keeps what it finds there), with require for
	 * the module; scripts never reach it. */
	lua_newtable(L);
	int env = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, LUA_GLOBALSINDEX)) {
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, env);
	}
	lua_pushvalue(L, env);
	lua_pushcclosure(L, mp_require, 1);
	lua_setfield(L, env, "require");
	lua_pushlightuserdata(L, &K_ENV);
	lua_insert(L, env);
	lua_rawset(L, LUA_REGISTRYINDEX);

	static const struct { const char *name; lua_CFunction f; } fns[] = {
		{ "pack", mp_pack }, { "unpack", mp_unpack }, { "unpack_one", mp_unpack_one },
		{ "unpack_limit", mp_unpack_limit },
	};
	lua_createtable(L, 0, 5);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		lua_pushcfunction(L, fns[i].f);
		lua_setfield(L, -2, fns[i].name);
	}
	lua_pushliteral(L, "cmsgpack");
	lua_setfield(L, -2, "_NAME");
	return 1;
}
