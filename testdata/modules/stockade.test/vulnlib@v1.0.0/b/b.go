// Package b is imported by the scan fixture; only Unused is vulnerable.
package b

// Used is safe.
func Used() int { return 1 }

// Unused is vulnerable at v1.0.0 (v1.0.0) and never called by the fixture.
func Unused() int { return 0 }
