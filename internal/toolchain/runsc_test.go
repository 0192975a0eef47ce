package toolchain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
)

// TestExecute_Runsc: with Config.Runtime runsc, the execute profile's
// guarantees hold under gVisor, proved by the same checks as under the
// engine's default: no network but loopback, the source and the module
// cache read-only, a fresh build cache per validation, and the probe
// (every check probes first) sees the run's directories through gVisor's
// gofer. The containers of the repository's code do run under gVisor:
// their kernel is gVisor's (dmesg), and the engine made them with runsc.
func TestExecute_Runsc(t *testing.T) {
	eng := enginetest.Client(t)
	rt := enginetest.Runsc(t, eng)
	r := openRunner(t, eng, testImage(t, eng, false), func(o *Options) { o.Config.Runtime = rt })
	t.Run("Kernel", func(t *testing.T) {
		mustProbe(t, r)
		bc, _ := r.NewBuildCache()
		res := mustRun(t, r, Job{Profile: Execute, BuildCache: bc, Cmd: sh("dmesg; cat /proc/version")})
		if out := string(res.Stdout); res.ExitCode != 0 || !strings.Contains(out, "gVisor") {
			t.Errorf("execute under %s: exit %d, %q, stderr %q; want gVisor's kernel", rt, res.ExitCode, out, res.Stderr)
		}
	})
	t.Run("NoNetwork", func(t *testing.T) { executeNoNetwork(t, r) })
	t.Run("SourceAndCacheReadOnly", func(t *testing.T) { executeReadOnly(t, r) })
	t.Run("BuildCacheFreshPerValidation", func(t *testing.T) { executeFreshCache(t, r) })
}

// TestOpen_RefusesMissingRuntime: a runtime the engine does not offer is
// refused before the run starts (container.ErrRuntimeUnavailable); the
// repository's code never runs under another.
func TestOpen_RefusesMissingRuntime(t *testing.T) {
	eng := enginetest.Client(t)
	o := Options{DataDir: testDataDir(t), Owner: enginetest.Owner(t), Config: Config{Image: "img", Runtime: "stockade-no-such-runtime"}}
	if r, err := Open(context.Background(), eng, o); !errors.Is(err, container.ErrRuntimeUnavailable) {
		if r != nil {
			r.Close(context.Background())
		}
		t.Errorf("Open(Runtime %q) = %v; want ErrRuntimeUnavailable", o.Config.Runtime, err)
	}
}
