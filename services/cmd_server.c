/*
 * cmd_server.c - the commands clients use to look at pkvs rather than at
 * its data: INFO, CONFIG, COMMAND, TIME, LASTSAVE, SAVE, BGSAVE, WAIT,
 * SHUTDOWN, CLUSTER, and the limit CONFIG SET maxmemory puts on writes.
 * (The connection's own commands are in cmd_conn.c; SCAN and KEYS in
 * cmd_keyspace.c.) COMMAND's interface facts beyond the rows (ACL
 * categories, key specs, tips, DOCS's arguments and versions) are
 * Redis's reference's, from cmd_meta.c; DOCS's summaries are the rows'.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "paste_version.h"
#include "cmd_block.h"
#include "kv_notify.h"
#include "pkvs_resp.h"

/* ---------------------------------------------------- RESP3 -> RESP2 */

/* Append a reply kept as RESP3 bytes (cmd_meta.c's DOCS maps), in the
 * connection's protocol: RESP2 has no maps ('%' n: '*' 2n) or sets ('~'
 * n: '*' n). */
static void out_resp3(struct resp_out *o, const char *p, size_t n, int proto)
{
	if (proto == 3) {
		resp_out_put(o, p, n);
		return;
	}
	const char *end = p + n;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		size_t line = (size_t)(nl - p) + 1;
		if (*p == '%' || *p == '~') {
			long long k = strtoll(p + 1, NULL, 10);
			char h[32];
			int m = snprintf(h, sizeof(h), "*%lld\r\n", *p == '%' ? 2 * k : k);
			resp_out_put(o, h, (size_t)m);
			p += line;
		} else if (*p == '$') {
			size_t blen = (size_t)strtoull(p + 1, NULL, 10);
			resp_out_put(o, p, line + blen + 2);
			p += line + blen + 2;
		} else {
			resp_out_put(o, p, line);
			p += line;
		}
	}
}

static void out_int(struct resp_out *o, int64_t v)
{
	char h[32];
	resp_out_put(o, h, (size_t)paste_resp_put_int(h, sizeof(h), v));
}

static void out_head(struct resp_out *o, char type, int proto, uint64_t n)
{
	char h[32];
	int k;
	if (type == '%')
		k = paste_resp_put_map(h, sizeof(h), proto, n);
	else if (type == '~')
		k = paste_resp_put_set(h, sizeof(h), proto, n);
	else
		k = paste_resp_put_array(h, sizeof(h), n);
	resp_out_put(o, h, (size_t)k);
}

static void out_simple(struct resp_out *o, const char *s)
{
	char h[80];
	resp_out_put(o, h, (size_t)paste_resp_put_simple(h, sizeof(h), s));
}

static void out_str(struct resp_out *o, const char *s)
{
	resp_out_bulk(o, s, strlen(s));
}

const char *kv_config_file;

/* Redis's glob, any case (COMMAND LIST PATTERN, CONFIG GET): both sides
 * lower-cased, then kv_glob. */
static bool kv_glob_nocase(const char *pat, size_t plen, const uint8_t *s, size_t slen)
{
	char p[256], t[256];
	if (plen > sizeof(p) || slen > sizeof(t))
		return false;
	for (size_t i = 0; i < plen; i++)
		p[i] = (char)(pat[i] >= 'A' && pat[i] <= 'Z' ? pat[i] + 32 : pat[i]);
	for (size_t i = 0; i < slen; i++)
		t[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	return kv_glob(p, plen, (const uint8_t *)t, slen);
}

/* The Redis port's bound port (INFO tcp_port, CONFIG GET port). */
static unsigned kv_resp_port(const struct resp_ctx *x)
{
	const struct server *s = x->w->srv;
	for (uint32_t i = 0; i < s->nlis; i++)
		if (s->lis[i].proto == &resp_proto)
			return s->listen_port[i];
	return 0;
}

/* ---------------------------------------------------------- COMMAND */

const char *const kv_acl_names[] = {
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
	"hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
	"dangerous", "connection", "transaction", "scripting", NULL,
};

static uint32_t acl_bit(const char *name)
{
	for (uint32_t i = 0; kv_acl_names[i]; i++)
		if (!strcmp(kv_acl_names[i], name))
			return 1u << i;
	return 0;
}

/* A command's ACL categories: Redis's, or for a command cmd_meta.c does
 * not list, those its flags and group imply (as Redis adds them). */
uint32_t kv_cmd_acl(const struct kv_cmd_rt *rt)
{
	if (rt->meta)
		return rt->meta->acl;
	static const struct { const char *group, *cat; } groups[] = {
		{ "string", "string" }, { "generic", "keyspace" }, { "hash", "hash" },
		{ "list", "list" }, { "set", "set" }, { "sorted-set", "sortedset" },
		{ "connection", "connection" }, { "transactions", "transaction" },
		{ "pubsub", "pubsub" }, { "scripting", "scripting" }, { "stream", "stream" },
	};
	uint32_t acl = 0;
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (!strcmp(rt->c->group, groups[i].group))
			acl |= acl_bit(groups[i].cat);
	if (rt->fl & KV_CMD_WRITE)
		acl |= acl_bit("write");
	if (rt->fl & KV_CMD_READONLY)
		acl |= acl_bit("read");
	if (rt->fl & KV_CMD_ADMIN)
		acl |= acl_bit("admin") | acl_bit("dangerous");
	if (rt->fl & KV_CMD_PUBSUB)
		acl |= acl_bit("pubsub");
	if (rt->fl & KV_CMD_FAST)
		acl |= acl_bit("fast");
	if (rt->fl & KV_CMD_BLOCKING)
		acl |= acl_bit("blocking");
	if (!(acl & acl_bit("fast")))
		acl |= acl_bit("slow");
	return acl;
}

/* A command's key specs: Redis's, or one from the row's key positions
 * (RO access for a read, RW update for a write). */
static const struct kv_keyspec *cmd_specs(const struct kv_cmd_rt *rt, struct kv_keyspec *one,
					  uint32_t *n)
{
	if (rt->meta) {
		*n = rt->meta->nspecs;
		return rt->meta->specs;
	}
	const struct kv_cmd *c = rt->c;
	*n = 0;
	if (!c->first_key)
		return NULL;
	*one = (struct kv_keyspec){
		.flags = rt->fl & KV_CMD_WRITE ? KV_KEY_RW | KV_KEY_UPDATE : KV_KEY_RO | KV_KEY_ACCESS,
		.bs = KV_BS_INDEX, .pos = c->first_key, .fk = KV_FK_RANGE,
		.a = (int16_t)(c->last_key < 0 ? c->last_key : c->last_key - c->first_key),
		.b = c->key_step, .c = 0,
	};
	*n = 1;
	return one;
}

static void out_keyflags(struct resp_out *o, uint32_t fl, int proto)
{
	static const char *const names[] = { "RO", "RW", "OW", "RM", "access", "update", "insert",
					     "delete", "not_key", "incomplete", "variable_flags" };
	uint32_t n = 0;
	for (uint32_t i = 0; i < 11; i++)
		n += (fl >> i) & 1;
	out_head(o, '~', proto, n);
	for (uint32_t i = 0; i < 11; i++)
		if (fl & (1u << i))
			out_simple(o, names[i]);
}

static void out_keyspecs(struct resp_out *o, const struct kv_cmd_rt *rt, int proto)
{
	struct kv_keyspec one;
	uint32_t n;
	const struct kv_keyspec *ks = cmd_specs(rt, &one, &n);
	out_head(o, '~', proto, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct kv_keyspec *k = &ks[i];
		out_head(o, '%', proto, 3);
		out_str(o, "flags");
		out_keyflags(o, k->flags, proto);
		out_str(o, "begin_search");
		out_head(o, '%', proto, 2);
		out_str(o, "type");
		if (k->bs == KV_BS_INDEX) {
			out_str(o, "index");
			out_str(o, "spec");
			out_head(o, '%', proto, 1);
			out_str(o, "index");
			out_int(o, k->pos);
		} else if (k->bs == KV_BS_KEYWORD) {
			out_str(o, "keyword");
			out_str(o, "spec");
			out_head(o, '%', proto, 2);
			out_str(o, "keyword");
			out_str(o, k->keyword);
			out_str(o, "startfrom");
			out_int(o, k->pos);
		} else {
			out_str(o, "unknown");
			out_str(o, "spec");
			out_head(o, '%', proto, 0);
		}
		out_str(o, "find_keys");
		out_head(o, '%', proto, 2);
		out_str(o, "type");
		if (k->fk == KV_FK_RANGE || k->fk == KV_FK_KEYNUM) {
			bool range = k->fk == KV_FK_RANGE;
			out_str(o, range ? "range" : "keynum");
			out_str(o, "spec");
			out_head(o, '%', proto, 3);
			out_str(o, range ? "lastkey" : "keynumidx");
			out_int(o, k->a);
			out_str(o, range ? "keystep" : "firstkey");
			out_int(o, k->b);
			out_str(o, range ? "limit" : "keystep");
			out_int(o, k->c);
		} else {
			out_str(o, "unknown");
			out_str(o, "spec");
			out_head(o, '%', proto, 0);
		}
	}
}

static struct kv_cmd_rt *sub_at(const struct kv_cmd_rt *rt, uint32_t i)
{
	return kv_cmd_at(rt->sub0 + i);
}

static void command_info(struct resp_out *o, const struct kv_cmd_rt *rt, int proto)
{
	static const struct { uint32_t bit; const char *name; } flags[] = {
		{ KV_CMD_WRITE, "write" }, { KV_CMD_READONLY, "readonly" }, { KV_CMD_DENYOOM, "denyoom" },
		{ KV_CMD_ADMIN, "admin" }, { KV_CMD_PUBSUB, "pubsub" }, { KV_CMD_NOSCRIPT, "noscript" },
		{ KV_CMD_BLOCKING, "blocking" }, { KV_CMD_LOADING, "loading" }, { KV_CMD_STALE, "stale" },
		{ KV_CMD_SKIP_MONITOR, "skip_monitor" }, { KV_CMD_SKIP_SLOWLOG, "skip_slowlog" },
		{ KV_CMD_ASKING, "asking" }, { KV_CMD_FAST, "fast" }, { KV_CMD_NO_AUTH, "no_auth" },
		{ KV_CMD_NO_MANDATORY_KEYS, "no_mandatory_keys" },
		{ KV_CMD_NO_ASYNC_LOADING, "no_async_loading" }, { KV_CMD_NO_MULTI, "no_multi" },
		{ KV_CMD_MOVABLE_KEYS, "movablekeys" }, { KV_CMD_ALLOW_BUSY, "allow_busy" },
	};
	const struct kv_cmd *c = rt->c;
	out_head(o, '*', proto, 10);
	out_str(o, c->name);
	out_int(o, c->arity);
	uint32_t nf = 0;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		nf += (rt->fl & flags[i].bit) != 0;
	out_head(o, '~', proto, nf);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (rt->fl & flags[i].bit)
			out_simple(o, flags[i].name);
	out_int(o, c->first_key);
	out_int(o, c->last_key);
	out_int(o, c->key_step);
	uint32_t acl = kv_cmd_acl(rt), na = 0;
	for (uint32_t i = 0; kv_acl_names[i]; i++)
		na += (acl >> i) & 1;
	out_head(o, '~', proto, na);
	for (uint32_t i = 0; kv_acl_names[i]; i++)
		if (acl & (1u << i)) {
			char cat[32];
			snprintf(cat, sizeof(cat), "@%s", kv_acl_names[i]);
			out_simple(o, cat);
		}
	const char *tips = rt->meta ? rt->meta->tips : "";
	uint32_t nt = 0;
	for (const char *p = tips; *p; p += strcspn(p, "\n"), p += *p == '\n')
		nt++;
	out_head(o, '~', proto, nt);
	for (const char *p = tips; *p;) {
		size_t len = strcspn(p, "\n");
		resp_out_bulk(o, p, len);
		p += len + (p[len] == '\n');
	}
	out_keyspecs(o, rt, proto);
	out_head(o, rt->nsubs ? '*' : '~', proto, rt->nsubs);   /* as Redis: a set when none */
	for (uint32_t i = 0; i < rt->nsubs; i++)
		command_info(o, sub_at(rt, i), proto);
}

/* The row's summary, then cmd_meta.c's pairs (since, group, doc flags,
 * deprecation, arguments) or, without them, the row's group. */
static void command_docs(struct resp_out *o, const struct kv_cmd_rt *rt, int proto)
{
	const struct kv_cmd_meta *m = rt->meta;
	out_head(o, '%', proto, 1 + (m ? m->ndocs : 1) + (rt->nsubs > 0));
	out_str(o, "summary");
	out_str(o, rt->c->summary);
	if (m) {
		out_resp3(o, m->docs, m->docs_len, proto);
	} else {
		out_str(o, "group");
		out_str(o, rt->c->group);
	}
	if (rt->nsubs) {
		out_str(o, "subcommands");
		out_head(o, '%', proto, rt->nsubs);
		for (uint32_t i = 0; i < rt->nsubs; i++) {
			out_str(o, sub_at(rt, i)->c->name);
			command_docs(o, sub_at(rt, i), proto);
		}
	}
}

/* The keys of argv[0..argc) (a whole command) as its key specs find
 * them: positions in pos[] and flags, at most cap; -1 when the specs do
 * not fit the arguments (Redis: "Invalid arguments"). SET's flags depend
 * on GET (variable_flags), as Redis's own key function says. */
static int getkeys(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc,
		   uint32_t *pos, uint32_t *fl, uint32_t cap)
{
	struct kv_keyspec one;
	uint32_t n, nk = 0;
	const struct kv_keyspec *ks = cmd_specs(rt, &one, &n);
	for (uint32_t j = 0; j < n; j++) {
		const struct kv_keyspec *k = &ks[j];
		if (k->flags & KV_KEY_NOT_KEY)
			continue;
		int64_t first = 0, last, step;
		if (k->bs == KV_BS_INDEX) {
			first = k->pos;
		} else if (k->bs == KV_BS_KEYWORD) {
			int64_t start = k->pos > 0 ? k->pos : (int64_t)argc + k->pos;
			int64_t end = k->pos > 0 ? (int64_t)argc - 1 : 1;
			for (int64_t i = start; i != end; i += start <= end ? 1 : -1) {
				if (i >= (int64_t)argc || i < 1)
					break;
				if (paste_resp_arg_eq(&argv[i], k->keyword)) {
					first = i + 1;
					break;
				}
			}
			if (!first)
				continue;
		} else {
			return -1;
		}
		if (k->fk == KV_FK_RANGE) {
			step = k->b;
			if (k->a >= 0)
				last = first + k->a;
			else if (!k->c)
				last = (int64_t)argc + k->a;
			else
				last = first + (((int64_t)argc - first) / k->c + k->a);
		} else if (k->fk == KV_FK_KEYNUM) {
			step = k->c;
			int64_t nkeys;
			if (first + k->a >= (int64_t)argc ||
			    paste_resp_arg_i64(&argv[first + k->a], &nkeys) || nkeys < 0)
				return -1;
			first += k->b;
			last = first + nkeys - 1;
		} else {
			return -1;
		}
		if (last >= (int64_t)argc || last < first || first >= (int64_t)argc)
			return -1;
		for (int64_t i = first; i <= last && step > 0; i += step) {
			if (nk == cap)
				return -1;
			pos[nk] = (uint32_t)i;
			fl[nk++] = k->flags;
		}
		if (k->flags & KV_KEY_INCOMPLETE)
			return -1;
	}
	if (nk && !strcmp(rt->c->name, "set")) {
		fl[0] = KV_KEY_OW | KV_KEY_UPDATE;
		for (uint32_t i = 3; i < argc; i++)
			if (paste_resp_arg_eq(&argv[i], "GET"))
				fl[0] = KV_KEY_RW | KV_KEY_ACCESS | KV_KEY_UPDATE;
	}
	return (int)nk;
}

static bool has_keys(const struct kv_cmd_rt *rt)
{
	struct kv_keyspec one;
	uint32_t n;
	const struct kv_keyspec *ks = cmd_specs(rt, &one, &n);
	for (uint32_t i = 0; i < n; i++)
		if (!(ks[i].flags & KV_KEY_NOT_KEY))
			return true;
	return false;
}

static void command_getkeys(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n,
			    bool with_flags)
{
	const struct paste_resp_arg *argv = a + 2;
	uint32_t argc = n - 2;
	struct kv_cmd_rt *rt = kv_cmd_find(&argv[0]);
	if (rt && rt->nsubs && argc >= 2)
		rt = kv_cmd_sub(rt, &argv[1]);
	if (!rt) {
		resp_error(x, "ERR Invalid command specified");
		return;
	}
	if (!has_keys(rt)) {
		resp_error(x, "ERR The command has no key arguments");
		return;
	}
	int arity = rt->c->arity;
	if ((arity > 0 && (uint32_t)arity != argc) || argc < (uint32_t)abs(arity)) {
		resp_error(x, "ERR Invalid number of arguments specified for command");
		return;
	}
	uint32_t cap = argc, *pos = malloc(2 * (size_t)cap * sizeof(*pos));
	if (!pos) {
		resp_error(x, "ERR out of memory");
		return;
	}
	int nk = getkeys(rt, argv, argc, pos, pos + cap, cap);
	if (nk <= 0) {
		free(pos);
		if (rt->fl & KV_CMD_NO_MANDATORY_KEYS)
			resp_array(x, 0);
		else
			resp_error(x, "ERR Invalid arguments specified for command");
		return;
	}
	struct resp_out o = { 0 };
	char head[32];
	for (int i = 0; i < nk; i++) {
		if (with_flags)
			out_head(&o, '*', x->r->proto, 2);
		resp_out_bulk(&o, argv[pos[i]].p, argv[pos[i]].len);
		if (with_flags)
			out_keyflags(&o, pos[cap + (uint32_t)i], x->r->proto);
	}
	free(pos);
	resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), (uint64_t)nk), &o);
}

/* COMMAND LIST's filters: none, MODULE (pkvs has none), ACLCAT, PATTERN. */
static bool listed(const struct kv_cmd_rt *rt, int filter, const struct paste_resp_arg *arg)
{
	if (filter == 0)
		return true;
	if (filter == 1)
		return false;
	if (filter == 2) {
		char cat[32];
		if (arg->len >= sizeof(cat))
			return false;
		memcpy(cat, arg->p, arg->len);
		cat[arg->len] = 0;
		for (char *p = cat; *p; p++)
			*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
		uint32_t bit = acl_bit(cat);
		return bit && (kv_cmd_acl(rt) & bit);
	}
	return kv_glob_nocase(arg->p, arg->len, (const uint8_t *)rt->c->name, strlen(rt->c->name));
}

static void command_list(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n)
{
	int filter = 0;
	const struct paste_resp_arg *arg = NULL;
	for (uint32_t i = 2; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "FILTERBY") && n - 1 - i == 2) {
			if (paste_resp_arg_eq(&a[i + 1], "MODULE"))
				filter = 1;
			else if (paste_resp_arg_eq(&a[i + 1], "ACLCAT"))
				filter = 2;
			else if (paste_resp_arg_eq(&a[i + 1], "PATTERN"))
				filter = 3;
			else {
				resp_error(x, "ERR syntax error");
				return;
			}
			arg = &a[i + 2];
			i += 2;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct resp_out o = { 0 };
	char head[32];
	uint32_t cnt = 0;
	for (uint32_t i = 0; i < kv_cmd_count(); i++) {
		const struct kv_cmd_rt *rt = kv_cmd_at(i);
		if (listed(rt, filter, arg)) {
			out_str(&o, rt->c->name);
			cnt++;
		}
	}
	resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), cnt), &o);
}

/* Every command a client may name: rows of a family but subcommands (they
 * are listed under their container). */
static bool top_level(const struct kv_cmd_rt *rt)
{
	return !rt->parent;
}

static uint32_t top_count(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < kv_cmd_count(); i++)
		n += top_level(kv_cmd_at(i));
	return n;
}

void cmd_command(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a;
	int proto = x->r->proto;
	struct resp_out o = { 0 };
	char head[32];
	if (n != 1) {
		resp_error(x, "ERR unknown subcommand");   /* not reached: dispatch finds the subcommand */
		return;
	}
	for (uint32_t i = 0; i < kv_cmd_count(); i++)
		if (top_level(kv_cmd_at(i)))
			command_info(&o, kv_cmd_at(i), proto);
	resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), top_count()), &o);
}

static void cmd_command_sub(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv;
	int proto = x->r->proto;
	struct resp_out o = { 0 };
	char head[32];
	if (paste_resp_arg_eq(&a[1], "COUNT")) {
		resp_int(x, top_count());
	} else if (paste_resp_arg_eq(&a[1], "LIST")) {
		command_list(x, a, n);
	} else if (paste_resp_arg_eq(&a[1], "INFO")) {
		uint32_t cnt = n == 2 ? top_count() : n - 2;
		if (n == 2) {
			for (uint32_t i = 0; i < kv_cmd_count(); i++)
				if (top_level(kv_cmd_at(i)))
					command_info(&o, kv_cmd_at(i), proto);
		} else {
			for (uint32_t i = 2; i < n; i++) {
				const struct kv_cmd_rt *rt = kv_cmd_lookup(a[i].p, a[i].len);
				if (rt)
					command_info(&o, rt, proto);
				else
					resp_out_put(&o, head, (size_t)paste_resp_put_null(head, sizeof(head), proto));
			}
		}
		resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), cnt), &o);
	} else if (paste_resp_arg_eq(&a[1], "DOCS")) {
		uint32_t cnt = 0;
		for (uint32_t i = n == 2 ? 0 : 2; i < (n == 2 ? kv_cmd_count() : n); i++) {
			const struct kv_cmd_rt *rt = n == 2 ? kv_cmd_at(i) : kv_cmd_lookup(a[i].p, a[i].len);
			if (!rt || (n == 2 && !top_level(rt)))
				continue;
			out_str(&o, rt->c->name);
			command_docs(&o, rt, proto);
			cnt++;
		}
		resp_out_send(x, head, paste_resp_put_map(head, sizeof(head), proto, cnt), &o);
	} else if (paste_resp_arg_eq(&a[1], "GETKEYS")) {
		command_getkeys(x, a, n, false);
	} else if (paste_resp_arg_eq(&a[1], "GETKEYSANDFLAGS")) {
		command_getkeys(x, a, n, true);
	} else {
		static const char *const help[] = {
			"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)",
			"    Return details about all Redis commands.",
			"COUNT",
			"    Return the total number of commands in this Redis server.",
			"LIST",
			"    Return a list of all commands in this Redis server.",
			"INFO [<command-name> ...]",
			"    Return details about multiple Redis commands.",
			"    If no command names are given, documentation details for all",
			"    commands are returned.",
			"DOCS [<command-name> ...]",
			"    Return documentation details about multiple Redis commands.",
			"    If no command names are given, documentation details for all",
			"    commands are returned.",
			"GETKEYS <full-command>",
			"    Return the keys from a full Redis command.",
			"GETKEYSANDFLAGS <full-command>",
			"    Return the keys and the access flags from a full Redis command.",
			"HELP",
			"    Print this help.",
		};
		kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
	}
}

void kv_reply_help(struct resp_ctx *x, const char *const *lines, uint32_t n)
{
	resp_array(x, n);
	for (uint32_t i = 0; i < n; i++)
		resp_simple(x, lines[i]);
}

/* ----------------------------------------------------------- CONFIG */

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
	{ "lazyfree-lazy-expire", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-server-del", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-user-del", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "lazyfree-lazy-user-flush", NULL, CFG_KEPT, T_BOOL, "no", NULL },
	{ "slowlog-log-slower-than", NULL, CFG_KEPT, T_INT, "10000", NULL },
	{ "slowlog-max-len", NULL, CFG_KEPT, T_INT, "128", NULL },
	{ "latency-monitor-threshold", NULL, CFG_KEPT, T_INT, "0", NULL },
	{ "latency-tracking", NULL, CFG_KEPT, T_BOOL, "yes", NULL },
	{ "maxmemory-samples", NULL, CFG_KEPT, T_INT, "5", NULL },
	{ "maxmemory-clients", NULL, CFG_KEPT, T_MEM, "0", NULL },
	{ "tcp-keepalive", NULL, CFG_KEPT, T_INT, "300", NULL },
	{ "client-output-buffer-limit", NULL, CFG_KEPT, T_STR,
	  "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", NULL },
	{ "stream-node-max-bytes", NULL, CFG_KEPT, T_MEM, "4096", NULL },
	{ "stream-node-max-entries", NULL, CFG_KEPT, T_INT, "100", NULL },
	{ "active-expire-effort", NULL, CFG_KEPT, T_INT, "1", NULL },
	{ "replica-read-only", "slave-read-only", CFG_KEPT, T_BOOL, "yes", NULL },
	{ "replica-serve-stale-data", "slave-serve-stale-data", CFG_KEPT, T_BOOL, "yes", NULL },
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
	{ "lfu-log-factor", NULL, CFG_KEPT, T_INT, "10", NULL },
	{ "lfu-decay-time", NULL, CFG_KEPT, T_INT, "1", NULL },
};
#define NPARAMS (sizeof(params) / sizeof(params[0]))

/* The process's settings (one thread serves every front end). */
static struct {
	char *kept[NPARAMS];             /* CFG_KEPT values set (NULL: the default) */
	uint64_t maxmemory;              /* 0: the store's size is the only bound */
	uint64_t saves, last_save;       /* SAVE/BGSAVE calls; LASTSAVE (s) */
	uint64_t resets_ms;              /* CONFIG RESETSTAT */
} conf;

static const struct cfg_param *param_find(const char *p, size_t n)
{
	for (size_t i = 0; i < NPARAMS; i++)
		if (strlen(params[i].name) == n && !strncasecmp(params[i].name, p, n))
			return &params[i];
	return NULL;
}

const char *kv_config_kept(const char *name)
{
	const struct cfg_param *p = param_find(name, strlen(name));
	if (!p || p->kind != CFG_KEPT)
		return NULL;
	return conf.kept[p - params] ? conf.kept[p - params] : p->dflt;
}

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
	if (!strcmp(n, "timeout"))
		snprintf(buf, cap, "%" PRIu64, s->cfg.idle_to_ms / 1000);
	else if (!strcmp(n, "maxmemory"))
		snprintf(buf, cap, "%" PRIu64, conf.maxmemory);
	else if (!strcmp(n, "maxmemory-policy"))
		return "noeviction";
	else if (!strcmp(n, "databases"))
		snprintf(buf, cap, "%u", kv->ndbs);
	else if (!strcmp(n, "port"))
		snprintf(buf, cap, "%u", kv_resp_port(x));
	else if (!strcmp(n, "bind"))
		return s->cfg.host;
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
		const char *v = conf.kept[p - params];
		if (!v && p->alias) {                 /* an alias set under its other name */
			const struct cfg_param *o = param_find(p->alias, strlen(p->alias));
			v = o ? conf.kept[o - params] : NULL;
		}
		return v ? v : p->dflt;
	} else {
		return p->dflt ? p->dflt : "";
	}
	return buf;
}

/* CONFIG GET pattern...: a name without glob characters is looked up
 * and answered under the name as given (any case), as Redis does; a
 * pattern matches every name, aliases included. */
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
			bool match = glob ? kv_glob_nocase(a[i].p, a[i].len, (const uint8_t *)name, strlen(name))
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
	char *end;
	errno = 0;
	long long ll = strtoll(s, &end, 10);
	uint64_t mul = 1;
	if (p->type == T_MEM && end != s) {
		static const struct { const char *u; uint64_t m; } units[] = {
			{ "k", 1000 }, { "kb", 1024 }, { "m", 1000000 }, { "mb", 1u << 20 },
			{ "g", 1000000000 }, { "gb", 1u << 30 }, { "b", 1 },
		};
		for (size_t i = 0; *end && i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcasecmp(end, units[i].u)) {
				mul = units[i].m;
				end += strlen(end);
			}
	}
	if (!*s || *end || errno || (p->type == T_MEM && ll < 0)) {
		*why = p->type == T_MEM ? "argument must be a memory value" : "argument couldn't be parsed into an integer";
		return false;
	}
	*num = (uint64_t)ll * mul;
	return true;
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
	if (!strcmp(n, "maxmemory")) {
		conf.maxmemory = num;
		return 0;
	}
	if (!strcmp(n, "maxmemory-policy"))
		return 0;
	/* Kept as Redis reads them back: numbers in bytes, words in lower case. */
	char num_s[24];
	struct paste_resp_arg nv;
	if (p->type == T_INT || p->type == T_MEM) {
		nv = (struct paste_resp_arg){ num_s, (size_t)snprintf(num_s, sizeof(num_s), "%lld",
								    (long long)num) };
		v = &nv;
	} else if (p->type == T_BOOL) {
		static const struct paste_resp_arg yes = { "yes", 3 }, no = { "no", 2 };
		v = num ? &yes : &no;
	}
	char *copy = strndup(v->p, v->len);
	if (copy && p->type == T_ENUM)
		for (char *c = copy; *c; c++)
			*c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
	if (!copy) {
		*why = "out of memory";
		return -1;
	}
	free(conf.kept[p - params]);
	conf.kept[p - params] = copy;
	if (p->alias) {                          /* both names read back the last value */
		const struct cfg_param *o = param_find(p->alias, strlen(p->alias));
		if (o) {
			free(conf.kept[o - params]);
			conf.kept[o - params] = NULL;
		}
	}
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
		/* What Redis changes at run time and pkvs fixes at start: the
		 * value it has is fine (a client setting back what it read). */
		const char *now = p->kind == CFG_FIXED || !strcmp(p->name, "maxmemory-policy")
				  ? param_get(x, kv, p, buf, sizeof(buf)) : NULL;
		if (now && (strlen(now) != v->len || strncasecmp(now, v->p, v->len))) {
			char why2[160];
			snprintf(why2, sizeof(why2), "pkvs %s", !strcmp(p->name, "maxmemory-policy")
				 ? "never evicts keys (noeviction only)" : "sets it at start (see pkvs(1))");
			config_set_failed(x, &cname, why2, NULL);
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
	}
	resp_errstats_reset(x);
	kv->n.hits = kv->n.misses = 0;
	kv->n.expired = 0;
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

bool kv_over_maxmemory(struct resp_ctx *x)
{
	if (!conf.maxmemory)
		return false;
	struct paste_store *st = x->w->srv->store;
	uint64_t used = (uint64_t)paste_store_nheld(st) * paste_store_geom(st)->buf_size;
	return used > conf.maxmemory;
}

/* ------------------------------------------------------------- INFO */

enum {
	S_SERVER = 1u << 0, S_CLIENTS = 1u << 1, S_MEMORY = 1u << 2, S_PERSISTENCE = 1u << 3,
	S_STATS = 1u << 4, S_REPLICATION = 1u << 5, S_CPU = 1u << 6, S_MODULES = 1u << 7,
	S_ERRORSTATS = 1u << 8, S_CLUSTER = 1u << 9, S_KEYSPACE = 1u << 10,
	S_COMMANDSTATS = 1u << 11, S_LATENCYSTATS = 1u << 12,
	S_DEFAULT = S_SERVER | S_CLIENTS | S_MEMORY | S_PERSISTENCE | S_STATS | S_REPLICATION |
		    S_CPU | S_MODULES | S_ERRORSTATS | S_CLUSTER | S_KEYSPACE,
	S_ALL = S_DEFAULT | S_COMMANDSTATS,
};

static uint32_t info_sections(const struct paste_resp_arg *a, uint32_t n)
{
	static const struct { const char *name; uint32_t bits; } names[] = {
		{ "server", S_SERVER }, { "clients", S_CLIENTS }, { "memory", S_MEMORY },
		{ "persistence", S_PERSISTENCE }, { "stats", S_STATS },
		{ "replication", S_REPLICATION }, { "cpu", S_CPU }, { "modules", S_MODULES },
		{ "errorstats", S_ERRORSTATS }, { "cluster", S_CLUSTER }, { "keyspace", S_KEYSPACE },
		{ "commandstats", S_COMMANDSTATS }, { "latencystats", S_LATENCYSTATS },
		{ "default", S_DEFAULT }, { "all", S_ALL }, { "everything", S_ALL },
	};
	if (n < 2)
		return S_DEFAULT;
	uint32_t want = 0;
	for (uint32_t i = 1; i < n; i++)
		for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
			if (paste_resp_arg_eq(&a[i], names[j].name))
				want |= names[j].bits;
	return want;
}

/* INFO's pkvs_ack: what a reply waits for. The epoll baseline pays a
 * barrier per reply; the other engines one per batch. */
static const char *ack_after(enum paste_engine e, enum paste_durability d)
{
	if (d == PASTE_DUR_NONE)
		return "nothing";
	if (e == PASTE_ENGINE_EPOLL)
		return d == PASTE_DUR_FSYNC ? "fdatasync per reply" : "fence per reply";
	return d == PASTE_DUR_FSYNC ? "group commit (fdatasync)" : "fence";
}

static void human(char *out, size_t cap, uint64_t n)
{
	if (n < 1024)
		snprintf(out, cap, "%" PRIu64 "B", n);
	else if (n < (1ull << 20))
		snprintf(out, cap, "%.2fK", (double)n / 1024);
	else if (n < (1ull << 30))
		snprintf(out, cap, "%.2fM", (double)n / (1 << 20));
	else if (n < (1ull << 40))
		snprintf(out, cap, "%.2fG", (double)n / (1 << 30));
	else
		snprintf(out, cap, "%.2fT", (double)n / (1ull << 40));
}

/* A fixed run id (40 hex digits) per process, as Redis's. */
static const char *run_id(void)
{
	static char id[41];
	if (!id[0]) {
		uint64_t seed = paste_clock_ns() ^ ((uint64_t)getpid() << 32);
		for (int i = 0; i < 40; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			id[i] = "0123456789abcdef"[(seed >> 59) & 15];
		}
	}
	return id;
}

struct clients_count {
	uint32_t n;
};

static bool count_client(struct resp_ctx *o, void *arg)
{
	(void)o;
	((struct clients_count *)arg)->n++;
	return true;
}

void cmd_info(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct server *s = x->w->srv;
	struct kv_handle *h = x->ss;
	uint32_t want = info_sections(a, n);
	struct server_totals tt;
	server_totals(x->w, &tt);
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	enum paste_durability d = x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE;
	struct resp_out o = { 0 };
	char line[1024], hb[32], hb2[32];
#define ADD(...) resp_out_put(&o, line, (size_t)snprintf(line, sizeof(line), __VA_ARGS__))
	bool first = true;
#define SECTION(name) do { if (!first) ADD("\r\n"); first = false; ADD("# " name "\r\n"); } while (0)
	uint64_t now_ms = paste_clock_coarse_ms();
	if (want & S_SERVER) {
		struct utsname u;
		uname(&u);
		char exe[512];
		ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[el > 0 ? el : 0] = 0;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t up = (now_ms - h->started_ms) / 1000;
		SECTION("Server");
		ADD("redis_version:%s\r\npkvs_version:%s\r\nredis_mode:standalone\r\nos:%s %s %s\r\n"
		    "arch_bits:%d\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:%s\r\n"
		    "process_id:%d\r\nprocess_supervised:no\r\nrun_id:%s\r\ntcp_port:%u\r\n"
		    "server_time_usec:%" PRIu64 "\r\nuptime_in_seconds:%" PRIu64
		    "\r\nuptime_in_days:%" PRIu64 "\r\nhz:10\r\nconfigured_hz:10\r\nexecutable:%s\r\n"
		    "config_file:%s\r\nio_threads_active:0\r\nio_engine:%s\r\n",
		    PKVS_REDIS_VERSION, PASTE_VERSION, u.sysname, u.release, u.machine,
		    (int)(sizeof(void *) * 8),
		    s->cfg.engine == PASTE_ENGINE_URING ? "io_uring" : "epoll", (int)getpid(), run_id(),
		    kv_resp_port(x), (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000, up,
		    up / 86400, exe, kv_config_file ? kv_config_file : "",
		    paste_engine_name(s->cfg.engine));
	}
	struct resp_pending rp;
	resp_pending_info(x, &rp);
	if (want & S_CLIENTS) {
		struct clients_count cc = { 0 };
		resp_each(x, count_client, &cc);
		/* The limits on a client's memory: unsent replies before it is
		 * no longer read (0: none), one unfinished command, all of them. */
		SECTION("Clients");
		/* connected_clients: both front ends' (the Redis port's alone in
		 * pkvs_resp_clients). */
		ADD("connected_clients:%u\r\ncluster_connections:0\r\nmaxclients:%u\r\n"
		    "client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n"
		    "blocked_clients:%u\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n"
		    "pkvs_resp_clients:%u\r\npkvs_paused_clients:%u\r\npkvs_max_output:%" PRIu64
		    "\r\npkvs_max_request:%u\r\npkvs_max_request_total:%" PRIu64
		    "\r\npkvs_request_bytes:%" PRIu64 "\r\n",
		    tt.port.conns, s->cfg.max_conns, kv_block_count(), cc.n, tt.port.paused, s->cfg.max_output, rp.max_request, rp.limit, rp.bytes);
	}
	if (want & S_MEMORY) {
		/* The store is pkvs's memory: used_memory is what its buffers
		 * hold (values, the log's headers; not the receive ring's empty
		 * buffers), pkvs_store_bytes their total. maxmemory is the bound
		 * past which writes are refused: the store's size, or CONFIG SET
		 * maxmemory's if lower. */
		const struct paste_store_geom *g = paste_store_geom(s->store);
		uint64_t total = (uint64_t)g->nbufs * g->buf_size;
		uint64_t used = (uint64_t)tt.bufs_held * g->buf_size;
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		human(hb, sizeof(hb), used);
		uint64_t bound = conf.maxmemory && conf.maxmemory < total ? conf.maxmemory : total;
		human(hb2, sizeof(hb2), bound);
		SECTION("Memory");
		ADD("used_memory:%" PRIu64 "\r\nused_memory_human:%s\r\nused_memory_rss:%" PRIu64
		    "\r\nused_memory_peak:%" PRIu64 "\r\nused_memory_dataset:%" PRIu64
		    "\r\nmaxmemory:%" PRIu64 "\r\nmaxmemory_human:%s\r\nmaxmemory_policy:noeviction\r\n"
		    "mem_allocator:libc\r\n",
		    used, hb, (uint64_t)ru.ru_maxrss * 1024, used, bi.live_bytes, bound, hb2);
		ADD("pkvs_store_bytes:%" PRIu64 "\r\npkvs_live_bytes:%" PRIu64
		    "\r\npkvs_live_buffers:%u\r\npkvs_utilization:%.2f\r\npkvs_clean_cycles:%" PRIu64
		    "\r\npkvs_clean_victims:%" PRIu64 "\r\npkvs_clean_moved:%" PRIu64
		    "\r\npkvs_clean_moved_bytes:%" PRIu64 "\r\npkvs_clean_damaged:%" PRIu64
		    "\r\npkvs_clean_ms:%.3f\r\npkvs_space_checkpoints:%" PRIu64
		    "\r\npkvs_room_calls:%" PRIu64 "\r\n",
		    total, bi.live_bytes, bi.live_bufs,
		    total ? 100.0 * (double)bi.live_bytes / (double)total : 0.0, bi.clean_cycles,
		    bi.clean_victims, bi.clean_moved, bi.clean_moved_bytes, bi.clean_damaged,
		    (double)bi.clean_ns / 1e6, bi.space_checkpoints, kv->n.room_calls);
		struct kv_script_info si;
		kv_script_info(kv, &si);
		ADD("used_memory_lua:%zu\r\nused_memory_vm_eval:%zu\r\nused_memory_scripts_eval:%" PRIu64
		    "\r\nnumber_of_cached_scripts:%" PRIu64 "\r\nnumber_of_functions:%" PRIu64
		    "\r\nnumber_of_libraries:%" PRIu64 "\r\nused_memory_vm_functions:%zu"
		    "\r\nused_memory_vm_total:%zu\r\n",
		    si.eval_bytes, si.eval_bytes, si.script_bytes, si.scripts, si.functions, si.libraries,
		    si.fn_bytes, si.eval_bytes + si.fn_bytes);
	}
	if (want & S_PERSISTENCE) {
		SECTION("Persistence");
		ADD("loading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:%" PRIu64
		    "\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:%" PRIu64
		    "\r\nrdb_last_bgsave_status:ok\r\nrdb_saves:%" PRIu64 "\r\naof_enabled:%d\r\n"
		    "aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n"
		    "aof_last_write_status:%s\r\n",
		    bi.records_since, conf.last_save ? conf.last_save : h->started_ms / 1000,
		    conf.saves, d != PASTE_DUR_NONE,
		    paste_store_failed(s->store, NULL) ? "err" : "ok");
		ADD("pkvs_durability:%s\r\npkvs_ack:after %s\r\npkvs_checkpoints:%" PRIu64
		    "\r\npkvs_checkpoint_lsn:%" PRIu64 "\r\npkvs_records_since_checkpoint:%" PRIu64
		    "\r\npkvs_recovery_ms:%.3f\r\npkvs_replayed_at_start:%" PRIu64
		    "\r\npkvs_tree_height:%u\r\npkvs_tree_pages:%u\r\npkvs_tree_pages_total:%u"
		    "\r\npkvs_point_index_keys:%" PRIu64 "\r\npkvs_point_index_bytes:%" PRIu64
		    "\r\npkvs_hinted_sets:%" PRIu64 "\r\npkvs_hinted_dels:%" PRIu64
		    "\r\nstore_failed:%d\r\n",
		    paste_durability_name(d), ack_after(s->cfg.engine, d),
		    bi.checkpoints, bi.ckpt_lsn, bi.records_since, (double)bi.recovery_ns / 1e6,
		    bi.replayed, bi.height, bi.pages_used, bi.pages_total, bi.point_keys, bi.point_bytes,
		    bi.hinted_sets, bi.hinted_dels, paste_store_failed(s->store, NULL) != 0);
	}
	if (want & S_STATS) {
		uint32_t nerr;
		uint64_t errors;
		resp_errstats(x, &nerr, &errors);
		SECTION("Stats");
		ADD("total_connections_received:%" PRIu64 "\r\ntotal_commands_processed:%" PRIu64
		    "\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:%" PRIu64
		    "\r\ntotal_net_output_bytes:%" PRIu64 "\r\nrejected_connections:%" PRIu64
		    "\r\nexpired_keys:%" PRIu64 "\r\nevicted_keys:0\r\nevicted_clients:0\r\n"
		    "keyspace_hits:%" PRIu64 "\r\nkeyspace_misses:%" PRIu64 "\r\npubsub_channels:0\r\n"
		    "pubsub_patterns:0\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\n"
		    "total_error_replies:%" PRIu64 "\r\ntotal_reads_processed:%" PRIu64 "\r\n",
		    tt.port.accepts, tt.requests, tt.port.bytes_in, tt.port.bytes_out, tt.port.refused,
		    kv->n.expired, kv->n.hits, kv->n.misses, errors, tt.port.events);
		ADD("pkvs_sets:%" PRIu64 "\r\npkvs_dels:%" PRIu64 "\r\npkvs_batches:%" PRIu64
		    "\r\npkvs_syscalls:%" PRIu64 "\r\npkvs_fences:%" PRIu64 "\r\npkvs_commits:%" PRIu64
		    "\r\nmax_value:%" PRIu64 "\r\npkvs_output_pauses:%" PRIu64
		    "\r\npkvs_requests_too_big:%" PRIu64 "\r\n",
		    kv->n.sets, kv->n.dels, tt.port.polls, tt.port.syscalls, tt.port.fences,
		    tt.port.commits, kv->max_value, tt.port.pauses, rp.refused);
		/* The barrier histogram as /metrics has it (cumulative, bucket
		 * bounds in microseconds), in Redis's latencystats style. */
		uint64_t cum = 0, total = 0;
		for (uint32_t i = 0; i < PASTE_PORT_LAT_BUCKETS; i++)
			total += tt.port.barrier_hist[i];
		ADD("pkvs_barriers:%" PRIu64 "\r\npkvs_barrier_usec_sum:%" PRIu64 "\r\npkvs_barrier_hist:",
		    total, tt.port.barrier_ns / 1000);
		for (uint32_t i = 0; i + 1 < PASTE_PORT_LAT_BUCKETS; i++) {
			cum += tt.port.barrier_hist[i];
			ADD("%sle%llu=%" PRIu64, i ? "," : "", 1ull << i, cum);
		}
		ADD("\r\n");
	}
	if (want & S_REPLICATION) {
		SECTION("Replication");
		ADD("role:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n"
		    "master_replid:%s\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
		    "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
		    "repl_backlog_size:0\r\nrepl_backlog_first_byte_offset:0\r\n"
		    "repl_backlog_histlen:0\r\n", run_id());
	}
	if (want & S_CPU) {
		struct rusage self, kids;
		getrusage(RUSAGE_SELF, &self);
		getrusage(RUSAGE_CHILDREN, &kids);
#define TV(t) ((double)(t).tv_sec + (double)(t).tv_usec / 1e6)
		SECTION("CPU");
		ADD("used_cpu_sys:%f\r\nused_cpu_user:%f\r\nused_cpu_sys_children:%f\r\n"
		    "used_cpu_user_children:%f\r\n", TV(self.ru_stime), TV(self.ru_utime),
		    TV(kids.ru_stime), TV(kids.ru_utime));
#undef TV
	}
	if (want & S_MODULES)
		SECTION("Modules");
	if (want & S_COMMANDSTATS) {
		SECTION("Commandstats");
		for (uint32_t i = 0; i < kv_cmd_count(); i++) {
			const struct kv_cmd_rt *rt = kv_cmd_at(i);
			if (!rt->calls && !rt->rejected && !rt->failed)
				continue;
			uint64_t us = rt->ns / 1000;
			ADD("cmdstat_%s:calls=%" PRIu64 ",usec=%" PRIu64 ",usec_per_call=%.2f,"
			    "rejected_calls=%" PRIu64 ",failed_calls=%" PRIu64 "\r\n", rt->c->name,
			    rt->calls, us, rt->calls ? (double)rt->ns / 1000.0 / (double)rt->calls : 0.0,
			    rt->rejected, rt->failed);
		}
	}
	if (want & S_ERRORSTATS) {
		uint32_t nerr;
		uint64_t errors;
		const struct resp_errstat *es = resp_errstats(x, &nerr, &errors);
		SECTION("Errorstats");
		for (uint32_t i = 0; i < nerr; i++)
			ADD("errorstat_%s:count=%" PRIu64 "\r\n", es[i].code, es[i].count);
	}
	if (want & S_CLUSTER) {
		SECTION("Cluster");
		ADD("cluster_enabled:0\r\n");
	}
	if (want & S_KEYSPACE) {
		SECTION("Keyspace");
		for (uint32_t db = 0; db < kv->ndbs; db++)
			if (kv_dbsize(kv, db))
				ADD("db%u:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", db,
				    kv_dbsize(kv, db), kv_dbexpires(kv, db));
	}
#undef SECTION
#undef ADD
	/* A bulk string, and in RESP3 a verbatim one ("=" len "txt:"). */
	char head[48];
	int hl;
	if (x->r->proto == 3) {
		hl = snprintf(head, sizeof(head), "=%zu\r\ntxt:", (size_t)o.b.len + 4);
		resp_out_put(&o, "\r\n", 2);
	} else {
		hl = paste_resp_put_bulk_head(head, sizeof(head), o.b.len);
		resp_out_put(&o, "\r\n", 2);
	}
	resp_out_send(x, head, hl, &o);
}

/* ------------------------------------------------- the server's own */

static void cmd_time(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char s[24], us[24];
	int sl = snprintf(s, sizeof(s), "%lld", (long long)ts.tv_sec);
	int ul = snprintf(us, sizeof(us), "%ld", ts.tv_nsec / 1000);
	resp_array(x, 2);
	resp_bulk(x, s, (size_t)sl);
	resp_bulk(x, us, (size_t)ul);
}

/* Every write is durable before its reply: the last save is now. */
static void cmd_lastsave(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_int(x, (int64_t)(conf.last_save ? conf.last_save
					     : ((struct kv_handle *)x->ss)->started_ms / 1000));
}

/* SAVE and BGSAVE have nothing left to write: every acknowledged write
 * is durable already. The reply waits for the batch's barrier like any. */
static void cmd_save(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	conf.saves++;
	conf.last_save = (uint64_t)time(NULL);
	if (paste_resp_arg_eq(&a[0], "BGSAVE")) {
		if (n > 2 || (n == 2 && !paste_resp_arg_eq(&a[1], "SCHEDULE"))) {
			resp_error(x, "ERR syntax error");
			return;
		}
		resp_simple(x, "Background saving started");
	} else if (paste_resp_arg_eq(&a[0], "BGREWRITEAOF")) {
		resp_simple(x, "Background append only file rewriting started");
	} else {
		resp_ok(x);
	}
}

/* No replicas: nothing to wait for. */
static void cmd_wait(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	int64_t v;
	if (paste_resp_arg_i64(&a[1], &v) || paste_resp_arg_i64(&a[2], &v)) {
		resp_error(x, "ERR value is not an integer or out of range");
		return;
	}
	if (v < 0) {
		resp_error(x, "ERR timeout is negative");
		return;
	}
	resp_int(x, 0);
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: a clean stop (exit 0);
 * the store is durable either way. */
static void cmd_shutdown(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv;
	bool save = false, nosave = false, abort_ = false;
	for (uint32_t i = 1; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "NOSAVE"))
			nosave = true;
		else if (paste_resp_arg_eq(&a[i], "SAVE"))
			save = true;
		else if (paste_resp_arg_eq(&a[i], "ABORT"))
			abort_ = true;
		else if (!paste_resp_arg_eq(&a[i], "NOW") && !paste_resp_arg_eq(&a[i], "FORCE")) {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if ((save && nosave) || (abort_ && n > 2)) {
		resp_error(x, "ERR syntax error");
		return;
	}
	if (abort_) {
		resp_error(x, "ERR No shutdown in progress.");
		return;
	}
	/* main's signal wait stops the workers and exits 0, as at SIGTERM. */
	kill(getpid(), SIGTERM);
}

static void cmd_cluster(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_error(x, "ERR This instance has cluster support disabled");
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_server[] = {
	{ "info", -1, "loading stale", "server", "The server's state and counters, by section.", cmd_info, 0, 0, 0 },
	{ "config", -2, "", "server", "CONFIG subcommands: settings read and changed while pkvs runs.", NULL, 0, 0, 0 },
	{ "config|get", -3, "admin noscript loading stale", "server", "The settings whose names match glob patterns, with their values.", cmd_config_get, 0, 0, 0 },
	{ "config|set", -4, "admin noscript loading stale", "server", "Changes settings now: pkvs applies some, keeps others only to read back, and refuses those fixed at its start.", cmd_config_set, 0, 0, 0 },
	{ "config|resetstat", 2, "admin noscript loading stale", "server", "Sets the counters INFO reports back to zero.", cmd_config_resetstat, 0, 0, 0 },
	{ "config|rewrite", 2, "admin noscript loading stale", "server", "Answers the error of a server without a config file: pkvs never rewrites its --config file.", cmd_config_rewrite, 0, 0, 0 },
	{ "config|help", 2, "loading stale", "server", "Lists CONFIG's subcommands.", cmd_config_help, 0, 0, 0 },
	{ "command", -1, "loading stale", "server", "Describes every command pkvs has.", cmd_command, 0, 0, 0 },
	{ "command|count", 2, "loading stale", "server", "How many commands pkvs has.", cmd_command_sub, 0, 0, 0 },
	{ "command|docs", -2, "loading stale", "server", "Documentation of commands: pkvs's summary, group, versions and argument grammar.", cmd_command_sub, 0, 0, 0 },
	{ "command|getkeys", -4, "loading stale", "server", "Which arguments of a whole command are keys.", cmd_command_sub, 0, 0, 0 },
	{ "command|getkeysandflags", -4, "loading stale", "server", "Which arguments of a whole command are keys, and what it does to each.", cmd_command_sub, 0, 0, 0 },
	{ "command|help", 2, "loading stale", "server", "Lists COMMAND's subcommands.", cmd_command_sub, 0, 0, 0 },
	{ "command|info", -2, "loading stale", "server", "Describes the named commands: arity, flags, keys, ACL categories, key specifications.", cmd_command_sub, 0, 0, 0 },
	{ "command|list", -2, "loading stale", "server", "Names the commands, optionally only those of an ACL category, a pattern or a module.", cmd_command_sub, 0, 0, 0 },
	{ "time", 1, "loading stale fast", "server", "The server's clock: Unix seconds and the microseconds past them.", cmd_time, 0, 0, 0 },
	{ "lastsave", 1, "loading stale fast", "server", "The Unix time of the last SAVE, BGSAVE or BGREWRITEAOF, or of pkvs's start before any.", cmd_lastsave, 0, 0, 0 },
	{ "save", 1, "admin noscript no_async_loading no_multi", "server", "Answers OK: every write is durable before its reply, so nothing is left to save.", cmd_save, 0, 0, 0 },
	{ "bgsave", -1, "admin noscript no_async_loading", "server", "Answers that a background save started: every write is durable already.", cmd_save, 0, 0, 0 },
	{ "bgrewriteaof", 1, "admin noscript no_async_loading", "server", "Answers that a log rewrite started: pkvs has no append-only file to rewrite.", cmd_save, 0, 0, 0 },
	{ "wait", 3, "noscript", "generic", "Answers 0 at once: pkvs has no replicas to wait for.", cmd_wait, 0, 0, 0 },
	{ "shutdown", -1, "admin noscript loading stale no_multi allow_busy", "server", "Stops pkvs cleanly (exit status 0); the store is durable, so nothing is saved first.", cmd_shutdown, 0, 0, 0 },
	{ "cluster", -2, "", "cluster", "CLUSTER subcommands: pkvs is not a cluster node.", NULL, 0, 0, 0 },
	{ "cluster|info", 2, "stale", "cluster", "Cluster state: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|keyslot", 3, "stale", "cluster", "A key's hash slot: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|nodes", 2, "stale", "cluster", "The cluster's nodes: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|slots", 2, "stale", "cluster", "Which nodes serve which slots: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|shards", 2, "stale", "cluster", "The cluster's shards: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|myid", 2, "stale", "cluster", "This node's cluster id: answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "cluster|help", 2, "loading stale", "cluster", "Answers that cluster support is disabled.", cmd_cluster, 0, 0, 0 },
	{ "hello", -1, "noscript loading stale fast no_auth allow_busy", "connection", "Picks the protocol (2 or 3), optionally logs in and names the connection; describes the server.", NULL, 0, 0, 0 },
	{ "quit", -1, "noscript loading stale fast no_auth allow_busy", "connection", "Answers OK and closes the connection.", NULL, 0, 0, 0 },
	{ 0 }
};
