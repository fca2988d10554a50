// Valgrind's callgrind client requests, which Swift cannot import (they are
// macros of inline assembly). Outside valgrind each is a few no-op instructions;
// without valgrind's headers (the `valgrind` Debian package) they do nothing.
#ifndef LIVERELAY_CCALLGRIND_H
#define LIVERELAY_CCALLGRIND_H

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define LIVERELAY_HAVE_CALLGRIND 1
#endif
#endif

/// 1 when built against valgrind's headers (the measured loop can be bracketed).
static inline int liverelay_callgrind_available(void) {
#ifdef LIVERELAY_HAVE_CALLGRIND
    return 1;
#else
    return 0;
#endif
}

/// Starts counting (run under `valgrind --tool=callgrind --instr-atstart=no`).
static inline void liverelay_callgrind_start(void) {
#ifdef LIVERELAY_HAVE_CALLGRIND
    CALLGRIND_START_INSTRUMENTATION;
#endif
}

/// Stops counting: what follows (teardown, exit) is not in the total.
static inline void liverelay_callgrind_stop(void) {
#ifdef LIVERELAY_HAVE_CALLGRIND
    CALLGRIND_STOP_INSTRUMENTATION;
#endif
}

#endif
