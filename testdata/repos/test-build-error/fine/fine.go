// Package fine builds and tests.
package fine

// Yes returns true.
func Yes() bool { return true }
