/* wal.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_wal_placeholder_t;
