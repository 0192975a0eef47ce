package docker

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// faulty wraps the real engine and misbehaves on the stream of every exec
// with tag as one of its arguments: it returns from ExecStart after a second, with
// err (nil: as if the stream had ended), while the command goes on.
type faulty struct {
	engine
	tag   string
	err   error
	mu    sync.Mutex
	execs map[string]bool
	kills atomic.Int64
}

func (f *faulty) ExecCreate(ctx context.Context, id string, cfg dockerapi.ExecConfig) (string, error) {
	eid, err := f.engine.ExecCreate(ctx, id, cfg)
	if err == nil && f.tag != "" && slices.Contains(cfg.Cmd, f.tag) {
		f.mu.Lock()
		f.execs[eid] = true
		f.mu.Unlock()
	}
	return eid, err
}

func (f *faulty) ExecStart(ctx context.Context, id string, stdout, stderr io.Writer) error {
	f.mu.Lock()
	bad := f.execs[id]
	f.mu.Unlock()
	if !bad {
		return f.engine.ExecStart(ctx, id, stdout, stderr)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	f.engine.ExecStart(sctx, id, stdout, stderr)
	return f.err
}

func (f *faulty) ContainerKill(ctx context.Context, id, signal string) error {
	f.kills.Add(1)
	return f.engine.ContainerKill(ctx, id, signal)
}

// faultyBox provisions a session whose provider talks through a faulty
// engine. With a tag, the provider has no agent: the faults are the
// engine's exec streams'.
func faultyBox(t *testing.T, tag string, serr error) (*box, *faulty) {
	t.Helper()
	c := enginetest.Client(t)
	p, _ := newGateProvider(t, Config{Owner: enginetest.Owner(t), NoAgent: tag != ""})
	f := &faulty{engine: p.eng, tag: tag, err: serr, execs: map[string]bool{}}
	p.eng = f
	ctx := context.Background()
	id := domain.ID("exec-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(id) > 60 {
		id = id[:60]
	}
	sb, err := p.Provision(ctx, sandbox.Spec{SessionID: id, Image: testImage(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Reap(context.Background(), id) })
	return sb.(*box), f
}

// running counts the live (not zombie) processes of sb whose command line
// ends with args.
func running(t *testing.T, sb sandbox.Sandbox, args string) int {
	t.Helper()
	out := run(t, sb, "ps -o stat,args | grep -v '^Z' | grep -c '"+args+"$' || true")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("ps: %q", out)
	}
	return n
}

// An Exec whose output stream breaks returns an error, and the command it
// started is dead by then: nothing runs on unseen.
func TestExecStreamBreakKillsCommand(t *testing.T) {
	t.Parallel()
	sb, _ := faultyBox(t, "sleep 61", errors.New("test: stream broke"))
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 61", Timeout: time.Minute})
	if !errors.Is(err, container.ErrExecLost) {
		t.Errorf("Exec over a broken stream = %v; want ErrExecLost", err)
	}
	if n := running(t, sb, "sleep 61"); n != 0 {
		t.Errorf("the command still runs after Exec returned")
	}
}

// An exec still running ExitGrace after its stream ended is killed, and
// the Exec says it lost the command.
func TestExecLostAfterStreamEndKillsCommand(t *testing.T) {
	t.Parallel()
	sb, _ := faultyBox(t, "sleep 62", nil)
	start := time.Now()
	_, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 62", Timeout: time.Minute})
	if !errors.Is(err, container.ErrExecLost) {
		t.Errorf("Exec whose stream ended early = %v; want ErrExecLost", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Exec took %v", d)
	}
	if n := running(t, sb, "sleep 62"); n != 0 {
		t.Errorf("the command still runs after Exec returned")
	}
}

// A timeout that fires before the command's wrapper starts ends that
// command only: a concurrent Exec of the session goes on, and the sandbox
// is not restarted.
func TestExecTinyTimeoutEndsOnlyItsCommand(t *testing.T) {
	t.Parallel()
	sb, f := faultyBox(t, "", nil)
	ctx := context.Background()
	type out struct {
		res sandbox.ExecResult
		err error
	}
	other := make(chan out, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 4; echo alive", Timeout: time.Minute})
		other <- out{res, err}
	}()
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 3; i++ {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "sleep 63", Timeout: time.Nanosecond})
		if err != nil || !res.TimedOut {
			t.Errorf("Exec with a 1ns timeout = %+v, %v; want TimedOut", res, err)
		}
	}
	o := <-other
	if o.err != nil || o.res.ExitCode != 0 || o.res.Stdout != "alive\n" {
		t.Errorf("concurrent Exec = %+v, %v; want it to finish", o.res, o.err)
	}
	if n := running(t, sb, "sleep 63"); n != 0 {
		t.Errorf("a timed-out command still runs")
	}
	if k := f.kills.Load(); k != 0 {
		t.Errorf("the sandbox was killed %d times; want none", k)
	}
}

// Two Execs whose killers fail together restart the sandbox once, not
// twice interleaved.
func TestRestartsSerialized(t *testing.T) {
	t.Parallel()
	sb, f := faultyBox(t, "", nil)
	since := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sb.restart(context.Background(), since)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if k := f.kills.Load(); k != 1 {
		t.Errorf("three backstops at once killed the sandbox %d times; want 1", k)
	}
	if got := run(t, sb, "echo ok"); got != "ok\n" {
		t.Errorf("after the restart: %q", got)
	}
}

func run(t *testing.T, sb sandbox.Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Command: cmd, Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v, %v", cmd, res, err)
	}
	return res.Stdout
}
