/*
 * cmd_config.c - CONFIG GET, SET, RESETSTAT, REWRITE and HELP over the
 * table of the settings CONFIG knows: those pkvs applies at run time,
 * those fixed at its start, and Redis's tuning settings it only keeps to
 * read back (docs/compat.md). maxmemory and its settings are
 * kv_evict.c's (kv_evict_get, kv_evict_set); kv_over_maxmemory is
 * dispatch's way to them, kv_config_preset pkvs's flags'.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd_tracking.h"
#include "kv_evict.h"
#include "kv_notify.h"
#include "kv_repl.h"
#include "pkvs_resp.h"

/* Settings CONFIG knows: those pkvs applies (kind LIVE: a getter and a
 * setter below), those fixed at start (FIXED: Redis changes them at run
 * time, pkvs takes only the value they have; IMMUTABLE: Redis refuses
 * them too, in its words), and Redis's tuning settings
 * that mean nothing to pkvs's store (KEPT: any value of the right form
 * is taken and read back, docs/compat.md). Values are kept as strings. */
enum cfg_kind { CFG_LIVE, CFG_FIXED, CFG_IMMUTABLE, CFG_KEPT };
enum cfg_type { T_STR, T_INT, T_BOOL, T_MEM, T_ENUM };
struct cfg_param {
	const char *name, *alias;
	enum cfg_kind kind;
	enum cfg_type type;
	const char *dflt;
	const char *choices;     /* T_ENUM: space-separated */
};

static const struct cfg_param params[] = {
	{ "requirepass", NULL, CFG_LIVE, T_STR, "", NULL },
	{ "protected-mode", NULL, CFG_LIVE, T_BOOL, "yes", NULL },
	{ "timeout", NULL, CFG_LIVE, T_INT, "0", NULL },
	{ "maxmemory", NULL, CFG_LIVE, T_MEM, "0", NULL },
	{ "maxmemory-policy", NULL, CFG_LIVE, T_ENUM, "noeviction",
	  "volatile-lru volatile-lfu volatile-random volatile-ttl allkeys-lru allkeys-lfu allkeys-random noeviction" },
	{ "databases", NULL, CFG_IMMUTABLE, T_INT, NULL, NULL },
	{ "port", NULL, CFG_FIXED, T_INT, NULL, NULL },
	{ "bind", NULL, CFG_FIXED, T_STR, NULL, NULL },
	{ "maxclients", NULL, CFG_FIXED, T_INT, NULL, NULL },
	{ "appendonly", NULL, CFG_FIXED, T_BOOL, NULL, NULL },
	{ "appendfsync", NULL, CFG_FIXED, T_ENUM, NULL, "always everysec no" },
	{ "save", NULL, CFG_KEPT, T_STR, "", NULL },
	{ "dir", NULL, CFG_FIXED, T_STR, NULL, NULL },
	{ "dbfilename", NULL, CFG_FIXED, T_STR, NULL, NULL },
	{ "daemonize", NULL, CFG_IMMUTABLE, T_BOOL, "no", NULL },
	{ "io-threads", NULL, CFG_IMMUTABLE, T_INT, "1", NULL },
	{ "cluster-enabled", NULL, CFG_IMMUTABLE, T_BOOL, "no", NULL },
	{ "proto-max-bulk-len", NULL, CFG_FIXED, T_MEM, "536870912", NULL },
	{ "notify-keyspace-events", NULL, CFG_KEPT, T_STR, "", NULL },
	{ "hz", NULL, CFG_KEPT, T_INT, "10", NULL },
	{ "loglevel", NULL, CFG_KEPT, T_ENUM, "notice", "debug verbose notice warning nothing" },
	{ "lua-time-limit", "busy-reply-threshold", CFG_KEPT, T_INT, "5000", NULL },
	{ "busy-reply-threshold", "lua-time-limit", CFG_KEPT, T_INT, "5000", NULL },
	{ "hash-max-listpack-entries", "hash-max-ziplist-entries", CFG_KEPT, T_INT, "512", NULL },
	{ "hash-max-listpack-value", "hash-max-ziplist-value", CFG_KEPT, T_MEM, "64", NULL },
	{ "hash-max-ziplist-entries", "hash-max-listpack-entries", CFG_KEPT, T_INT, "512", NULL },
	{ "hash-max-ziplist-value", "hash-max-listpack-value", CFG_KEPT, T_MEM, "64", NULL },
	{ "list-max-listpack-size", "list-max-ziplist-size", CFG_KEPT, T_INT, "-2", NULL },
	{ "list-max-ziplist-size", "list-max-listpack-size", CFG_KEPT, T_INT, "-2", NULL },
	{ "list-compress-depth", NULL, CFG_KEPT, T_INT, "0", NULL },
	{ "set-max-intset-entries", NULL, CFG_KEPT, T_INT, "512", NULL },
	{ "zset-max-listpack-entries", "zset-max-ziplist-entries", CFG_KEPT, T_INT, "128", NULL },
	{ "zset-max-listpack-value", "zset-max-ziplist-value", CFG_KEPT, T_MEM, "64", NULL },
	{ "zset-max-ziplist-entries", "zset-max-listpack-entries", CFG_KEPT, T_INT, "128", NULL },
	{ "zset-max-ziplist-value", "zset-max-listpack-value", CFG_KEPT, T_MEM, "64", NULL },
	{ "activerehashing", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "activedefrag", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-eviction", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "repl-ping-replica-period", "repl-ping-slave-period", CFG_KEPT, T_INT, "10", NULL },
	{ "repl-ping-slave-period", "repl-ping-replica-period", CFG_KEPT, T_INT, "10", NULL },
	{ "lazyfree-lazy-expire", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-server-del", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-user-del", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-user-flush", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "slowlog-log-slower-than", NULL, CFG_KEPT, T_INT, "10000", NULL },
	{ "slowlog-max-len", NULL, CFG_KEPT, T_INT, "128", NULL },
	{ "acllog-max-len", NULL, CFG_KEPT, T_INT, "128", NULL },
	{ "acl-pubsub-default", NULL, CFG_KEPT, T_ENUM, "resetchannels", "allchannels resetchannels" },
	{ "latency-monitor-threshold", NULL, CFG_KEPT, T_INT, "0", NULL },
	{ "latency-tracking", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "latency-tracking-info-percentiles", NULL, CFG_KEPT, T_STR, "50 99 99.9", NULL },
	{ "maxmemory-samples", NULL, CFG_LIVE, T_INT, "5", NULL },
	{ "maxmemory-eviction-tenacity", NULL, CFG_LIVE, T_INT, "10", NULL },
	{ "maxmemory-clients", NULL, CFG_KEPT, T_MEM, "0", NULL },
	{ "tcp-keepalive", NULL, CFG_KEPT, T_INT, "300", NULL },
	{ "client-output-buffer-limit", NULL, CFG_KEPT, T_STR,
	  "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", NULL },
	{ "stream-node-max-bytes", NULL, CFG_KEPT, T_MEM, "4096", NULL },
	{ "hll-sparse-max-bytes", NULL, CFG_KEPT, T_MEM, "3000", NULL },
	{ "stream-node-max-entries", NULL, CFG_KEPT, T_INT, "100", NULL },
	{ "active-expire-effort", NULL, CFG_KEPT, T_INT, "1", NULL },
	{ "replica-read-only", "slave-read-only", CFG_KEPT, T_BOOL, "yes", NULL },
	{ "replica-serve-stale-data", "slave-serve-stale-data", CFG_KEPT, T_BOOL, "yes", NULL },
	/* A replica's credentials at its primary: read at each handshake. */
	{ "masteruser", NULL, CFG_KEPT, T_STR, "", NULL },
	{ "masterauth", NULL, CFG_KEPT, T_STR, "", NULL },
	{ "min-replicas-to-write", "min-slaves-to-write", CFG_KEPT, T_INT, "0", NULL },
	{ "min-replicas-max-lag", "min-slaves-max-lag", CFG_KEPT, T_INT, "10", NULL },
	{ "slave-read-only", "replica-read-only", CFG_KEPT, T_BOOL, "yes", NULL },
	{ "slave-serve-stale-data", "replica-serve-stale-data", CFG_KEPT, T_BOOL, "yes", NULL },
	{ "min-slaves-to-write", "min-replicas-to-write", CFG_KEPT, T_INT, "0", NULL },
	{ "min-slaves-max-lag", "min-replicas-max-lag", CFG_KEPT, T_INT, "10", NULL },
	{ "aof-use-rdb-preamble", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "rdbcompression", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "rdbchecksum", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "stop-writes-on-bgsave-error", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "lfu-log-factor", NULL, CFG_LIVE, T_INT, "10", NULL },
	{ "lfu-decay-time", NULL, CFG_LIVE, T_INT, "1", NULL },
	{ "tracking-table-max-keys", NULL, CFG_KEPT, T_INT, "1000000", NULL },
	{ "replicaof", "slaveof", CFG_IMMUTABLE, T_STR, NULL, NULL },
	{ "slaveof", "replicaof", CFG_IMMUTABLE, T_STR, NULL, NULL },
	{ "repl-backlog-size", NULL, CFG_KEPT, T_MEM, "1048576", NULL },
	{ "repl-backlog-ttl", NULL, CFG_KEPT, T_INT, "3600", NULL },
	{ "repl-timeout", NULL, CFG_KEPT, T_INT, "60", NULL },
	{ "repl-diskless-sync", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "repl-diskless-sync-delay", NULL, CFG_KEPT, T_INT, "5", NULL },
	{ "repl-diskless-sync-max-replicas", NULL, CFG_KEPT, T_INT, "0", NULL },
	{ "repl-diskless-load", NULL, CFG_KEPT, T_ENUM, "disabled", "disabled on-empty-db swapdb" },
	{ "repl-disable-tcp-nodelay", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "client-query-buffer-limit", NULL, CFG_KEPT, T_MEM, "1073741824", NULL },
	/* Redis's hidden settings: listed only when asked by name. */
	{ "key-load-delay", NULL, CFG_KEPT, T_INT, "0", NULL },
	{ "loading-process-events-interval-bytes", NULL, CFG_KEPT, T_INT, "2097152", NULL },
};
#define FIRST_HIDDEN "key-load-delay"

#define NPARAMS (sizeof(params) / sizeof(params[0]))

/* The process's settings (one thread serves every front end). */
static struct {
	char *kept[NPARAMS];             /* CFG_KEPT values set (NULL: the default) */
	uint64_t resets_ms;              /* CONFIG RESETSTAT */
} conf;

static const struct cfg_param *param_find(const char *p, size_t n)
{
	for (size_t i = 0; i < NPARAMS; i++)
		if (strlen(params[i].name) == n && !strncasecmp(params[i].name, p, n))
			return &params[i];
	return NULL;
}

/* A kept setting's value: set under its name or its alias's (the
 * other name forgets it), else the default. */
static const char *kept_value(const struct cfg_param *p)
{
	const char *v = conf.kept[p - params];
	if (!v && p->alias) {
		const struct cfg_param *o = param_find(p->alias, strlen(p->alias));
		v = o ? conf.kept[o - params] : NULL;
	}
	return v ? v : p->dflt;
}

uint64_t kv_config_gen;

const char *kv_config_kept(const char *name)
{
	const struct cfg_param *p = param_find(name, strlen(name));
	if (!p || p->kind != CFG_KEPT)
		return NULL;
	return kept_value(p);
}

bool kv_noreplicas;

/* The value of a setting now, into buf. */
static const char *param_get(struct resp_ctx *x, struct kv *kv, const struct cfg_param *p,
			     char *buf, size_t cap)
{
	struct server *s = x->w->srv;
	struct srv_auth *a = resp_auth(x);
	enum paste_durability d = x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE;
	const char *n = p->name;
	if (!strcmp(n, "requirepass")) {
		snprintf(buf, cap, "%.*s", a && a->pass ? (int)a->len : 0, a && a->pass ? (const char *)a->pass : "");
		return buf;
	}
	if (!strcmp(n, "protected-mode"))
		return a && a->protected_mode ? "yes" : "no";
	const char *ev = kv_evict_get(n, buf, cap);     /* maxmemory and its settings */
	if (ev)
		return ev;
	if (!strcmp(n, "timeout"))
		snprintf(buf, cap, "%" PRIu64, s->cfg.idle_to_ms / 1000);
	else if (!strcmp(n, "databases"))
		snprintf(buf, cap, "%u", kv->ndbs);
	else if (!strcmp(n, "port"))
		snprintf(buf, cap, "%u", kv_resp_port(x));
	else if (!strcmp(n, "bind"))
		return s->cfg.host;
	else if (!strcmp(n, "replicaof") || !strcmp(n, "slaveof"))
		return kv_repl_primary(buf, cap);
	else if (!strcmp(n, "maxclients"))
		snprintf(buf, cap, "%u", s->cfg.max_conns);
	else if (!strcmp(n, "appendonly"))
		return d == PASTE_DUR_NONE ? "no" : "yes";
	else if (!strcmp(n, "appendfsync"))
		return d == PASTE_DUR_NONE ? "no" : "always";
	else if (!strcmp(n, "dir")) {
		const char *slash = strrchr(s->cfg.store_path, '/');
		if (!slash)
			return getcwd(buf, cap) ? buf : ".";
		size_t len = slash == s->cfg.store_path ? 1 : (size_t)(slash - s->cfg.store_path);
		snprintf(buf, cap, "%.*s", (int)len, s->cfg.store_path);
	} else if (!strcmp(n, "dbfilename")) {
		const char *slash = strrchr(s->cfg.store_path, '/');
		return slash ? slash + 1 : s->cfg.store_path;
	} else if (!strcmp(n, "notify-keyspace-events")) {
		kv_notify_format(kv_notify_get(), buf);
	} else if (p->kind == CFG_KEPT) {
		return kept_value(p);
	} else {
		return p->dflt ? p->dflt : "";
	}
	return buf;
}

static void out_str(struct resp_out *o, const char *s)
{
	resp_out_bulk(o, s, strlen(s));
}

/* CONFIG GET pattern...: a name without glob characters is looked up
 * and answered under the name as given (any case), as Redis does; a
 * pattern matches every name, aliases included. */
/* The settings from FIRST_HIDDEN on, which a pattern does not list. */
static bool hidden(const struct cfg_param *p)
{
	static const struct cfg_param *first;
	if (!first)
		first = param_find(FIRST_HIDDEN, strlen(FIRST_HIDDEN));
	return p >= first;
}

static void cmd_config_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	const struct paste_resp_arg *as[NPARAMS] = { 0 };
	bool hit[NPARAMS] = { 0 };
	uint32_t hits = 0;
	for (uint32_t i = 2; i < n; i++) {
		bool glob = memchr(a[i].p, '*', a[i].len) || memchr(a[i].p, '?', a[i].len) ||
			    memchr(a[i].p, '[', a[i].len);
		for (size_t j = 0; j < NPARAMS; j++) {
			const char *name = params[j].name;
			bool match = glob ? !hidden(&params[j]) &&
					    kv_glob_nocase(a[i].p, a[i].len, (const uint8_t *)name, strlen(name))
					  : param_find(a[i].p, a[i].len) == &params[j];
			if (!hit[j] && match) {
				hit[j] = true;
				as[j] = glob ? NULL : &a[i];
				hits++;
			}
		}
	}
	struct resp_out o = { 0 };
	char head[32], buf[512];
	for (size_t j = 0; j < NPARAMS; j++) {
		if (!hit[j])
			continue;
		if (as[j])
			resp_out_bulk(&o, as[j]->p, as[j]->len);
		else
			out_str(&o, params[j].name);
		const struct srv_auth *au = resp_auth(x);
		if (!strcmp(params[j].name, "requirepass") && au && au->pass)
			resp_out_bulk(&o, au->pass, au->len);      /* any bytes, NUL too */
		else
			out_str(&o, param_get(x, kv, &params[j], buf, sizeof(buf)));
	}
	resp_out_send(x, head, paste_resp_put_map(head, sizeof(head), x->r->proto, hits), &o);
}

/* Redis's bounds of some kept numbers (an int config's limits are its
 * type's: INT_MAX). */
static const struct { const char *name; long long min, max; } bounds[] = {
	{ "repl-backlog-size", 1, LLONG_MAX },
	{ "repl-backlog-ttl", 0, INT_MAX },
	{ "repl-timeout", 1, INT_MAX },
	{ "repl-diskless-sync-delay", 0, INT_MAX },
	{ "repl-diskless-sync-max-replicas", 0, INT_MAX },
	{ "repl-ping-replica-period", 1, INT_MAX },
	{ "repl-ping-slave-period", 1, INT_MAX },
	{ "client-query-buffer-limit", 1024 * 1024, LLONG_MAX },
	{ "key-load-delay", INT_MIN, INT_MAX },
	{ "loading-process-events-interval-bytes", 1024, INT_MAX },
	{ "slowlog-log-slower-than", -1, LLONG_MAX },
	{ "slowlog-max-len", 0, LONG_MAX },
	{ "hll-sparse-max-bytes", 0, LONG_MAX },
};

static bool in_bounds(const struct cfg_param *p, long long v, const char **why)
{
	static char msg[96];
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++)
		if (!strcmp(bounds[i].name, p->name) && (v < bounds[i].min || v > bounds[i].max)) {
			snprintf(msg, sizeof(msg), "argument must be between %lld and %lld inclusive",
				 bounds[i].min, bounds[i].max);
			*why = msg;
			return false;
		}
	return true;
}

/* A value in the form a setting takes: false with *why. */
static bool value_ok(const struct cfg_param *p, const struct paste_resp_arg *v, uint64_t *num,
		     const char **why)
{
	char s[64];
	if (p->type == T_STR)
		return true;
	if (v->len >= sizeof(s)) {
		*why = "argument too long";
		return false;
	}
	memcpy(s, v->p, v->len);
	s[v->len] = 0;
	if (p->type == T_BOOL) {
		if (strcasecmp(s, "yes") && strcasecmp(s, "no")) {
			*why = "argument must be 'yes' or 'no'";
			return false;
		}
		*num = !strcasecmp(s, "yes");
		return true;
	}
	if (p->type == T_ENUM) {
		for (const char *c = p->choices; *c;) {
			size_t len = strcspn(c, " ");
			if (len == v->len && !strncasecmp(c, s, len))
				return true;
			c += len + (c[len] == ' ');
		}
		*why = "enum";
		return false;
	}
	bool pct = !strcmp(p->name, "maxmemory-clients");
	if (pct && v->len && s[v->len - 1] == '%') {
		/* Redis's percent form: of maxmemory, kept as written. */
		char *end;
		errno = 0;
		long long pc = strtoll(s, &end, 10);
		if (end != s + v->len - 1 || errno || pc < 0) {
			*why = "argument must be a memory or percent value";
			return false;
		}
		if (pc > 100) {
			*why = "percentage argument must be less or equal to 100";
			return false;
		}
		*num = pc ? UINT64_MAX : 0;      /* param_set: keep the words; 0% is 0 */
		return true;
	}
	if (p->type == T_MEM) {
		if (!kv_mem_value(s, strlen(s), num)) {
			*why = pct ? "argument must be a memory or percent value"
				   : "argument must be a memory value";
			return false;
		}
		return in_bounds(p, *num > LLONG_MAX ? LLONG_MAX : (long long)*num, why);
	}
	char *end;
	errno = 0;
	long long ll = strtoll(s, &end, 10);
	if (!*s || *end || errno) {
		*why = "argument couldn't be parsed into an integer";
		return false;
	}
	*num = (uint64_t)ll;
	return in_bounds(p, ll, why);
}

bool kv_mem_value(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
		uint64_t d = (uint64_t)(p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (!i)
		return false;
	static const struct { const char *u; uint64_t m; } units[] = {
		{ "", 1 }, { "b", 1 }, { "k", 1000 }, { "kb", 1024 }, { "m", 1000000 },
		{ "mb", 1u << 20 }, { "g", 1000000000 }, { "gb", 1u << 30 },
	};
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
		if (strlen(units[u].u) == n - i && !strncasecmp(units[u].u, p + i, n - i)) {
			if (v > UINT64_MAX / units[u].m)
				return false;
			*out = v * units[u].m;
			return true;
		}
	return false;
}

/* client-output-buffer-limit's classes, in the order CONFIG GET lists
 * them, and Redis's defaults: hard, soft, seconds. */
enum { OL_NORMAL, OL_SLAVE, OL_PUBSUB, OL_CLASSES };
static const char *const ol_names[OL_CLASSES] = { "normal", "slave", "pubsub" };
static const uint64_t ol_default[OL_CLASSES][3] = {
	{ 0, 0, 0 }, { 256ull << 20, 64ull << 20, 60 }, { 32ull << 20, 8ull << 20, 60 },
};

static int ol_class(const char *w, size_t n)
{
	if (n == 7 && !strncasecmp(w, "replica", 7))
		return OL_SLAVE;
	for (int c = 0; c < OL_CLASSES; c++)
		if (n == strlen(ol_names[c]) && !strncasecmp(w, ol_names[c], n))
			return c;
	return -1;
}

/* Apply s[0..n) (words in fours: class hard soft seconds) to val, all
 * or nothing; false with Redis's reason when a word is wrong. */
static bool ol_apply(const char *s, size_t n, uint64_t val[OL_CLASSES][3], const char **why)
{
	uint64_t v[OL_CLASSES][3];
	memcpy(v, val, sizeof(v));
	const char *w[4];
	size_t wl[4];
	int k = 0, c = 0;
	for (const char *p = s, *end = s + n; p < end;) {
		while (p < end && *p == ' ')
			p++;
		if (p == end)
			break;
		w[k] = p;
		while (p < end && *p != ' ')
			p++;
		wl[k] = (size_t)(p - w[k]);
		if (k == 0 && (c = ol_class(w[0], wl[0])) < 0) {
			*why = "Invalid client class specified in buffer limit configuration.";
			return false;
		}
		if (k > 0 && !kv_mem_value(w[k], wl[k], &v[c][k - 1])) {
			*why = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
			return false;
		}
		k = (k + 1) % 4;
	}
	if (k) {
		*why = "Wrong number of arguments in buffer limit configuration.";
		return false;
	}
	memcpy(val, v, sizeof(v));
	return true;
}

/* The setting as kept: every class, from the defaults. */
static void ol_current(uint64_t val[OL_CLASSES][3])
{
	memcpy(val, ol_default, sizeof(ol_default));
	const char *s = kv_config_kept("client-output-buffer-limit"), *why;
	if (s)
		(void)ol_apply(s, strlen(s), val, &why);
}

/* CONFIG SET: the classes named change, the others keep their values,
 * and the setting is kept as Redis reads it back (every class, in bytes). */
static char *ol_set(const struct paste_resp_arg *v, const char **why)
{
	uint64_t val[OL_CLASSES][3];
	ol_current(val);
	if (!ol_apply(v->p, v->len, val, why))
		return NULL;
	char buf[256];
	size_t at = 0;
	for (int c = 0; c < OL_CLASSES; c++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s %" PRIu64 " %" PRIu64 " %" PRIu64,
				       c ? " " : "", ol_names[c], val[c][0], val[c][1], val[c][2]);
	char *copy = strdup(buf);
	if (!copy)
		*why = "out of memory";
	return copy;
}

void kv_outlimit_read(struct kv_outlimit *l)
{
	const char *s = kv_config_kept("client-output-buffer-limit");
	if (l->from == s && l->from)
		return;
	l->from = s;
	uint64_t val[OL_CLASSES][3];
	ol_current(val);
	int c = ol_class(l->cls, strlen(l->cls));
	l->hard = val[c][0];
	l->soft = val[c][1];
	l->secs = val[c][2];
}

bool kv_outlimit_over(const struct kv_outlimit *l, uint64_t queued, uint64_t now_ms, uint64_t *since)
{
	bool over = l->hard && queued > l->hard;
	if (l->soft && queued > l->soft) {
		if (!*since)
			*since = now_ms ? now_ms : 1;
		else if (now_ms - *since > l->secs * 1000)
			over = true;
	} else {
		*since = 0;
	}
	return over;
}

/* The value of a setting kept as Redis reads it back: numbers in bytes,
 * words in lower case. */
static int keep(const struct cfg_param *p, const struct paste_resp_arg *v, uint64_t num,
		const char **why)
{
	char num_s[24];
	struct paste_resp_arg nv;
	if (p->type == T_INT || (p->type == T_MEM && num != UINT64_MAX)) {
		nv = (struct paste_resp_arg){ num_s, (size_t)snprintf(num_s, sizeof(num_s), "%lld",
								    (long long)num) };
		v = &nv;
	} else if (p->type == T_BOOL) {
		static const struct paste_resp_arg yes = { "yes", 3 }, no = { "no", 2 };
		v = num ? &yes : &no;
	}
	bool obl = !strcmp(p->name, "client-output-buffer-limit");
	char *copy = obl ? ol_set(v, why) : strndup(v->p, v->len);
	if (!copy && obl)
		return -1;
	if (copy && p->type == T_ENUM)
		for (char *c = copy; *c; c++)
			*c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
	if (!copy) {
		*why = "out of memory";
		return -1;
	}
	free(conf.kept[p - params]);
	conf.kept[p - params] = copy;
	kv_config_gen++;
	return 0;
}

static int param_set(struct resp_ctx *x, const struct cfg_param *p, const struct paste_resp_arg *v,
		     uint64_t num, const char **why)
{
	if (!strcmp(p->name, "notify-keyspace-events")) {
		int fl = kv_notify_parse(v->p, v->len);
		if (fl < 0) {
			*why = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";
			return -1;
		}
		kv_notify_set(pkvs_kv(x->ss), (uint32_t)fl);   /* kv_notify.c keeps it */
		return 0;
	}
	struct srv_auth *a = resp_auth(x);
	const char *n = p->name;
	if (!strcmp(n, "requirepass")) {
		if (!a) {
			*why = "this port has no password store";
			return -1;
		}
		return srv_auth_set(a, v->p, v->len) ? (*why = "out of memory", -1) : 0;
	}
	if (!strcmp(n, "protected-mode")) {
		if (a)
			a->protected_mode = num;
		return 0;
	}
	if (!strcmp(n, "timeout")) {
		if ((int64_t)num < 0 || num > 1000000) {
			*why = "argument must be between 0 and 1000000 inclusive";
			return -1;
		}
		x->w->srv->cfg.idle_to_ms = num * 1000;
		return 0;
	}
	if (!strcmp(n, "maxmemory-clients"))
		kv_clients_limit_set(v->p, v->len);   /* applied (cmd_conn.c), and kept */
	int r = kv_evict_set(pkvs_kv(x->ss), n, num, v->p, v->len, why);
	if (r <= 0)
		return r;                       /* maxmemory and its settings (kv_evict.c) */
	if (keep(p, v, num, why))
		return -1;
	if (p->alias) {                          /* both names read back the last value */
		const struct cfg_param *o = param_find(p->alias, strlen(p->alias));
		if (o) {
			free(conf.kept[o - params]);
			conf.kept[o - params] = NULL;
		}
	}
	if (!strcmp(n, "client-output-buffer-limit"))
		kv_outlimit_read(&kv_normal_limit);    /* the others read it where they check */
	/* Redis's checkGoodReplicasStatus: writes are refused while fewer
	 * replicas than min-replicas-to-write acknowledged within the lag
	 * (kv_repl.c). Kept in a flag so that dispatch reads no setting per
	 * command. */
	if (!strncmp(n, "slowlog-", 8))
		kv_slowlog_setting(n, (int64_t)num);
	if (!strncmp(n, "latency-", 8))
		kv_latency_setting(n, conf.kept[p - params]);
	if (!strcmp(n, "tracking-table-max-keys"))
		kv_tracking_max_keys(num);      /* cmd_tracking.c bounds its table */
	if (!strncmp(n, "min-replicas-", 13) || !strncmp(n, "min-slaves-", 11))
		kv_repl_good_update();          /* kv_repl.c: against the replicas' lag */
	return 0;
}

static void config_set_failed(struct resp_ctx *x, const struct paste_resp_arg *name, const char *why,
			      const struct cfg_param *p)
{
	char arg[132];
	size_t k = name->len < 128 ? name->len : 128;
	memcpy(arg, name->p, k);
	arg[k] = 0;
	if (p && !strcmp(why, "enum")) {
		char list[256];
		size_t k = 0;
		for (const char *c = p->choices; *c && k + 3 < sizeof(list); c++) {
			if (*c == ' ')
				list[k++] = ',';
			list[k++] = *c;
		}
		list[k] = 0;
		resp_error(x, "ERR CONFIG SET failed (possibly related to argument '%s') - argument(s) "
			   "must be one of the following: %s", arg, list);
	} else
		resp_error(x, "ERR CONFIG SET failed (possibly related to argument '%s') - %s", arg, why);
}

/* The name Redis reports a setting's errors under: the current one of a
 * renamed pair (hash-max-ziplist-value is hash-max-listpack-value). */
static const char *canonical(const struct cfg_param *p)
{
	return p->alias && (strstr(p->name, "ziplist") || !strcmp(p->name, "lua-time-limit") ||
			    !strncmp(p->name, "slave", 5) || strstr(p->name, "-slaves-"))
	       ? p->alias : p->name;
}

/* CONFIG SET name value [name value ...]: all or none, as Redis: names
 * first (unknown, immutable, duplicate), then values. */
static void cmd_config_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	char buf[512];
	if (n % 2) {
		resp_error(x, "ERR syntax error");
		return;
	}
	const struct cfg_param *ps[64];
	uint64_t nums[64];
	uint32_t np = (n - 2) / 2;
	if (np > 64) {
		resp_error(x, "ERR CONFIG SET: at most 64 settings at once");
		return;
	}
	for (uint32_t i = 0; i < np; i++) {
		const struct paste_resp_arg *name = &a[2 + 2 * i];
		const struct cfg_param *p = param_find(name->p, name->len);
		if (!p) {
			resp_error(x, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'",
				   (int)(name->len < 128 ? name->len : 128), name->p);
			return;
		}
		if (p->kind == CFG_IMMUTABLE) {
			config_set_failed(x, name, "can't set immutable config", NULL);
			return;
		}
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(canonical(ps[j]), canonical(p))) {
				config_set_failed(x, name, "duplicate parameter", NULL);
				return;
			}
		ps[i] = p;
	}
	for (uint32_t i = 0; i < np; i++) {
		const struct cfg_param *p = ps[i];
		const struct paste_resp_arg *v = &a[3 + 2 * i];
		const struct paste_resp_arg cname = { p->name, strlen(p->name) };
		const char *why = NULL;
		nums[i] = 0;
		if (!value_ok(p, v, &nums[i], &why)) {
			config_set_failed(x, &cname, why, p);
			return;
		}
		if (kv_evict_check(p->name, nums[i], &why)) {      /* maxmemory-samples ... */
			config_set_failed(x, &cname, why, NULL);
			return;
		}
		/* What Redis changes at run time and pkvs fixes at start: the
		 * value it has is fine (a client setting back what it read). */
		const char *now = p->kind == CFG_FIXED ? param_get(x, kv, p, buf, sizeof(buf)) : NULL;
		if (now && (strlen(now) != v->len || strncasecmp(now, v->p, v->len))) {
			config_set_failed(x, &cname, "pkvs sets it at start (see pkvs(1))", NULL);
			return;
		}
	}
	for (uint32_t i = 0; i < np; i++) {
		const char *why = NULL;
		const struct paste_resp_arg cname = { ps[i]->name, strlen(ps[i]->name) };
		if (ps[i]->kind != CFG_FIXED && param_set(x, ps[i], &a[3 + 2 * i], nums[i], &why)) {
			config_set_failed(x, &cname, why, NULL);
			return;
		}
	}
	resp_ok(x);
}

static void cmd_config_resetstat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				 uint32_t n)
{
	(void)a, (void)n;
	for (uint32_t i = 0; i < kv_cmd_count(); i++) {
		struct kv_cmd_rt *rt = kv_cmd_at(i);
		rt->calls = rt->ns = rt->rejected = rt->failed = 0;
		kv_latency_reset(rt);
	}
	resp_errstats_reset(x);
	kv->n.hits = kv->n.misses = 0;
	kv->n.expired = 0;
	kv->n.lazyfreed = 0;
	kv_evict_reset_stats();
	kv_info_resetstat(x->w, kv);
	kv_clients_evicted(true);
	conf.resets_ms = paste_clock_coarse_ms();
	resp_ok(x);
}

static void cmd_config_rewrite(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_error(x, "ERR The server is running without a config file");
}

static void cmd_config_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET <pattern>",
		"    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>",
		"    Set the configuration <directive> to <value>.",
		"RESETSTAT",
		"    Reset statistics reported by the INFO command.",
		"REWRITE",
		"    Rewrite the configuration file.",
		"HELP",
		"    Print this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

uint64_t kv_config_maxmemory(void)
{
	return kv_evict_cfg.maxmemory;
}

bool kv_over_maxmemory(struct resp_ctx *x)
{
	if (!kv_evict_cfg.maxmemory)
		return false;
	kv_clients_memory(x);                   /* the clients' term of the bound, now */
	return kv_evict_over(pkvs_kv(x->ss));
}

int kv_config_preset(const char *name, const char *value, const char **why)
{
	const struct cfg_param *p = param_find(name, strlen(name));
	const struct paste_resp_arg v = { value, strlen(value) };
	uint64_t num = 0;
	*why = "not a setting pkvs takes at start";
	if (!p || !value_ok(p, &v, &num, why)) {
		if (!strcmp(*why, "enum"))
			*why = "not one of the setting's words";
		return -1;
	}
	if (!strcmp(p->name, "maxmemory-clients")) {
		kv_clients_limit_set(v.p, v.len);     /* applied (cmd_conn.c), and kept */
		return keep(p, &v, num, why);
	}
	int r = kv_evict_set(NULL, p->name, num, v.p, v.len, why);
	return r > 0 ? (*why = "not a setting pkvs takes at start", -1) : r;
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_config[] = {
	{ "config", -2, "", "server", "CONFIG subcommands: settings read and changed while pkvs runs.", NULL, 0, 0, 0 },
	{ "config|get", -3, "admin noscript loading stale", "server", "The settings whose names match glob patterns, with their values.", cmd_config_get, 0, 0, 0 },
	{ "config|set", -4, "admin noscript loading stale", "server", "Changes settings now: pkvs applies some, keeps others only to read back, and refuses those fixed at its start.", cmd_config_set, 0, 0, 0 },
	{ "config|resetstat", 2, "admin noscript loading stale", "server", "Sets the counters INFO reports back to zero.", cmd_config_resetstat, 0, 0, 0 },
	{ "config|rewrite", 2, "admin noscript loading stale", "server", "Answers the error of a server without a config file: pkvs never rewrites its --config file.", cmd_config_rewrite, 0, 0, 0 },
	{ "config|help", 2, "loading stale", "server", "Lists CONFIG's subcommands.", cmd_config_help, 0, 0, 0 },
	{ 0 }
};
