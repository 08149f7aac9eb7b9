#include "check.h"
#include "paste.h"
int main(void) { CHECK(1); return check_done(); }
