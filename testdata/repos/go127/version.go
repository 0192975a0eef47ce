// Package version reports the Go release that built it.
package version

import "runtime"

// Go is the release the package was built with, such as "go1.27.3".
func Go() string { return runtime.Version() }
