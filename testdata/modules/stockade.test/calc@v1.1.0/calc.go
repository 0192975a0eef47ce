// Package calc is a fixture dependency: v1.1.0, a minor release whose
// Double is off by one: it builds, and breaks its callers' tests.
package calc

// Double returns 2*n, and one more.
func Double(n int) int { return 2*n + 1 }

// Triple returns 3*n; new in v1.1.0.
func Triple(n int) int { return 3 * n }
