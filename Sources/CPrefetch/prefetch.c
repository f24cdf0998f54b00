// The functions are static inline in the header; SwiftPM needs a source file per C target.
#include "CPrefetch.h"
