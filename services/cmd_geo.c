/*
 * cmd_geo.c - pkvs's GEO commands over its sorted sets, with Redis 7.0's
 * replies and errors in RESP2 and RESP3: GEOADD, GEODIST, GEOHASH,
 * GEOPOS, GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER,
 * GEORADIUSBYMEMBER_RO, GEOSEARCH and GEOSEARCHSTORE.
 *
 * A position is a member whose score is its 52-bit geohash
 * (kv_geohash.h), so ZRANGE and ZSCORE of a geo key give Redis's numbers.
 * GEOADD is ZADD of those scores (its events are ZADD's). A search walks
 * the score ranges of at most nine geohash boxes that cover its shape
 * (kv_geo_cover), keeps the members inside the shape, sorts them by
 * distance when asked (all of them: stably, as glibc's qsort that Redis
 * calls; the nearest COUNT: as Redis's partial quicksort, so that members
 * at one distance come in Redis's order either way) and replies, or
 * writes them whole as a new sorted set (STORE, STOREDIST,
 * GEOSEARCHSTORE: durable as ZUNIONSTORE's result).
 *
 * Distances are written with four decimals, coordinates as Redis writes
 * a long double for people (17 decimals, trailing zeros dropped; RESP3: a
 * double).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_set.h"
#include "kv_geohash.h"
#include "kv_notify.h"

/* ------------------------------------------------------------ arguments */

/* A unit's meters (m, km, ft, mi, any case): -1 after replying. */
static double unit_arg(struct resp_ctx *x, const struct paste_resp_arg *a)
{
	static const char *const names[] = { "m", "km", "ft", "mi" };
	static const double meters[] = { 1, 1000, 0.3048, 1609.34 };
	int u = paste_resp_lookup(a, names, 4);
	if (u < 0) {
		resp_error(x, "ERR unsupported unit provided. please use M, KM, FT, MI");
		return -1;
	}
	return meters[u];
}

/* A number as Redis's getDoubleFromObjectOrReply reads one: false after
 * replying "ERR <msg>" ("value is not a valid float" when msg is NULL). */
static bool num_arg(struct resp_ctx *x, const struct paste_resp_arg *a, const char *msg, double *d)
{
	if (kv_zscore_arg(a, d))
		return true;
	resp_error(x, "ERR %s", msg ? msg : "value is not a valid float");
	return false;
}

/* a[0] a[1]: a longitude and a latitude GEOADD takes. */
static bool lonlat_arg(struct resp_ctx *x, const struct paste_resp_arg *a, double *lon, double *lat)
{
	if (!num_arg(x, &a[0], NULL, lon) || !num_arg(x, &a[1], NULL, lat))
		return false;
	if (!kv_geo_valid(*lon, *lat)) {
		resp_error(x, "ERR invalid longitude,latitude pair %f,%f", *lon, *lat);
		return false;
	}
	return true;
}

/* a[0] a[1]: radius unit. */
static bool radius_arg(struct resp_ctx *x, const struct paste_resp_arg *a, struct kv_geo_shape *s)
{
	double r;
	if (!num_arg(x, &a[0], "need numeric radius", &r))
		return false;
	if (r < 0) {
		resp_error(x, "ERR radius cannot be negative");
		return false;
	}
	double conv = unit_arg(x, &a[1]);
	if (conv < 0)
		return false;
	s->box = false;
	s->radius = r;
	s->conv = conv;
	return true;
}

/* a[0] a[1] a[2]: width height unit. */
static bool box_arg(struct resp_ctx *x, const struct paste_resp_arg *a, struct kv_geo_shape *s)
{
	double w, h;
	if (!num_arg(x, &a[0], "need numeric width", &w) ||
	    !num_arg(x, &a[1], "need numeric height", &h))
		return false;
	if (h < 0 || w < 0) {
		resp_error(x, "ERR height or width cannot be negative");
		return false;
	}
	double conv = unit_arg(x, &a[2]);
	if (conv < 0)
		return false;
	s->box = true;
	s->width = w;
	s->height = h;
	s->conv = conv;
	return true;
}

/* ------------------------------------------------------------ replies */

/* A distance with four decimals, as Redis's fixedpoint_d2string writes
 * one (the value times 10^4 rounded to an integer). */
static int dist_str(char *out, size_t cap, double d)
{
	long long v = llrint(d * 10000.0);
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	if (v == 0)
		return snprintf(out, cap, "0.0000");
	return snprintf(out, cap, "%s%llu.%04llu", v < 0 ? "-" : "", u / 10000, u % 10000);
}

static void out_dist(struct kv_out *o, double d)
{
	char num[48];
	int n = dist_str(num, sizeof(num), d);
	kv_out_bulk(o, num, (size_t)n);
}

/* A coordinate: RESP2 a bulk, RESP3 a double, both of the long double's
 * human form. */
static void out_coord(struct kv_out *o, double v)
{
	char num[64];
	int n = kv_ld_format(num, sizeof(num), (long double)v);
	if (n < 0)
		n = 0;
	if (kv_out_proto(o) == 3) {
		kv_out_put(o, ",", 1);
		kv_out_put(o, num, (size_t)n);
		kv_out_put(o, "\r\n", 2);
	} else {
		kv_out_bulk(o, num, (size_t)n);
	}
}

/* ------------------------------------------------------------ GEOADD */

/* GEOADD key [NX|XX] [CH] longitude latitude member ...: ZADD of the
 * positions' scores (kv_zadd_args), as Redis's GEOADD calls ZADD. */
static void cmd_geoadd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	uint32_t at = 2;
	bool nx = false, xx = false;
	for (; at < n; at++) {
		if (paste_resp_arg_eq(&a[at], "nx"))
			nx = true;
		else if (paste_resp_arg_eq(&a[at], "xx"))
			xx = true;
		else if (!paste_resp_arg_eq(&a[at], "ch"))
			break;
	}
	if ((n - at) % 3 || (nx && xx)) {
		resp_error(x, "ERR syntax error");
		return;
	}
	uint32_t k = (n - at) / 3, m = at + 2 * k;
	struct paste_resp_arg one[8], *za = m <= 8 ? one : malloc(sizeof(*za) * m);
	char onenum[2][24], (*num)[24] = k <= 2 ? onenum : malloc(sizeof(*num) * k);
	if (!za || !num) {
		resp_error(x, "ERR out of memory");
		goto done;
	}
	za[0] = (struct paste_resp_arg){ "zadd", 4 };
	memcpy(&za[1], &a[1], sizeof(*za) * (at - 1));
	for (uint32_t i = 0; i < k; i++) {
		double lon, lat;
		if (!lonlat_arg(x, &a[at + 3 * i], &lon, &lat))
			goto done;
		int l = snprintf(num[i], sizeof(num[i]), "%" PRIu64, kv_geo_score(lon, lat));
		za[at + 2 * i] = (struct paste_resp_arg){ num[i], (size_t)l };
		za[at + 2 * i + 1] = a[at + 3 * i + 2];
	}
	kv_zadd_args(x, kv, za, m);
done:
	if (za != one)
		free(za);
	if (num != onenum)
		free(num);
}

/* ------------------------------------------------------------ point reads */

/* GEOPOS key member ...: [longitude, latitude] or a null array each. */
static void pos_one(struct kv_out *o, bool found, double d)
{
	double xy[2];
	if (!found) {
		kv_out_null_array(o);
		return;
	}
	kv_geo_decode(d, xy);
	kv_out_array(o, 2);
	out_coord(o, xy[0]);
	out_coord(o, xy[1]);
}

static void cmd_geopos(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n)
{
	kv_zscores_reply(x, kv, a, n, pos_one);
}

/* GEOHASH key member ...: the geohash string or a null each. */
static void hash_one(struct kv_out *o, bool found, double d)
{
	char h[11];
	if (!found) {
		kv_out_null(o);
		return;
	}
	kv_geo_string(d, h);
	kv_out_bulk(o, h, sizeof(h));
}

static void cmd_geohash(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	kv_zscores_reply(x, kv, a, n, hash_one);
}

/* GEODIST key member1 member2 [unit] */
static void cmd_geodist(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	double conv = 1;
	if (n == 5 && (conv = unit_arg(x, &a[4])) < 0)
		return;
	if (n > 5) {
		resp_error(x, "ERR syntax error");
		return;
	}
	double d[2], p1[2], p2[2];
	int r = kv_zscores_of(x, kv, &a[1], &a[2], 2, d);
	if (r <= 0) {
		if (r == 0)
			resp_null(x);
		return;
	}
	kv_geo_decode(d[0], p1);
	kv_geo_decode(d[1], p2);
	struct kv_out o;
	kv_out_init(&o, x);
	out_dist(&o, kv_geo_distance(p1[0], p1[1], p2[0], p2[1]) / conv);
	kv_out_end(&o);
}

/* ------------------------------------------------------------ searches */

/* A member found: its position, distance (meters) and score; its bytes
 * are names' i-th. */
struct gpoint {
	double lon, lat, dist, score;
	uint64_t i;
};

struct garray {
	struct gpoint *p;
	uint64_t n, cap;
	struct kv_names names;
	bool oom;
};

static void garray_add(struct garray *g, const double xy[2], double dist, double score,
		       const uint8_t *m, size_t len)
{
	if (g->oom)
		return;
	if (g->n == g->cap) {
		uint64_t nc = g->cap ? g->cap * 2 : 16;
		struct gpoint *np = realloc(g->p, sizeof(*np) * nc);
		if (!np) {
			g->oom = true;
			return;
		}
		g->p = np;
		g->cap = nc;
	}
	kv_names_add(&g->names, m, len);
	if (g->names.oom) {
		g->oom = true;
		return;
	}
	g->p[g->n] = (struct gpoint){ xy[0], xy[1], dist, score, g->n };
	g->n++;
}

static void garray_free(struct garray *g)
{
	free(g->p);
	kv_names_free(&g->names);
}

/* The members of box h inside the shape (the scores [h's, h + 1's) of
 * 52 bits), added to g, stopping at limit found (0: none). */
static int box_members(struct kv *kv, const struct kv_cset *s, struct kv_geo_hash h,
		       const struct kv_geo_shape *shape, struct garray *g, uint64_t limit)
{
	double min = (double)kv_geo_align52(h);
	h.bits++;
	double max = (double)kv_geo_align52(h);
	struct kv_cwalk w;
	kv_zwalk_score(kv, &w, s, false, &min, false);
	int got;
	while ((got = kv_cwalk_next(kv, &w)) == 1) {
		double sc = kv_zwalk_scoreof(&w), xy[2], dist = 0;
		if (!(sc < max))
			break;
		if (kv_geo_within(shape, sc, xy, &dist))
			garray_add(g, xy, dist, sc, w.name, w.nlen);
		if (g->oom)
			return -ENOMEM;
		if (g->n && limit && g->n >= limit)
			break;
	}
	return got < 0 ? got : 0;
}

/* The members inside the shape: the nine boxes in Redis's order, a box
 * the same as the one walked last skipped (at the coarsest step
 * neighbours repeat). */
static int shape_members(struct kv *kv, const struct kv_cset *s, const struct kv_geo_shape *shape,
			 struct garray *g, uint64_t limit)
{
	struct kv_geo_hash box[9];
	kv_geo_cover(shape, box);
	unsigned last = 0;
	for (unsigned i = 0; i < 9; i++) {
		if (box[i].bits == 0 && box[i].step == 0)
			continue;
		if (last && box[i].bits == box[last].bits && box[i].step == box[last].step)
			continue;
		if (g->n && limit && g->n >= limit)
			break;
		int r = box_members(kv, s, box[i], shape, g, limit);
		if (r)
			return r;
		last = i;
	}
	return 0;
}

/* Stable merge sort by distance (desc: farthest first). */
static bool before(const struct gpoint *p, const struct gpoint *q, bool desc)
{
	return desc ? p->dist > q->dist : p->dist < q->dist;
}

static void sort_points(struct gpoint *p, struct gpoint *tmp, uint64_t n, bool desc)
{
	if (n < 2)
		return;
	uint64_t h = n / 2;
	sort_points(p, tmp, h, desc);
	sort_points(p + h, tmp, n - h, desc);
	uint64_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		tmp[k++] = before(&p[j], &p[i], desc) ? p[j++] : p[i++];
	while (i < h)
		tmp[k++] = p[i++];
	while (j < n)
		tmp[k++] = p[j++];
	memcpy(p, tmp, sizeof(*p) * n);
}

static int cmp_dist(const struct gpoint *p, const struct gpoint *q, bool desc)
{
	int c = p->dist > q->dist ? 1 : p->dist == q->dist ? 0 : -1;
	return desc ? -c : c;
}

static void swap_points(struct gpoint *p, uint64_t i, uint64_t j)
{
	struct gpoint t = p[i];
	p[i] = p[j];
	p[j] = t;
}

static uint64_t median3(const struct gpoint *p, uint64_t a, uint64_t b, uint64_t c, bool desc)
{
	if (cmp_dist(&p[a], &p[b], desc) < 0)
		return cmp_dist(&p[b], &p[c], desc) < 0 ? b : cmp_dist(&p[a], &p[c], desc) < 0 ? c : a;
	return cmp_dist(&p[b], &p[c], desc) > 0 ? b : cmp_dist(&p[a], &p[c], desc) < 0 ? a : c;
}

/* The nearest k of p[0..n) first, in order, as Redis picks them when
 * COUNT keeps fewer than it found: Bentley and McIlroy's three-way
 * quicksort (pivot a median of three, of nine past 40; below 7 an
 * insertion sort) that sorts only the parts starting before k. Members at
 * one distance end where this algorithm puts them, which a stable sort
 * would not reproduce. */
static void partial_sort(struct gpoint *base, uint64_t n, uint64_t k, bool desc)
{
	while (n >= 7) {
		uint64_t m = n / 2;
		if (n > 7) {
			uint64_t l = 0, h = n - 1;
			if (n > 40) {
				uint64_t d = n / 8;
				l = median3(base, l, l + d, l + 2 * d, desc);
				m = median3(base, m - d, m, m + d, desc);
				h = median3(base, h - 2 * d, h - d, h, desc);
			}
			m = median3(base, l, m, h, desc);
		}
		swap_points(base, 0, m);
		/* [1, a): equal to the pivot; [a, b): below; (c, d]: above;
		 * (d, n): equal */
		uint64_t a = 1, b = 1, c = n - 1, d = n - 1;
		for (;;) {
			int r;
			while (b <= c && (r = cmp_dist(&base[b], &base[0], desc)) <= 0) {
				if (r == 0)
					swap_points(base, a++, b);
				b++;
			}
			while (b <= c && (r = cmp_dist(&base[c], &base[0], desc)) >= 0) {
				if (r == 0)
					swap_points(base, c, d--);
				c--;
			}
			if (b > c)
				break;
			swap_points(base, b++, c--);
		}
		/* the equal runs to the middle */
		uint64_t r = a < b - a ? a : b - a;
		for (uint64_t i = 0; i < r; i++)
			swap_points(base, i, b - r + i);
		r = d - c < n - d - 1 ? d - c : n - d - 1;
		for (uint64_t i = 0; i < r; i++)
			swap_points(base, b + i, n - r + i);
		if (b - a > 1)
			partial_sort(base, b - a, k, desc);     /* starts at 0 < k */
		uint64_t right = d - c;
		if (right <= 1 || n - right >= k)
			return;                             /* nothing of it in the first k */
		k -= n - right;
		base += n - right;
		n = right;
	}
	for (uint64_t i = 1; i < n; i++)
		for (uint64_t j = i; j > 0 && cmp_dist(&base[j - 1], &base[j], desc) > 0; j--)
			swap_points(base, j, j - 1);
}

enum {
	G_COORDS = 1,           /* GEORADIUS: from a longitude and latitude */
	G_MEMBER = 2,           /* GEORADIUSBYMEMBER: from a member */
	G_NOSTORE = 4,          /* the _RO forms: no STORE, STOREDIST */
	G_SEARCH = 8,           /* GEOSEARCH's arguments */
	G_SEARCHSTORE = 16,     /* GEOSEARCHSTORE: the destination first, STOREDIST a flag */
};
enum { SORT_NONE, SORT_ASC, SORT_DESC };

/* The points at dst: scores (storedist: distances in the unit), each
 * member once (the boxes' score ranges do not overlap). */
static void store_points(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *da,
			 const struct garray *g, uint64_t k, bool storedist, double conv,
			 const char *event)
{
	struct kv_key dst;
	if (!kv_arg_key(x, kv, da, &dst))
		return;
	bool had = kv_key_held(kv, &dst);
	struct kv_cbuild b;
	int r = kv_cbuild_begin(kv, &b, KV_ZSET);
	for (uint64_t i = 0; r == 0 && i < k; i++) {
		const struct gpoint *p = &g->p[i];
		size_t len;
		const uint8_t *m = kv_names_get(&g->names, p->i, &len);
		r = kv_zbuild_add(kv, &b, m, len, storedist ? p->dist / conv : p->score);
	}
	r = kv_cbuild_end(kv, &b, &dst, r);
	if (r) {
		kv_reply_cset_errno(x, r);
		return;
	}
	kv_notify_stored(kv, &dst, had, k, KV_NOTIFY_ZSET, event);
	resp_int(x, (int64_t)k);
}

static void reply_points(struct resp_ctx *x, const struct garray *g, uint64_t k, double conv,
			 bool withdist, bool withhash, bool withcoord)
{
	uint64_t opts = withdist + withhash + withcoord;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, k);
	for (uint64_t i = 0; i < k; i++) {
		const struct gpoint *p = &g->p[i];
		size_t len;
		const uint8_t *m = kv_names_get(&g->names, p->i, &len);
		if (opts)
			kv_out_array(&o, opts + 1);
		kv_out_bulk(&o, m, len);
		if (withdist)
			out_dist(&o, p->dist / conv);
		if (withhash)
			kv_out_int(&o, (int64_t)p->score);
		if (withcoord) {
			kv_out_array(&o, 2);
			out_coord(&o, p->lon);
			out_coord(&o, p->lat);
		}
	}
	kv_out_end(&o);
}

/* The position of member m of s as a shape's centre: false when absent. */
static bool member_centre(struct kv *kv, const struct kv_cset *s, const struct paste_resp_arg *m,
			  struct kv_geo_shape *shape)
{
	double d, xy[2];
	if (kv_zset_score(kv, s, m->p, m->len, &d))
		return false;
	kv_geo_decode(d, xy);
	shape->lon = xy[0];
	shape->lat = xy[1];
	return true;
}

/* GEORADIUS key longitude latitude radius unit [options]
 * GEORADIUSBYMEMBER key member radius unit [options]
 * GEOSEARCH key FROMMEMBER m | FROMLONLAT lon lat  BYRADIUS r unit | BYBOX w h unit [options]
 * GEOSEARCHSTORE dst key ... [STOREDIST]
 * with options WITHCOORD WITHDIST WITHHASH, COUNT n [ANY], ASC|DESC,
 * STORE key, STOREDIST key, in Redis's order of checks: the key's type
 * first, then the arguments left to right, then the options together. */
static void geo_search(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		       uint32_t n, uint32_t src, unsigned fl)
{
	struct kv_cset s;
	int r = kv_cset_arg(x, kv, &a[src], &s, KV_ZSET, false, true);
	if (r == -EINVAL)
		return;
	bool have = r == 0;
	struct kv_geo_shape shape = { 0 };
	const struct paste_resp_arg *store = NULL;
	bool storedist = false;
	uint32_t base;
	if (fl & G_COORDS) {
		base = 6;
		if (!lonlat_arg(x, &a[2], &shape.lon, &shape.lat) || !radius_arg(x, &a[4], &shape))
			return;
	} else if (fl & G_MEMBER) {
		base = 5;
		if (have) {
			if (!member_centre(kv, &s, &a[2], &shape)) {
				resp_error(x, "ERR could not decode requested zset member");
				return;
			}
			if (!radius_arg(x, &a[3], &shape))
				return;
		}
	} else {
		base = 2;
		if (fl & G_SEARCHSTORE) {
			base = 3;
			store = &a[1];
		}
	}
	bool withdist = false, withhash = false, withcoord = false, any = false;
	bool frommember = false, fromloc = false, byradius = false, bybox = false;
	int sort = SORT_NONE;
	int64_t count = 0;
	uint32_t left = n - base;
	bool stores = !(fl & G_NOSTORE) && !(fl & G_SEARCH), search = fl & G_SEARCH;
	for (uint32_t i = 0; i < left; i++) {
		const struct paste_resp_arg *o = &a[base + i];
		if (paste_resp_arg_eq(o, "withdist")) {
			withdist = true;
		} else if (paste_resp_arg_eq(o, "withhash")) {
			withhash = true;
		} else if (paste_resp_arg_eq(o, "withcoord")) {
			withcoord = true;
		} else if (paste_resp_arg_eq(o, "any")) {
			any = true;
		} else if (paste_resp_arg_eq(o, "asc")) {
			sort = SORT_ASC;
		} else if (paste_resp_arg_eq(o, "desc")) {
			sort = SORT_DESC;
		} else if (paste_resp_arg_eq(o, "count") && i + 1 < left) {
			if (!kv_arg_int(x, &a[base + i + 1], &count))
				return;
			if (count <= 0) {
				resp_error(x, "ERR COUNT must be > 0");
				return;
			}
			i++;
		} else if (stores && i + 1 < left &&
			   (paste_resp_arg_eq(o, "store") || paste_resp_arg_eq(o, "storedist"))) {
			store = &a[base + i + 1];
			storedist = o->len == 9;
			i++;
		} else if ((fl & G_SEARCHSTORE) && paste_resp_arg_eq(o, "storedist")) {
			storedist = true;
		} else if (search && !fromloc && i + 1 < left && paste_resp_arg_eq(o, "frommember")) {
			if (have && !member_centre(kv, &s, &a[base + i + 1], &shape)) {
				resp_error(x, "ERR could not decode requested zset member");
				return;
			}
			frommember = true;
			i++;
		} else if (search && !frommember && i + 2 < left && paste_resp_arg_eq(o, "fromlonlat")) {
			if (!lonlat_arg(x, &a[base + i + 1], &shape.lon, &shape.lat))
				return;
			fromloc = true;
			i += 2;
		} else if (search && !bybox && i + 2 < left && paste_resp_arg_eq(o, "byradius")) {
			if (!radius_arg(x, &a[base + i + 1], &shape))
				return;
			byradius = true;
			i += 2;
		} else if (search && !byradius && i + 3 < left && paste_resp_arg_eq(o, "bybox")) {
			if (!box_arg(x, &a[base + i + 1], &shape))
				return;
			bybox = true;
			i += 3;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (store && (withdist || withhash || withcoord)) {
		resp_error(x, "ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
			   (fl & G_SEARCHSTORE) ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
		return;
	}
	if (search && !(frommember || fromloc)) {
		resp_error(x, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %.*s",
			   (int)a[0].len, a[0].p);
		return;
	}
	if (search && !(byradius || bybox)) {
		resp_error(x, "ERR exactly one of BYRADIUS and BYBOX can be specified for %.*s",
			   (int)a[0].len, a[0].p);
		return;
	}
	if (any && !count) {
		resp_error(x, "ERR the ANY argument requires COUNT argument");
		return;
	}
	const char *event = search ? "geosearchstore" : "georadiusstore";
	struct garray g = { 0 };
	if (!have) {
		if (store)
			store_points(x, kv, store, &g, 0, storedist, 1, event);
		else
			resp_array(x, 0);
		return;
	}
	if (count && sort == SORT_NONE && !any)
		sort = SORT_ASC;                /* the nearest count: sorted */
	r = shape_members(kv, &s, &shape, &g, any ? (uint64_t)count : 0);
	if (r) {
		kv_reply_errno(x, r);
		garray_free(&g);
		return;
	}
	if (g.n == 0 && !store) {
		resp_array(x, 0);
		garray_free(&g);
		return;
	}
	uint64_t k = count == 0 || g.n < (uint64_t)count ? g.n : (uint64_t)count;
	if (sort != SORT_NONE && k < g.n) {
		partial_sort(g.p, g.n, k, sort == SORT_DESC);
	} else if (sort != SORT_NONE && g.n > 1) {
		/* all of them: a stable sort, as the C library's qsort is
		 * (glibc's merge sort) */
		struct gpoint *tmp = malloc(sizeof(*tmp) * g.n);
		if (!tmp) {
			kv_reply_errno(x, -ENOMEM);
			garray_free(&g);
			return;
		}
		sort_points(g.p, tmp, g.n, sort == SORT_DESC);
		free(tmp);
	}
	if (store)
		store_points(x, kv, store, &g, k, storedist, shape.conv, event);
	else
		reply_points(x, &g, k, shape.conv, withdist, withhash, withcoord);
	garray_free(&g);
}

static void cmd_georadius(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	/* GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO */
	unsigned fl = a[0].len > 12 ? G_MEMBER : G_COORDS;
	if (a[0].p[a[0].len - 3] == '_')
		fl |= G_NOSTORE;
	geo_search(x, kv, a, n, 1, fl);
}

static void cmd_geosearch(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	bool st = a[0].len == 14;       /* GEOSEARCHSTORE */
	geo_search(x, kv, a, n, st ? 2 : 1, G_SEARCH | (st ? G_SEARCHSTORE : 0));
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_geo[] = {
	{ "geoadd", -5, "write denyoom", "geo", "Adds one or more members with their longitudes and latitudes to a sorted set used as a geospatial index.", cmd_geoadd, 1, 1, 1 },
	{ "geodist", -4, "readonly", "geo", "Returns the distance between two members of a geospatial index.", cmd_geodist, 1, 1, 1 },
	{ "geohash", -2, "readonly", "geo", "Returns members of a geospatial index as geohash strings.", cmd_geohash, 1, 1, 1 },
	{ "geopos", -2, "readonly", "geo", "Returns the longitudes and latitudes of members of a geospatial index.", cmd_geopos, 1, 1, 1 },
	{ "georadius", -6, "write denyoom movablekeys", "geo", "Returns the members of a geospatial index within a distance of a point, or stores them.", cmd_georadius, 1, 1, 1 },
	{ "georadius_ro", -6, "readonly", "geo", "Returns the members of a geospatial index within a distance of a point.", cmd_georadius, 1, 1, 1 },
	{ "georadiusbymember", -5, "write denyoom movablekeys", "geo", "Returns the members of a geospatial index within a distance of a member, or stores them.", cmd_georadius, 1, 1, 1 },
	{ "georadiusbymember_ro", -5, "readonly", "geo", "Returns the members of a geospatial index within a distance of a member.", cmd_georadius, 1, 1, 1 },
	{ "geosearch", -7, "readonly", "geo", "Returns the members of a geospatial index within a circle or a box.", cmd_geosearch, 1, 1, 1 },
	{ "geosearchstore", -8, "write denyoom", "geo", "Stores the members of a geospatial index within a circle or a box in a key.", cmd_geosearch, 1, 2, 1 },
	{ 0 }
};
