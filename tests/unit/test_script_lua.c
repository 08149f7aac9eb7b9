/* test_script_lua.c - services/script_lua.c without a server: SHA-1
 * against FIPS 180's published vectors, the RESP -> Lua and Lua -> RESP
 * conversions, the sandbox, and redis.call through a host that answers
 * from a table. */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "check.h"
#include "script_lua.h"

static void sha(const char *in, size_t n, const char *want)
{
	char hex[41];
	sl_sha1_hex(in, n, hex);
	CHECK(!strcmp(hex, want));
	if (strcmp(hex, want))
		fprintf(stderr, "  sha1(%.20s...) = %s, want %s\n", in, hex, want);
}

static void test_sha1(void)
{
	sha("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
	sha("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha(two, strlen(two), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
	sha(four, strlen(four), "a49b2446a02c645bf419f995b67091253a04a259");
	/* A million 'a', fed in uneven pieces (the block boundary inside a
	 * piece, and pieces inside a block). */
	struct sl_sha1 s;
	uint8_t d[20];
	char a[997];
	memset(a, 'a', sizeof(a));
	sl_sha1_init(&s);
	size_t left = 1000000;
	for (size_t k = 1; left; k = k % sizeof(a) + 7) {
		size_t n = k < left ? k : left;
		n = n < sizeof(a) ? n : sizeof(a);
		sl_sha1_update(&s, a, n);
		left -= n;
	}
	sl_sha1_final(&s, d);
	static const uint8_t want[20] = { 0x34, 0xaa, 0x97, 0x3c, 0xd4, 0xc4, 0xda, 0xa4, 0xf6, 0x1e,
					  0xeb, 0x2b, 0xdb, 0xad, 0x27, 0x31, 0x65, 0x34, 0x01, 0x6f };
	CHECK(!memcmp(d, want, 20));
	/* Redis's own example (redis.sha1hex in scripting.tcl). */
	sha("Pizza & Mandolino", 17, "74822d82031af7493c20eefa13bd07ec4fada82f");
}

/* A reply's RESP turned into Lua and back to RESP (for a client of
 * cproto, the script's RESP sproto). */
static void round_trip(lua_State *L, const char *in, int cproto, int sproto, const char *want)
{
	size_t used = sl_push_reply(L, in, strlen(in));
	CHECK_EQ(used, strlen(in));
	struct sl_buf out = { 0 };
	sl_reply_value(L, &out, cproto, sproto);
	bool ok = out.len == strlen(want) && !memcmp(out.p, want, out.len);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  %s -> %.*s, want %s\n", in, (int)out.len, out.p, want);
	sl_buf_free(&out);
	CHECK_EQ(lua_gettop(L), 0);
}

static void test_conversions(void)
{
	struct sl_engine *e = sl_open(SL_KIND_EVAL);
	CHECK(e != NULL);
	lua_State *L = sl_state(e);
	round_trip(L, ":42\r\n", 2, 2, ":42\r\n");
	round_trip(L, "$5\r\nhello\r\n", 2, 2, "$5\r\nhello\r\n");
	round_trip(L, "$0\r\n\r\n", 2, 2, "$0\r\n\r\n");
	round_trip(L, "$-1\r\n", 2, 2, "$-1\r\n");              /* null bulk: false, then null */
	round_trip(L, "$-1\r\n", 3, 2, "_\r\n");
	round_trip(L, "*-1\r\n", 2, 2, "$-1\r\n");
	round_trip(L, "+OK\r\n", 2, 2, "+OK\r\n");
	round_trip(L, "-ERR bad thing\r\n", 2, 2, "-ERR bad thing\r\n");
	round_trip(L, "-WRONGTYPE Operation\r\n", 3, 2, "-WRONGTYPE Operation\r\n");
	round_trip(L, "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n", 2, 2, "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n");
	round_trip(L, "*0\r\n", 2, 2, "*0\r\n");
	/* RESP3 from a script that asked for it (redis.setresp(3)). */
	round_trip(L, "_\r\n", 2, 3, "$-1\r\n");
	round_trip(L, "_\r\n", 3, 3, "_\r\n");
	round_trip(L, "#t\r\n", 2, 3, ":1\r\n");
	round_trip(L, "#f\r\n", 2, 3, ":0\r\n");
	round_trip(L, "#t\r\n", 3, 3, "#t\r\n");
	round_trip(L, ",3.141\r\n", 2, 3, "$5\r\n3.141\r\n");
	round_trip(L, ",3.141\r\n", 3, 3, ",3.141\r\n");
	round_trip(L, ",inf\r\n", 3, 3, ",inf\r\n");
	round_trip(L, "(1234567999999999999999999999999999999\r\n", 3, 3,
		   "(1234567999999999999999999999999999999\r\n");
	round_trip(L, "(12\r\n", 2, 3, "$2\r\n12\r\n");
	round_trip(L, "%1\r\n$1\r\nf\r\n$1\r\nv\r\n", 3, 3, "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
	round_trip(L, "%1\r\n$1\r\nf\r\n$1\r\nv\r\n", 2, 3, "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
	round_trip(L, "~1\r\n$1\r\nm\r\n", 3, 3, "~1\r\n$1\r\nm\r\n");
	round_trip(L, "~1\r\n$1\r\nm\r\n", 2, 3, "*1\r\n$1\r\nm\r\n");
	round_trip(L, "=8\r\ntxt:abcd\r\n", 3, 3, "=8\r\ntxt:abcd\r\n");
	round_trip(L, "=8\r\ntxt:abcd\r\n", 2, 3, "$4\r\nabcd\r\n");
	round_trip(L, "|1\r\n$1\r\na\r\n:1\r\n$1\r\nx\r\n", 2, 3, "$1\r\nx\r\n");   /* attributes dropped */
	/* Cut or malformed: nothing pushed. */
	CHECK_EQ(sl_push_reply(L, "$5\r\nhel", 8), 0);
	CHECK_EQ(sl_push_reply(L, "*2\r\n:1\r\n", 8), 0);
	CHECK_EQ(sl_push_reply(L, "?x\r\n", 4), 0);
	lua_settop(L, 0);
	/* Lua values as a script returns them. */
	struct { const char *lua; int cproto, sproto; const char *want; } v[] = {
		{ "return 100.5", 2, 2, ":100\r\n" },
		{ "return -3.99", 2, 2, ":-3\r\n" },
		{ "return 1e300", 2, 2, ":-9223372036854775808\r\n" },
		{ "return true", 3, 2, ":1\r\n" },
		{ "return false", 3, 2, "_\r\n" },
		{ "return {ok='a\\r\\nb'}", 2, 2, "+a  b\r\n" },
		{ "return {err='MY code'}", 2, 2, "-MY code\r\n" },
		{ "return {1, nil, 3}", 2, 2, "*1\r\n:1\r\n" },
		{ "return {double=0.1}", 3, 2, ",0.10000000000000001\r\n" },
		{ "return {big_number='1\\r\\n2'}", 2, 2, "$4\r\n1  2\r\n" },
		{ "return {map={a=1}}", 3, 2, "%1\r\n$1\r\na\r\n:1\r\n" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		CHECK(luaL_loadstring(L, v[i].lua) == 0);
		CHECK(lua_pcall(L, 0, 1, 0) == 0);
		struct sl_buf out = { 0 };
		sl_reply_value(L, &out, v[i].cproto, v[i].sproto);
		bool ok = out.len == strlen(v[i].want) && !memcmp(out.p, v[i].want, out.len);
		CHECK(ok);
		if (!ok)
			fprintf(stderr, "  %s -> %.*s, want %s\n", v[i].lua, (int)out.len, out.p, v[i].want);
		sl_buf_free(&out);
	}
	sl_close(e);
}

/* A host whose every command answers what `replies` says for its name. */
static int calls;
static int fake_call(void *arg, struct sl_call *c)
{
	(void)arg;
	calls++;
	if (c->argc < 0)
		return 0;
	if (c->lens[0] == 3 && !memcmp(c->argv[0], "bad", 3)) {
		snprintf(c->err, sizeof(c->err), "Unknown Redis command called from script");
		return -1;
	}
	if (c->lens[0] == 4 && !memcmp(c->argv[0], "echo", 4)) {   /* "$n\r\n<arg 1>\r\n" */
		static char b[256];
		int n = snprintf(b, sizeof(b), "$%zu\r\n%.*s\r\n", c->lens[1], (int)c->lens[1], c->argv[1]);
		c->reply = b;
		c->rlen = (size_t)n;
		return 0;
	}
	c->reply = "-ERR nope\r\n";
	c->rlen = 11;
	return 0;
}

static const struct sl_host fake = { .call = fake_call };

static void run_script(struct sl_engine *e, const char *code, const char *want)
{
	char err[256];
	uint32_t flags;
	size_t skip;
	CHECK(sl_shebang(code, strlen(code), &flags, &skip, err, sizeof(err)) == 0);
	int ref = sl_compile(e, code + skip, strlen(code) - skip, err, sizeof(err));
	CHECK(ref >= 0);
	if (ref < 0)
		return;
	struct sl_run run = { .host = &fake, .name = "t", .caller_proto = 2, .proto = 2 };
	const char *args[] = { "k1", "a1" };
	size_t lens[] = { 2, 2 };
	struct sl_buf out = { 0 };
	bool isErr, counted;
	sl_run(e, &run, ref, true, 1, args, lens, 1, args + 1, lens + 1, &out, &isErr, &counted);
	bool ok = out.len == strlen(want) && !memcmp(out.p, want, out.len);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  %s -> %.*s, want %s\n", code, (int)out.len, out.p, want);
	sl_buf_free(&out);
	sl_unref(e, ref);
}

static void test_sandbox_and_calls(void)
{
	struct sl_engine *e = sl_open(SL_KIND_EVAL);
	run_script(e, "return {KEYS[1], ARGV[1]}", "*2\r\n$2\r\nk1\r\n$2\r\na1\r\n");
	run_script(e, "return redis.call('echo', 42)", "$2\r\n42\r\n");
	run_script(e, "return redis.call('echo', 0.5)", "$3\r\n0.5\r\n");
	run_script(e, "return redis.pcall('other')", "-ERR nope\r\n");
	run_script(e, "return redis.pcall('bad')", "-ERR Unknown Redis command called from script\r\n");
	run_script(e, "return redis.call('bad')",
		   "-ERR Unknown Redis command called from script script: t, on @user_script:1.\r\n");
	run_script(e, "return x", "-ERR user_script:1: Script attempted to access nonexistent global "
				  "variable 'x' script: t, on @user_script:1.\r\n");
	run_script(e, "x = 1", "-ERR user_script:1: Attempt to modify a readonly table script: t, on "
			       "@user_script:1.\r\n");
	run_script(e, "string.rep = nil", "-ERR user_script:1: Attempt to modify a readonly table "
					  "script: t, on @user_script:1.\r\n");
	run_script(e, "return type(os)", "-ERR user_script:1: Script attempted to access nonexistent "
					 "global variable 'os' script: t, on @user_script:1.\r\n");
	run_script(e, "return rawget(redis, 'call') ~= nil", ":1\r\n");
	run_script(e, "return ('ab'):rep(2)", "$4\r\nabab\r\n");
	run_script(e, "#!lua flags=no-writes\nreturn cjson.encode({1})", "$3\r\n[1]\r\n");
	run_script(e, "return bit.band(12, 10)", ":8\r\n");
	char err[256];
	uint32_t flags;
	size_t skip;
	CHECK(sl_shebang("#!lua flags=no-writes,allow-oom\nx", 33, &flags, &skip, err, sizeof(err)) == 0);
	CHECK_EQ(flags, SL_NO_WRITES | SL_ALLOW_OOM);
	CHECK_EQ(skip, 31);
	CHECK(sl_shebang("#!lua flags=bad\n", 16, &flags, &skip, err, sizeof(err)) == -1);
	CHECK(!strcmp(err, "Unexpected flag in script shebang: bad"));
	CHECK(sl_shebang("return 1", 8, &flags, &skip, err, sizeof(err)) == 0);
	CHECK_EQ(flags, SL_EVAL_COMPAT);
	CHECK(sl_compile(e, "return (", 8, err, sizeof(err)) < 0);
	static const char pre[] = "Error compiling script (new function): user_script:1:";
	CHECK(!strncmp(err, pre, sizeof(pre) - 1));
	sl_close(e);
}

/* cmsgpack (script_cmsgpack.c): the bytes Redis 7.0.15's cmsgpack writes
 * (checked against redis-server), its reads and its errors. */
static void test_cmsgpack(void)
{
	static const char hex[] = "local function hex(s) return (s:gsub('.', function(c) "
				  "return string.format('%02x', c:byte()) end)) end ";
	static const struct { const char *expr, *want; } packs[] = {
		{ "0.1", "cb3fb999999999999a" },                /* a double */
		{ "0.5", "ca3f000000" },                        /* a float holds it */
		{ "1/0", "ca7f800000" },
		{ "-1099511627776", "d3ffffff0000000000" },
		{ "2^60 + 2^10", "cf1000000000000400" },        /* past 2^53: 8 exact bytes */
		{ "-2^60 - 2^10", "d3effffffffffffc00" },
		{ "2^63", "ca5f000000" },                       /* no int64: a float */
		{ "2^-149", "ca00000001" },                     /* the least float */
		{ "1e-310", "cb000012688b70e62b" },             /* below normal doubles */
		{ "-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1",
		  "ffe0d0dfd080d1ff7fd18000d2ffff7fffd280000000d3ffffffff7fffffff" },
		{ "127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32",
		  "7fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000" },
		{ "true, false, nil, 'a', type", "c3c2c0a161c0" },
		{ "{}", "90" },
		{ "{1, 2, 3}", "93010203" },
		{ "{[1] = 1, [3] = 3}", "8201010303" },      /* a hole: a map */
	};
	struct sl_engine *e = sl_open(SL_KIND_EVAL);
	char code[512], want[128];
	for (size_t i = 0; i < sizeof(packs) / sizeof(packs[0]); i++) {
		snprintf(code, sizeof(code), "%sreturn hex(cmsgpack.pack(%s))", hex, packs[i].expr);
		snprintf(want, sizeof(want), "$%zu\r\n%s\r\n", strlen(packs[i].want), packs[i].want);
		run_script(e, code, want);
	}
	snprintf(code, sizeof(code), "%sreturn hex(cmsgpack.pack(string.rep('x', 40))):sub(1, 6)", hex);
	run_script(e, code, "$6\r\nd92878\r\n");                 /* str8 */
	/* A table holding itself: packed 16 deep, then nil. */
	snprintf(code, sizeof(code), "%slocal a = {y = 5} a.x = {x = a} return hex(cmsgpack.pack(a))", hex);
	run_script(e, code, "$146\r\n82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881"
			    "a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881"
			    "a178c0\r\n");
	run_script(e, "local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, 'x', {2, {k = 0.25}})) "
		      "return {a, b, c[1], c[2].k * 4}", "*4\r\n:1\r\n$1\r\nx\r\n:2\r\n:1\r\n");
	run_script(e, "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 'x'), 1)}", "*2\r\n:2\r\n:2\r\n");
	run_script(e, "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 1)}", "*2\r\n:-1\r\n:2\r\n");
	run_script(e, "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 0)}",
		   "*3\r\n:2\r\n:1\r\n:2\r\n");
	run_script(e, "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2), 0)}", "*2\r\n:1\r\n:2\r\n");
	run_script(e, "return {cmsgpack.unpack('')}", "*0\r\n");
	run_script(e, "return cmsgpack.unpack('\\193')", "-ERR user_script:1: Bad data format in input. "
							"script: t, on @user_script:1.\r\n");
	run_script(e, "return cmsgpack.unpack('\\196\\1a')", "-ERR user_script:1: Bad data format in "
							  "input. script: t, on @user_script:1.\r\n");
	run_script(e, "return cmsgpack.unpack('\\147\\1')", "-ERR user_script:1: Missing bytes in input. "
							  "script: t, on @user_script:1.\r\n");
	run_script(e, "return cmsgpack.unpack_one('ab', 3)", "-ERR user_script:1: Start offset 3 greater "
							    "than input length 2. script: t, on @user_script:1.\r\n");
	run_script(e, "return cmsgpack.pack()", "-ERR user_script:1: bad argument #0 to 'pack' "
						"(MessagePack pack needs input.) script: t, on @user_script:1.\r\n");
	run_script(e, "cmsgpack.pack = nil", "-ERR user_script:1: Attempt to modify a readonly table "
					     "script: t, on @user_script:1.\r\n");
	sl_close(e);
	/* Functions have it too. */
	e = sl_open(SL_KIND_FUNCTION);
	run_script(e, "return cmsgpack.unpack(cmsgpack.pack('f'))", "$1\r\nf\r\n");
	sl_close(e);
}

int main(void)
{
	test_sha1();
	test_conversions();
	test_sandbox_and_calls();
	test_cmsgpack();
	printf("%d passed, %d failed\n", check_pass, check_fail);
	return check_fail != 0;
}
