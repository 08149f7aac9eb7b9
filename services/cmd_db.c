/*
 * cmd_db.c - databases (pkvs_resp.h): SELECT, SWAPDB, MOVE. (DBSIZE,
 * FLUSHDB and FLUSHALL are in cmd_keyspace.c.)
 *
 * --databases N logical databases (default 16, at most KV_MAX_DBS), each
 * mapped onto a prefix of the tree's keys (kv_db.c): SWAPDB swaps two
 * mappings in one record, whatever the databases hold, and a connection
 * stays on its database number, seeing what was swapped in, as in Redis.
 * MOVE writes the key under the other database's prefix and deletes it
 * here in one group; a collection keeps its members (they are not under
 * the key), so a hash of any size moves in O(1).
 */
#include <limits.h>

#include "kv_notify.h"
#include "pkvs_resp.h"

/* A database index as Redis reads it (getIntFromObjectOrReply): false,
 * and replied `msg` (NULL: Redis's words for not an integer, or for one
 * outside an int), when it is not an int. */
static bool db_index(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t *v,
		     const char *msg)
{
	if (paste_resp_arg_i64(a, v)) {
		resp_error(x, "ERR %s", msg ? msg : "value is not an integer or out of range");
		return false;
	}
	if (*v < INT_MIN || *v > INT_MAX) {
		resp_error(x, "ERR %s", msg ? msg : "value is out of range, value must between "
			   "-2147483648 and 2147483647");
		return false;
	}
	return true;
}

static bool db_valid(const struct kv *kv, int64_t v)
{
	return v >= 0 && v < (int64_t)kv->ndbs;
}

static void cmd_select(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t db;
	if (!db_index(x, &a[1], &db, NULL))
		return;
	if (!db_valid(kv, db)) {
		resp_error(x, "ERR DB index is out of range");
		return;
	}
	((struct kv_resp_conn *)x->sc)->db = (uint32_t)db;
	resp_ok(x);
}

static void cmd_swapdb(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t d1, d2;
	if (!db_index(x, &a[1], &d1, "invalid first DB index") ||
	    !db_index(x, &a[2], &d2, "invalid second DB index"))
		return;
	if (!db_valid(kv, d1) || !db_valid(kv, d2)) {
		resp_error(x, "ERR DB index is out of range");
		return;
	}
	int r = kv_swapdb(kv, (uint32_t)d1, (uint32_t)d2);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

/* MOVE key db: 1 moved; 0 when the key is absent here or present there. */
static void cmd_move(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	int64_t to;
	uint32_t from = kv_resp_db(x);
	if (!db_index(x, &a[2], &to, NULL))
		return;
	if (!db_valid(kv, to)) {
		resp_error(x, "ERR DB index is out of range");
		return;
	}
	if ((uint32_t)to == from) {
		resp_error(x, "ERR source and destination objects are the same");
		return;
	}
	if (a[1].len > KV_MAX_KEY) {
		resp_int(x, 0);                 /* no such key can exist */
		return;
	}
	struct kv_key src, dst;
	struct kv_obj o, there;
	kv_key_init(kv, &src, from, a[1].p, a[1].len);
	kv_key_init(kv, &dst, (uint32_t)to, a[1].p, a[1].len);
	if (kv_lookup(kv, &src, &o, false) || kv_lookup(kv, &dst, &there, false) == 0) {
		resp_int(x, 0);
		return;
	}
	int r = kv_rename(kv, &src, &o, &dst);
	if (r == 0) {
		kv_notify(KV_NOTIFY_GENERIC, "move_from", &src);
		kv_notify(KV_NOTIFY_GENERIC, "move_to", &dst);
	}
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, 1);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_db[] = {
	{ "select", 2, "loading stale fast", "connection", "Makes another database this connection's current one.", cmd_select, 0, 0, 0 },
	{ "swapdb", 3, "write fast", "server", "Exchanges the keys of two databases.", cmd_swapdb, 0, 0, 0 },
	{ "move", 3, "write fast", "generic", "Moves a key from the current database to another that lacks it.", cmd_move, 1, 1, 1 },
	{ 0 }
};
