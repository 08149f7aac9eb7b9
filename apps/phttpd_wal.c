/* placeholder */
typedef int phttpd_wal_placeholder_t;
