package image

import "testing"

// SetHostBusybox points the build's look-up of the host's static busybox
// (DefaultBusybox) at name until t ends, so a test takes the Debian path
// on a host that has one. Tests that call it must not run in parallel.
func SetHostBusybox(t testing.TB, name string) {
	old := hostBusyboxPath
	hostBusyboxPath = name
	t.Cleanup(func() { hostBusyboxPath = old })
}

// CacheDirForTests is testCacheDir, for the engine tests.
var CacheDirForTests = testCacheDir
