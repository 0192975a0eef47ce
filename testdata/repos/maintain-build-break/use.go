// Package use is the maintain-build-break fixture: brk v1.1.0 removes Old,
// so the minor upgrade breaks the build.
package use

import "stockade.test/brk"

// Echo returns s.
func Echo(s string) string { return brk.Old(s) }
