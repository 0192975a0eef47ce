package enginetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// RequireRunscEnv is the variable that turns a missing gVisor runtime into
// a failure of the tests that run under it (CI's runsc leg sets it, after
// scripts/runsc-up).
const RequireRunscEnv = "STOCKADE_REQUIRE_RUNSC"

// Runsc returns the name of gVisor's runtime (container.RuntimeRunsc) when
// c's engine offers it. Without it the test is skipped, unless
// STOCKADE_REQUIRE_RUNSC=1, when it fails: the runsc tests run wherever
// the runtime is registered (scripts/runsc-up), and CI's runsc leg can
// never pass by skipping them.
func Runsc(t testing.TB, c *dockerapi.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rts container.Runtimes
	err := rts.Check(ctx, c, container.RuntimeRunsc)
	switch {
	case err == nil:
		return container.RuntimeRunsc
	case os.Getenv(RequireRunscEnv) == "1":
		t.Fatalf("gVisor required (%s=1): %v", RequireRunscEnv, err)
	default:
		t.Skipf("gVisor's runtime is not registered with the engine (scripts/runsc-up; %s=1 fails instead): %v", RequireRunscEnv, err)
	}
	return ""
}
