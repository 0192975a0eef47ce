// Package ok passes its tests.
package ok

// One returns 1.
func One() int { return 1 }
