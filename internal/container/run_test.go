package container_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func spec(t *testing.T, c *dockerapi.Client, script string) container.Spec {
	return container.Spec{
		Image:  enginetest.BaseImage(t, c),
		Cmd:    []string{"/bin/sh", "-c", script},
		Labels: label.Base(enginetest.Owner(t), label.KindProbe),
		Mounts: []container.Mount{{Type: container.Tmpfs, Target: "/tmp", Exec: true}},
		Limits: container.Limits{MemoryBytes: 64 << 20, PidsLimit: 64},
	}
}

func gone(t *testing.T, c *dockerapi.Client, id string) {
	t.Helper()
	if _, err := c.ContainerInspect(context.Background(), id); !errors.Is(err, dockerapi.ErrNotFound) {
		t.Errorf("container %s still exists after Run (err=%v)", id, err)
	}
}

func TestRunHardenedAndRemoved(t *testing.T) {
	c := enginetest.Client(t)
	t.Setenv("STOCKADE_TEST_TOKEN", "secret")
	s := spec(t, c, `id -u; id -g; env | sort; grep Cap /proc/self/status; touch /etc/x 2>&1 || echo rofs; echo ok > /tmp/f && cat /tmp/f; ls /sys/class/net; exit 7`)
	s.Env = map[string]string{"ONLY": "this"}
	res, err := container.Run(context.Background(), c, s, container.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	for _, want := range []string{"65534\n65534\n", "ONLY=this", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "rofs", "ok\n", "lo\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"STOCKADE_TEST_TOKEN", "secret", "eth0"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	if res.ExitCode != 7 || res.TimedOut || res.OOMKilled || res.Truncated() {
		t.Errorf("result = exit %d timedout %v oom %v trunc %v; want exit 7 only", res.ExitCode, res.TimedOut, res.OOMKilled, res.Truncated())
	}
	if p := res.Phases; p.Create <= 0 || p.Start <= 0 || p.Wait <= 0 || p.Remove <= 0 {
		t.Errorf("phases = %+v; want every phase timed", p)
	}
	gone(t, c, res.ContainerID)
}

func TestRunTimeoutKillsAndRemoves(t *testing.T) {
	c := enginetest.Client(t)
	res, err := container.Run(context.Background(), c, spec(t, c, "echo started; sleep 600"), container.RunOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "started") {
		t.Errorf("result = %+v; want timed out with output read", res)
	}
	gone(t, c, res.ContainerID)
}

// TestRun_LongCommandStillCollectsLogsAndRemoves: a command longer than every
// single phase budget still has its logs read and its container removed,
// because each post-run phase gets its own budget.
func TestRun_LongCommandStillCollectsLogsAndRemoves(t *testing.T) {
	c := enginetest.Client(t)
	b := container.Budgets{Create: 3 * time.Second, Start: 3 * time.Second, Kill: 3 * time.Second, Logs: 3 * time.Second, Remove: 3 * time.Second}
	res, err := container.Run(context.Background(), c, spec(t, c, "echo begin; sleep 5; echo end"), container.RunOptions{Budgets: b, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "begin\nend\n" || res.ExitCode != 0 {
		t.Errorf("stdout = %q exit %d; want begin/end, 0", got, res.ExitCode)
	}
	gone(t, c, res.ContainerID)
}

func TestRunOutputCapAndOOM(t *testing.T) {
	c := enginetest.Client(t)
	res, err := container.Run(context.Background(), c, spec(t, c, "dd if=/dev/zero bs=1024 count=4096 2>/dev/null; echo err >&2"), container.RunOptions{OutputCap: 1 << 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1<<20 || !res.StdoutTruncated || res.StdoutBytes != 4<<20 || res.StderrTruncated || string(res.Stderr) != "err\n" {
		t.Errorf("kept %d of %d bytes, truncated %v, stderr %q", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated, res.Stderr)
	}
	// A shell variable that grows past the 64 MiB limit.
	res, err = container.Run(context.Background(), c, spec(t, c, `x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done`), container.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.TimedOut {
		t.Errorf("oom=%v timedout=%v exit=%d; want OOM", res.OOMKilled, res.TimedOut, res.ExitCode)
	}
}

func TestRunCancelledStillRemoves(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	res, err := container.Run(ctx, c, spec(t, c, "sleep 600"), container.RunOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	gone(t, c, res.ContainerID)
}

// TestRunOOMAndPlainKill: a command the kernel kills for memory is
// OOMKilled; one that SIGKILLs itself exits 137 without it.
func TestRunOOMAndPlainKill(t *testing.T) {
	c := enginetest.Client(t)
	for _, tt := range []struct {
		name, script string
		oom          bool
	}{
		{"oom", "dd if=/dev/zero of=/dev/null bs=128M count=1", true},
		{"sigkill", "sleep 60 & kill -9 $!; wait $!", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := container.Run(context.Background(), c, spec(t, c, tt.script), container.RunOptions{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 137 || res.OOMKilled != tt.oom || res.TimedOut {
				t.Errorf("result = exit %d oom %v timedout %v; want exit 137 oom %v", res.ExitCode, res.OOMKilled, res.TimedOut, tt.oom)
			}
			gone(t, c, res.ContainerID)
		})
	}
}
