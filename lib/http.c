/* http.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_http_placeholder_t;
