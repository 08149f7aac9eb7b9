/* persist.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_persist_placeholder_t;
