/*
 * pkvs_resp.c - pkvs over the Redis protocol (pkvs_resp.h): the command
 * table, dispatch with Redis's arity errors, values streamed into held
 * buffers, and the look ahead. Commands not listed get "-ERR unknown
 * command"; options pkvs does not implement get a clear error of their
 * own. The commands are in cmd_string.c, cmd_keyspace.c, cmd_server.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkvs_resp.h"

/* The value of a streamed SET (per connection, the service's part). */
struct kv_resp_conn {
	struct paste_body body;
	uint16_t klen;
	uint8_t key[PASTE_BTREE_MAX_KEY];
};

bool kv_key_ok(struct resp_ctx *x, const struct paste_resp_arg *k)
{
	if (k->len == 0 || k->len > PASTE_BTREE_MAX_KEY) {
		resp_error(x, "ERR key length %zu is not in 1..%u (pkvs's limit)", k->len,
			   PASTE_BTREE_MAX_KEY);
		return false;
	}
	return true;
}

void kv_reply_errno(struct resp_ctx *x, int r)
{
	if (server_store_failed(x->w))
		resp_reply_failed(x);
	else if (r == -ENOSPC)
		/* Redis's words: clients and proxies know them (a write
		 * refused, reads and deletes go on). */
		resp_error(x, "OOM command not allowed when used memory > 'maxmemory'.");
	else if (r == -EFBIG)
		resp_error(x, "ERR value too large (pkvs's limit: see INFO max_value)");
	else
		resp_error(x, "ERR %s", strerror(-r));
}

int kv_reply_value(struct resp_ctx *x, const struct paste_extent *ext, uint32_t n,
		   uint64_t from, uint64_t len)
{
	if (resp_bulk_head(x, len))
		return -EIO;
	if (paste_port_send_extents(x->w->port, x->conn, ext, n, from, len, PASTE_SEND_DURABLE)) {
		resp_reply_failed(x);
		return -EIO;
	}
	return resp_bulk_end(x);
}

/* The command table: name, arity as Redis counts it (negative: at least),
 * flags and group for COMMAND / COMMAND DOCS, handler. Sorted by nothing:
 * a linear scan of ~30 names costs less than the reply's memcpy. */
const struct kv_cmd kv_cmds[] = {
	{ "get", 2, "readonly fast", "string", "Returns the string value of a key.", cmd_get },
	{ "set", -3, "write denyoom", "string", "Sets the string value of a key (NX, XX, GET).", cmd_set },
	{ "strlen", 2, "readonly fast", "string", "Returns the length of a string value.", cmd_strlen },
	{ "getrange", 4, "readonly", "string", "Returns a substring of the string stored at a key.", cmd_getrange },
	{ "incr", 2, "write denyoom fast", "string", "Increments the integer value of a key by one.", cmd_incr },
	{ "decr", 2, "write denyoom fast", "string", "Decrements the integer value of a key by one.", cmd_decr },
	{ "incrby", 3, "write denyoom fast", "string", "Increments the integer value of a key by a number.", cmd_incr },
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
	{ "scan", -2, "readonly", "generic", "Iterates over the key names in the database.", cmd_scan },
	{ "keys", 2, "readonly", "generic", "Returns all key names that match a pattern.", cmd_keys },
	{ "info", -1, "loading stale", "server", "Returns information and statistics about the server.", cmd_info },
	{ "config", -2, "admin loading stale", "server", "CONFIG GET: the configuration parameters pkvs knows.", cmd_config },
	{ "command", -1, "loading stale", "server", "Returns detailed information about all commands.", cmd_command },
	{ "client", -2, "loading stale", "connection", "CLIENT SETNAME, GETNAME, SETINFO, ID.", cmd_client },
	{ "hello", -1, "fast loading stale", "connection", "Handshakes with the server.", NULL },
	{ "quit", -1, "fast loading stale", "connection", "Closes the connection.", NULL },
};
const uint32_t kv_ncmds = sizeof(kv_cmds) / sizeof(kv_cmds[0]);

static void kv_command(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
	struct kv *kv = pkvs_kv(x->ss);
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
	struct kv *kv = pkvs_kv(x->ss);
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
	kv_admit(kv, argv[2].len);
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
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	paste_body_feed(&kc->body, &kv->bc, x->w->port, ev, off, len);
}

static void kv_stream_end(struct resp_ctx *x)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	int r = kv_set_body(kv, kc->key, kc->klen, &kc->body, NULL);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

static void kv_resp_closed(struct resp_ctx *x)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	paste_body_release(&kc->body, kv->store);
}

/* The next command's key: its point-index slot, ~1 us before the lookup. */
static void kv_prefetch(void *ss, const char *key, size_t klen)
{
	if (klen <= UINT32_MAX)
		(void)paste_btree_prefetch(pkvs_kv(ss)->tree, key, (uint32_t)klen);
}

const struct resp_service pkvs_resp_service = {
	.base = PKVS_SERVICE_BASE(struct kv_resp_conn),
	.command = kv_command,
	.stream_begin = kv_stream_begin,
	.stream_data = kv_stream_data,
	.stream_split = kv_stream_split,
	.stream_end = kv_stream_end,
	.closed = kv_resp_closed,
	.prefetch = kv_prefetch,
};
