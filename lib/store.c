/* store.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_store_placeholder_t;
