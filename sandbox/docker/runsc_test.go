package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
)

// TestRunsc_Kernel: a session asked to run under gVisor (Spec.Runtime, the
// provider's default being the engine's) does: the engine made its
// container with runsc, and what the session sees of its kernel is
// gVisor's, not the host's (uname, /proc/version, dmesg). It comes from a
// warm pool of a runc spec and a runsc spec, from the runsc member (the
// pool's key holds the runtime; its container says runsc). A session of
// the engine's default runtime is not adopted for it (ErrSpecMismatch).
func TestRunsc_Kernel(t *testing.T) {
	f := newFixture(t)
	rt := enginetest.Runsc(t, f.c)
	hostKernel := hostRelease(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pooled, err := New(Config{Owner: f.p.owner, Pool: PoolConfig{Size: 1, Specs: []sandbox.Spec{{Image: f.img}, {Image: f.img, Runtime: rt}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pooled.Close(context.Background()) })
	if err := pooled.WarmPool(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := pooled.Provision(ctx, sandbox.Spec{SessionID: "runsc-kernel", Image: f.img, Runtime: rt})
	if err != nil {
		t.Fatalf("Provision(Runtime %q) = %v", rt, err)
	}
	if n := pooled.PoolClaims(); n != 1 {
		t.Errorf("PoolClaims() = %d; want the gVisor session served by the pool's gVisor member", n)
	}
	c, err := f.c.ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.Runtime != rt {
		t.Errorf("the session's container runs under %q; want %q", c.HostConfig.Runtime, rt)
	}
	for _, tc := range []struct{ cmd, want string }{
		{"uname -r", ""},
		{"cat /proc/version", "gvisor"},
		{"dmesg", "gVisor"},
	} {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: tc.cmd, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("Exec(%q) = %v", tc.cmd, err)
		}
		if res.ExitCode != 0 || strings.Contains(res.Stdout, hostKernel) || !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%s = exit %d, %q, stderr %q; want exit 0, gVisor's kernel (%q), not the host's %q", tc.cmd, res.ExitCode, res.Stdout, res.Stderr, tc.want, hostKernel)
		}
	}
	// The same session asked of the engine's default runtime is another
	// sandbox.
	_, err = f.p.Provision(ctx, sandbox.Spec{SessionID: "runsc-kernel", Image: f.img})
	if !errors.Is(err, sandbox.ErrSpecMismatch) || !strings.Contains(err.Error(), "runtime") {
		t.Errorf("Provision(runc) of a runsc session = %v; want ErrSpecMismatch naming the runtime", err)
	}
}

// hostRelease is the host's kernel release (uname -r), which a gVisor
// session must not see.
func hostRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Skipf("the host's kernel release: %v", err)
	}
	return strings.TrimSpace(string(b))
}
