/*
 * kv_resp.c - pkvs's Redis commands over the key-value store (kv.h), as a
 * resp_service (server/resp.h). Commands not listed get "-ERR unknown
 * command"; options pkvs does not implement (key expiry) get a clear
 * error of their own. The admin commands (INFO, CONFIG, COMMAND, CLIENT,
 * SCAN/KEYS) are in kv_resp_admin.c.
 *
 * Values: a SET whose value landed in a packet buffer and is longer than
 * KV_PACK_MAX stays there, zero copy (paste_body_feed holds the buffer); a
 * SET value that arrives across reads streams (PASTE_RESP_STREAM, and
 * kv_stream_split for the short ones) and is held the same way; values
 * inside a command that had to be put together (MSET's) are copied
 * (paste_body_copy). GET replies go straight from the value's buffers
 * (values of KV_PACK_MAX bytes or less are copied into the reply).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"
#include "kv_resp.h"

/* The value of a streamed SET (per connection, the service's part). */
struct kv_resp_conn {
	struct paste_body body;
	uint16_t klen;
	uint8_t key[PASTE_BTREE_MAX_KEY];
};

static bool key_ok(struct resp_ctx *x, const struct paste_resp_arg *k)
{
	if (k->len == 0 || k->len > PASTE_BTREE_MAX_KEY) {
		resp_error(x, "ERR key length %zu is not in 1..%u (pkvs's limit)", k->len,
			   PASTE_BTREE_MAX_KEY);
		return false;
	}
	return true;
}

static void reply_errno(struct resp_ctx *x, int r)
{
	if (server_store_failed(x->w))
		resp_reply_failed(x);
	else if (r == -ENOSPC)
		resp_error(x, "ERR store full (no free buffers, log or tree pages)");
	else if (r == -EFBIG)
		resp_error(x, "ERR value too large (pkvs's limit: see INFO max_value)");
	else
		resp_error(x, "ERR %s", strerror(-r));
}

/* Set key from an argument of a whole command: zero copy when it lies in
 * the event's store buffer and is worth holding, else copied. */
static int set_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *k,
		   const struct paste_resp_arg *v, bool *created)
{
	const struct paste_event *ev = x->ev;
	if (ev && ev->buf != PASTE_NO_BUF && v->len > KV_PACK_MAX && v->p >= (const char *)ev->data &&
	    v->p + v->len <= (const char *)ev->data + ev->len) {
		struct paste_body b;
		kv_body_idle(&b);
		if (paste_body_begin(&b, &kv->bc, kv->store, v->len))
			return -EFBIG;
		paste_body_feed(&b, &kv->bc, x->w->port, ev, (uint32_t)(v->p - (const char *)ev->data),
				(uint32_t)v->len);
		return kv_set_body(kv, k->p, (uint32_t)k->len, &b, created);
	}
	return kv_set_bytes(kv, k->p, (uint32_t)k->len, v->p, v->len, created);
}

static int send_value(struct resp_ctx *x, const struct paste_extent *ext, uint32_t n,
		      uint64_t from, uint64_t len)
{
	if (resp_bulk_head(x, len))
		return -EIO;
	if (kv_send_value(x->w, x->conn, ext, n, from, len)) {
		resp_reply_failed(x);
		return -EIO;
	}
	return resp_bulk_end(x);
}

/* ---------------------------------------------------------- strings */

static void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (!key_ok(x, &a[1]))
		return;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len))
		resp_null(x);
	else
		send_value(x, ext, en, 0, len);
}

/* SET key value [NX|XX] [GET]; EX/PX/EXAT/PXAT/KEEPTTL refused. */
static void cmd_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bool nx = false, xx = false, get = false;
	for (uint32_t i = 3; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "NX") && !xx)
			nx = true;
		else if (paste_resp_arg_eq(&a[i], "XX") && !nx)
			xx = true;
		else if (paste_resp_arg_eq(&a[i], "GET"))
			get = true;
		else if (paste_resp_arg_eq(&a[i], "EX") || paste_resp_arg_eq(&a[i], "PX") ||
			 paste_resp_arg_eq(&a[i], "EXAT") || paste_resp_arg_eq(&a[i], "PXAT") ||
			 paste_resp_arg_eq(&a[i], "KEEPTTL")) {
			resp_error(x, "ERR pkvs keeps keys until deleted: key expiry (EX, PX, EXAT, "
				   "PXAT, KEEPTTL) is not supported");
			return;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (!key_ok(x, &a[1]))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	/* A descent only when an option needs the old value (not a GET:
	 * INFO's keyspace hits and misses count reads by clients). */
	bool exists = (nx || xx || get) &&
		      paste_btree_get(kv->tree, a[1].p, (uint32_t)a[1].len, ext, &en, &len) == 0;
	if ((nx && exists) || (xx && !exists)) {
		if (get && exists)
			send_value(x, ext, en, 0, len);
		else
			resp_null(x);
		return;
	}
	/* SET ... GET: the old value must leave before the set releases it;
	 * its buffers are pinned by the send (kv_send_value), so queue first. */
	if (get) {
		if (exists ? send_value(x, ext, en, 0, len) : resp_null(x))
			return;
	}
	int r = set_arg(x, kv, &a[1], &a[2], NULL);
	if (r)
		reply_errno(x, r);
	else if (!get)
		resp_ok(x);
}

static void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (key_ok(x, &a[1]))
		resp_int(x, kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) ? 0 : len);
}

/* GETRANGE key start end: Redis's index rules (negative from the end). */
static void cmd_getrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)n;
	int64_t s, e;
	if (paste_resp_arg_i64(&a[2], &s) || paste_resp_arg_i64(&a[3], &e)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (!key_ok(x, &a[1]))
		return;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) || len == 0 ||
	    (s < 0 && e < 0 && s > e)) {
		resp_bulk(x, "", 0);
		return;
	}
	if (s < 0)
		s += len;
	if (e < 0)
		e += len;
	if (s < 0)
		s = 0;
	if (e < 0)
		e = 0;
	if (e >= (int64_t)len)
		e = (int64_t)len - 1;
	if (s > e) {
		resp_bulk(x, "", 0);
		return;
	}
	send_value(x, ext, en, (uint64_t)s, (uint64_t)(e - s + 1));
}

static void cmd_incr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		     uint32_t n, int64_t sign)
{
	int64_t by = 1;
	if (n == 3 && paste_resp_arg_i64(&a[2], &by)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	if (!key_ok(x, &a[1]))
		return;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	int64_t v = 0;
	if (kv_get(kv, a[1].p, (uint32_t)a[1].len, ext, &en, &len) == 0) {
		char num[24];
		struct paste_resp_arg cur = { num, len };
		if (len > 20 || (kv_copy_value(kv, ext, en, 0, num, len), paste_resp_arg_i64(&cur, &v))) {
			resp_error(x, "ERR value is not an integer or out of range");
			return;
		}
	}
	if (sign < 0 && by == INT64_MIN) {
		resp_error(x, "ERR decrement would overflow");
		return;
	}
	by *= sign;
	if ((by > 0 && v > INT64_MAX - by) || (by < 0 && v < INT64_MIN - by)) {
		resp_error(x, "ERR increment or decrement would overflow");
		return;
	}
	v += by;
	char out[24];
	int k = snprintf(out, sizeof(out), "%" PRId64, v);
	int r = kv_set_bytes(kv, a[1].p, (uint32_t)a[1].len, out, (size_t)k, NULL);
	if (r)
		reply_errno(x, r);
	else
		resp_int(x, v);
}

static void cmd_incr1(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	cmd_incr(x, kv, a, n, 1);
}

static void cmd_decr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	cmd_incr(x, kv, a, n, -1);
}

/* ------------------------------------------------------- multi-key */

static void cmd_del(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t count = 0;
	for (uint32_t i = 1; i < n; i++) {
		if (!a[i].len || a[i].len > PASTE_BTREE_MAX_KEY)
			continue;                   /* no such key can exist */
		int r = kv_del(kv, a[i].p, (uint32_t)a[i].len);
		if (r < 0) {
			reply_errno(x, r);
			return;
		}
		count += r;
	}
	resp_int(x, count);
}

static void cmd_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t count = 0;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	for (uint32_t i = 1; i < n; i++)
		if (a[i].len && a[i].len <= PASTE_BTREE_MAX_KEY &&
		    paste_btree_get(kv->tree, a[i].p, (uint32_t)a[i].len, ext, &en, &len) == 0)
			count++;
	resp_int(x, count);
}

static void cmd_mget(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	if (resp_array(x, n - 1))
		return;
	for (uint32_t i = 1; i < n; i++) {
		int r = a[i].len && a[i].len <= PASTE_BTREE_MAX_KEY
			? kv_get(kv, a[i].p, (uint32_t)a[i].len, ext, &en, &len) : -ENOENT;
		if (r ? resp_null(x) : send_value(x, ext, en, 0, len))
			return;
	}
}

/* MSET k v [k v ...]: every key checked first, so a bad one sets none. */
static void cmd_mset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n % 2 == 0) {
		resp_arity_error(x, &a[0]);
		return;
	}
	for (uint32_t i = 1; i < n; i += 2)
		if (!key_ok(x, &a[i]))
			return;
	for (uint32_t i = 1; i < n; i += 2) {
		int r = set_arg(x, kv, &a[i], &a[i + 1], NULL);
		if (r) {
			reply_errno(x, r);
			return;
		}
	}
	resp_ok(x);
}

static void cmd_dbsize(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	resp_int(x, (int64_t)paste_btree_count(kv->tree));
}

static void cmd_flushall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n > 2 || (n == 2 && !paste_resp_arg_eq(&a[1], "SYNC") && !paste_resp_arg_eq(&a[1], "ASYNC"))) {
		resp_error(x, "ERR syntax error");
		return;
	}
	int r = paste_btree_clear(kv->tree, NULL);
	if (r)
		reply_errno(x, r);
	else
		resp_ok(x);
}

static void cmd_ping(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n == 2)
		resp_bulk(x, a[1].p, a[1].len);
	else
		resp_simple(x, "PONG");
}

static void cmd_echo(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	resp_bulk(x, a[1].p, a[1].len);
}

static void cmd_select(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	int64_t db;
	if (paste_resp_arg_i64(&a[1], &db))
		resp_error(x, "ERR value is not an integer or out of range");
	else if (db != 0)
		resp_error(x, "ERR DB index is out of range (pkvs has database 0 only)");
	else
		resp_ok(x);
}

static void cmd_type(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t en, len;
	bool there = a[1].len && a[1].len <= PASTE_BTREE_MAX_KEY &&
		     paste_btree_get(kv->tree, a[1].p, (uint32_t)a[1].len, ext, &en, &len) == 0;
	resp_simple(x, there ? "string" : "none");
}

/* The command table: name, arity as Redis counts it (negative: at least),
 * flags and group for COMMAND / COMMAND DOCS, handler. Sorted by nothing:
 * a linear scan of ~30 names costs less than the reply's memcpy. */
const struct kv_cmd kv_cmds[] = {
	{ "get", 2, "readonly fast", "string", "Returns the string value of a key.", cmd_get },
	{ "set", -3, "write denyoom", "string", "Sets the string value of a key (NX, XX, GET).", cmd_set },
	{ "strlen", 2, "readonly fast", "string", "Returns the length of a string value.", cmd_strlen },
	{ "getrange", 4, "readonly", "string", "Returns a substring of the string stored at a key.", cmd_getrange },
	{ "incr", 2, "write denyoom fast", "string", "Increments the integer value of a key by one.", cmd_incr1 },
	{ "decr", 2, "write denyoom fast", "string", "Decrements the integer value of a key by one.", cmd_decr },
	{ "incrby", 3, "write denyoom fast", "string", "Increments the integer value of a key by a number.", cmd_incr1 },
	{ "decrby", 3, "write denyoom fast", "string", "Decrements a number from the integer value of a key.", cmd_decr },
	{ "mget", -2, "readonly fast", "string", "Atomically returns the string values of one or more keys.", cmd_mget },
	{ "mset", -3, "write denyoom", "string", "Atomically creates or modifies the string values of one or more keys.", cmd_mset },
	{ "del", -2, "write", "generic", "Deletes one or more keys.", cmd_del },
	{ "unlink", -2, "write fast", "generic", "Deletes one or more keys.", cmd_del },
	{ "exists", -2, "readonly fast", "generic", "Determines whether one or more keys exist.", cmd_exists },
	{ "type", 2, "readonly fast", "generic", "Determines the type of value stored at a key.", cmd_type },
	{ "dbsize", 1, "readonly fast", "server", "Returns the number of keys in the database.", cmd_dbsize },
	{ "flushall", -1, "write", "server", "Removes all keys from all databases.", cmd_flushall },
	{ "flushdb", -1, "write", "server", "Removes all keys from the current database.", cmd_flushall },
	{ "ping", -1, "fast", "connection", "Returns the server's liveliness response.", cmd_ping },
	{ "echo", 2, "fast", "connection", "Returns the given string.", cmd_echo },
	{ "select", 2, "loading stale fast", "connection", "Changes the selected database.", cmd_select },
	{ "scan", -2, "readonly", "generic", "Iterates over the key names in the database.", kv_cmd_scan },
	{ "keys", 2, "readonly", "generic", "Returns all key names that match a pattern.", kv_cmd_keys },
	{ "info", -1, "loading stale", "server", "Returns information and statistics about the server.", kv_cmd_info },
	{ "config", -2, "admin loading stale", "server", "CONFIG GET: the configuration parameters pkvs knows.", kv_cmd_config },
	{ "command", -1, "loading stale", "server", "Returns detailed information about all commands.", kv_cmd_command },
	{ "client", -2, "loading stale", "connection", "CLIENT SETNAME, GETNAME, SETINFO, ID.", kv_cmd_client },
	{ "hello", -1, "fast loading stale", "connection", "Handshakes with the server.", NULL },
	{ "quit", -1, "fast loading stale", "connection", "Closes the connection.", NULL },
};
const uint32_t kv_ncmds = sizeof(kv_cmds) / sizeof(kv_cmds[0]);

static void kv_command(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
	struct kv *kv = ((struct kv_handle *)x->ss)->kv;
	for (uint32_t i = 0; i < kv_ncmds; i++) {
		const struct kv_cmd *c = &kv_cmds[i];
		if (!c->fn || !paste_resp_arg_eq(&argv[0], c->name))
			continue;
		if ((c->arity > 0 && argc != (uint32_t)c->arity) ||
		    (c->arity < 0 && argc < (uint32_t)-c->arity)) {
			resp_arity_error(x, &argv[0]);
			return;
		}
		c->fn(x, kv, argv, argc);
		return;
	}
	char name[132], args[200];
	size_t k = 0;
	for (size_t j = 0; j < argv[0].len && k < 128; j++)
		name[k++] = argv[0].p[j] >= 0x20 && argv[0].p[j] < 0x7f ? argv[0].p[j] : '?';
	name[k] = 0;
	k = 0;
	for (uint32_t i = 1; i < argc && k < 160; i++) {
		args[k++] = '\'';
		for (size_t j = 0; j < argv[i].len && k < 160; j++)
			args[k++] = argv[i].p[j] >= 0x20 && argv[i].p[j] < 0x7f ? argv[i].p[j] : '?';
		args[k++] = '\'';
		args[k++] = ' ';
	}
	args[k] = 0;
	resp_error(x, "ERR unknown command '%s', with args beginning with: %s", name, args);
}

/* ------------------------------------------------- streamed values */

static int kv_stream_begin(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc,
			   const char **why)
{
	struct kv *kv = ((struct kv_handle *)x->ss)->kv;
	struct kv_resp_conn *kc = x->sc;
	if (argc != 3 || !paste_resp_arg_eq(&argv[0], "SET")) {
		*why = "only SET key value may carry a value this large (or split it)";
		return -EINVAL;
	}
	if (!argv[1].len || argv[1].len > PASTE_BTREE_MAX_KEY) {
		*why = "key length is not in 1..512 (pkvs's limit)";
		return -EINVAL;
	}
	if (argv[2].len > kv_max_value(kv) ||
	    paste_body_begin(&kc->body, &kv->bc, kv->store, argv[2].len)) {
		*why = "value too large (pkvs's limit: see INFO max_value; --buf-size sets it)";
		return -EFBIG;
	}
	memcpy(kc->key, argv[1].p, argv[1].len);
	kc->klen = (uint16_t)argv[1].len;
	return 0;
}

/* A SET whose value (over KV_PACK_MAX bytes, so held where it lands, not
 * packed) did not arrive in one read: stream it into held buffers, as a
 * long one, instead of gathering the command and copying the value
 * twice (pipelined 1 KiB SETs split about every other value). */
static bool kv_stream_split(const struct paste_resp_arg *argv, uint32_t argc)
{
	return argc == 3 && argv[2].len > KV_PACK_MAX && paste_resp_arg_eq(&argv[0], "SET");
}

static void kv_stream_data(struct resp_ctx *x, const struct paste_event *ev, uint32_t off,
			   uint32_t len)
{
	struct kv *kv = ((struct kv_handle *)x->ss)->kv;
	struct kv_resp_conn *kc = x->sc;
	paste_body_feed(&kc->body, &kv->bc, x->w->port, ev, off, len);
}

static void kv_stream_end(struct resp_ctx *x)
{
	struct kv *kv = ((struct kv_handle *)x->ss)->kv;
	struct kv_resp_conn *kc = x->sc;
	int r = kv_set_body(kv, kc->key, kc->klen, &kc->body, NULL);
	if (r)
		reply_errno(x, r);
	else
		resp_ok(x);
}

static void kv_resp_closed(struct resp_ctx *x)
{
	struct kv *kv = ((struct kv_handle *)x->ss)->kv;
	struct kv_resp_conn *kc = x->sc;
	paste_body_release(&kc->body, kv->store);
}

/* The next command's key: its point-index slot, ~1 us before the lookup. */
static void kv_prefetch(void *ss, const char *key, size_t klen)
{
	if (klen <= UINT32_MAX)
		(void)paste_btree_prefetch(((struct kv_handle *)ss)->kv->tree, key, (uint32_t)klen);
}

const struct resp_service kv_resp_service = {
	.base = KV_SERVICE_BASE(struct kv_resp_conn),
	.command = kv_command,
	.stream_begin = kv_stream_begin,
	.stream_data = kv_stream_data,
	.stream_split = kv_stream_split,
	.stream_end = kv_stream_end,
	.closed = kv_resp_closed,
	.prefetch = kv_prefetch,
};
