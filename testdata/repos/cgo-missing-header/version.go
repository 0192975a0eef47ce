// Package version asks SQLite for its version: it needs sqlite3.h, which
// libc does not provide.
package version

// #include <sqlite3.h>
import "C"

// Version is the SQLite library's version.
func Version() string { return C.GoString(C.sqlite3_libversion()) }
