//go:build tools

// Package tools pins gVisor's runsc: scripts/runsc-build builds
// gvisor.dev/gvisor/runsc at the version this module requires, with the
// module hashes of the go.sum beside it (-mod=readonly: a hash that
// differs fails the build).
package tools

import _ "gvisor.dev/gvisor/runsc"
