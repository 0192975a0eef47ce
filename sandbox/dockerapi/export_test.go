package dockerapi

import "testing"

// SetSockets replaces the sockets FindHost and New("") try until t ends.
func SetSockets(t testing.TB, s []string) {
	saved := defaultSockets
	defaultSockets = s
	t.Cleanup(func() { defaultSockets = saved })
}

// ImagePath is imagePath, for the tests.
var ImagePath = imagePath
