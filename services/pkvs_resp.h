/*
 * pkvs_resp.h - pkvs over the Redis protocol: the command table
 * (pkvs_resp.c) and the command families, one file each, as Redis keeps
 * t_string.c above networking.c:
 *
 *   cmd_string.c    GET, SET..., GETEX, APPEND, SETRANGE, INCR..., MSET, SETBIT, LCS
 *   cmd_keyspace.c  DEL, EXISTS, TYPE, RENAME, COPY, RANDOMKEY, OBJECT, SCAN, KEYS
 *   cmd_expire.c    EXPIRE..., TTL..., PERSIST
 *   cmd_info.c      INFO
 *   cmd_config.c    CONFIG
 *   cmd_command.c   COMMAND
 *   cmd_server.c    TIME, SAVE..., WAIT, SHUTDOWN, CLUSTER
 *
 * A command reads the way Redis's do: check its arguments, call the
 * key-value core (kv.h), reply with resp_*() (server/resp.h). The table
 * names arity, flags and group once; dispatch and COMMAND read it.
 */
#ifndef PASTE_SERVICES_PKVS_RESP_H
#define PASTE_SERVICES_PKVS_RESP_H

#include "pkvs_front.h"
#include "resp.h"

/* The Redis version whose protocol and replies pkvs follows: INFO's
 * redis_version and HELLO's version (pkvs's own is PASTE_VERSION). */
#define PKVS_REDIS_VERSION "7.0.15"

typedef void (*kv_cmd_fn)(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *argv,
			  uint32_t argc);

/* A command, as each family's table (kv_cmds_<family>[], ended by a row
 * of zeros) lists it once: dispatch, COMMAND and INFO read it. */
struct kv_cmd {
	const char *name;      /* lower case, as COMMAND reports it */
	int arity;             /* Redis's: argc including the name; negative: at least */
	const char *flags;     /* Redis's command flags, space-separated, for COMMAND */
	const char *group;     /* for COMMAND DOCS */
	const char *summary;
	kv_cmd_fn fn;          /* NULL: the protocol's own (HELLO, QUIT), or a container
				* whose subcommands are the rows "name|sub" right after it */
	/* Redis's legacy key positions (COMMAND INFO, GETKEYS): the first
	 * key's argument index (0: no keys), the last's (negative: counted
	 * from the end, -1 the last argument) and the step between keys. */
	int8_t first_key, last_key, key_step;
};

/* What dispatch reads from the flags, parsed once. */
enum {
	KV_CMD_WRITE = 1u << 0, KV_CMD_READONLY = 1u << 1, KV_CMD_DENYOOM = 1u << 2,
	KV_CMD_ADMIN = 1u << 3, KV_CMD_PUBSUB = 1u << 4, KV_CMD_NOSCRIPT = 1u << 5,
	KV_CMD_BLOCKING = 1u << 6, KV_CMD_LOADING = 1u << 7, KV_CMD_STALE = 1u << 8,
	KV_CMD_NO_AUTH = 1u << 9, KV_CMD_NO_MULTI = 1u << 10, KV_CMD_FAST = 1u << 11,
	KV_CMD_ALLOW_BUSY = 1u << 12,
	KV_CMD_SKIP_MONITOR = 1u << 13, KV_CMD_SKIP_SLOWLOG = 1u << 14, KV_CMD_ASKING = 1u << 15,
	KV_CMD_NO_MANDATORY_KEYS = 1u << 16, KV_CMD_NO_ASYNC_LOADING = 1u << 17,
	KV_CMD_MOVABLE_KEYS = 1u << 18,
	/* pkvs's own: dispatch stamps the command's keys in the access table
	 * (kv_evict.h; not Redis's LOOKUP_NOTOUCH commands). */
	KV_CMD_TOUCH = 1u << 19,
	/* Redis's may_replicate: not a write, but it goes down the
	 * replication stream (PUBLISH, PFCOUNT, EVAL...): CLIENT PAUSE WRITE
	 * holds it. */
	KV_CMD_MAY_REPLICATE = 1u << 20,
};

/* Redis's key specifications (COMMAND INFO, GETKEYS, GETKEYSANDFLAGS):
 * where a command's keys begin (an argument index, or after a keyword)
 * and how many follow (a range, or a count argument), with what the
 * command does to them. cmd_meta.c has Redis's for its commands; a
 * command it does not list gets one spec from its row's first_key,
 * last_key and key_step. */
enum {
	KV_KEY_RO = 1u << 0, KV_KEY_RW = 1u << 1, KV_KEY_OW = 1u << 2, KV_KEY_RM = 1u << 3,
	KV_KEY_ACCESS = 1u << 4, KV_KEY_UPDATE = 1u << 5, KV_KEY_INSERT = 1u << 6,
	KV_KEY_DELETE = 1u << 7, KV_KEY_NOT_KEY = 1u << 8, KV_KEY_INCOMPLETE = 1u << 9,
	KV_KEY_VARIABLE_FLAGS = 1u << 10,
};
enum { KV_BS_UNKNOWN = 0, KV_BS_INDEX, KV_BS_KEYWORD };
enum { KV_FK_UNKNOWN = 0, KV_FK_RANGE, KV_FK_KEYNUM };
struct kv_keyspec {
	uint16_t flags;                /* KV_KEY_* */
	uint8_t bs;                    /* KV_BS_*: */
	int16_t pos;                   /* INDEX: the index; KEYWORD: where the search starts */
	const char *keyword;           /* KEYWORD */
	uint8_t fk;                    /* KV_FK_*: RANGE (lastkey, keystep, limit) or */
	int16_t a, b, c;               /* KEYNUM (keynumidx, firstkey, keystep) */
};
/* The interface facts Redis's reference gives of a command beyond its
 * row (cmd_meta.c, sorted by name): ACL categories (bit i:
 * kv_acl_names[i]), key specs, tips ('\n'-separated), its COMMAND
 * DOCS map's pairs but "summary" (the row's) and "subcommands" (ndocs
 * pairs, RESP3, turned into RESP2 when asked), and its arity and
 * noscript flag (for a command pkvs lacks, what a script is told). */
struct kv_cmd_meta {
	const char *name;
	uint32_t acl;
	uint8_t nspecs;
	const struct kv_keyspec *specs;
	bool movable;
	const char *tips;
	uint8_t ndocs;
	uint32_t docs_len;
	const char *docs;
	int16_t arity;
	bool noscript;
};
extern const struct kv_cmd_meta kv_cmd_metas[];
extern const uint32_t kv_cmd_nmetas;
/* Redis's facts of the command or subcommand fullname ("config|get",
 * lower case), NULL when its reference has none. */
const struct kv_cmd_meta *kv_cmd_meta_find(const char *fullname);

/* A command at run time: its row, flags, and INFO commandstats. */
struct kv_cmd_rt {
	const struct kv_cmd *c;
	uint32_t fl;
	uint64_t calls, ns, rejected, failed;   /* ns: time in the handler */
	uint64_t *lat;                          /* run times' histogram (cmd_latency.c); NULL: none yet */
	/* COMMAND's view: Redis's reference (NULL: derived from the row);
	 * a subcommand's container ("config|get" -> "config"); a
	 * container's subcommands, cmds[sub0 .. sub0 + nsubs). */
	const struct kv_cmd_meta *meta;
	struct kv_cmd_rt *parent;
	uint16_t sub0, nsubs;
};

/* The families (pkvs_resp.c lists them). */
extern const struct kv_cmd kv_cmds_string[], kv_cmds_bitmap[], kv_cmds_hll[], kv_cmds_keyspace[], kv_cmds_expire[],
	kv_cmds_hash[], kv_cmds_multi[], kv_cmds_conn[], kv_cmds_server[];
/* cmd_info.c, cmd_config.c, cmd_command.c: INFO, CONFIG, COMMAND. */
extern const struct kv_cmd kv_cmds_info[], kv_cmds_config[], kv_cmds_command[];
/* CONFIG RESETSTAT of INFO's counters that are the server's totals. */
void kv_info_resetstat(struct worker *w, struct kv *kv);
/* cmd_memory.c: MEMORY; the process's resident bytes (INFO's used_memory_rss). */
extern const struct kv_cmd kv_cmds_memory[];
uint64_t kv_rss_bytes(void);
/* cmd_db.c: SELECT, SWAPDB, MOVE. */
extern const struct kv_cmd kv_cmds_db[];
/* cmd_slowlog.c: SLOWLOG, and the log kv_run feeds (a command that took
 * kv_slowlog_ns or more: slowlog-log-slower-than; UINT64_MAX: off). */
extern const struct kv_cmd kv_cmds_slowlog[];
extern uint64_t kv_slowlog_ns;
void kv_slowlog_push(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc, uint64_t ns);
/* cmd_latency.c: LATENCY; each call's time into its command's histogram
 * while kv_latency_tracking (latency-tracking), and a call that took
 * kv_latency_ns or more (latency-monitor-threshold; UINT64_MAX: off) into
 * the monitor's "command" or "fast-command" event. */
extern const struct kv_cmd kv_cmds_latency[];
extern bool kv_latency_tracking;
extern uint64_t kv_latency_ns;
/* The bucket of a run time (clamped to 1 s, as Redis clamps it): 16
 * log-linear buckets per power of two; inline, as kv_run adds one per
 * call. record: the same, allocating rt's buckets first. */
#define KV_LAT_BUCKETS (38 * 16)
static inline unsigned kv_latency_bucket(uint64_t ns)
{
	if (ns > 1000000000u)
		ns = 1000000000u;
	if (ns < 16)
		return (unsigned)ns;
	unsigned m = 63u - (unsigned)__builtin_clzll(ns);
	return (m - 3) * 16 + (unsigned)((ns >> (m - 4)) & 15);
}
void kv_latency_record(struct kv_cmd_rt *rt, uint64_t ns);
void kv_latency_reset(struct kv_cmd_rt *rt);
void kv_latency_event(const char *name, uint64_t ms);
/* CONFIG SET of latency-tracking or latency-monitor-threshold (value as
 * CONFIG GET reads it back). */
void kv_latency_setting(const char *name, const char *value);
/* INFO latencystats' lines, appended to o. */
void kv_latency_info(struct resp_out *o);
/* CONFIG SET of slowlog-log-slower-than or slowlog-max-len (v: the value). */
void kv_slowlog_setting(const char *name, int64_t v);
/* cmd_script.c: EVAL..., SCRIPT, FUNCTION, FCALL. */
extern const struct kv_cmd kv_cmds_script[];
/* cmd_pubsub.c: SUBSCRIBE, PUBLISH, PUBSUB, ... */
extern const struct kv_cmd kv_cmds_pubsub[];
/* cmd_list.c: LPUSH ... BLMPOP (blocked clients: cmd_block.h). */
extern const struct kv_cmd kv_cmds_list[];
/* cmd_set.c: SADD ... SSCAN; cmd_zset.c: ZADD ... ZRANDMEMBER (cmd_set.h). */
extern const struct kv_cmd kv_cmds_set[], kv_cmds_zset[];
/* cmd_sort.c: SORT, SORT_RO; their keys as Redis's sortGetKeys finds
 * them (COMMAND GETKEYS): positions in pos[], flags in fl[] (room for
 * two), how many. */
extern const struct kv_cmd kv_cmds_sort[];
/* cmd_geo.c: GEOADD ... GEOSEARCHSTORE (positions in sorted sets). */
extern const struct kv_cmd kv_cmds_geo[];
int kv_sort_getkeys(const struct paste_resp_arg *argv, uint32_t argc, bool readonly,
		    uint32_t *pos, uint32_t *fl);

/* Every command: count, the i-th, and by name (any case; NULL: unknown). */
uint32_t kv_cmd_count(void);
struct kv_cmd_rt *kv_cmd_at(uint32_t i);
struct kv_cmd_rt *kv_cmd_find(const struct paste_resp_arg *name);
/* A command or subcommand by its full name ("config|get"), any case:
 * COMMAND INFO and DOCS (dispatch never runs a name with '|'). */
struct kv_cmd_rt *kv_cmd_lookup(const char *p, size_t len);
/* Container rt's subcommand named by a (NULL: none). */
struct kv_cmd_rt *kv_cmd_sub(struct kv_cmd_rt *rt, const struct paste_resp_arg *a);
/* Run a command whose arity was checked (dispatch, EXEC). */
void kv_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
	    const struct paste_resp_arg *argv, uint32_t argc);

/* cmd_multi.c: inside MULTI, a command is queued (true: replied QUEUED)
 * or, refused before it ran (unknown, arity), marks the transaction
 * failed. */
bool kv_multi_queue(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc);
void kv_multi_reject(struct resp_ctx *x);
/* EXEC refused inside MULTI (its arity, a script running long): Redis
 * answers "EXECABORT Transaction discarded because of: <why>" and
 * discards the transaction (true: replied; false: rt is not such an EXEC). */
bool kv_multi_exec_abort(struct resp_ctx *x, const struct kv_cmd_rt *rt, const char *why);
/* rt is EXEC inside MULTI and a write command is queued. */
bool kv_multi_exec_writes(struct resp_ctx *x, const struct kv_cmd_rt *rt);
/* Inside MULTI: a queued command writes or may replicate (CLIENT PAUSE
 * WRITE holds the EXEC). */
bool kv_multi_queued_writes(struct resp_ctx *x);
/* cmd_pause.c: CLIENT PAUSE / UNPAUSE. kv_pause_holds: the admitted
 * command x is about to run waits for the pause's end (true: postponed,
 * or answered); pass and wake end a pause at its timeout; count: the
 * clients waiting (INFO blocked_clients). */
bool kv_pause_on(void);
bool kv_pause_holds(struct resp_ctx *x, struct kv *kv, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc);
void kv_pause_pass(struct worker *w, struct kv *kv);
uint64_t kv_pause_wake(void);
uint32_t kv_pause_count(void);
void kv_client_pause(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_client_unpause(struct resp_ctx *x, struct kv *kv);
/* May the command change data or the replication stream: a write or
 * may_replicate command, a script by its declared flags (none, or an
 * unknown script: it may)? */
bool kv_cmd_may_write(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc);
/* EVAL, EVALSHA or FCALL argv: may the script write, by its flags? */
bool kv_script_may_write(const struct paste_resp_arg *argv, uint32_t argc);
bool kv_function_may_write(const struct paste_resp_arg *name);
/* rt is EXEC inside MULTI and a queued command lacks flag (KV_CMD_*). */
bool kv_multi_exec_lacks(struct resp_ctx *x, const struct kv_cmd_rt *rt, uint32_t flag);
/* A streamed SET's value is in (kv_resp_conn's body and key): inside
 * MULTI it is queued, its buffers held, and QUEUED replied (true). */
bool kv_multi_stream_end(struct resp_ctx *x);
/* A write of the running EXEC found no room (kv_reply_errno): its group
 * is aborted. */
void kv_multi_nospace(struct resp_ctx *x);
/* The connection ends (closed hook), or RESET: out of MULTI, nothing
 * queued or watched. */
void kv_multi_closed(struct resp_ctx *x);
void kv_multi_reset(struct resp_ctx *x);
/* Between MULTI and EXEC (ACL LOG's context). */
bool kv_multi_active(struct resp_ctx *x);
/* cmd_conn.c: may this connection run rt with argv (AUTH, ACL)? false:
 * replied. */
bool kv_conn_allowed(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		     uint32_t argc);
/* cmd_pubsub.c: the connection's subscriptions end (closed hook, RESET);
 * PING of a subscribed RESP2 connection (true: replied its way). */
void kv_pubsub_closed(struct resp_ctx *x);
void kv_pubsub_reset(struct resp_ctx *x);
bool kv_pubsub_ping(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n);
/* cmd_conn.c: o's line of CLIENT LIST (ACL LOG's client-info too). */
int kv_client_line(struct resp_ctx *o, char *out, size_t cap);
/* cmd_acl.c: AUTH and ACL. */
extern const struct kv_cmd kv_cmds_acl[];

/* The service's part of a connection. */
struct kv_resp_conn {
	uint32_t db;                   /* SELECT */
	/* A streamed SET's value and key (a long key's bytes in name): in
	 * body when it fits one entry, else written in chunks by big. */
	struct paste_body body;
	struct kv_writer big;
	struct kv_key key;
	uint8_t *name;
	struct kv_multi *multi;        /* MULTI's queue, WATCH (cmd_multi.c); NULL: none yet */
	struct kv_psclient *pubsub;    /* its subscriptions (cmd_pubsub.c); NULL: none yet */
	const struct kv_cmd *last;     /* the last command run (CLIENT LIST cmd=) */
	struct kv_bclient *block;      /* blocked on keys (cmd_block.c); NULL: not */
	bool monitor;                  /* MONITOR (cmd_monitor.c) */
	struct kv_tclient *track;      /* CLIENT TRACKING (cmd_tracking.c); NULL: never on */
	uint64_t out_soft_since;       /* over the normal class's soft output limit since (ms; 0: not) */
};

static inline uint32_t kv_resp_db(const struct resp_ctx *x)
{
	return ((const struct kv_resp_conn *)x->sc)->db;
}

/* Shared by the command files. */
/* The key named by argument a in the connection's database: false (and
 * replied) when it is longer than pkvs takes. */
bool kv_arg_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, struct kv_key *k);
/* Look k up expecting `type`: 0 (found, *o), -ENOENT (absent), or
 * -EINVAL after replying WRONGTYPE. */
int kv_find(struct resp_ctx *x, struct kv *kv, struct kv_key *k, enum kv_type type,
	    struct kv_obj *o, bool read);
void kv_reply_errno(struct resp_ctx *x, int r);
/* "$len\r\n" + bytes [from, from + len) of string o's value + "\r\n", sent
 * from where the value lies: 0 or -EIO. */
int kv_reply_value(struct resp_ctx *x, struct kv *kv, const struct kv_obj *o, uint64_t from,
		   uint64_t len);
/* An integer argument as Redis's getRangeLongFromObjectOrReply reads one:
 * false after replying "ERR <msg>" (for a bad number too), or when msg is
 * NULL "value is not an integer or out of range" and the range's words. */
bool kv_arg_range(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t min, int64_t max,
		  const char *msg, int64_t *v);
/* A SCAN cursor as Redis's parseScanCursorOrReply reads one: strtoul's
 * digits (a sign allowed), no leading space, nothing after, no overflow
 * (the empty string is 0). */
bool kv_arg_cursor(const struct paste_resp_arg *a, uint64_t *v);
/* LMPOP, BLMPOP, ZMPOP, BZMPOP: numkeys (at a[at]) key... words[0]|words[1]
 * [COUNT count], as Redis reads them: false after replying; *k the keys
 * (a[at + 1 ..]), *which the word given, *count (1 when none). */
bool kv_arg_mpop(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t at,
		 const char *const words[2], uint32_t *k, int *which, int64_t *count);
/* The options of HSCAN, SSCAN, ZSCAN at a[from..n): [COUNT count] [MATCH
 * pattern], as Redis reads them (count 10 by default; a MATCH of "*" is
 * none: *match NULL). false after replying the error. */
bool kv_arg_scan(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint32_t from,
		 int64_t *count, const struct paste_resp_arg **match);
/* Uniform in [0, n), n > 0 (xoshiro256** seeded from getrandom). */
uint64_t kv_rand_below(uint64_t n);
/* k distinct indexes of [0, n) (k <= n), increasing, into out[]: every
 * k-subset as likely. 0, or -ENOMEM. */
int kv_rand_distinct(uint64_t n, uint64_t k, uint64_t *out);
/* Redis's glob (stringmatchlen): * ? [abc] [^a] [a-z] and \ escapes. */
bool kv_glob(const char *pat, size_t plen, const uint8_t *s, size_t slen);

/* cmd_string.c */
void cmd_get(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_set(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_strlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_getrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_incr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_decr(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_mget(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_mset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
/* A SET value held where it landed in ev's buffer (the streamed path and
 * set_arg share it). */
int kv_set_arg(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const struct paste_resp_arg *v,
	       int64_t expire_ms, bool *created);
/* An integer argument as Redis reads one: false after replying "value is
 * not an integer or out of range". */
bool kv_arg_int(struct resp_ctx *x, const struct paste_resp_arg *a, int64_t *v);
/* Take (pin true) or drop a reference on each buffer of o's value: a
 * value sent after a write that replaces or deletes it (GETDEL, SET GET). */
void kv_pin(struct kv *kv, const struct kv_obj *o, bool pin);

/* cmd_expire.c */
/* "ERR invalid expire time in '<cmd>' command" (cmd: the name, any case). */
void kv_reply_bad_expire(struct resp_ctx *x, const struct paste_resp_arg *cmd);

/* cmd_hash.c */
/* Argument v of a whole command as body b, held where it landed in
 * x->ev's store buffer: 1 (b holds it: kv_put_body or kv_hash_set_body
 * take and release it), 0 (not in that buffer, or KV_PACK_MAX bytes or
 * less: copy it), or -EFBIG (over the store's largest value). */
int kv_arg_hold(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *v,
		struct paste_body *b);
/* Long doubles as Redis reads and writes them (HINCRBYFLOAT,
 * INCRBYFLOAT): parse takes all of s[0..len), len < KV_LD_CHARS, no
 * leading space, finite and not NaN (false otherwise); format writes 17
 * decimals with trailing zeros and a bare point dropped and "-0" as "0",
 * NUL-ended: the length, or -1 when cap is too small. */
#define KV_LD_CHARS 5120
bool kv_ld_parse(const char *s, size_t len, long double *out);
int kv_ld_format(char *out, size_t cap, long double v);

/* cmd_keyspace.c */
void cmd_del(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_type(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_dbsize(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_flushall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_keys(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

/* cmd_server.c */
/* A HELP reply: an array of simple strings. */
void kv_reply_help(struct resp_ctx *x, const char *const *lines, uint32_t n);
/* Redis's addReplySubcommandSyntaxError: subcommand sub of container
 * ("ACL", ...) given the wrong arguments. */
void kv_sub_syntax_error(struct resp_ctx *x, const char *container, const struct paste_resp_arg *sub);
/* Redis's glob, any case (COMMAND LIST PATTERN, CONFIG GET): both sides
 * lower-cased, then kv_glob. */
bool kv_glob_nocase(const char *pat, size_t plen, const uint8_t *s, size_t slen);
/* The Redis port's bound port (INFO tcp_port, CONFIG GET port). */
unsigned kv_resp_port(const struct resp_ctx *x);
/* SAVE, BGSAVE and BGREWRITEAOF calls; the last one's Unix time, or
 * pkvs's start before any (LASTSAVE, INFO rdb_last_save_time). */
uint64_t kv_save_count(void);
uint64_t kv_last_save(const struct resp_ctx *x);
/* cmd_command.c: ACL categories: names (bit i of a command's mask), and
 * a command's. */
extern const char *const kv_acl_names[];
uint32_t kv_cmd_acl(const struct kv_cmd_rt *rt);
/* The keys of argv[0..argc) (a whole command of rt) as its key specs find
 * them (COMMAND GETKEYS, ACL): positions in pos[], KV_KEY_* flags in
 * fl[], at most cap; -1 when the specs do not fit the arguments. */
int kv_cmd_getkeys(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc,
		   uint32_t *pos, uint32_t *fl, uint32_t cap);
/* cmd_config.c */
/* maxmemory is set and the dataset is over it with nothing (more) to
 * evict (kv_evict_over: keys are evicted first by maxmemory-policy): a
 * denyoom command is refused (Redis's OOM error). */
bool kv_over_maxmemory(struct resp_ctx *x);
/* cmd_conn.c: clients' memory (unsent replies and unfinished requests,
 * replicas' left out; measuring it also sets kv_evict_clients) and client eviction (maxmemory-clients: bytes, or
 * "N%" of maxmemory; 0 off): after a command, past the limit, the clients
 * that hold the most are closed, their output dropped, until under it;
 * CLIENT NO-EVICT and replicas are never. */
uint64_t kv_clients_memory(struct resp_ctx *x);
/* What one client holds: its unsent replies and its unfinished request
 * (CLIENT LIST's tot-mem; what client eviction ranks by). */
uint64_t kv_client_memory(struct resp_ctx *o);
void kv_clients_limit_set(const char *p, size_t n);
extern bool kv_clients_limit_on;
void kv_clients_evict(struct resp_ctx *x);
uint64_t kv_clients_evicted(bool reset);
/* CONFIG SET maxmemory's bound in bytes (0: none). */
uint64_t kv_config_maxmemory(void);
/* A setting from pkvs's command line or --config file, read as CONFIG
 * SET reads it (maxmemory and its settings, kv_evict.h): 0, or -1 with
 * *why. */
int kv_config_preset(const char *name, const char *value, const char **why);
/* A setting CONFIG keeps as a string, as CONFIG GET reads it back (a new
 * string after each change); NULL for another name. */
const char *kv_config_kept(const char *name);
/* Bumped whenever a kept setting changes: a command that reads one on
 * every call keeps the value it read and reads again when this moved. */
extern uint64_t kv_config_gen;
/* A memory value as Redis reads one: digits with an optional unit, any
 * case (b; k 1000, kb 1024; m, mb; g, gb). false: not one, or too big. */
bool kv_mem_value(const char *p, size_t n, uint64_t *out);
/* One class of client-output-buffer-limit ("pubsub", or "slave", which a
 * "replica" word also names): Redis's default for it until the setting
 * names it; read again (kv_outlimit_read) when the setting changes. */
struct kv_outlimit {
	const char *cls;
	uint64_t hard, soft, secs;      /* bytes, bytes, seconds; 0: that part off */
	const char *from;               /* the setting's string it was read from */
};
void kv_outlimit_read(struct kv_outlimit *l);
/* A connection with queued bytes unsent is over l: past the hard limit,
 * or over the soft one longer than its seconds. *since is the caller's
 * per connection: when it went over the soft limit (0: it is not). */
bool kv_outlimit_over(const struct kv_outlimit *l, uint64_t queued, uint64_t now_ms, uint64_t *since);
/* The normal class (0 0 0, off, by default, as Redis's), read again when
 * CONFIG SET changes the setting. A normal client (not subscribed, not a
 * replica; a monitor is one) whose unsent replies pass it after a command
 * or a monitor line is dropped with them unsent, as Redis closes it before
 * writing; one over the soft limit is looked at every pass until it
 * drains or its seconds run out (cmd_conn.c). One load per command while
 * the class is off. */
extern struct kv_outlimit kv_normal_limit;
void kv_normal_limit_check(struct resp_ctx *x);
void kv_normal_limit_pass(struct worker *w);
static inline void kv_normal_limit_after(struct resp_ctx *x)
{
	if (kv_normal_limit.hard | kv_normal_limit.soft)
		kv_normal_limit_check(x);
}
/* min-replicas-to-write above 0, min-replicas-max-lag not 0, and fewer
 * replicas than the former acknowledged within the latter: pkvs refuses
 * writes with Redis's NOREPLICAS error (a write command, an EXEC that
 * queued one, a script that may write). kv_repl_good_update keeps it. */
extern bool kv_noreplicas;
#define KV_NOREPLICAS "NOREPLICAS Not enough good replicas to write."
/* cmd_info.c: the --config file (INFO config_file), NULL: none;
 * apps/pkvs.c sets it. */
extern const char *kv_config_file;
/* cmd_info.c: every pass, the totals behind INFO's instantaneous_* rates
 * (a sample at most every 100 ms, as Redis's cron takes them). */
void kv_info_sample(struct worker *w, struct kv *kv);
/* The dataset's peak since the start or CONFIG RESETSTAT (INFO's
 * used_memory_peak, MEMORY STATS's peak.allocated). */
uint64_t kv_used_peak(struct kv *kv);
/* cmd_script.c */
/* Dispatch while a script runs past busy-reply-threshold (false when
 * none does): a command not flagged allow_busy is answered Redis's BUSY
 * error, one that is runs (or is queued inside MULTI) without serving
 * blocked clients, which wait for the script's end. True: handled. */
bool kv_script_busy(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc);
/* Redis's BUSY line while a script runs past busy-reply-threshold (the
 * loop then serves clients from inside it), else NULL: what reaches the
 * store outside a command (a streamed SET's end, an HTTP request) is
 * refused with it, so nothing enters the script's unfinished group. */
const char *kv_script_busy_line(void);
/* INFO's Memory lines of scripting. */
struct kv_script_info {
	size_t eval_bytes, fn_bytes;    /* the two Lua states */
	uint64_t scripts, script_bytes; /* cached scripts and their bodies */
	uint64_t functions, libraries;
};
void kv_script_info(struct kv *kv, struct kv_script_info *out);

extern const struct resp_service pkvs_resp_service;

#endif
