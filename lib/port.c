/* port.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_port_placeholder_t;
