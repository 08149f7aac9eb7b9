/*
 * kv_geohash.c - the geohash arithmetic (kv_geohash.h).
 *
 * Every floating-point expression keeps Redis 7.0's operations in
 * Redis's order, so that scores, decoded positions, distances and the
 * boxes a search visits are the same bits as Redis's: a member written
 * by either reads the same in both, and a search finds the same members.
 */
#include <math.h>

#include "kv_geohash.h"

static const double deg_to_rad = M_PI / 180.0;
static const double mercator_max = 20037726.37;

static double rad(double deg)
{
	return deg * deg_to_rad;
}

static double deg(double r)
{
	return r / deg_to_rad;
}

/* The 32 bits of v to the even bits of the result, and back. */
static uint64_t spread(uint32_t v)
{
	static const uint64_t mask[] = { 0x0000FFFF0000FFFFull, 0x00FF00FF00FF00FFull,
					 0x0F0F0F0F0F0F0F0Full, 0x3333333333333333ull,
					 0x5555555555555555ull };
	uint64_t x = v;
	for (unsigned i = 0, sh = 16; i < 5; i++, sh >>= 1)
		x = (x | (x << sh)) & mask[i];
	return x;
}

static uint32_t squash(uint64_t x)
{
	static const uint64_t mask[] = { 0x3333333333333333ull, 0x0F0F0F0F0F0F0F0Full,
					 0x00FF00FF00FF00FFull, 0x0000FFFF0000FFFFull,
					 0x00000000FFFFFFFFull };
	x &= 0x5555555555555555ull;
	for (unsigned i = 0, sh = 1; i < 5; i++, sh <<= 1)
		x = (x | (x >> sh)) & mask[i];
	return (uint32_t)x;
}

/* Latitude in the even bits, longitude in the odd ones. */
static uint64_t weave(uint32_t lat, uint32_t lon)
{
	return spread(lat) | spread(lon) << 1;
}

bool kv_geo_valid(double lon, double lat)
{
	return !(lon < KV_GEO_LONG_MIN || lon > KV_GEO_LONG_MAX || lat < KV_GEO_LAT_MIN ||
		 lat > KV_GEO_LAT_MAX);
}

bool kv_geo_encode_in(double lon, double lat, double lon_min, double lon_max, double lat_min,
		      double lat_max, unsigned step, struct kv_geo_hash *h)
{
	h->bits = 0;
	h->step = 0;
	if (step == 0 || step > 32 || !kv_geo_valid(lon, lat))
		return false;
	h->step = (uint8_t)step;
	if (lat < lat_min || lat > lat_max || lon < lon_min || lon > lon_max)
		return false;
	double lat_off = (lat - lat_min) / (lat_max - lat_min);
	double lon_off = (lon - lon_min) / (lon_max - lon_min);
	lat_off *= (double)(1ull << step);
	lon_off *= (double)(1ull << step);
	h->bits = weave((uint32_t)lat_off, (uint32_t)lon_off);
	return true;
}

bool kv_geo_encode(double lon, double lat, unsigned step, struct kv_geo_hash *h)
{
	return kv_geo_encode_in(lon, lat, KV_GEO_LONG_MIN, KV_GEO_LONG_MAX, KV_GEO_LAT_MIN,
				KV_GEO_LAT_MAX, step, h);
}

uint64_t kv_geo_align52(struct kv_geo_hash h)
{
	return h.bits << (52 - h.step * 2);
}

uint64_t kv_geo_score(double lon, double lat)
{
	struct kv_geo_hash h;
	kv_geo_encode(lon, lat, KV_GEO_STEP_MAX, &h);
	return kv_geo_align52(h);
}

void kv_geo_area_of(struct kv_geo_hash h, struct kv_geo_area *a)
{
	uint32_t lat = squash(h.bits), lon = squash(h.bits >> 1);
	double lat_scale = KV_GEO_LAT_MAX - KV_GEO_LAT_MIN;
	double lon_scale = KV_GEO_LONG_MAX - KV_GEO_LONG_MIN;
	double cells = (double)(1ull << h.step);
	a->lat_min = KV_GEO_LAT_MIN + (lat * 1.0 / cells) * lat_scale;
	a->lat_max = KV_GEO_LAT_MIN + ((lat + 1) * 1.0 / cells) * lat_scale;
	a->lon_min = KV_GEO_LONG_MIN + (lon * 1.0 / cells) * lon_scale;
	a->lon_max = KV_GEO_LONG_MIN + ((lon + 1) * 1.0 / cells) * lon_scale;
}

/* A score's bits as a double converts to an unsigned 64-bit integer on
 * x86-64 (cvttsd2si; out of range: the integer indefinite), defined here
 * for every double. */
static uint64_t score_bits(double d)
{
	if (d >= 9223372036854775808.0)
		return d < 18446744073709551616.0 ? (uint64_t)d : 0;
	if (d >= -9223372036854775808.0)
		return (uint64_t)(int64_t)d;
	return 1ull << 63;
}

void kv_geo_decode(double score, double xy[2])
{
	struct kv_geo_hash h = { score_bits(score), KV_GEO_STEP_MAX };
	struct kv_geo_area a;
	kv_geo_area_of(h, &a);
	xy[0] = (a.lon_min + a.lon_max) / 2;
	if (xy[0] > KV_GEO_LONG_MAX)
		xy[0] = KV_GEO_LONG_MAX;
	if (xy[0] < KV_GEO_LONG_MIN)
		xy[0] = KV_GEO_LONG_MIN;
	xy[1] = (a.lat_min + a.lat_max) / 2;
	if (xy[1] > KV_GEO_LAT_MAX)
		xy[1] = KV_GEO_LAT_MAX;
	if (xy[1] < KV_GEO_LAT_MIN)
		xy[1] = KV_GEO_LAT_MIN;
}

/* h moved dlon cells east and dlat north, each axis that moves wrapping
 * within step bits (an axis that does not move keeps its bits). */
static struct kv_geo_hash move(struct kv_geo_hash h, int dlon, int dlat)
{
	uint32_t lat = squash(h.bits), lon = squash(h.bits >> 1);
	uint64_t mask = (1ull << h.step) - 1;
	if (dlon)
		lon = (uint32_t)((lon + (uint64_t)(int64_t)dlon) & mask);
	if (dlat)
		lat = (uint32_t)((lat + (uint64_t)(int64_t)dlat) & mask);
	h.bits = weave(lat, lon);
	return h;
}

void kv_geo_neighbors(struct kv_geo_hash h, struct kv_geo_hash out[8])
{
	static const int8_t d[8][2] = { { 0, 1 }, { 0, -1 }, { 1, 0 }, { -1, 0 },
					{ 1, 1 }, { -1, 1 }, { 1, -1 }, { -1, -1 } };
	for (int i = 0; i < 8; i++)
		out[i] = move(h, d[i][0], d[i][1]);
}

double kv_geo_lat_distance(double lat1, double lat2)
{
	return KV_GEO_EARTH_M * fabs(rad(lat2) - rad(lat1));
}

double kv_geo_distance(double lon1, double lat1, double lon2, double lat2)
{
	double lon1r = rad(lon1), lon2r = rad(lon2);
	double v = sin((lon2r - lon1r) / 2);
	if (v == 0.0)
		return kv_geo_lat_distance(lat1, lat2);   /* one meridian */
	double lat1r = rad(lat1), lat2r = rad(lat2);
	double u = sin((lat2r - lat1r) / 2);
	double a = u * u + cos(lat1r) * cos(lat2r) * v * v;
	return 2.0 * KV_GEO_EARTH_M * asin(sqrt(a));
}

unsigned kv_geo_steps(double range_m, double lat)
{
	if (range_m == 0)
		return KV_GEO_STEP_MAX;
	int step = 1;
	while (range_m < mercator_max) {
		range_m *= 2;
		step++;
	}
	step -= 2;
	if (lat > 66 || lat < -66) {
		step--;                     /* meridians converge: wider boxes */
		if (lat > 80 || lat < -80)
			step--;
	}
	return step < 1 ? 1 : step > (int)KV_GEO_STEP_MAX ? KV_GEO_STEP_MAX : (unsigned)step;
}

void kv_geo_bounds(const struct kv_geo_shape *s, double b[4])
{
	double height = s->conv * (s->box ? s->height / 2 : s->radius);
	double width = s->conv * (s->box ? s->width / 2 : s->radius);
	double dlat = deg(height / KV_GEO_EARTH_M);
	double dlon_top = deg(width / KV_GEO_EARTH_M / cos(rad(s->lat + dlat)));
	double dlon_bottom = deg(width / KV_GEO_EARTH_M / cos(rad(s->lat - dlat)));
	/* the widest edge: the southern one in the north, and back */
	double dlon = s->lat < 0 ? dlon_bottom : dlon_top;
	b[0] = s->lon - dlon;
	b[2] = s->lon + dlon;
	b[1] = s->lat - dlat;
	b[3] = s->lat + dlat;
}

enum { N, S, E, W, NE, NW, SE, SW };

void kv_geo_cover(const struct kv_geo_shape *s, struct kv_geo_hash out[9])
{
	double b[4];
	kv_geo_bounds(s, b);
	double r = s->box ? sqrt((s->width / 2) * (s->width / 2) + (s->height / 2) * (s->height / 2))
			  : s->radius;
	r *= s->conv;
	unsigned step = kv_geo_steps(r, s->lat);
	struct kv_geo_hash *nb = out + 1;
	struct kv_geo_area area, a;
	kv_geo_encode(s->lon, s->lat, step, &out[0]);
	kv_geo_neighbors(out[0], nb);
	/* A step whose neighbours fall short of the bounds on a side is
	 * one too fine: one coarser. */
	bool coarser = false;
	kv_geo_area_of(nb[N], &a);
	coarser |= a.lat_max < b[3];
	kv_geo_area_of(nb[S], &a);
	coarser |= a.lat_min > b[1];
	kv_geo_area_of(nb[E], &a);
	coarser |= a.lon_max < b[2];
	kv_geo_area_of(nb[W], &a);
	coarser |= a.lon_min > b[0];
	if (step > 1 && coarser) {
		step--;
		kv_geo_encode(s->lon, s->lat, step, &out[0]);
		kv_geo_neighbors(out[0], nb);
	}
	kv_geo_area_of(out[0], &area);
	if (step < 2)
		return;
	/* Neighbours beyond the bounds on a side are left out. */
	static const struct kv_geo_hash none = { 0, 0 };
	if (area.lat_min < b[1])
		nb[S] = nb[SW] = nb[SE] = none;
	if (area.lat_max > b[3])
		nb[N] = nb[NE] = nb[NW] = none;
	if (area.lon_min < b[0])
		nb[W] = nb[SW] = nb[NW] = none;
	if (area.lon_max > b[2])
		nb[E] = nb[SE] = nb[NE] = none;
}

bool kv_geo_within(const struct kv_geo_shape *s, double score, double xy[2], double *dist)
{
	kv_geo_decode(score, xy);
	if (!s->box) {
		double d = kv_geo_distance(s->lon, s->lat, xy[0], xy[1]);
		if (d > s->radius * s->conv)
			return false;
		*dist = d;
		return true;
	}
	/* the latitude's distance first: the cheaper one */
	if (kv_geo_lat_distance(xy[1], s->lat) > s->height * s->conv / 2)
		return false;
	if (kv_geo_distance(xy[0], xy[1], s->lon, xy[1]) > s->width * s->conv / 2)
		return false;
	*dist = kv_geo_distance(s->lon, s->lat, xy[0], xy[1]);
	return true;
}

void kv_geo_string(double score, char out[11])
{
	static const char alphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";
	double xy[2];
	struct kv_geo_hash h;
	kv_geo_decode(score, xy);
	kv_geo_encode_in(xy[0], xy[1], -180, 180, -90, 90, KV_GEO_STEP_MAX, &h);
	for (int i = 0; i < 10; i++)
		out[i] = alphabet[(h.bits >> (52 - (i + 1) * 5)) & 0x1f];
	out[10] = '0';                  /* 52 bits give ten characters; an eleventh as Redis's */
}
