// Everything is inline in include/CCallgrind.h; SwiftPM wants one source file.
#include "CCallgrind.h"
