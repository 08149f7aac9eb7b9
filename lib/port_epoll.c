/* port_epoll.c - placeholder until the module lands. */
#include "paste.h"
typedef int paste_port_epoll_placeholder_t;
