/* test_kv_geohash.c - the geohash arithmetic of the GEO commands
 * (services/kv_geohash.c): scores, decoded positions, geohash strings and
 * distances against what Redis 7.0.15 (Debian's redis-server) answers for
 * the same positions (GEOADD then ZSCORE, GEOPOS, GEOHASH, GEODIST);
 * neighbours adjacent and wrapping; the steps a radius gets; the nine
 * boxes of a search covering every position inside its shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kv_geohash.h"
#include "pkvs_resp.h"

/* GEOADD k lon lat p; ZSCORE; GEOPOS (RESP2 strings); GEOHASH. */
static const struct {
	double lon, lat;
	uint64_t score;
	const char *x, *y, *hash;
} points[] = {
	{ 13.361389, 38.115556, 3479099956230698ull, "13.36138933897018433", "38.11555639549629859", "sqc8b49rny0" },
	{ 15.087269, 37.502669, 3479447370796909ull, "15.08726745843887329", "37.50266842333162032", "sqdtr74hyu0" },
	{ -73.9454966, 40.747533, 1791875804419201ull, "-73.94549578428268433", "40.74753227099792952", "dr5rv3fe940" },
	{ 0, 0, 3377699720527872ull, "0.00000268220901489", "0.00000126736058093", "s0000000000" },
	{ 180, 85.05112878, 13510798882111488ull, "180", "85.0511287799999991", "bp05b5048p0" },
	{ -180, -85.05112878, 0ull, "-179.99999731779098511", "-85.05112751263942528", "00bh0hbj200" },
	{ -122.27652, 37.805186, 1367952638197536ull, "-122.27652043104171753", "37.80518485897756165", "9q9p1d0znt0" },
	{ 139.6917, 35.6895, 4171231230197045ull, "139.69170123338699341", "35.68950126697937009", "xn774c06kt0" },
	{ 2.3522, 48.8566, 3663832779122514ull, "2.35219806432723999", "48.8565995303492997", "u09tvw0f640" },
	{ -0.1276, 51.5072, 2163557714838307ull, "-0.12760072946548462", "51.50720053692975853", "gcpvj0e54w0" },
	{ 151.2093, -33.8688, 3252046221964352ull, "151.20929986238479614", "-33.86880091934155956", "r3gx2f77bj0" },
	{ 179.999, -0.0001, 3377699720491362ull, "179.99899953603744507", "-0.00010012148579364", "rzzzzzzr2t0" },
	{ -179.9999, 1e-05, 1125899906843149ull, "-179.99990075826644897", "0.00000887152405227", "80000000430" },
	{ 45, -45, 2486000106619925ull, "45.00000268220901489", "-45.00000100864581043", "jpbpbpbpbp0" },
};

/* GEODIST k pa pb, and in km: four decimals. */
static const struct {
	int a, b;
	const char *m, *km;
} dists[] = {
	{ 0, 1, "166274.1516", "166.2742" },
	{ 2, 6, "4121513.8119", "4121.5138" },
	{ 3, 4, "10560811.4940", "10560.8115" },
	{ 4, 5, "18919844.5891", "18919.8446" },
	{ 8, 9, "343626.8434", "343.6268" },
	{ 10, 7, "7828823.5342", "7828.8235" },
	{ 11, 12, "122.9155", "0.1229" },
	{ 3, 13, "6673578.1799", "6673.5782" },
	{ 0, 0, "0.0000", "0.0000" },
};

#define NPOINTS (sizeof(points) / sizeof(points[0]))

static bool coord_is(double v, const char *want)
{
	char b[64];
	int n = kv_ld_format(b, sizeof(b), (long double)v);
	bool ok = n > 0 && strcmp(b, want) == 0;
	if (!ok)
		fprintf(stderr, "  coordinate %s, want %s\n", b, want);
	return ok;
}

/* Four decimals as Redis writes a distance: llrint(d * 10^4). */
static bool dist_is(double d, const char *want)
{
	long long v = llrint(d * 10000.0);
	char b[48];
	snprintf(b, sizeof(b), "%lld.%04lld", v / 10000, v % 10000);
	bool ok = strcmp(b, want) == 0;
	if (!ok)
		fprintf(stderr, "  distance %s, want %s\n", b, want);
	return ok;
}

static void test_redis_values(void)
{
	for (size_t i = 0; i < NPOINTS; i++) {
		CHECK(kv_geo_valid(points[i].lon, points[i].lat));
		CHECK_EQ(kv_geo_score(points[i].lon, points[i].lat), points[i].score);
		double xy[2];
		kv_geo_decode((double)points[i].score, xy);
		CHECK(coord_is(xy[0], points[i].x));
		CHECK(coord_is(xy[1], points[i].y));
		char h[12] = { 0 };
		kv_geo_string((double)points[i].score, h);
		CHECK(strcmp(h, points[i].hash) == 0);
	}
	for (size_t i = 0; i < sizeof(dists) / sizeof(dists[0]); i++) {
		double p[2], q[2];
		kv_geo_decode((double)points[dists[i].a].score, p);
		kv_geo_decode((double)points[dists[i].b].score, q);
		double d = kv_geo_distance(p[0], p[1], q[0], q[1]);
		CHECK(dist_is(d, dists[i].m));
		CHECK(dist_is(d / 1000, dists[i].km));
	}
	/* GEOADD's bounds, inclusive */
	CHECK(kv_geo_valid(-180, -85.05112878) && kv_geo_valid(180, 85.05112878));
	CHECK(!kv_geo_valid(180.0000001, 0) && !kv_geo_valid(0, 85.05112879));
	CHECK(!kv_geo_valid(-180.0000001, 0) && !kv_geo_valid(0, -85.05112879));
}

static void test_neighbors(void)
{
	srand(7);
	for (int t = 0; t < 2000; t++) {
		unsigned step = 1 + (unsigned)(rand() % 26);
		double lon = -180 + 360.0 * rand() / RAND_MAX, lat = -85 + 170.0 * rand() / RAND_MAX;
		struct kv_geo_hash h, nb[8];
		CHECK(kv_geo_encode(lon, lat, step, &h));
		kv_geo_neighbors(h, nb);
		struct kv_geo_area c, a;
		kv_geo_area_of(h, &c);
		bool in = c.lon_min <= lon && lon <= c.lon_max && c.lat_min <= lat && lat <= c.lat_max;
		CHECK(in);
		double w = c.lon_max - c.lon_min, ht = c.lat_max - c.lat_min;
		/* north, south, east, west, NE, NW, SE, SW: one cell over,
		 * wrapping around at the edges */
		static const int d[8][2] = { { 0, 1 }, { 0, -1 }, { 1, 0 }, { -1, 0 },
					     { 1, 1 }, { -1, 1 }, { 1, -1 }, { -1, -1 } };
		for (int i = 0; i < 8; i++) {
			CHECK_EQ(nb[i].step, step);
			kv_geo_area_of(nb[i], &a);
			double elon = c.lon_min + d[i][0] * w, elat = c.lat_min + d[i][1] * ht;
			if (elon < -180 + w / 4)
				elon += elon < -180 - w / 4 ? 360 : 0;
			if (elon > 180 - w / 4)
				elon -= 360;
			if (elat < KV_GEO_LAT_MIN - ht / 4)
				elat += KV_GEO_LAT_MAX - KV_GEO_LAT_MIN;
			if (elat > KV_GEO_LAT_MAX - ht / 4)
				elat -= KV_GEO_LAT_MAX - KV_GEO_LAT_MIN;
			bool near = fabs(a.lon_min - elon) < w / 4 && fabs(a.lat_min - elat) < ht / 4;
			CHECK(near);
			if (!near)
				fprintf(stderr, "  step %u neighbour %d of (%g, %g)\n", step, i, lon, lat);
		}
	}
	/* exact adjacency: the east box starts where the centre ends */
	struct kv_geo_hash h, nb[8];
	struct kv_geo_area c, e, n;
	kv_geo_encode(13.361389, 38.115556, 20, &h);
	kv_geo_neighbors(h, nb);
	kv_geo_area_of(h, &c);
	kv_geo_area_of(nb[2], &e);
	kv_geo_area_of(nb[0], &n);
	CHECK(e.lon_min == c.lon_max && e.lat_min == c.lat_min);
	CHECK(n.lat_min == c.lat_max && n.lon_min == c.lon_min);
}

static void test_steps(void)
{
	CHECK_EQ(kv_geo_steps(0, 0), 26);
	CHECK_EQ(kv_geo_steps(1000, 0), 14);        /* 1000 * 2^15 passes 20037726.37 */
	CHECK_EQ(kv_geo_steps(1000, 70), 13);
	CHECK_EQ(kv_geo_steps(1000, -85), 12);
	CHECK_EQ(kv_geo_steps(5e6, 0), 2);
	CHECK_EQ(kv_geo_steps(1e7, 0), 1);
	CHECK_EQ(kv_geo_steps(3e7, 0), 1);
	CHECK_EQ(kv_geo_steps(0.001, 0), 26);
}

/* Every position inside a shape lies in one of its nine boxes. */
static void test_cover(void)
{
	srand(11);
	int inside = 0;
	for (int t = 0; t < 400; t++) {
		struct kv_geo_shape s = { 0 };
		s.lon = -180 + 360.0 * rand() / RAND_MAX;
		s.lat = -70 + 140.0 * rand() / RAND_MAX;
		s.conv = 1000;
		s.box = t % 2;
		s.radius = 1 + rand() % 3000;
		s.width = 1 + rand() % 3000;
		s.height = 1 + rand() % 3000;
		struct kv_geo_hash box[9];
		kv_geo_cover(&s, box);
		CHECK(box[0].step >= 1 && box[0].step <= 26);
		for (int p = 0; p < 200; p++) {
			double lon = s.lon + (rand() / (double)RAND_MAX - 0.5) * 80;
			double lat = s.lat + (rand() / (double)RAND_MAX - 0.5) * 40;
			if (lon < -180 || lon > 180 || !kv_geo_valid(lon, lat))
				continue;
			double score = (double)kv_geo_score(lon, lat), xy[2], dist;
			if (!kv_geo_within(&s, score, xy, &dist))
				continue;
			inside++;
			bool found = false;
			for (int i = 0; i < 9; i++) {
				if (box[i].step == 0)
					continue;
				double lo = (double)kv_geo_align52(box[i]);
				struct kv_geo_hash nx = box[i];
				nx.bits++;
				found |= score >= lo && score < (double)kv_geo_align52(nx);
			}
			CHECK(found);
		}
	}
	CHECK(inside > 1000);
	/* a radius of 0: the step of a score */
	struct kv_geo_shape s = { .lon = 13.361389, .lat = 38.115556, .radius = 0, .conv = 1 };
	struct kv_geo_hash box[9];
	kv_geo_cover(&s, box);
	CHECK_EQ(box[0].step, 26);
	CHECK_EQ(kv_geo_align52(box[0]), 3479099956230698ull);
}

int main(void)
{
	test_redis_values();
	test_neighbors();
	test_steps();
	test_cover();
	return check_done();
}
