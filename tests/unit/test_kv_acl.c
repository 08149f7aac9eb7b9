/* test_kv_acl.c - pkvs's ACL rules (services/kv_acl.c): SHA-256 against
 * FIPS 180-4's vectors, the rule parser (each rule, its errors, all or
 * nothing), the description ACL LIST gives, and the check of commands,
 * keys and channels against patterns. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv_acl.h"

static struct paste_resp_arg A(const char *s)
{
	return (struct paste_resp_arg){ s, strlen(s) };
}

/* ACL SETUSER name ops... (NULL-ended): 0 or -1, err holds the words. */
static char err[512];
static int setuser(const char *name, ...)
{
	struct paste_resp_arg ops[32];
	uint32_t n = 0;
	va_list ap;
	va_start(ap, name);
	for (const char *op; (op = va_arg(ap, const char *)) != NULL;)
		ops[n++] = A(op);
	va_end(ap);
	err[0] = 0;
	return kv_acl_setuser(name, strlen(name), ops, n, err, sizeof(err));
}

static int check_cmd(const char *user, uint32_t *idx, ...)
{
	struct paste_resp_arg argv[16];
	uint32_t argc = 0;
	va_list ap;
	va_start(ap, idx);
	for (const char *w; (w = va_arg(ap, const char *)) != NULL;)
		argv[argc++] = A(w);
	va_end(ap);
	struct kv_cmd_rt *rt = kv_cmd_find(&argv[0]);
	if (rt && rt->nsubs && argc > 1)
		rt = kv_cmd_sub(rt, &argv[1]);
	if (!rt)
		return -1;
	return kv_acl_check(kv_acl_get(user, strlen(user)), rt, argv, argc, idx);
}

static bool described(const char *user, const char *want)
{
	char *d = kv_acl_describe(kv_acl_get(user, strlen(user)));
	bool ok = d && !strcmp(d, want);
	if (!ok)
		fprintf(stderr, "describe %s: '%s', want '%s'\n", user, d ? d : "(null)", want);
	free(d);
	return ok;
}

static void sha256_vectors(void)
{
	static const struct { const char *in, *out; } v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
		  "klmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char h[65] = { 0 };
		kv_acl_sha256_hex(v[i].in, strlen(v[i].in), h);
		CHECK(!strcmp(h, v[i].out));
	}
	/* A million 'a': many blocks. */
	char *m = malloc(1000000);
	memset(m, 'a', 1000000);
	char h[65] = { 0 };
	kv_acl_sha256_hex(m, 1000000, h);
	CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	free(m);
	/* 55, 56 and 64 bytes: the padding's edges. */
	static const struct { size_t n; const char *out; } e[] = {
		{ 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
		{ 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
		{ 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
	};
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		char b[64];
		memset(b, 'a', e[i].n);
		kv_acl_sha256_hex(b, e[i].n, h);
		CHECK(!strcmp(h, e[i].out));
	}
}

static void parser(void)
{
	CHECK(described("default", "on nopass ~* &* +@all"));
	CHECK(kv_acl_default()->all);
	CHECK_EQ(setuser("bob", NULL), 0);
	CHECK(described("bob", "off resetchannels -@all"));
	CHECK(!kv_acl_get("bob", 3)->all);
	CHECK_EQ(setuser("alice", "on", ">p1", "~foo*", "%R~bar", "&ch*", "+@hash", "-hset", NULL), 0);
	CHECK(described("alice", "on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a "
			"~foo* %R~bar resetchannels &ch* -@all +@hash -hset"));
	CHECK(kv_acl_password_ok(kv_acl_get("alice", 5), "p1", 2));
	CHECK(!kv_acl_password_ok(kv_acl_get("alice", 5), "p2", 2));
	/* all or nothing: a bad rule leaves the user as it was */
	CHECK_EQ(setuser("alice", "off", "+nosuchcommand", NULL), -1);
	CHECK(!strcmp(err, "ERR Error in ACL SETUSER modifier '+nosuchcommand': Unknown command or "
		      "category name in ACL"));
	CHECK(kv_acl_get("alice", 5)->flags & KV_ACLU_ON);
	CHECK_EQ(setuser("carol", "+@nosuch", NULL), -1);
	CHECK(kv_acl_get("carol", 5) == NULL);
	CHECK_EQ(setuser("alice", "allkeys", "~x", NULL), -1);
	CHECK(strstr(err, "'allkeys' flag") != NULL);
	CHECK_EQ(setuser("alice", "allchannels", "&x", NULL), -1);
	CHECK(strstr(err, "'allchannels' flag") != NULL);
	CHECK_EQ(setuser("alice", "#abc", NULL), -1);
	CHECK(strstr(err, "exactly 64 characters") != NULL);
	CHECK_EQ(setuser("alice", "<nothere", NULL), -1);
	CHECK(strstr(err, "does not exist") != NULL);
	CHECK_EQ(setuser("alice", "+config|get|x", NULL), -1);
	CHECK_EQ(setuser("alice", "+select|", NULL), -1);
	CHECK(strstr(err, "Syntax error") != NULL);
	CHECK_EQ(setuser("alice", "%X~a", NULL), -1);
	CHECK_EQ(setuser("bad name", NULL), -1);
	CHECK(!strcmp(err, "ERR Usernames can't contain spaces or null characters"));
	CHECK_EQ(setuser("alice", "(~x", NULL), -1);
	CHECK(!strcmp(err, "ERR Unmatched parenthesis in acl selector starting at '(~x'."));
	/* passwords: by hash, removal, nopass, resetpass */
	CHECK_EQ(setuser("dave", "on", "#" "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
			 NULL), 0);
	CHECK(kv_acl_password_ok(kv_acl_get("dave", 4), "abc", 3));
	CHECK_EQ(setuser("dave", "<abc", NULL), 0);
	CHECK(!kv_acl_password_ok(kv_acl_get("dave", 4), "abc", 3));
	CHECK_EQ(setuser("dave", "nopass", NULL), 0);
	CHECK(kv_acl_password_ok(kv_acl_get("dave", 4), "anything", 8));
	CHECK_EQ(setuser("dave", "resetpass", NULL), 0);
	CHECK(!kv_acl_password_ok(kv_acl_get("dave", 4), "anything", 8));
	/* +@all -cmd keeps "future" commands; reset goes back to nothing */
	CHECK_EQ(setuser("dave", "+@all", "-get", "allkeys", NULL), 0);
	CHECK(described("dave", "on ~* resetchannels +@all -get"));
	CHECK_EQ(setuser("dave", "reset", NULL), 0);
	CHECK(described("dave", "off sanitize-payload resetchannels -@all"));
	/* first args and subcommands */
	CHECK_EQ(setuser("dave", "+select|0", "+config|get", NULL), 0);
	CHECK(described("dave", "off sanitize-payload resetchannels -@all +config|get +select|0"));
	/* a selector */
	CHECK_EQ(setuser("dave", "(~sel*", "+set)", NULL), 0);
	CHECK(described("dave", "off sanitize-payload resetchannels -@all +config|get +select|0 "
			"(~sel* resetchannels -@all +set)"));
	CHECK_EQ(setuser("dave", "clearselectors", NULL), 0);
	CHECK_EQ(kv_acl_get("dave", 4)->nsel, 1);
}

static void checks(void)
{
	uint32_t idx = 0;
	CHECK_EQ(setuser("eve", "on", "nopass", "~foo*", "%R~ro*", "%W~wo*", "&news.*", "+get", "+set",
			 "+publish", "+subscribe", "+psubscribe", "+select|1", "+config|get", "+mget",
			 NULL), 0);
	CHECK_EQ(check_cmd("eve", &idx, "get", "foo1", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "get", "bar", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(idx, 1);
	CHECK_EQ(check_cmd("eve", &idx, "mget", "foo1", "foo2", "zzz", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(idx, 3);
	CHECK_EQ(check_cmd("eve", &idx, "get", "ro1", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "set", "ro1", "v", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(check_cmd("eve", &idx, "set", "wo1", "v", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "get", "wo1", NULL), KV_ACL_DENIED_KEY);
	/* SET ... GET reads the key too */
	CHECK_EQ(check_cmd("eve", &idx, "set", "wo1", "v", "GET", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(check_cmd("eve", &idx, "del", "foo1", NULL), KV_ACL_DENIED_CMD);
	CHECK_EQ(check_cmd("eve", &idx, "select", "1", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "select", "2", NULL), KV_ACL_DENIED_CMD);
	CHECK_EQ(check_cmd("eve", &idx, "config", "get", "x", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "config", "set", "x", "y", NULL), KV_ACL_DENIED_CMD);
	CHECK_EQ(check_cmd("eve", &idx, "publish", "news.a", "m", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "publish", "sport", "m", NULL), KV_ACL_DENIED_CHANNEL);
	CHECK_EQ(check_cmd("eve", &idx, "subscribe", "news.x", "sport", NULL), KV_ACL_DENIED_CHANNEL);
	CHECK_EQ(idx, 2);
	/* a pattern subscription must name an allowed pattern literally */
	CHECK_EQ(check_cmd("eve", &idx, "psubscribe", "news.*", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "psubscribe", "news.a*", NULL), KV_ACL_DENIED_CHANNEL);
	/* no_auth commands run whatever the rules */
	CHECK_EQ(check_cmd("eve", &idx, "auth", "x", NULL), KV_ACL_OK);
	/* a second selector allows what the root does not */
	CHECK_EQ(setuser("eve", "(~other* +del)", NULL), 0);
	CHECK_EQ(check_cmd("eve", &idx, "del", "other1", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("eve", &idx, "del", "foo1", NULL), KV_ACL_DENIED_KEY);
	/* categories */
	CHECK_EQ(setuser("frank", "on", "allkeys", "+@read", "-@hash", NULL), 0);
	CHECK_EQ(check_cmd("frank", &idx, "get", "k", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("frank", &idx, "hget", "k", "f", NULL), KV_ACL_DENIED_CMD);
	CHECK_EQ(check_cmd("frank", &idx, "set", "k", "v", NULL), KV_ACL_DENIED_CMD);
}

static void glob_patterns(void)
{
	uint32_t idx;
	CHECK_EQ(setuser("gina", "on", "+get", "~a?c", "~[xy]z", "~lit\\*", NULL), 0);
	CHECK_EQ(check_cmd("gina", &idx, "get", "abc", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("gina", &idx, "get", "abbc", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(check_cmd("gina", &idx, "get", "yz", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("gina", &idx, "get", "zz", NULL), KV_ACL_DENIED_KEY);
	CHECK_EQ(check_cmd("gina", &idx, "get", "lit*", NULL), KV_ACL_OK);
	CHECK_EQ(check_cmd("gina", &idx, "get", "litx", NULL), KV_ACL_DENIED_KEY);
}

static void file_round_trip(void)
{
	char *text = kv_acl_save();
	CHECK(text != NULL);
	uint32_t before = kv_acl_count();
	char e[512];
	CHECK_EQ(kv_acl_load("f.acl", text, strlen(text), e, sizeof(e)), 0);
	CHECK_EQ(kv_acl_count(), before);
	char *again = kv_acl_save();
	CHECK(again && !strcmp(text, again));
	free(again);
	/* an error leaves the users as they were */
	const char bad[] = "user x on +get\nuser y on +nosuch\n";
	CHECK_EQ(kv_acl_load("f.acl", bad, sizeof(bad) - 1, e, sizeof(e)), -1);
	CHECK(!strcmp(e, "ERR f.acl:2: Error in applying operation '+nosuch': Unknown command or "
		      "category name in ACL. WARNING: ACL errors detected, no change to the "
		      "previously active ACL rules was performed"));
	CHECK_EQ(kv_acl_count(), before);
	const char dup[] = "user x on\nuser x off\n";
	CHECK_EQ(kv_acl_load("f.acl", dup, sizeof(dup) - 1, e, sizeof(e)), -1);
	CHECK(strstr(e, "ERR WARNING: Duplicate user 'x' found on line 2. ") == e);
	/* without default in the file, default is Redis's again */
	const char one[] = "user solo on nopass +@all ~*\n";
	CHECK_EQ(kv_acl_load("f.acl", one, sizeof(one) - 1, e, sizeof(e)), 0);
	CHECK_EQ(kv_acl_count(), 2);
	CHECK(described("default", "on nopass ~* &* +@all"));
	free(text);
}

int main(void)
{
	sha256_vectors();
	parser();
	checks();
	glob_patterns();
	file_round_trip();
	printf("%d passed, %d failed\n", check_pass, check_fail);
	return check_fail != 0;
}
