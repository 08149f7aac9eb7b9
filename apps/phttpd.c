#include "paste.h"
int main(void) { return 0; }
