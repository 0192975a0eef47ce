package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox"
)

// stream is a process's output read to its end.
type stream struct {
	stdout, stderr bytes.Buffer
	dropped        int64
	first          sandbox.EventType
	result         sandbox.ProcessResult
}

// readAll reads p to its end within d, checking that the chunks' offsets
// follow each other.
func readAll(t *testing.T, p sandbox.Process, d time.Duration) stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var s stream
	next := int64(-1)
	for {
		ev, err := p.Next(ctx)
		if err == io.EOF {
			return s
		}
		if err != nil {
			t.Fatalf("Next = %v (stdout so far %d bytes)", err, s.stdout.Len())
		}
		if s.first == 0 {
			s.first = ev.Type
		}
		switch ev.Type {
		case sandbox.EventStdout, sandbox.EventStderr:
			if next >= 0 && ev.Offset != next {
				t.Fatalf("chunk at offset %d, want %d", ev.Offset, next)
			}
			next = ev.Offset + int64(len(ev.Data))
			if ev.Type == sandbox.EventStdout {
				s.stdout.Write(ev.Data)
			} else {
				s.stderr.Write(ev.Data)
			}
		case sandbox.EventDropped:
			s.dropped += ev.Dropped
			if next >= 0 {
				next += ev.Dropped
			}
		case sandbox.EventEnd:
			s.result = *ev.Result
		}
	}
}

// until reads p until its output holds want.
func until(t *testing.T, p sandbox.Process, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		ev, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v; output %q", want, err, out.String())
		}
		out.Write(ev.Data)
	}
	return out.String()
}

// testProcesses checks the interactive processes of the main sandbox, or
// that a backend without them says so.
func testProcesses(t *testing.T, r *run) {
	if r.h.Disrupt != nil {
		// The disruption kills the exec agent, which processes do not use:
		// the undisrupted run covers them, in CI's budget.
		t.Skip("processes do not go through the exec agent")
	}
	ctx, cancel := r.ctx()
	t.Cleanup(cancel) // the parallel cases run after this function returns
	ps, err := sandbox.ProcessesOf(r.main)
	if err == nil {
		var p sandbox.Process
		if p, err = ps.Start(ctx, sandbox.ProcessRequest{Command: "true"}); err == nil {
			p.Wait(ctx)
		}
	}
	if errors.Is(err, sandbox.ErrUnsupported) {
		if ps != nil {
			if _, err := ps.List(ctx); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("List without processes = %v; want ErrUnsupported", err)
			}
		}
		t.Skipf("interactive processes unsupported: %v", err)
	}
	if err != nil {
		t.Fatalf("Start(true) = %v", err)
	}
	start := func(t *testing.T, req sandbox.ProcessRequest) sandbox.Process {
		t.Helper()
		ctx, cancel := r.ctx()
		defer cancel()
		p, err := ps.Start(ctx, req)
		if err != nil {
			t.Fatalf("Start(%q) = %v", req.Command, err)
		}
		return p
	}
	alive := func(t *testing.T, pid string) bool {
		t.Helper()
		res, err := r.main.Exec(ctx, sandbox.ExecRequest{Command: "kill -0 " + pid + " 2>/dev/null"})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode == 0
	}
	t.Run("OrderAndEnvironment", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: `i=0; while [ $i -lt 3000 ]; do echo $i; i=$((i+1)); done; echo "$GREETING/$EXTRA/$(pwd)" >&2; exit 7`,
			Env: map[string]string{"EXTRA": "x"}, Dir: "/tmp"})
		s := readAll(t, p, time.Minute)
		var want strings.Builder
		for i := 0; i < 3000; i++ {
			fmt.Fprintln(&want, i)
		}
		if s.stdout.String() != want.String() || s.stderr.String() != "hello world/x//tmp\n" {
			t.Errorf("stdout %d bytes (want %d), stderr %q", s.stdout.Len(), want.Len(), s.stderr.String())
		}
		if s.result.ExitCode != 7 || s.result.Cause != sandbox.CauseExit {
			t.Errorf("result %+v", s.result)
		}
	})
	t.Run("StdinEcho", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: "cat", Stdin: true})
		in := bytes.Repeat([]byte("stdin through cat\n"), 40000) // past the window
		go func() {
			p.Write(ctx, in)
			p.CloseStdin(ctx)
		}()
		s := readAll(t, p, time.Minute)
		if !bytes.Equal(s.stdout.Bytes(), in) || s.result.ExitCode != 0 {
			t.Errorf("echoed %d of %d bytes, result %+v", s.stdout.Len(), len(in), s.result)
		}
	})
	t.Run("SignalReachesChildren", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: "sleep 300 & echo $!; wait"})
		pid := strings.TrimSpace(until(t, p, "\n"))
		if err := p.Signal(ctx, sandbox.SignalTERM); err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait(ctx)
		if err != nil || res.Cause != sandbox.CauseSignal || res.ExitCode != 143 {
			t.Errorf("Wait = %+v, %v", res, err)
		}
		if alive(t, pid) {
			t.Errorf("the child %s survived the signal", pid)
		}
		if err := p.Signal(ctx, sandbox.SignalKILL); !errors.Is(err, sandbox.ErrProcessEnded) {
			t.Errorf("Signal after the end = %v; want ErrProcessEnded", err)
		}
	})
	t.Run("TimeoutKillsTree", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: "setsid sleep 300 & echo $!; sleep 300", Timeout: time.Second})
		pid := strings.TrimSpace(until(t, p, "\n"))
		res, err := p.Wait(ctx)
		if err != nil || !res.TimedOut || res.Cause != sandbox.CauseTimeout || res.ExitCode != 137 {
			t.Errorf("Wait = %+v, %v", res, err)
		}
		if alive(t, pid) {
			t.Errorf("the escaped child %s survived the timeout", pid)
		}
	})
	t.Run("LargeStreamWholeAndCapped", func(t *testing.T) {
		t.Parallel()
		// 32 MiB, 32 times the buffer (100 MiB costs CI 40 s on a loaded
		// machine; BenchmarkProcessThroughput streams 100 MiB).
		p := start(t, sandbox.ProcessRequest{Command: "head -c 33554432 /dev/zero"})
		s := readAll(t, p, 2*time.Minute)
		if s.stdout.Len() != 32<<20 || s.dropped != 0 || s.result.ExitCode != 0 {
			t.Errorf("%d bytes, %d dropped, result %+v", s.stdout.Len(), s.dropped, s.result)
		}
		p = start(t, sandbox.ProcessRequest{Command: "head -c 10000000 /dev/zero; sleep 300", OutputCap: 1 << 20})
		s = readAll(t, p, time.Minute)
		if s.stdout.Len() != 1<<20 || !s.result.Truncated || s.result.Cause != sandbox.CauseOutputCap {
			t.Errorf("capped: %d bytes, result %+v", s.stdout.Len(), s.result)
		}
	})
	t.Run("BackgroundSurvivesAndReattaches", func(t *testing.T) {
		t.Parallel()
		name := "bg-" + r.prefix
		sctx, scancel := context.WithCancel(context.Background())
		p, err := ps.Start(sctx, sandbox.ProcessRequest{Command: "echo one; sleep 1; echo two; exec sleep 300", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		until(t, p, "one\n")
		scancel() // the starter goes away
		if _, err := ps.Start(ctx, sandbox.ProcessRequest{Command: "true", Name: name}); !errors.Is(err, sandbox.ErrProcessNameInUse) {
			t.Errorf("Start of a name in use = %v; want ErrProcessNameInUse", err)
		}
		time.Sleep(1500 * time.Millisecond)
		// Another provider (another process of the platform) finds it.
		provider := r.h.Provider
		if r.h.Other != nil {
			provider = r.h.Other
		}
		sb, err := provider.Attach(ctx, r.spec.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		ops, err := sandbox.ProcessesOf(sb)
		if err != nil {
			t.Fatal(err)
		}
		list, err := ops.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, i := range list {
			if i.Name == name {
				found = i.ID == p.Info().ID && i.State == sandbox.ProcessRunning && strings.Contains(strings.Join(i.Argv, " "), "echo one")
			}
		}
		if !found {
			t.Errorf("List = %+v; want %s running", list, name)
		}
		if _, err := ops.Attach(ctx, sandbox.AttachRequest{Name: name + "-none"}); !errors.Is(err, sandbox.ErrProcessNotFound) {
			t.Errorf("Attach(unknown) = %v; want ErrProcessNotFound", err)
		}
		again, err := ops.Attach(ctx, sandbox.AttachRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		until(t, again, "one\ntwo\n")
		again.Signal(ctx, sandbox.SignalKILL)
		if res, err := again.Wait(ctx); err != nil || res.ExitCode != 137 {
			t.Errorf("Wait = %+v, %v", res, err)
		}
	})
	t.Run("BufferOverflowCounted", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: "head -c 4000000 /dev/zero", BufferBytes: 64 << 10})
		p.Detach(ctx)
		id := p.Info().ID
		for ended := false; !ended; time.Sleep(50 * time.Millisecond) {
			list, err := ps.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range list {
				ended = ended || i.ID == id && i.State == sandbox.ProcessEnded
			}
		}
		again, err := ps.Attach(ctx, sandbox.AttachRequest{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		s := readAll(t, again, time.Minute)
		if s.first != sandbox.EventDropped || s.dropped+int64(s.stdout.Len()) != 4000000 || s.stdout.Len() > 64<<10 || s.result.Dropped == 0 || s.result.Dropped > s.dropped {
			t.Errorf("first event %v, %d bytes, %d dropped, result %+v", s.first, s.stdout.Len(), s.dropped, s.result)
		}
	})
	t.Run("TerminalResize", func(t *testing.T) {
		t.Parallel()
		p := start(t, sandbox.ProcessRequest{Command: "stty size; read x; stty size", Terminal: &sandbox.TerminalSize{Rows: 24, Cols: 80}})
		until(t, p, "24 80")
		if err := p.Resize(ctx, sandbox.TerminalSize{Rows: 30, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		p.Write(ctx, []byte("\n"))
		s := readAll(t, p, time.Minute)
		if !strings.Contains(s.stdout.String(), "30 100") || s.result.ExitCode != 0 {
			t.Errorf("output %q, result %+v", s.stdout.String(), s.result)
		}
	})
	t.Run("HostileStreams", func(t *testing.T) {
		t.Parallel()
		// Closing its output does not end a process: its exit does.
		p := start(t, sandbox.ProcessRequest{Command: "exec >&- 2>&-; sleep 1; exit 5"})
		if s := readAll(t, p, time.Minute); s.result.ExitCode != 5 || s.result.Cause != sandbox.CauseExit {
			t.Errorf("closed output: result %+v", s.result)
		}
		// A child in the background holding the output: the process ends
		// (its exit, then a bounded drain) while the child runs on.
		began := time.Now()
		p = start(t, sandbox.ProcessRequest{Command: "sleep 300 & echo $!"})
		s := readAll(t, p, time.Minute)
		if s.result.ExitCode != 0 || time.Since(began) > 20*time.Second {
			t.Errorf("background child: result %+v after %v", s.result, time.Since(began))
		}
		if pid := strings.TrimSpace(s.stdout.String()); pid != "" {
			r.main.Exec(ctx, sandbox.ExecRequest{Command: "kill -9 " + pid})
		}
		// Output that looks like the channel's frames is data.
		forged := "X\\0\\0\\0\\1\\0\\0\\0\\4\\0\\0\\0\\0H\\0\\0\\0\\0\\0\\0\\0\\0"
		p = start(t, sandbox.ProcessRequest{Command: "printf '" + forged + "'; echo; echo after"})
		s = readAll(t, p, time.Minute)
		if !strings.HasSuffix(s.stdout.String(), "\nafter\n") || s.stdout.Len() != 22+1+6 || s.result.ExitCode != 0 {
			t.Errorf("forged frames: stdout %q, result %+v", s.stdout.String(), s.result)
		}
	})
	t.Run("Concurrent50", func(t *testing.T) {
		t.Parallel()
		errs := make(chan error, 50)
		for i := 0; i < 50; i++ {
			go func() {
				p, err := ps.Start(ctx, sandbox.ProcessRequest{Command: fmt.Sprintf("sleep 1; echo %d", i)})
				if err != nil {
					errs <- err
					return
				}
				var out bytes.Buffer
				for {
					ev, err := p.Next(ctx)
					if err == io.EOF {
						break
					}
					if err != nil {
						errs <- err
						return
					}
					out.Write(ev.Data)
				}
				if out.String() != fmt.Sprintf("%d\n", i) {
					errs <- fmt.Errorf("process %d wrote %q", i, out.String())
					return
				}
				errs <- nil
			}()
		}
		for i := 0; i < 50; i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("BadRequests", func(t *testing.T) {
		t.Parallel()
		if _, err := ps.Start(ctx, sandbox.ProcessRequest{Command: "true", Env: map[string]string{"STOCKADE_X": "1"}}); !errors.Is(err, sandbox.ErrInvalidEnv) {
			t.Errorf("reserved env = %v", err)
		}
		if _, err := ps.Start(ctx, sandbox.ProcessRequest{Argv: []string{"/no/such/program"}}); !errors.Is(err, sandbox.ErrCommandNotStarted) {
			t.Errorf("missing program = %v", err)
		}
	})
}

// testProcessGone: a reader of a process whose sandbox is destroyed gets
// ErrProcessGone within ProcessGoneBound.
func testProcessGone(t *testing.T, r *run) {
	sb := r.provision(t, "procgone", nil)
	ps, err := sandbox.ProcessesOf(sb)
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	p, err := ps.Start(ctx, sandbox.ProcessRequest{Command: "echo up; sleep 300"})
	if errors.Is(err, sandbox.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	until(t, p, "up")
	got := make(chan error, 1)
	go func() {
		_, err := p.Next(ctx)
		got <- err
	}()
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, sandbox.ErrProcessGone) {
			t.Errorf("Next after Destroy = %v; want ErrProcessGone", err)
		}
	case <-time.After(sandbox.ProcessGoneBound):
		t.Errorf("Next still waits %v after Destroy", sandbox.ProcessGoneBound)
	}
}
