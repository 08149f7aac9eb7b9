/* port_uring.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_port_uring_placeholder_t;
