package container_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/defaults"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// started runs a long-lived container of s (its command replaced by a
// sleep) and removes it when the test ends.
func started(t *testing.T, c *dockerapi.Client, s container.Spec) string {
	t.Helper()
	s.Cmd = []string{"sleep", "600"}
	s.Init = true
	cfg, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := c.ContainerCreate(ctx, container.RandomName("exectest"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.ContainerRemove(context.Background(), id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	})
	if err := c.ContainerStart(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Wait for docker-init to have started the main process, as a session's
	// Provision does with its first exec: a command whose wrapper starts
	// before it would take the main process for an orphan started after the
	// command (seen once under CI load), which is kill.sh's documented limit.
	// ps shows "sleep 600" twice then: docker-init's argv ends with it.
	for deadline := time.Now().Add(30 * time.Second); count(t, c, id, "sleep 600") != "2"; {
		if time.Now().After(deadline) {
			t.Fatal("the container's main process did not start within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return id
}

func isRunning(t *testing.T, c *dockerapi.Client, id string) bool {
	t.Helper()
	j, err := c.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State.Running
}

// count is the number of live processes in id whose argv ends with args.
func count(t *testing.T, c *dockerapi.Client, id, args string) string {
	t.Helper()
	res, err := container.Exec(context.Background(), c, id, container.ExecSpec{
		Argv:    []string{"/bin/sh", "-c", "ps -o stat,args | grep -v '^Z' | grep -c '" + args + "$' || true"},
		Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func TestExecResultIsData(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	ctx := context.Background()
	res, err := container.Exec(ctx, c, id, container.ExecSpec{
		Argv: []string{"/bin/sh", "-c", `id -u; echo "$ONLY"; pwd; yes | head -c 3000; echo oops >&2; exit 7`},
		Env:  map[string]string{"ONLY": "this"}, Dir: "/tmp", OutputCap: 2000, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); !strings.HasPrefix(out, "65534\nthis\n/tmp\ny\n") || len(out) != 2000 || !res.StdoutTruncated || res.StdoutBytes != int64(3000+len("65534\nthis\n/tmp\n")) {
		t.Errorf("stdout %q (%d bytes, truncated %v)", out, res.StdoutBytes, res.StdoutTruncated)
	}
	if res.ExitCode != 7 || string(res.Stderr) != "oops\n" || res.TimedOut || res.OOMKilled {
		t.Errorf("result = %+v", res)
	}
	if _, err := container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"id"}, User: "0:0"}); !errors.Is(err, container.ErrInvalidSpec) {
		t.Errorf("root exec = %v; want ErrInvalidSpec", err)
	}
	if _, err := container.Exec(ctx, c, id, container.ExecSpec{Argv: []string{"true"}, Policy: container.KillTree}); !errors.Is(err, container.ErrInvalidSpec) {
		t.Errorf("KillTree without a backstop = %v; want ErrInvalidSpec", err)
	}
	if _, err := container.Exec(ctx, c, "stockade-no-such-container", container.ExecSpec{Argv: []string{"true"}}); !errors.Is(err, container.ErrNotRunning) {
		t.Errorf("exec in a missing container = %v; want ErrNotRunning", err)
	}
}

// The wrapper reports an OOM kill, even past the stderr cap.
func TestExecOOM(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	res, err := container.Exec(context.Background(), c, id, container.ExecSpec{
		Argv:      []string{"/bin/sh", "-c", `yes | head -c 5000 >&2; x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done`},
		OutputCap: 100, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.ExitCode != 137 || res.TimedOut {
		t.Errorf("result = exit %d oom %v timedout %v; want an OOM kill", res.ExitCode, res.OOMKilled, res.TimedOut)
	}
	res, err = container.Exec(context.Background(), c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", "kill -9 $$"}, Timeout: time.Minute})
	if err != nil || res.ExitCode != 137 || res.OOMKilled {
		t.Errorf("a plain SIGKILL = exit %d oom %v, %v; want 137 without OOM", res.ExitCode, res.OOMKilled, err)
	}
}

// KillContainer: a timeout kills the container. The timeout is long enough
// for the command to print under load (at 1 s, a machine at load 30 had not
// started it yet), short enough to keep the test quick.
func TestExecTimeoutKillContainer(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	start := time.Now()
	res, err := container.Exec(context.Background(), c, id, container.ExecSpec{Argv: []string{"/bin/sh", "-c", "echo begun; sleep 600"}, Timeout: 5 * time.Second})
	if err != nil || !res.TimedOut || string(res.Stdout) != "begun\n" {
		t.Errorf("result = %+v, %v; want TimedOut with the output so far", res, err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %v", d)
	}
	if isRunning(t, c, id) {
		t.Error("the container still runs")
	}
}

// KillTree: a timeout and a cancellation kill the command's tree, setsid
// and double-forked children included, and keep the container and its
// other commands; the backstop is not needed.
func TestExecTimeoutKillTree(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	var backstops atomic.Int64
	ts := container.ExecSpec{Policy: container.KillTree, Backstop: func(context.Context) error { backstops.Add(1); return nil }}
	other := make(chan container.Result, 1)
	go func() {
		s := ts
		s.Argv, s.Timeout = []string{"/bin/sh", "-c", "sleep 5; echo alive"}, time.Minute
		res, _ := container.Exec(context.Background(), c, id, s)
		other <- res
	}()
	s := ts
	s.Argv, s.Timeout = []string{"/bin/sh", "-c", "(setsid sleep 601 &); (sleep 602 &); sleep 603"}, 2*time.Second
	res, err := container.Exec(context.Background(), c, id, s)
	if err != nil || !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("result = %+v, %v; want TimedOut 137", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	s.Argv, s.Timeout = []string{"/bin/sh", "-c", "sleep 604"}, time.Minute
	if _, err := container.Exec(ctx, c, id, s); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled exec = %v; want context.Canceled", err)
	}
	for _, a := range []string{"sleep 601", "sleep 602", "sleep 603", "sleep 604"} {
		if n := count(t, c, id, a); n != "0" {
			t.Errorf("%s: %s still run", a, n)
		}
	}
	if o := <-other; o.ExitCode != 0 || string(o.Stdout) != "alive\n" {
		t.Errorf("the other command = %+v; want it unharmed", o)
	}
	if !isRunning(t, c, id) || backstops.Load() != 0 {
		t.Errorf("running %v, backstops %d; want the container kept, no backstop", isRunning(t, c, id), backstops.Load())
	}
}

// A timeout shorter than the exec's start still ends that command, and
// only it.
func TestExecTinyTimeout(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	var backstops atomic.Int64
	for i := 0; i < 3; i++ {
		res, err := container.Exec(context.Background(), c, id, container.ExecSpec{
			Argv: []string{"sleep", "605"}, Timeout: time.Nanosecond,
			Policy: container.KillTree, Backstop: func(context.Context) error { backstops.Add(1); return nil },
		})
		if err != nil || !res.TimedOut {
			t.Errorf("result = %+v, %v; want TimedOut", res, err)
		}
	}
	if n := count(t, c, id, "sleep 605"); n != "0" {
		t.Errorf("%s timed-out commands still run", n)
	}
	if backstops.Load() != 0 {
		t.Errorf("the backstop ran %d times; want none", backstops.Load())
	}
}

// noKiller is an engine on which the killer cannot start, as when the
// command holds every pid of the container.
type noKiller struct{ *dockerapi.Client }

func (n noKiller) ExecCreate(ctx context.Context, id string, cfg dockerapi.ExecConfig) (string, error) {
	if slices.Contains(cfg.Cmd, "stockade-kill") {
		return "", errors.New("test: no pid left for the killer")
	}
	return n.Client.ExecCreate(ctx, id, cfg)
}

// When the killer cannot run, the backstop ends the command, once.
func TestExecBackstop(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	var backstops atomic.Int64
	start := time.Now()
	res, err := container.Exec(context.Background(), noKiller{c}, id, container.ExecSpec{
		Argv: []string{"sleep", "606"}, Timeout: time.Second,
		Policy: container.KillTree, Backstop: func(ctx context.Context) error {
			backstops.Add(1)
			return c.ContainerKill(ctx, id, "KILL")
		},
	})
	if err != nil || !res.TimedOut {
		t.Errorf("result = %+v, %v; want TimedOut", res, err)
	}
	if backstops.Load() != 1 {
		t.Errorf("backstop ran %d times; want once", backstops.Load())
	}
	if d := time.Since(start); d > time.Second+container.KillerBudget+container.StreamGrace {
		t.Errorf("took %v", d)
	}
}

// The killer's modes for a resident agent: nested ends a wrapper that is
// an agent's child (with its descendants and its orphans), leaving the
// agent and its other children; tree ends the agent's exec and its
// descendants, and leaves orphans alone.
func TestKillModes(t *testing.T) {
	t.Parallel()
	c := enginetest.Client(t)
	id := started(t, c, spec(t, c, ""))
	ctx := context.Background()
	agent := `(setsid sleep 304 &)
sh -c 'sleep 301 & (setsid sleep 302 &); wait' stockade-exec W1 &
sleep 303 & wait`
	xid, err := c.ExecCreate(ctx, id, dockerapi.ExecConfig{Cmd: []string{"/bin/sh", "-c", agent, container.MarkerArg("A1")}, User: defaults.NobodyUser})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ExecStartDetached(ctx, xid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); count(t, c, id, "sleep 30[1-4]") != "4"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the processes did not start")
		}
	}
	if err := container.KillNested(ctx, c, id, defaults.NobodyUser, "W1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{{"sleep 301", "0"}, {"sleep 302", "0"}, {"sleep 303", "1"}, {"sleep 304", "1"}} {
		if got := count(t, c, id, tc.args); got != tc.want {
			t.Errorf("after KillNested: %s x %q; want %s", got, tc.args, tc.want)
		}
	}
	if err := container.KillMarked(ctx, c, id, defaults.NobodyUser, "A1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{{"sleep 303", "0"}, {"sleep 304", "1"}} {
		if got := count(t, c, id, tc.args); got != tc.want {
			t.Errorf("after KillMarked: %s x %q; want %s", got, tc.args, tc.want)
		}
	}
	if in, err := c.ExecInspect(ctx, xid); err != nil || in.Running {
		t.Errorf("the marked exec after KillMarked: running %v, %v; want ended", in.Running, err)
	}
	// A marker nothing carries is nothing to kill.
	if err := container.KillNested(ctx, c, id, defaults.NobodyUser, "none"); err != nil {
		t.Errorf("KillNested of nothing = %v", err)
	}
}
