/*
 * cmd_command.c - COMMAND and its subcommands (COUNT, DOCS, GETKEYS,
 * GETKEYSANDFLAGS, HELP, INFO, LIST): what pkvs tells a client of its
 * commands, from the families' rows (pkvs_resp.h) and Redis's reference
 * for the interface facts beyond them (ACL categories, key specs, tips,
 * DOCS's arguments and versions: cmd_meta.c); DOCS's summaries are the
 * rows'. ACL categories are here too (ACL CAT in cmd_conn.c reads them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int kv_cmd_getkeys(const struct kv_cmd_rt *rt, const struct paste_resp_arg *argv, uint32_t argc,
		   uint32_t *pos, uint32_t *fl, uint32_t cap)
{
	struct kv_keyspec one;
	uint32_t n, nk = 0;
	if (cap >= 2 && (!strcmp(rt->c->name, "sort") || !strcmp(rt->c->name, "sort_ro")))
		return kv_sort_getkeys(argv, argc, rt->c->name[4] == '_', pos, fl);   /* incomplete specs */
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
	int nk = kv_cmd_getkeys(rt, argv, argc, pos, pos + cap, cap);
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

static void cmd_command(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
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

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_command[] = {
	{ "command", -1, "loading stale", "server", "Describes every command pkvs has.", cmd_command, 0, 0, 0 },
	{ "command|count", 2, "loading stale", "server", "How many commands pkvs has.", cmd_command_sub, 0, 0, 0 },
	{ "command|docs", -2, "loading stale", "server", "Documentation of commands: pkvs's summary, group, versions and argument grammar.", cmd_command_sub, 0, 0, 0 },
	{ "command|getkeys", -4, "loading stale", "server", "Which arguments of a whole command are keys.", cmd_command_sub, 0, 0, 0 },
	{ "command|getkeysandflags", -4, "loading stale", "server", "Which arguments of a whole command are keys, and what it does to each.", cmd_command_sub, 0, 0, 0 },
	{ "command|help", 2, "loading stale", "server", "Lists COMMAND's subcommands.", cmd_command_sub, 0, 0, 0 },
	{ "command|info", -2, "loading stale", "server", "Describes the named commands: arity, flags, keys, ACL categories, key specifications.", cmd_command_sub, 0, 0, 0 },
	{ "command|list", -2, "loading stale", "server", "Names the commands, optionally only those of an ACL category, a pattern or a module.", cmd_command_sub, 0, 0, 0 },
	{ 0 }
};
