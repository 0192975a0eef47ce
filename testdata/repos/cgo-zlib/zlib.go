// Package zlibver calls zlib through cgo: it needs zlib's header and
// library (Debian's zlib1g-dev), which the C toolchain layer does not
// carry unless asked to (-apt-packages zlib1g-dev).
package zlibver

// #cgo LDFLAGS: -lz
// #include <zlib.h>
import "C"

// Version is the version of the zlib linked in.
func Version() string { return C.GoString(C.zlibVersion()) }
