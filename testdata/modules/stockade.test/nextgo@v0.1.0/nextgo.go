// Package nextgo is a fixture dependency whose v0.2.0 needs a Go newer than
// every toolchain image, so upgrading to it fails at go get.
package nextgo

// Answer returns 42.
func Answer() int { return 42 }
