/*
 * kv_geohash.h - the geohash arithmetic of pkvs's GEO commands
 * (cmd_geo.c), pure functions with Redis 7.0's numbers.
 *
 * A position is a sorted-set member whose score is its 52-bit geohash:
 * longitude and latitude each cut into 2^26 steps over [-180, 180] and
 * [-85.05112878, 85.05112878] (the Web Mercator square), their bits
 * interleaved (latitude in the even bits, longitude in the odd ones), so
 * that the members of one geohash box are one range of scores. A search
 * covers its shape with a box of the hash's prefix at a step (bits per
 * axis) chosen from the radius, and that box's eight neighbours: at most
 * nine ranges of scores, each a walk of the sorted set's score index.
 * Distances are great-circle (haversine) on a sphere of Redis's radius.
 */
#ifndef PASTE_SERVICES_KV_GEOHASH_H
#define PASTE_SERVICES_KV_GEOHASH_H

#include <stdbool.h>
#include <stdint.h>

#define KV_GEO_STEP_MAX 26u             /* bits per axis of a score */
#define KV_GEO_LAT_MIN (-85.05112878)
#define KV_GEO_LAT_MAX 85.05112878
#define KV_GEO_LONG_MIN (-180.0)
#define KV_GEO_LONG_MAX 180.0
#define KV_GEO_EARTH_M 6372797.560856   /* the sphere's radius in meters */

/* A geohash: the interleaved bits of step bits per axis. bits 0 and step
 * 0: none (a neighbour a search leaves out). */
struct kv_geo_hash {
	uint64_t bits;
	uint8_t step;
};

/* A box: its longitudes and latitudes. */
struct kv_geo_area {
	double lon_min, lon_max, lat_min, lat_max;
};

/* Is (lon, lat) a position GEOADD takes? */
bool kv_geo_valid(double lon, double lat);
/* The geohash of (lon, lat) at step bits per axis over the ranges
 * [lon_min, lon_max] and [lat_min, lat_max]: false when the position is
 * outside them or outside kv_geo_valid's (then *h is zero). */
bool kv_geo_encode_in(double lon, double lat, double lon_min, double lon_max, double lat_min,
		      double lat_max, unsigned step, struct kv_geo_hash *h);
/* ... over the score's ranges. */
bool kv_geo_encode(double lon, double lat, unsigned step, struct kv_geo_hash *h);
/* h's bits moved to the top of 52 (a score). */
uint64_t kv_geo_align52(struct kv_geo_hash h);
/* The score of (lon, lat): kv_geo_valid's positions only. */
uint64_t kv_geo_score(double lon, double lat);
/* The box of h over the score's ranges. */
void kv_geo_area_of(struct kv_geo_hash h, struct kv_geo_area *a);
/* The position a score stands for (its box's centre, kept in range):
 * xy[0] longitude, xy[1] latitude. Any score gives one (its bits are
 * taken as the integer the double converts to, as Redis's x86-64 build
 * converts one). */
void kv_geo_decode(double score, double xy[2]);
/* The eight neighbours of h (the longitude wraps, and so does the
 * latitude's step count), in the order a search visits them: north,
 * south, east, west, north-east, north-west, south-east, south-west. */
void kv_geo_neighbors(struct kv_geo_hash h, struct kv_geo_hash out[8]);

/* Great-circle distance in meters; along a meridian. */
double kv_geo_distance(double lon1, double lat1, double lon2, double lat2);
double kv_geo_lat_distance(double lat1, double lat2);
/* The step of the boxes that cover a radius of range_m meters at
 * latitude lat (1 .. 26). */
unsigned kv_geo_steps(double range_m, double lat);

/* A search's shape: a circle of radius, or a box of width x height
 * (both in units of conv meters), centred on (lon, lat). */
struct kv_geo_shape {
	double lon, lat;
	bool box;
	double radius, width, height;
	double conv;
};
/* The shape's bounds: minimum longitude, minimum latitude, maximum
 * longitude, maximum latitude. */
void kv_geo_bounds(const struct kv_geo_shape *s, double b[4]);
/* The boxes that cover the shape: out[0] the centre's, then the
 * neighbours in kv_geo_neighbors's order, those the shape cannot reach
 * zeroed. */
void kv_geo_cover(const struct kv_geo_shape *s, struct kv_geo_hash out[9]);
/* Is the position of score inside the shape? xy: the position; *dist:
 * its distance from the centre in meters (set when inside). */
bool kv_geo_within(const struct kv_geo_shape *s, double score, double xy[2], double *dist);
/* The 11-character geohash string of the position of score (the
 * standard alphabet over [-90, 90] latitudes; the last character '0'). */
void kv_geo_string(double score, char out[11]);

#endif
