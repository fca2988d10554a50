// The system SQLite (Debian's libsqlite3 3.40) for Swift: the parts Swift's C
// importer cannot reach by itself.
//
// SQLITE_STATIC and SQLITE_TRANSIENT are casts of integers to function
// pointers, which do not import; they are re-exported as inline functions.
#ifndef LIVERELAY_CSQLITE_SHIM_H
#define LIVERELAY_CSQLITE_SHIM_H

#include <sqlite3.h>

/// Bind text that SQLite copies at once (the Swift string may not outlive the call).
static inline int lr_sqlite3_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int bytes) {
    return sqlite3_bind_text(stmt, index, text, bytes, SQLITE_TRANSIENT);
}

/// Bind a blob that SQLite copies at once.
static inline int lr_sqlite3_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, int count) {
    return sqlite3_bind_blob(stmt, index, bytes, count, SQLITE_TRANSIENT);
}

/// sqlite3_config is variadic (not importable). Turning memory statistics off
/// drops a global mutex from every SQLite allocation; it must run before the
/// library initializes (the first open) and returns SQLITE_MISUSE after.
static inline int lr_sqlite3_config_memstatus(int enabled) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, enabled);
}

#endif
