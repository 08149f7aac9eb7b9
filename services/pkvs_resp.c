/*
 * pkvs_resp.c - pkvs over the Redis protocol (pkvs_resp.h): the command
 * table, dispatch with Redis's arity errors, values streamed into held
 * buffers, and the look ahead. Commands not listed get "-ERR unknown
 * command"; options pkvs does not implement get a clear error of their
 * own. The commands are in cmd_string.c, cmd_keyspace.c, cmd_server.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "cmd_block.h"
#include "cmd_stream.h"
#include "cmd_tracking.h"
#include "kv_evict.h"
#include "kv_acl.h"
#include "kv_notify.h"
#include "kv_repl.h"
#include "pkvs_resp.h"

bool kv_arg_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, struct kv_key *k)
{
	if (a->len > kv_max_key(kv)) {
		resp_error(x, "ERR key length %zu is over %zu bytes (pkvs's limit)", a->len,
			   kv_max_key(kv));
		return false;
	}
	kv_key_init(kv, k, kv_resp_db(x), a->p, a->len);
	return true;
}

int kv_find(struct resp_ctx *x, struct kv *kv, struct kv_key *k, enum kv_type type,
	    struct kv_obj *o, bool read)
{
	if (kv_lookup(kv, k, o, read))
		return -ENOENT;
	if (o->type != type) {
		resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
		return -EINVAL;
	}
	return 0;
}

void kv_reply_errno(struct resp_ctx *x, int r)
{
	if (server_store_failed(x->w))
		resp_reply_failed(x);
	else if (r == -ENOSPC) {
		/* Redis's words: clients and proxies know them (a write
		 * refused, reads and deletes go on). */
		kv_multi_nospace(x);
		resp_error(x, "OOM command not allowed when used memory > 'maxmemory'.");
	} else if (r == -EFBIG) {
		resp_error(x, "ERR value too large (pkvs's limit: see INFO max_value)");
	} else {
		resp_error(x, "ERR %s", strerror(-r));
	}
}

static int send_piece(void *arg, const struct paste_extent *ext, uint32_t n, uint64_t skip,
		      uint64_t len)
{
	struct resp_ctx *x = arg;
	return paste_port_send_extents(x->w->port, x->conn, ext, n, skip, len, PASTE_SEND_DURABLE);
}

int kv_reply_value(struct resp_ctx *x, struct kv *kv, const struct kv_obj *o, uint64_t from,
		   uint64_t len)
{
	if (x->r->reply_off || x->r->skip)
		return 0;                        /* CLIENT REPLY OFF / SKIP */
	if (resp_bulk_head(x, len))
		return -EIO;
	if (x->capture) {                /* EXEC gathers replies: a copy */
		char b[4096];
		for (uint64_t at = 0; at < len;) {
			size_t k = kv_value_read(kv, o, from + at, b, len - at < sizeof(b) ? len - at : sizeof(b));
			if (!k)
				break;
			resp_send(x, b, k);
			at += k;
		}
		return resp_bulk_end(x);
	}
	/* From the buffers the value lies in, an entry (chunk) at a time. */
	if (kv_value_each(kv, o, from, len, send_piece, x)) {
		resp_reply_failed(x);
		return -EIO;
	}
	return resp_bulk_end(x);
}

/* ------------------------------------------------- shared by the commands */

bool kv_arg_range(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t min, int64_t max,
		  const char *msg, int64_t *v)
{
	if (paste_resp_arg_i64(a, v)) {
		resp_error(x, "ERR %s", msg ? msg : "value is not an integer or out of range");
		return false;
	}
	if (*v < min || *v > max) {
		if (msg)
			resp_error(x, "ERR %s", msg);
		else
			resp_error(x, "ERR value is out of range, value must between %" PRId64 " and %" PRId64,
				   min, max);
		return false;
	}
	return true;
}

bool kv_arg_scan(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t from,
		 int64_t *count, const struct paste_resp_arg **match)
{
	*count = 10;
	*match = NULL;
	for (uint32_t i = from; i < n; i += 2) {
		if (i + 1 < n && paste_resp_arg_eq(&a[i], "COUNT")) {
			if (!kv_arg_int(x, &a[i + 1], count))
				return false;
			if (*count < 1) {
				resp_error(x, "ERR syntax error");
				return false;
			}
		} else if (i + 1 < n && paste_resp_arg_eq(&a[i], "MATCH")) {
			*match = a[i + 1].len == 1 && a[i + 1].p[0] == '*' ? NULL : &a[i + 1];
		} else {
			resp_error(x, "ERR syntax error");
			return false;
		}
	}
	return true;
}

bool kv_arg_mpop(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t at,
		 const char *const words[2], uint32_t *k, int *which, int64_t *count)
{
	int64_t numkeys;
	if (!kv_arg_range(x, &a[at], 1, INT64_MAX, "numkeys should be greater than 0", &numkeys))
		return false;
	uint64_t w = at + 1 + (uint64_t)numkeys;
	if (w >= n || (*which = paste_resp_lookup(&a[w], words, 2)) < 0) {
		resp_error(x, "ERR syntax error");
		return false;
	}
	*count = -1;
	for (uint64_t i = w + 1; i < n; i++) {
		if (*count == -1 && i + 1 < n && paste_resp_arg_eq(&a[i], "COUNT")) {
			if (!kv_arg_range(x, &a[++i], 1, INT64_MAX, "count should be greater than 0", count))
				return false;
		} else {
			resp_error(x, "ERR syntax error");
			return false;
		}
	}
	if (*count == -1)
		*count = 1;
	*k = (uint32_t)numkeys;
	return true;
}

bool kv_arg_cursor(const struct paste_resp_arg *a, uint64_t *v)
{
	char buf[32];
	if (a->len >= sizeof(buf))
		return false;
	memcpy(buf, a->p, a->len);
	buf[a->len] = 0;
	if (isspace((unsigned char)buf[0]))
		return false;
	char *end;
	errno = 0;
	unsigned long long c = strtoull(buf, &end, 10);
	if (*end || errno == ERANGE)
		return false;
	*v = c;
	return true;
}

static uint64_t rnd_state[4];

static uint64_t rotl(uint64_t v, int k)
{
	return (v << k) | (v >> (64 - k));
}

static uint64_t rnd64(void)
{
	if (!(rnd_state[0] | rnd_state[1] | rnd_state[2] | rnd_state[3])) {
		if (getrandom(rnd_state, sizeof(rnd_state), 0) != (ssize_t)sizeof(rnd_state)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			rnd_state[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30);
		}
		rnd_state[3] |= 1;
	}
	uint64_t *s = rnd_state, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* Lemire's multiply and reject. */
uint64_t kv_rand_below(uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)rnd64() * n;
	if ((uint64_t)m < n) {
		uint64_t t = -n % n;
		while ((uint64_t)m < t)
			m = (unsigned __int128)rnd64() * n;
	}
	return (uint64_t)(m >> 64);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int kv_rand_distinct(uint64_t n, uint64_t k, uint64_t *out)
{
	if (k * 3 > n) {
		/* Selection sampling: each index kept with the chance that
		 * leaves every k-subset equally likely. O(n). */
		uint64_t got = 0;
		for (uint64_t i = 0; i < n && got < k; i++)
			if (kv_rand_below(n - i) < k - got)
				out[got++] = i;
		return 0;
	}
	/* Draws with rejection of repeats: the first k distinct draws are a
	 * uniform k-subset. A round draws what is missing, sorts and drops
	 * repeats (k <= n / 3: few rounds). */
	uint64_t have = 0;
	while (have < k) {
		for (uint64_t i = have; i < k; i++)
			out[i] = kv_rand_below(n);
		qsort(out, k, sizeof(*out), cmp_u64);
		have = 0;
		for (uint64_t i = 0; i < k; i++)
			if (i == 0 || out[i] != out[have - 1])
				out[have++] = out[i];
	}
	return 0;
}

/* ------------------------------------------------- the command table */

/* The families, one table each (cmd_*.c). */
static const struct kv_cmd *const families[] = {
	kv_cmds_string, kv_cmds_bitmap, kv_cmds_hll, kv_cmds_keyspace, kv_cmds_expire, kv_cmds_hash,
	kv_cmds_multi, kv_cmds_conn, kv_cmds_acl, kv_cmds_info, kv_cmds_config, kv_cmds_command,
	kv_cmds_server, kv_cmds_memory, kv_cmds_db, kv_cmds_list,
	kv_cmds_pubsub,
	kv_cmds_script,
	kv_cmds_set, kv_cmds_zset,
	kv_cmds_sort,
	kv_cmds_geo,
	kv_cmds_stream, kv_cmds_xread, kv_cmds_xgroup, kv_cmds_xinfo,
	kv_cmds_monitor, kv_cmds_slowlog, kv_cmds_latency,
	kv_cmds_repl, kv_cmds_dump,
};

/* Every command once, and an open-addressing hash of their names (lower
 * case, FNV-1a): a lookup is a hash of the name and ~1 probe, where a
 * scan of ~150 names would cost more than the command. */
#define CMD_MAX 512u
#define CMD_SLOTS 1024u
static struct kv_cmd_rt cmds[CMD_MAX];
static uint32_t ncmds;
static uint16_t slots[CMD_SLOTS];      /* index + 1; 0: empty */

static uint32_t name_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)(p[i] | 0x20)) * 16777619u;   /* ASCII letters fold to lower */
	h ^= h >> 16;   /* mixed: FNV-1a's low bits alone (the slot) cluster */
	h *= 0x7feb352du;
	return h ^ h >> 15;
}

static uint32_t parse_flags(const char *f)
{
	static const struct { const char *w; uint32_t bit; } words[] = {
		{ "write", KV_CMD_WRITE }, { "readonly", KV_CMD_READONLY }, { "denyoom", KV_CMD_DENYOOM },
		{ "admin", KV_CMD_ADMIN }, { "pubsub", KV_CMD_PUBSUB }, { "noscript", KV_CMD_NOSCRIPT },
		{ "blocking", KV_CMD_BLOCKING }, { "loading", KV_CMD_LOADING }, { "stale", KV_CMD_STALE },
		{ "no_auth", KV_CMD_NO_AUTH }, { "no_multi", KV_CMD_NO_MULTI }, { "fast", KV_CMD_FAST },
		{ "allow_busy", KV_CMD_ALLOW_BUSY }, { "skip_monitor", KV_CMD_SKIP_MONITOR },
		{ "skip_slowlog", KV_CMD_SKIP_SLOWLOG }, { "asking", KV_CMD_ASKING },
		{ "no_mandatory_keys", KV_CMD_NO_MANDATORY_KEYS },
		{ "no_async_loading", KV_CMD_NO_ASYNC_LOADING }, { "movablekeys", KV_CMD_MOVABLE_KEYS },
		{ "may_replicate", KV_CMD_MAY_REPLICATE },
	};
	uint32_t fl = 0;
	for (const char *p = f; *p;) {
		size_t len = strcspn(p, " ");
		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (strlen(words[i].w) == len && !memcmp(words[i].w, p, len))
				fl |= words[i].bit;
		p += len;
		while (*p == ' ')
			p++;
	}
	return fl;
}

static int meta_cmp(const void *key, const void *m)
{
	return strcmp(key, ((const struct kv_cmd_meta *)m)->name);
}

const struct kv_cmd_meta *kv_cmd_meta_find(const char *fullname)
{
	return bsearch(fullname, kv_cmd_metas, kv_cmd_nmetas, sizeof(kv_cmd_metas[0]), meta_cmp);
}

static struct kv_cmd_rt *lookup(const char *p, size_t n)
{
	for (uint32_t h = name_hash(p, n);; h++) {
		uint16_t s = slots[h % CMD_SLOTS];
		if (!s)
			return NULL;
		const char *name = cmds[s - 1].c->name;
		if (strlen(name) == n && !strncasecmp(name, p, n))
			return &cmds[s - 1];
	}
}

/* Rows "name|sub" follow their container's row: its subcommands are a
 * run of cmds[] (a table that breaks the run is a bug: abort at start). */
static void cmds_init(void)
{
	if (ncmds)
		return;
	kv_access_init();
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (const struct kv_cmd *c = families[f]; c->name; c++) {
			if (ncmds == CMD_MAX)
				abort();                      /* a table too large: CMD_MAX */
			struct kv_cmd_rt *rt = &cmds[ncmds];
			*rt = (struct kv_cmd_rt){ .c = c, .fl = parse_flags(c->flags) };
			rt->meta = kv_cmd_meta_find(c->name);
			if (rt->meta && rt->meta->movable)
				rt->fl |= KV_CMD_MOVABLE_KEYS;
			if (c->first_key > 0 && !kv_access_notouch(c->name))
				rt->fl |= KV_CMD_TOUCH;
			const char *bar = strchr(c->name, '|');
			if (bar) {
				struct kv_cmd_rt *parent = lookup(c->name, (size_t)(bar - c->name));
				if (!parent || (parent->nsubs && parent->sub0 + parent->nsubs != ncmds))
					abort();              /* "a|b" not right after "a" and its subs */
				if (!parent->nsubs)
					parent->sub0 = (uint16_t)ncmds;
				parent->nsubs++;
				rt->parent = parent;
			}
			uint32_t h = name_hash(c->name, strlen(c->name));
			while (slots[h % CMD_SLOTS])
				h++;
			slots[h % CMD_SLOTS] = (uint16_t)++ncmds;
		}
}

uint32_t kv_cmd_count(void)
{
	cmds_init();
	return ncmds;
}

struct kv_cmd_rt *kv_cmd_at(uint32_t i)
{
	cmds_init();
	return i < ncmds ? &cmds[i] : NULL;
}

struct kv_cmd_rt *kv_cmd_find(const struct paste_resp_arg *name)
{
	cmds_init();
	for (uint32_t h = name_hash(name->p, name->len);; h++) {
		uint16_t s = slots[h % CMD_SLOTS];
		if (!s)
			return NULL;
		/* "config|get" names a row, but no command a client sends. */
		if (paste_resp_arg_eq(name, cmds[s - 1].c->name))
			return cmds[s - 1].parent ? NULL : &cmds[s - 1];
	}
}

struct kv_cmd_rt *kv_cmd_lookup(const char *p, size_t len)
{
	cmds_init();
	return lookup(p, len);
}

struct kv_cmd_rt *kv_cmd_sub(struct kv_cmd_rt *rt, const struct paste_resp_arg *a)
{
	for (uint32_t i = 0; i < rt->nsubs; i++) {
		const char *name = strchr(cmds[rt->sub0 + i].c->name, '|') + 1;
		if (paste_resp_arg_eq(a, name))
			return &cmds[rt->sub0 + i];
	}
	return NULL;
}

static void unknown_command(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
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

void kv_sub_syntax_error(struct resp_ctx *x, const char *container, const struct paste_resp_arg *sub)
{
	resp_error(x, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try %s HELP.",
		   (int)(sub->len < 128 ? sub->len : 128), sub->p, container);
}

/* "ERR unknown subcommand 'x'. Try CONFIG HELP." */
static void unknown_subcommand(struct resp_ctx *x, const struct kv_cmd_rt *rt,
			       const struct paste_resp_arg *a)
{
	char sub[132], up[40];
	size_t k = 0;
	for (size_t j = 0; j < a->len && k < 128; j++)
		sub[k++] = a->p[j] >= 0x20 && a->p[j] < 0x7f ? a->p[j] : '?';
	sub[k] = 0;
	for (k = 0; rt->c->name[k] && k + 1 < sizeof(up); k++)
		up[k] = (char)(rt->c->name[k] >= 'a' && rt->c->name[k] <= 'z' ? rt->c->name[k] - 32
									     : rt->c->name[k]);
	up[k] = 0;
	resp_error(x, "ERR unknown subcommand '%s'. Try %s HELP.", sub, up);
}

/* A call's end in INFO commandstats: its time from t0, the call (counted
 * after it ran: CONFIG RESETSTAT counts itself), a failure. Returns the
 * clock read at the end. */
static uint64_t count_call(struct kv_cmd_rt *rt, uint64_t t0, bool failed)
{
	uint64_t t1 = paste_clock_ns();
	rt->ns += t1 - t0;
	rt->calls++;
	rt->failed += failed;
	if (kv_latency_tracking) {               /* LATENCY HISTOGRAM, INFO latencystats */
		if (__builtin_expect(rt->lat != NULL, 1))
			rt->lat[kv_latency_bucket(t1 - t0)]++;
		else
			kv_latency_record(rt, t1 - t0);
	}
	if (t1 - t0 >= kv_latency_ns)            /* the latency monitor */
		kv_latency_event(rt->fl & KV_CMD_FAST ? "fast-command" : "command", (t1 - t0) / 1000000);
	return t1;
}

void kv_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
	    const struct paste_resp_arg *argv, uint32_t argc)
{
	/* INFO commandstats: a monotonic clock read (vDSO, ~30 ns) after each
	 * command; a top-level command that follows another in the same
	 * event starts where that one ended, the others read the clock
	 * first (docs/results.md, "Command statistics"). The start is also
	 * the command's time. An error reply while it ran makes it a failed
	 * call. */
	uint32_t errors = x->r->errors;
	bool top = kv->run_depth++ == 0;
	uint64_t t0 = top && x->clock_ns ? x->clock_ns : paste_clock_ns();
	if (!kv->group_depth)
		kv_clock_at(kv, t0);            /* a transaction sees one time */
	if (rt->fl & KV_CMD_TOUCH)               /* its keys' access times (kv_evict.h) */
		kv_access_cmd(kv, kv_resp_db(x), argv, argc, rt->c->first_key, rt->c->last_key,
			      rt->c->key_step);
	uint32_t watch = kv_watch;               /* MONITOR, CLIENT TRACKING in use */
	if (watch) {
		kv_watch_before(x, kv, rt, argv, argc);
		t0 = paste_clock_ns();           /* the monitors' lines are not the command's */
	}
	if (kv_repl_active)
		kv_repl_run(x, kv, rt, argv, argc);     /* replication's hook (kv_repl.h) */
	else
		rt->c->fn(x, kv, argv, argc);
	uint64_t t1 = count_call(rt, t0, x->r->errors != errors);
	if (kv_block_is(x))                      /* blocked: logged when served */
		kv_block_ran(x, rt, argv, argc, t1 - t0);
	else if (t1 - t0 >= kv_slowlog_ns)
		kv_slowlog_push(x, rt, argv, argc, t1 - t0);
	kv->run_depth--;
	if (top)
		x->clock_ns = t1;
	if (watch)
		kv_watch_after(x, kv, rt, argv, argc);
}

/* What may stop a known command of the right arity before it is queued
 * or run, in Redis's order: authentication, ACL, memory and replicas
 * (kv_conn_allowed), a replica's refusal, subscribed mode, a long
 * script. A SET whose value streams passes here at its head, as every
 * other command does. False: answered (refused, or run by the long
 * script's path). */
static bool admitted(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		     uint32_t argc)
{
	if (!kv_conn_allowed(x, rt, argv, argc)) {
		rt->rejected++;
		kv_multi_reject(x);
		return false;                    /* replied (NOAUTH) */
	}
	if (kv_repl_active && kv_repl_refused(x, rt)) {
		rt->rejected++;
		return false;                    /* a replica: READONLY, MASTERDOWN */
	}
	/* The subscribed-mode check is a call only for a subscribed
	 * connection (one load for others). */
	if (x->r->pubsub && resp_pubsub_refused(x, rt->c->name)) {
		rt->rejected++;
		kv_multi_reject(x);
		return false;                    /* subscribed, RESP2: not this command */
	}
	return !kv_script_busy(x, rt, argv, argc);   /* a script runs long: BUSY, or run here */
}

/* A command: found, allowed (AUTH), its arity checked, queued inside
 * MULTI, or run. */
static void kv_command(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	struct kv_cmd_rt *rt = kv_cmd_find(&argv[0]), *sub = rt;
	if (rt && rt->nsubs && argc >= 2)
		sub = kv_cmd_sub(rt, &argv[1]);
	/* CLIENT LIST's cmd=: what was named, refused or not; NULL when
	 * unknown (Redis records it at the lookup). */
	kc->last = sub ? sub->c : NULL;
	if (rt && !sub) {
		kv_multi_reject(x);
		unknown_subcommand(x, rt, &argv[1]);
		return;
	}
	rt = sub;
	if (!rt || (!rt->c->fn && !rt->nsubs)) {
		kv_multi_reject(x);
		unknown_command(x, argv, argc);
		return;
	}
	/* Redis's order: unknown, arity, then authentication. */
	int arity = rt->c->arity;
	if ((arity > 0 && argc != (uint32_t)arity) || (arity < 0 && argc < (uint32_t)-arity)) {
		rt->rejected++;
		if (kv_multi_exec_abort(x, rt, "wrong number of arguments for 'exec' command"))
			return;                  /* EXEC inside MULTI: EXECABORT */
		kv_multi_reject(x);
		resp_error(x, "ERR wrong number of arguments for '%s' command", rt->c->name);
		return;
	}
	/* maxmemory-clients: the clients holding the most are closed before
	 * anything is counted against maxmemory (x too: then nothing runs). */
	if (kv_clients_limit_on && (kv_clients_evict(x), x->r->state == R_DEAD))
		return;
	if (!admitted(x, rt, argv, argc))
		return;
	if (kv->paused && kv_pause_holds(x, kv, rt, argv, argc))
		return;                          /* CLIENT PAUSE: runs when it ends */
	if (kc->multi && kv_multi_queue(x, rt, argv, argc))
		return;                          /* queued: "+QUEUED" */
	kv_run(x, kv, rt, argv, argc);
	kv_normal_limit_after(x);                /* past the output limit: dropped, unanswered */
	kv_block_serve(kv);                      /* clients blocked on keys it filled */
	if (kv_watch)
		kv_watch_done(kv);               /* invalidations after the replies */
}

/* ------------------------------------------------- streamed values */

static int stream_begin(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc,
			const char **why)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	if (argc != 3 || !paste_resp_arg_eq(&argv[0], "SET")) {
		*why = "only SET key value may carry a value this large (or split it)";
		return -EINVAL;
	}
	if (argv[1].len > kv_max_key(kv)) {
		static char msg[80];
		snprintf(msg, sizeof(msg), "key length is over %zu bytes (pkvs's limit)", kv_max_key(kv));
		*why = msg;
		return -EINVAL;
	}
	uint64_t len = argv[2].len;
	if (len > kv_max_value(kv)) {
		*why = "value too large (pkvs's limit: see INFO max_value)";
		return -EFBIG;
	}
	if (len > paste_body_max(&kv->bc, kv->store)) {
		/* Over one entry: written in chunks as it arrives (inside
		 * MULTI too: the key's record is written at EXEC). */
		int r = kv_writer_begin(kv, &kc->big, len);
		if (r) {
			*why = r == -ENOSPC ? "value too large for the store's room (see INFO max_value)"
					    : "value too large (pkvs's limit: see INFO max_value)";
			return r;
		}
	} else if (paste_body_begin(&kc->body, &kv->bc, kv->store, len)) {
		*why = "value too large (pkvs's limit: see INFO max_value)";
		return -EFBIG;
	} else {
		kv_admit(kv, len);
	}
	/* The key must outlive the command's bytes: a long one is copied. */
	free(kc->name);
	kc->name = NULL;
	const void *name = argv[1].p;
	if (argv[1].len > KV_INLINE) {
		if (!(kc->name = malloc(argv[1].len))) {
			paste_body_release(&kc->body, kv->store);
			kv_writer_drop(kv, &kc->big);
			*why = "out of memory";
			return -ENOMEM;
		}
		memcpy(kc->name, argv[1].p, argv[1].len);
		name = kc->name;
	}
	kv_key_init(kv, &kc->key, kc->db, name, argv[1].len);
	if (!kc->key.longkey)
		kc->key.p = kc->key.t + 1;       /* not the command's bytes, gone by the end */
	return 0;
}

/* The streamed key named again at the value's end: the database map may
 * have changed meanwhile (SWAPDB, FLUSHDB on other connections). */
static void stream_key(struct kv *kv, struct kv_resp_conn *kc)
{
	struct kv_key *k = &kc->key;
	uint8_t b[KV_INLINE];
	size_t len = k->len;
	if (!k->longkey)
		memcpy(b, k->t + 1, len);
	kv_key_init(kv, k, kc->db, k->longkey ? (const void *)kc->name : b, len);
	if (!k->longkey)
		k->p = k->t + 1;
}

/* A SET whose value (over KV_PACK_MAX bytes, so held where it lands, not
 * packed) does not end in this read: stream it into held buffers instead
 * of gathering the command and copying the value twice (pipelined 1 KiB
 * SETs split about every other value). Every other command is gathered
 * whole (a 1 MiB key of a GET, say), up to --max-request. */
static bool kv_stream_split(const struct paste_resp_arg *argv, uint32_t argc)
{
	/* Under CLIENT PAUSE a SET is gathered whole: it may have to wait. */
	return !kv_pause_on() && argc == 3 && argv[2].len > KV_PACK_MAX && paste_resp_arg_eq(&argv[0], "SET");
}

/* SET's entry in the command table: a streamed SET is counted there. */
static struct kv_cmd_rt *set_rt(void)
{
	static struct kv_cmd_rt *rt;
	if (!rt)
		rt = kv_cmd_find(&(const struct paste_resp_arg){ "SET", 3 });
	return rt;
}

/* The head of a SET whose value streams: admitted as any command is
 * (NOAUTH, ACL, OOM, READONLY, subscribed mode, BUSY answered there in
 * Redis's words), then the value's room taken. */
static int kv_streamed_begin(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc,
			   const char **why)
{
	struct kv_cmd_rt *rt = set_rt();
	((struct kv_resp_conn *)x->sc)->last = rt->c;
	if (!admitted(x, rt, argv, argc)) {     /* (kv_stream_split let only SET k v stream) */
		*why = NULL;                     /* answered */
		return -EACCES;
	}
	int r = stream_begin(x, argv, argc, why);
	if (r) {
		rt->rejected++;
		kv_multi_reject(x);             /* refused inside MULTI: EXECABORT */
	}
	return r;
}

static void kv_stream_data(struct resp_ctx *x, const struct paste_event *ev, uint32_t off,
			   uint32_t len)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	if (kc->big.id)
		kv_writer_feed(kv, &kc->big, x->w->port, ev, off, len);
	else
		paste_body_feed(&kc->body, &kv->bc, x->w->port, ev, off, len);
}

/* A streamed SET's reply (r: its put's result), and its call, time and
 * failure counted in SET's command statistics as kv_run counts them. */
static void stream_counted(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct kv_key *k,
			   uint64_t t0, int r)
{
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
	uint64_t t1 = count_call(rt, t0, r != 0);
	x->clock_ns = t1;
	if (t1 - t0 < kv_slowlog_ns)
		return;
	/* The slow log shows the value's first bytes (it trims past 128):
	 * read back from the store, the command's bytes being gone. */
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_key kk = *k;
	struct kv_obj o;
	char head[128];
	struct paste_resp_arg av[3] = { { "SET", 3 },
		{ (const char *)(k->longkey ? k->p : k->t + 1), k->len }, { head, 0 } };
	if (!r && !kv_lookup(kv, &kk, &o, false) && o.type == KV_STRING) {
		kv_value_read(kv, &o, 0, head, sizeof(head));
		av[2].len = o.len;
	}
	kv_slowlog_push(x, rt, av, 3, t1 - t0);
}

static void kv_streamed_end(struct resp_ctx *x)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	stream_key(kv, kc);
	if (kv_multi_stream_end(x)) {           /* inside MULTI: queued */
		free(kc->name);
		kc->name = NULL;
		return;
	}
	struct kv_cmd_rt *rt = set_rt();
	/* A script turned busy while the value arrived: BUSY, as Redis
	 * answers a command it reads then; over maxmemory: OOM. */
	const char *busy = kv_script_busy_line();
	if (busy || kv_over_maxmemory(x)) {     /* evicts first (kv_evict.h) */
		paste_body_release(&kc->body, kv->store);
		kv_writer_drop(kv, &kc->big);
		free(kc->name);
		kc->name = NULL;
		rt->rejected++;
		if (busy)
			resp_error(x, "%s", busy);
		else
			kv_reply_errno(x, -ENOSPC);
		return;
	}
	/* Counted as kv_run counts a command (INFO commandstats). */
	uint64_t t0 = x->clock_ns ? x->clock_ns : paste_clock_ns();
	/* Access times are in seconds: the pass's clock serves. */
	kv_access_touch(kv, kc->key.db, kc->key.longkey ? kc->key.p : kc->key.t + 1, kc->key.len);
	if (kc->big.id) {                       /* in chunks */
		kv_clock(kv);
		int r = kv_writer_put(kv, &kc->big, &kc->key, KV_NO_TTL, NULL);
		if (r == 0)
			kv_notify(KV_NOTIFY_STRING, "set", &kc->key);
		if (r == 0 && kv_watch)
			kv_monitor_set(x, kv, &kc->key);        /* MONITOR (cmd_tracking.h) */
		if (r == 0 && kv_repl_active)
			kv_repl_set(x, kv, &kc->key);
		stream_counted(x, rt, &kc->key, t0, r);   /* (the key may be in name) */
		free(kc->name);
		kc->name = NULL;
		return;
	}
	kv->clock_due = true;                   /* read only if the key has a deadline */
	int r = kv_put_body(kv, &kc->key, &kc->body, KV_NO_TTL, NULL);
	if (r == 0)
		kv_notify(KV_NOTIFY_STRING, "set", &kc->key);
	if (r == 0 && kv_watch)
		kv_monitor_set(x, kv, &kc->key);                /* MONITOR (cmd_tracking.h) */
	if (r == 0 && kv_repl_active)
		kv_repl_set(x, kv, &kc->key);
	stream_counted(x, rt, &kc->key, t0, r);
	free(kc->name);
	kc->name = NULL;
}

static void kv_resp_closed(struct resp_ctx *x)
{
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	paste_body_release(&kc->body, kv->store);
	kv_writer_drop(kv, &kc->big);
	free(kc->name);
	kc->name = NULL;
	kv_multi_closed(x);
	kv_block_closed(x);
	kv_pubsub_closed(x);
	if (kv_repl_active)
		kv_repl_closed(x);
	kv_monitor_reset(x);
	kv_tracking_closed(x);
}

/* The next command's key: its point-index slot, ~1 us before the lookup. */
static void kv_prefetch(void *ss, void *sc, const char *key, size_t klen)
{
	if (klen > KV_INLINE)
		return;
	struct kv *kv = pkvs_kv(ss);
	struct kv_key k;
	kv_key_init(kv, &k, ((struct kv_resp_conn *)sc)->db, key, klen);
	(void)paste_btree_prefetch(kv->tree, k.t, k.tlen);
}

/* The shared pass, and blocked clients' timeouts (cmd_block.c). */
static void kv_resp_pass(struct worker *w, void *state)
{
	pkvs_svc_pass(w, state);
	kv_info_sample(w, pkvs_kv(state));
	kv_block_pass(w, pkvs_kv(state));
	kv_pause_pass(w, pkvs_kv(state));
	kv_evict_pass(pkvs_kv(state));          /* evictions a time limit left over */
	kv_normal_limit_pass(w);                 /* clients over the soft output limit */
	if (kv_repl_active)
		kv_repl_pass(w, pkvs_kv(state));
	if (kv_watch)
		kv_watch_pass(pkvs_kv(state));
}

static uint64_t kv_resp_wake(struct worker *w, void *state)
{
	uint64_t a = pkvs_svc_wake(w, state), b = kv_block_wake(w, state), p = kv_pause_wake();
	b = b < p ? b : p;
	if (kv_repl_active) {
		uint64_t c = kv_repl_wake(w);
		b = b < c ? b : c;
	}
	return a < b ? a : b;
}

const struct resp_service pkvs_resp_service = {
	.base = { .name = "kv", .conn_size = sizeof(struct kv_resp_conn), .open = pkvs_svc_open,
		  .close = pkvs_svc_close, .banner = pkvs_svc_banner, .started = pkvs_svc_started,
		  .pass = kv_resp_pass, .wake = kv_resp_wake },
	.command = kv_command,
	.stream_begin = kv_streamed_begin,
	.stream_data = kv_stream_data,
	.stream_split = kv_stream_split,
	.stream_end = kv_streamed_end,
	.closed = kv_resp_closed,
	.prefetch = kv_prefetch,
	.own = kv_monitor_own,
};
