package validate

import (
	"regexp"

	"github.com/stockade/stockade/internal/testjson"
)

// Finding kinds for what a cgo build needs beyond the image's C toolchain
// (gcc, binutils, libc): on a developer's machine the library's -dev
// package is installed; in the image it is not, so the failure is the
// environment's, named as such rather than as a plain build failure.
const (
	// KindMissingCHeader: the C compiler did not find a header.
	KindMissingCHeader = "missing_c_header"
	// KindMissingCLibrary: the linker did not find a library (-lname).
	KindMissingCLibrary = "missing_c_library"
)

var (
	// gcc: "fatal error: sqlite3.h: No such file or directory".
	missingHeaderRE = regexp.MustCompile(`fatal error: ([^:\s]+\.h[a-z]*): No such file or directory`)
	// ld: "cannot find -lsqlite3" (binutils 2.40: ": No such file or
	// directory" follows).
	missingLibraryRE = regexp.MustCompile(`cannot find -l([A-Za-z0-9_.+-]+)`)
)

// cgoKind returns f with its kind set to KindMissingCHeader or
// KindMissingCLibrary when its message is the C compiler's or linker's
// complaint about a missing header or library, and its key recomputed;
// any other finding is returned as it is.
func cgoKind(f testjson.Finding) testjson.Finding {
	switch {
	case missingHeaderRE.MatchString(f.Message):
		f.Kind = KindMissingCHeader
	case missingLibraryRE.MatchString(f.Message):
		f.Kind = KindMissingCLibrary
	default:
		return f
	}
	f.Key = testjson.Key(f)
	return f
}
