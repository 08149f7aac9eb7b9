/*
 * cmd_function.c - Redis 7.0's functions (cmd_script.h): FUNCTION LOAD,
 * LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL and HELP, and FCALL,
 * FCALL_RO, which run a function as cmd_script.c runs a script. A
 * library is its code and the functions its load registered in the
 * functions' own Lua state (script_lua.c).
 *
 * Functions persist: each library's code is an entry of pkvs's own
 * [0xFD]"fnlib:"<name> (kv_sys_put), read back at the first scripting
 * command after a start.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd_script.h"
#include "kv_rdb.h"

struct lib;
struct fn {
	char *name;
	char *desc;                     /* NULL: none */
	int ref;
	uint32_t flags;
	struct lib *lib;
};

struct lib {
	struct lib *next;
	char *name;
	char *code;                     /* the whole FUNCTION LOAD text */
	size_t clen;
	struct fn *fns;
	uint32_t nfns;
};

static struct {
	struct sl_engine *fn;
	struct lib *libs;
	uint32_t nlibs, nfns;
	bool loaded;                    /* the stored libraries were read */
} st;

#define LIB_PREFIX "\xfd" "fnlib:"
#define LIB_PREFIX_LEN 7u
#define LIB_NAME_MAX 400u

static bool name_ok(const char *p, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

static struct fn *fn_find(const char *p, size_t n, const struct lib *skip)
{
	for (struct lib *l = st.libs; l; l = l->next) {
		if (l == skip)
			continue;
		for (uint32_t i = 0; i < l->nfns; i++)
			if (strlen(l->fns[i].name) == n && !strncasecmp(l->fns[i].name, p, n))
				return &l->fns[i];
	}
	return NULL;
}

bool kv_function_may_write(const struct paste_resp_arg *name)
{
	const struct fn *f = fn_find(name->p, name->len, NULL);
	return !f || !(f->flags & SL_NO_WRITES);
}

static struct lib *lib_find(const char *p, size_t n)
{
	for (struct lib *l = st.libs; l; l = l->next)
		if (strlen(l->name) == n && !strncasecmp(l->name, p, n))
			return l;
	return NULL;
}

static void lib_free(struct lib *l, bool unref)
{
	if (!l)
		return;
	for (uint32_t i = 0; i < l->nfns; i++) {
		if (unref && st.fn)
			sl_unref(st.fn, l->fns[i].ref);
		free(l->fns[i].name);
		free(l->fns[i].desc);
	}
	free(l->fns);
	free(l->name);
	free(l->code);
	free(l);
}

static void lib_unlink(struct lib *l)
{
	for (struct lib **pp = &st.libs; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			st.nlibs--;
			st.nfns -= l->nfns;
			return;
		}
}

static void lib_link(struct lib *l)
{
	struct lib **pp = &st.libs;
	while (*pp)
		pp = &(*pp)->next;
	l->next = NULL;
	*pp = l;
	st.nlibs++;
	st.nfns += l->nfns;
}

static int host_register(void *arg, const char *name, size_t nlen, int ref, uint32_t flags,
			 const char *desc, size_t dlen, char *err, size_t errcap)
{
	struct lib *l = arg;
	if (!name_ok(name, nlen)) {
		snprintf(err, errcap, "Library names can only contain letters, numbers, or underscores(_) "
			 "and must be at least one character long");
		return -1;
	}
	for (uint32_t i = 0; i < l->nfns; i++)
		if (strlen(l->fns[i].name) == nlen && !strncasecmp(l->fns[i].name, name, nlen)) {
			snprintf(err, errcap, "Function already exists in the library");
			return -1;
		}
	struct fn *f = realloc(l->fns, (l->nfns + 1) * sizeof(*f));
	if (!f) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	l->fns = f;
	f = &l->fns[l->nfns];
	*f = (struct fn){ .name = strndup(name, nlen), .desc = desc ? strndup(desc, dlen) : NULL,
			  .ref = ref, .flags = flags, .lib = l };
	if (!f->name || (desc && !f->desc)) {
		free(f->name);
		free(f->desc);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	l->nfns++;
	return 0;
}

static const struct sl_host load_host = { .register_fn = host_register, .log = kv_script_log };

static void lib_key(uint8_t *t, uint32_t *tlen, const char *name, size_t n)
{
	memcpy(t, LIB_PREFIX, LIB_PREFIX_LEN);
	memcpy(t + LIB_PREFIX_LEN, name, n);
	*tlen = LIB_PREFIX_LEN + (uint32_t)n;
}

/* Create a library from FUNCTION LOAD's code (Redis's
 * functionsCreateWithLibraryCtx): the new library, linked, with the one
 * it replaces in *old (unlinked, not freed); NULL with err. */
static struct lib *lib_create(const char *code, size_t len, bool replace, struct lib **old, char *err,
			      size_t errcap)
{
	*old = NULL;
	if (len < 2 || code[0] != '#' || code[1] != '!') {
		snprintf(err, errcap, "ERR Missing library metadata");
		return NULL;
	}
	const char *nl = memchr(code, '\n', len);
	if (!nl) {
		snprintf(err, errcap, "ERR Invalid library metadata");
		return NULL;
	}
	/* "#!<engine> name=<name>", words split (and quotes taken) as
	 * Redis's sdssplitargs does. */
	static char words[32][512];
	int nw = 0;
	size_t ll = (size_t)(nl - code);
	if (!sl_split_words(code, ll, words, 32, &nw) || !nw) {
		snprintf(err, errcap, "ERR Invalid library metadata");
		return NULL;
	}
	char *engine = words[0], *name = NULL;
	for (int wi = 1; wi < nw; wi++) {
		char *w = words[wi];
		if (!strncasecmp(w, "name=", 5)) {
			if (name) {
				snprintf(err, errcap, "ERR Invalid metadata value, name argument was given multiple times");
				return NULL;
			}
			name = w + 5;
			continue;
		}
		snprintf(err, errcap, "ERR Invalid metadata value given: %.450s", w);
		return NULL;
	}
	if (!name) {
		snprintf(err, errcap, "ERR Library name was not given");
		return NULL;
	}
	size_t nlen = strlen(name);
	if (!name_ok(name, nlen)) {
		snprintf(err, errcap, "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
		return NULL;
	}
	if (nlen > LIB_NAME_MAX) {
		snprintf(err, errcap, "ERR Library name is over %u bytes (pkvs's limit)", LIB_NAME_MAX);
		return NULL;
	}
	if (strcasecmp(engine + 2, "lua")) {
		snprintf(err, errcap, "ERR Engine '%.100s' not found", engine + 2);
		return NULL;
	}
	struct lib *prev = lib_find(name, nlen);
	if (prev && !replace) {
		snprintf(err, errcap, "ERR Library '%.450s' already exists", name);
		return NULL;
	}
	struct lib *l = calloc(1, sizeof(*l));
	if (!l || !(l->name = strndup(name, nlen)) || !(l->code = malloc(len ? len : 1))) {
		lib_free(l, false);
		snprintf(err, errcap, "ERR out of memory");
		return NULL;
	}
	memcpy(l->code, code, len);
	l->clen = len;
	char m[512];
	if (sl_load_library(st.fn, nl, len - ll, &load_host, l, m, sizeof(m))) {
		snprintf(err, errcap, "ERR %s", m);
		lib_free(l, true);
		return NULL;
	}
	if (!l->nfns) {
		snprintf(err, errcap, "ERR No functions registered");
		lib_free(l, true);
		return NULL;
	}
	for (uint32_t i = 0; i < l->nfns; i++)
		if (fn_find(l->fns[i].name, strlen(l->fns[i].name), prev)) {
			snprintf(err, errcap, "ERR Function %s already exists", l->fns[i].name);
			lib_free(l, true);
			return NULL;
		}
	if (prev)
		lib_unlink(prev);
	lib_link(l);
	*old = prev;
	return l;
}

/* At the first scripting command after a start: the stored libraries. */
static void load_stored(struct kv *kv)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, LIB_PREFIX, LIB_PREFIX_LEN);
	const uint8_t *k;
	uint32_t klen, n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	while (paste_btree_cursor_next(&c, &k, &klen, ext, &n, &len) == 1) {
		if (klen < LIB_PREFIX_LEN || memcmp(k, LIB_PREFIX, LIB_PREFIX_LEN))
			break;
		char *code = malloc(len ? len : 1);
		if (!code)
			break;
		paste_store_read(kv->store, ext, n, 0, code, len);
		char err[600];
		struct lib *old;
		if (!lib_create(code, len, true, &old, err, sizeof(err)))
			fprintf(stderr, "pkvs: stored function library %.*s not loaded: %s\n",
				(int)(klen - LIB_PREFIX_LEN), (const char *)k + LIB_PREFIX_LEN, err);
		lib_free(old, true);
		free(code);
	}
}

/* FUNCTION FLUSH and RESTORE FLUSH: every library, stored ones too. */
static int libs_flush(struct kv *kv)
{
	int r = 0;
	for (struct lib *l = st.libs; l && !r; l = l->next) {
		uint8_t t[PASTE_BTREE_MAX_KEY];
		uint32_t tlen;
		lib_key(t, &tlen, l->name, strlen(l->name));
		r = kv_tree_del(kv, t, tlen);
		if (r == -ENOENT)
			r = 0;
	}
	if (r)
		return r;
	while (st.libs) {
		struct lib *l = st.libs;
		lib_unlink(l);
		lib_free(l, true);
	}
	return 0;
}

static int lib_store(struct kv *kv, const struct lib *l)
{
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	lib_key(t, &tlen, l->name, strlen(l->name));
	return kv_sys_put(kv, t, tlen, l->code, l->clen);
}

void cmd_function_load(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	bool replace = false;
	uint32_t i = 2;
	for (; i < n - 1; i++) {
		if (paste_resp_arg_eq(&a[i], "replace")) {
			replace = true;
			continue;
		}
		resp_error(x, "ERR Unknown option given: %.*s", (int)(a[i].len < 128 ? a[i].len : 128), a[i].p);
		return;
	}
	if (i >= n) {
		resp_error(x, "ERR Function code is missing");
		return;
	}
	char err[600];
	struct lib *old;
	struct lib *l = lib_create(a[i].p, a[i].len, replace, &old, err, sizeof(err));
	if (!l) {
		struct sl_buf b = { 0 };
		sl_buf_put(&b, "-", 1);
		for (const char *p = err; *p; p++)
			sl_buf_put(&b, *p == '\r' || *p == '\n' ? " " : p, 1);
		sl_buf_put(&b, "\r\n", 2);
		kv_script_send_reply(x, &b, true, false);
		sl_buf_free(&b);
		return;
	}
	int r = lib_store(kv, l);
	if (r) {                                 /* put back what was */
		lib_unlink(l);
		lib_free(l, true);
		if (old)
			lib_link(old);
		kv_reply_errno(x, r);
		return;
	}
	lib_free(old, true);
	resp_bulk(x, l->name, strlen(l->name));
}

static void reply_flags(struct resp_ctx *x, uint32_t flags)
{
	uint32_t k = 0;
	for (int i = 0; i < 5; i++)
		k += (flags >> i) & 1;
	resp_set(x, k);
	for (int i = 0; i < 5; i++)
		if (flags & (1u << i))
			resp_simple(x, sl_flag_names[i]);
}

static bool glob_nocase(const struct paste_resp_arg *pat, const char *s)
{
	char p[512], t[512];
	size_t pl = pat->len < sizeof(p) ? pat->len : sizeof(p), sl = strlen(s);
	sl = sl < sizeof(t) ? sl : sizeof(t);
	for (size_t i = 0; i < pl; i++)
		p[i] = (char)(pat->p[i] >= 'A' && pat->p[i] <= 'Z' ? pat->p[i] + 32 : pat->p[i]);
	for (size_t i = 0; i < sl; i++)
		t[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
	return kv_glob(p, pl, (const uint8_t *)t, sl);
}

void cmd_function_list(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	bool code = false;
	const struct paste_resp_arg *pat = NULL;
	for (uint32_t i = 2; i < n; i++) {
		if (!code && paste_resp_arg_eq(&a[i], "withcode")) {
			code = true;
			continue;
		}
		if (!pat && paste_resp_arg_eq(&a[i], "libraryname")) {
			if (i >= n - 1) {
				resp_error(x, "ERR library name argument was not given");
				return;
			}
			pat = &a[++i];
			continue;
		}
		resp_error(x, "ERR Unknown argument %.*s", (int)(a[i].len < 128 ? a[i].len : 128), a[i].p);
		return;
	}
	uint32_t k = 0;
	for (struct lib *l = st.libs; l; l = l->next)
		k += !pat || glob_nocase(pat, l->name);
	resp_array(x, k);
	for (struct lib *l = st.libs; l; l = l->next) {
		if (pat && !glob_nocase(pat, l->name))
			continue;
		resp_map(x, code ? 4 : 3);
		resp_bulk(x, "library_name", 12);
		resp_bulk(x, l->name, strlen(l->name));
		resp_bulk(x, "engine", 6);
		resp_bulk(x, "LUA", 3);
		resp_bulk(x, "functions", 9);
		resp_array(x, l->nfns);
		for (uint32_t i = 0; i < l->nfns; i++) {
			const struct fn *f = &l->fns[i];
			resp_map(x, 3);
			resp_bulk(x, "name", 4);
			resp_bulk(x, f->name, strlen(f->name));
			resp_bulk(x, "description", 11);
			if (f->desc)
				resp_bulk(x, f->desc, strlen(f->desc));
			else
				resp_null(x);
			resp_bulk(x, "flags", 5);
			reply_flags(x, f->flags);
		}
		if (code) {
			resp_bulk(x, "library_code", 12);
			const char *nl = memchr(l->code, '\n', l->clen);
			size_t at = nl ? (size_t)(nl - l->code) : 0;
			(void)at;
			resp_bulk(x, l->code, l->clen);
		}
	}
}

void cmd_function_delete(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)n;
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct lib *l = lib_find(a[2].p, a[2].len);
	if (!l) {
		resp_error(x, "ERR Library not found");
		return;
	}
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	lib_key(t, &tlen, l->name, strlen(l->name));
	int r = kv_tree_del(kv, t, tlen);
	if (r && r != -ENOENT) {
		kv_reply_errno(x, r);
		return;
	}
	lib_unlink(l);
	lib_free(l, true);
	resp_ok(x);
}

/* Redis's answer to a subcommand given too many arguments. */
static void sub_syntax(struct resp_ctx *x, const struct paste_resp_arg *sub)
{
	kv_sub_syntax_error(x, "FUNCTION", sub);
}

void cmd_function_flush(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	if (n > 3) {
		sub_syntax(x, &a[1]);
		return;
	}
	if ( (n == 3 && !paste_resp_arg_eq(&a[2], "sync") && !paste_resp_arg_eq(&a[2], "async"))) {
		resp_error(x, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
		return;
	}
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	int r = kv_begin(kv);
	if (!r && !(r = libs_flush(kv)))
		r = kv_commit(kv);
	else if (!r)
		kv_abort(kv);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

void cmd_function_kill(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)kv, (void)a, (void)n;
	kv_script_kill(x, false);
}

void cmd_function_stats(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	(void)a, (void)n;
	struct kv_srun *s = kv_script_running();
	if (s && s->eval) {
		resp_error(x, "%s", KV_BUSY_EVAL);
		return;
	}
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	resp_map(x, 2);
	resp_bulk(x, "running_script", 14);
	if (!s) {
		resp_null(x);
	} else {
		resp_map(x, 3);
		resp_bulk(x, "name", 4);
		resp_bulk(x, s->run.name, strlen(s->run.name));
		resp_bulk(x, "command", 7);
		resp_array(x, s->argc);
		for (uint32_t i = 0; i < s->argc; i++)
			resp_bulk(x, s->argv[i], s->alens[i]);
		resp_bulk(x, "duration_ms", 11);
		resp_int(x, (int64_t)((paste_clock_ns() - s->start_ns) / 1000000));
	}
	resp_bulk(x, "engines", 7);
	resp_map(x, 1);
	resp_bulk(x, "LUA", 3);
	resp_map(x, 2);
	resp_bulk(x, "libraries_count", 15);
	resp_int(x, st.nlibs);
	resp_bulk(x, "functions_count", 15);
	resp_int(x, st.nfns);
}

/* FUNCTION DUMP's payload, Redis's: per library 0xF5 and its code as an
 * RDB string; then 2 bytes of version (10) and the CRC-64 of all before
 * it. pkvs writes the code plain; Redis may compress it (LZF), which
 * RESTORE reads. */
#define DUMP_OPCODE 0xf5u

void cmd_function_dump(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)a, (void)n;
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct kv_rdb_buf b = { 0 };
	for (struct lib *l = st.libs; l; l = l->next) {
		uint8_t h[10] = { DUMP_OPCODE };
		kv_rdb_put(&b, h, 1 + kv_rdb_len_encode(h + 1, l->clen));
		kv_rdb_put(&b, l->code, l->clen);
	}
	kv_rdb_seal(&b, 0);
	if (b.oom)
		resp_error(x, "ERR out of memory");
	else
		resp_bulk(x, b.p, b.len);
	kv_rdb_free(&b);
}

void cmd_function_restore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (n > 4) {
		sub_syntax(x, &a[1]);
		return;
	}
	enum { APPEND, REPLACE, FLUSH } policy = APPEND;
	if (n == 4) {
		if (paste_resp_arg_eq(&a[3], "append"))
			policy = APPEND;
		else if (paste_resp_arg_eq(&a[3], "replace"))
			policy = REPLACE;
		else if (paste_resp_arg_eq(&a[3], "flush"))
			policy = FLUSH;
		else {
			resp_error(x, "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
			return;
		}
	}
	const uint8_t *p = (const uint8_t *)a[2].p;
	if (!kv_rdb_payload_ok(p, a[2].len)) {   /* Redis's framing: version, CRC-64 */
		resp_error(x, "ERR DUMP payload version or checksum are wrong");
		return;
	}
	size_t len = a[2].len - 10, at = 0;
	/* The libraries in the payload (Redis may have compressed their code),
	 * each checked alone first: a library of it that fails to load leaves
	 * everything as it was. */
	struct { const char *code; size_t len; uint8_t *mem; } items[1024];
	uint32_t k = 0;
	const char *bad = NULL;
	while (at < len && !bad) {
		const uint8_t *s;
		size_t sn;
		char num[24];
		if (p[at++] != DUMP_OPCODE)
			bad = "ERR given type is not a function";
		else if (k == 1024 || kv_rdb_str_decode(p, len, &at, &s, &sn, &items[k].mem, num) ||
			 (const char *)s == num)
			bad = "ERR failed loading the given functions payload";
		else {
			items[k].code = (const char *)s;
			items[k++].len = sn;
		}
	}
	if (bad) {
		for (uint32_t i = 0; i < k; i++)
			free(items[i].mem);
		resp_error(x, "%s", bad);
		return;
	}
	/* Set the current libraries aside, build the new set, and keep it
	 * or put the old one back. */
	struct lib *saved = st.libs;
	uint32_t snl = st.nlibs, snf = st.nfns;
	struct lib *keep = NULL;            /* FLUSH: none of the old */
	if (policy != FLUSH) {
		keep = saved;
	} else {
		st.libs = NULL;
		st.nlibs = st.nfns = 0;
	}
	struct lib *added[1024], *replaced[1024];
	uint32_t nadded = 0, nrepl = 0;
	char err[600] = "";
	for (uint32_t i = 0; i < k; i++) {
		struct lib *old;
		struct lib *l = lib_create(items[i].code, items[i].len, policy == REPLACE, &old, err, sizeof(err));
		if (!l) {
			if (policy == APPEND && !strncmp(err, "ERR Library '", 13)) {
				/* Redis's words for a collision at restore */
				char name[512];
				const char *q = err + 13, *e = strchr(q, '\'');
				snprintf(name, sizeof(name), "%.*s", e ? (int)(e - q) : 0, q);
				snprintf(err, sizeof(err), "ERR Library %s already exists", name);
			}
			break;
		}
		added[nadded++] = l;
		if (old)
			replaced[nrepl++] = old;
	}
	for (uint32_t i = 0; i < k; i++)
		free(items[i].mem);         /* the libraries keep copies */
	int r = 0;
	if (!err[0]) {
		r = kv_begin(kv);
		if (!r && policy == FLUSH) {
			for (struct lib *l = saved; l && !r; l = l->next) {
				uint8_t t[PASTE_BTREE_MAX_KEY];
				uint32_t tlen;
				lib_key(t, &tlen, l->name, strlen(l->name));
				r = kv_tree_del(kv, t, tlen);
				if (r == -ENOENT)
					r = 0;
			}
		}
		for (uint32_t i = 0; i < nadded && !r; i++)
			r = lib_store(kv, added[i]);
		if (!r)
			r = kv_commit(kv);
		else if (kv->group_depth)
			kv_abort(kv);
	}
	if (err[0] || r) {
		for (uint32_t i = nadded; i-- > 0;) {
			lib_unlink(added[i]);
			lib_free(added[i], true);
		}
		for (uint32_t i = 0; i < nrepl; i++)
			lib_link(replaced[i]);
		if (policy == FLUSH) {
			st.libs = saved;
			st.nlibs = snl;
			st.nfns = snf;
		}
		if (r)
			kv_reply_errno(x, r);
		else
			resp_error(x, "%s", err);
		return;
	}
	for (uint32_t i = 0; i < nrepl; i++)
		lib_free(replaced[i], true);
	if (policy == FLUSH)
		while (saved) {
			struct lib *l = saved;
			saved = l->next;
			lib_free(l, true);
		}
	(void)keep;
	resp_ok(x);
}

void cmd_function_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"LOAD [REPLACE] <FUNCTION CODE>",
		"    Create a new library with the given library name and code.",
		"DELETE <LIBRARY NAME>",
		"    Delete the given library.",
		"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
		"    Return general information on all the libraries:",
		"    * Library name",
		"    * The engine used to run the Library",
		"    * Library description",
		"    * Functions list",
		"    * Library code (if WITHCODE is given)",
		"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
		"STATS",
		"    Return information about the current function running:",
		"    * Function name",
		"    * Command used to run the function",
		"    * Duration in MS that the function is running",
		"    If no function is running, return nil",
		"    In addition, returns a list of available engines.",
		"KILL",
		"    Kill the current running function.",
		"FLUSH [ASYNC|SYNC]",
		"    Delete all the libraries.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the libraries.",
		"    * SYNC: Synchronously flush the libraries.",
		"DUMP",
		"    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
		"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
		"    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
		"    control how to handle existing libraries (default APPEND):",
		"    * FLUSH: delete all existing libraries.",
		"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
		"    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
		"      libraries with the new libraries (notice that even on this option there is a chance of failure",
		"      in case of functions name collision with another library).",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

static void fcall_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n, bool ro)
{
	if (kv_script_engines(kv)) {
		resp_error(x, "ERR out of memory");
		return;
	}
	struct fn *f = fn_find(a[1].p, a[1].len, NULL);
	if (!f) {
		resp_error(x, "ERR Function not found");
		return;
	}
	int64_t nk;
	if (!kv_script_numkeys(x, a, n, true, &nk))
		return;
	if (!kv_script_flags_ok(x, f->flags, ro))
		return;
	kv_script_run(x, kv, st.fn, f->ref, false, f->name, f->flags, ro, a, n, nk);
}

void cmd_fcall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	fcall_generic(x, kv, a, n, false);
}

void cmd_fcall_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	fcall_generic(x, kv, a, n, true);
}

int kv_function_open(struct kv *kv)
{
	if (!st.fn && !(st.fn = sl_open(SL_KIND_FUNCTION)))
		return -ENOMEM;
	if (!st.loaded) {
		st.loaded = true;
		load_stored(kv);
	}
	return 0;
}

void kv_function_info(struct kv_script_info *out)
{
	out->fn_bytes = sl_memory(st.fn);
	out->functions = st.nfns;
	out->libraries = st.nlibs;
}
