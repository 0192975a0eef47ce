// Package good builds.
package good

// Two returns 2.
func Two() int { return 2 }
