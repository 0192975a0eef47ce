// Package calc is a fixture dependency: v1.0.0 doubles correctly.
package calc

// Double returns 2*n.
func Double(n int) int { return 2 * n }
