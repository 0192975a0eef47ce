// Package slow is a fixture dependency: v1.0.0 returns at once.
package slow

// Wait returns when the work is done.
func Wait() {}
