/*
 * cmd_tracking.c - client-side caching's commands with Redis 7.0.15's
 * behaviour: CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p]... [BCAST]
 * [OPTIN] [OPTOUT] [NOLOOP], CLIENT CACHING YES|NO, CLIENT GETREDIR and
 * CLIENT TRACKINGINFO, their checks and errors word for word, and a
 * connection's tracking state in CLIENT LIST, RESET and the close
 * (cmd_tracking.h). The tracking table and the invalidation messages
 * are kv_tracking.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_tracking.h"

/* Redis's stringCheckPrefix: one is a prefix of the other. */
static bool overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	return !memcmp(a, b, alen < blen ? alen : blen);
}

struct find_id {
	uint64_t id;
	uint32_t conn;
	bool found;
};

static bool find_one(struct resp_ctx *o, void *arg)
{
	struct find_id *f = arg;
	if (o->r->id != f->id)
		return true;
	f->conn = o->conn;
	f->found = true;
	return false;
}

static void client_tracking(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	int64_t redir = 0;
	uint32_t rconn = 0, opts = 0, npfx = 0;
	const struct paste_resp_arg **pfx = NULL;
	for (uint32_t j = 3; j < n; j++) {
		bool more = j + 1 < n;
		if (paste_resp_arg_eq(&a[j], "REDIRECT") && more) {
			j++;
			if (redir) {
				resp_error(x, "ERR A client can only redirect to a single other client");
				goto out;
			}
			if (paste_resp_arg_i64(&a[j], &redir)) {
				resp_error(x, "ERR value is not an integer or out of range");
				goto out;
			}
			struct find_id f = { .id = (uint64_t)redir };
			if (redir > 0)
				resp_each(x, find_one, &f);
			if (!f.found) {
				resp_error(x, "ERR The client ID you want redirect to does not exist");
				goto out;
			}
			rconn = f.conn;
		} else if (paste_resp_arg_eq(&a[j], "BCAST")) {
			opts |= T_BCAST;
		} else if (paste_resp_arg_eq(&a[j], "OPTIN")) {
			opts |= T_OPTIN;
		} else if (paste_resp_arg_eq(&a[j], "OPTOUT")) {
			opts |= T_OPTOUT;
		} else if (paste_resp_arg_eq(&a[j], "NOLOOP")) {
			opts |= T_NOLOOP;
		} else if (paste_resp_arg_eq(&a[j], "PREFIX") && more) {
			j++;
			const struct paste_resp_arg **q = realloc(pfx, (npfx + 1) * sizeof(*pfx));
			if (!q) {
				resp_error(x, "ERR out of memory");
				goto out;
			}
			pfx = q;
			pfx[npfx++] = &a[j];
		} else {
			resp_error(x, "ERR syntax error");
			goto out;
		}
	}
	struct kv_resp_conn *kc = x->sc;
	struct kv_tclient *c = kc->track;
	if (paste_resp_arg_eq(&a[2], "OFF")) {
		if (c)
			kv_track_disable(x, c);
		resp_ok(x);
		goto out;
	}
	if (!paste_resp_arg_eq(&a[2], "ON")) {
		resp_error(x, "ERR syntax error");
		goto out;
	}
	uint32_t cur = c ? c->flags : 0;
	if (!(opts & T_BCAST) && npfx) {
		resp_error(x, "ERR PREFIX option requires BCAST mode to be enabled");
		goto out;
	}
	if ((cur & T_ON) && !(cur & T_BCAST) != !(opts & T_BCAST)) {
		resp_error(x, "ERR You can't switch BCAST mode on/off before disabling tracking for "
			   "this client, and then re-enabling it with a different mode.");
		goto out;
	}
	if ((opts & T_BCAST) && (opts & (T_OPTIN | T_OPTOUT))) {
		resp_error(x, "ERR OPTIN and OPTOUT are not compatible with BCAST");
		goto out;
	}
	if ((opts & T_OPTIN) && (opts & T_OPTOUT)) {
		resp_error(x, "ERR You can't specify both OPTIN mode and OPTOUT mode");
		goto out;
	}
	if (((opts & T_OPTIN) && (cur & T_OPTOUT)) || ((opts & T_OPTOUT) && (cur & T_OPTIN))) {
		resp_error(x, "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for "
			   "this client, and then re-enabling it with a different mode.");
		goto out;
	}
	if (opts & T_BCAST) {
		for (uint32_t i = 0; i < npfx; i++) {
			const struct paste_resp_arg *p = pfx[i];
			for (uint32_t k = 0; c && k < c->npfx; k++)
				if (overlap(c->pfx[k]->p, c->pfx[k]->len, p->p, p->len)) {
					resp_error(x, "ERR Prefix '%.*s' overlaps with an existing prefix '%.*s'. "
						   "Prefixes for a single client must not overlap.",
						   (int)p->len, p->p, (int)c->pfx[k]->len, (const char *)c->pfx[k]->p);
					goto out;
				}
			for (uint32_t k = i + 1; k < npfx; k++)
				if (overlap(p->p, p->len, pfx[k]->p, pfx[k]->len)) {
					resp_error(x, "ERR Prefix '%.*s' overlaps with another provided prefix "
						   "'%.*s'. Prefixes for a single client must not overlap.",
						   (int)p->len, p->p, (int)pfx[k]->len, pfx[k]->p);
					goto out;
				}
		}
	}
	if (!c && !(c = kc->track = calloc(1, sizeof(*c)))) {
		resp_error(x, "ERR out of memory");
		goto out;
	}
	if (kv_track_join(x, kv, c)) {
		resp_error(x, "ERR out of memory");
		goto out;
	}
	c->flags = T_ON | (c->flags & T_CACHING) | (opts & (T_BCAST | T_OPTIN | T_OPTOUT | T_NOLOOP));
	c->redir = (uint64_t)redir;
	c->rconn = rconn;
	if (opts & T_BCAST) {
		if (!npfx)
			kv_track_bcast_add(x, c, "", 0);
		for (uint32_t i = 0; i < npfx; i++)
			kv_track_bcast_add(x, c, pfx[i]->p, pfx[i]->len);
	}
	kv_track_sync();
	resp_ok(x);
out:
	free(pfx);
}

static void client_caching(struct resp_ctx *x, const struct paste_resp_arg *a)
{
	struct kv_tclient *c = tc_of(x);
	if (!c || !(c->flags & T_ON)) {
		resp_error(x, "ERR CLIENT CACHING can be called only when the client is in tracking "
			   "mode with OPTIN or OPTOUT mode enabled");
		return;
	}
	if (paste_resp_arg_eq(&a[2], "YES")) {
		if (!(c->flags & T_OPTIN)) {
			resp_error(x, "ERR CLIENT CACHING YES is only valid when tracking is enabled in "
				   "OPTIN mode.");
			return;
		}
	} else if (paste_resp_arg_eq(&a[2], "NO")) {
		if (!(c->flags & T_OPTOUT)) {
			resp_error(x, "ERR CLIENT CACHING NO is only valid when tracking is enabled in "
				   "OPTOUT mode.");
			return;
		}
	} else {
		resp_error(x, "ERR syntax error");
		return;
	}
	c->flags |= T_CACHING;
	resp_ok(x);
}

static void client_trackinginfo(struct resp_ctx *x)
{
	struct kv_tclient *c = tc_of(x);
	uint32_t fl = c ? c->flags : 0;
	static const struct { uint32_t need, bit; const char *word; } words[] = {
		{ 0, T_BCAST, "bcast" }, { 0, T_OPTIN, "optin" }, { T_OPTIN, T_CACHING, "caching-yes" },
		{ 0, T_OPTOUT, "optout" }, { T_OPTOUT, T_CACHING, "caching-no" },
		{ 0, T_NOLOOP, "noloop" }, { 0, T_BROKEN, "broken_redirect" },
	};
	uint32_t nf = 1;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		nf += (fl & words[i].bit) && (!words[i].need || (fl & words[i].need));
	resp_map(x, 3);
	resp_bulk(x, "flags", 5);
	resp_set(x, nf);
	if (fl & T_ON)
		resp_bulk(x, "on", 2);
	else
		resp_bulk(x, "off", 3);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if ((fl & words[i].bit) && (!words[i].need || (fl & words[i].need)))
			resp_bulk(x, words[i].word, strlen(words[i].word));
	resp_bulk(x, "redirect", 8);
	resp_int(x, (fl & T_ON) ? (int64_t)c->redir : -1);
	resp_bulk(x, "prefixes", 8);
	uint32_t np = c ? c->npfx : 0;
	resp_array(x, np);
	for (uint32_t i = 0; i < np; i++)
		resp_bulk(x, c->pfx[i]->p, c->pfx[i]->len);
}

void kv_client_tracking(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	if (paste_resp_arg_eq(&a[1], "TRACKING"))
		client_tracking(x, kv, a, n);
	else if (paste_resp_arg_eq(&a[1], "CACHING"))
		client_caching(x, a);
	else if (paste_resp_arg_eq(&a[1], "GETREDIR")) {
		struct kv_tclient *c = tc_of(x);
		resp_int(x, c && (c->flags & T_ON) ? (int64_t)c->redir : -1);
	} else {
		client_trackinginfo(x);
	}
}

void kv_tracking_reset(struct resp_ctx *x)
{
	struct kv_tclient *c = tc_of(x);
	if (c)
		kv_track_disable(x, c);
}

void kv_tracking_closed(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	struct kv_tclient *c = kc->track;
	if (!c)
		return;
	kv_track_disable(x, c);
	free(c->pfx);
	free(c);
	kc->track = NULL;
}

int kv_tracking_flags(const struct resp_ctx *x, char *f)
{
	const struct kv_tclient *c = tc_of(x);
	int k = 0;
	if (!c || !(c->flags & T_ON))
		return 0;
	f[k++] = 't';
	if (c->flags & T_BROKEN)
		f[k++] = 'R';
	if (c->flags & T_BCAST)
		f[k++] = 'B';
	return k;
}

int64_t kv_tracking_redir(const struct resp_ctx *x)
{
	const struct kv_tclient *c = tc_of(x);
	return c && (c->flags & T_ON) ? (int64_t)c->redir : -1;
}
