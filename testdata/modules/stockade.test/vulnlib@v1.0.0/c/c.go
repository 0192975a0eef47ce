// Package c is never imported by the scan fixture: an advisory for it
// reaches only the required level.
package c

// Risky is vulnerable at v1.0.0 (v1.0.0).
func Risky() {}
