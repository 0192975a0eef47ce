package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procd starts a daemon on a socket of its own and returns a dialer of
// fresh channels to it.
func procd(t *testing.T) (dial func() *ProcConn) {
	t.Helper()
	name := fmt.Sprintf("stockade-procd-test-%d-%s", os.Getpid(), newID())
	ctx, cancel := context.WithCancel(context.Background())
	d := NewDaemon([]string{"PATH=/usr/bin:/bin", "A=base"})
	done := make(chan error, 1)
	go func() { done <- d.Listen(ctx, name) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() *ProcConn {
		t.Helper()
		var nc net.Conn
		var err error
		for i := 0; i < 200; i++ {
			if nc, err = net.Dial("unix", "@"+name); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		octx, ocancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ocancel()
		c, err := OpenProcs(octx, nc, nc, nc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// collected is a process's stream read to its end.
type collected struct {
	stdout, stderr bytes.Buffer
	dropped        int64
	end            *EndInfo
	order          []byte // the types of the events in order
	next           int64  // the offset of the next chunk; -1 before the first
}

func collect(t *testing.T, h *Proc, d time.Duration) collected {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c := collected{next: -1}
	for {
		ev, err := h.Next(ctx)
		if err == io.EOF {
			return c
		}
		if err != nil {
			t.Fatalf("next: %v (stdout %q)", err, c.stdout.String())
		}
		c.order = append(c.order, ev.Type)
		switch ev.Type {
		case TypeStdout, TypeStderr:
			if c.next >= 0 && ev.Offset != c.next {
				t.Fatalf("chunk at offset %d, want %d", ev.Offset, c.next)
			}
			c.next = ev.Offset + int64(len(ev.Data))
			if ev.Type == TypeStdout {
				c.stdout.Write(ev.Data)
			} else {
				c.stderr.Write(ev.Data)
			}
		case TypeDropped:
			c.dropped += ev.Dropped
			if c.next >= 0 {
				c.next += ev.Dropped
			}
		case TypeEnd:
			c.end = ev.End
		}
	}
}

func start(t *testing.T, c *ProcConn, req StartRequest) *Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// marked counts the processes carrying id's marker.
func marked(id string) int {
	want := []byte(markerEnv + "=" + id + "\x00")
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && bytes.Contains(env, want) {
			n++
		}
	}
	return n
}

func TestProcStream(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"sh", "-c", `i=0; while [ $i -lt 2000 ]; do echo $i; i=$((i+1)); done; echo "$A $B" >&2; exit 3`}, Env: []string{"B=added"}})
	got := collect(t, h, 20*time.Second)
	var want strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintln(&want, i)
	}
	if got.stdout.String() != want.String() {
		t.Errorf("stdout out of order or incomplete: %d bytes", got.stdout.Len())
	}
	if got.stderr.String() != "base added\n" {
		t.Errorf("stderr %q", got.stderr.String())
	}
	if got.end == nil || got.end.ExitCode != 3 || got.end.Cause != CauseExit || got.end.Output != int64(want.Len()+len("base added\n")) {
		t.Errorf("end %+v", got.end)
	}
}

func TestProcStdinEcho(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"cat"}, Stdin: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: past the window
	go func() {
		h.Write(ctx, []byte("hello\n"))
		h.Write(ctx, big)
		h.CloseStdin(ctx)
	}()
	got := collect(t, h, 10*time.Second)
	if !bytes.Equal(got.stdout.Bytes(), append([]byte("hello\n"), big...)) || got.end.ExitCode != 0 {
		t.Errorf("echo: %d bytes, end %+v", got.stdout.Len(), got.end)
	}
}

func TestProcSignalTree(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"sh", "-c", "sleep 60 & echo up; wait"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev, err := h.Next(ctx); err != nil || string(ev.Data) != "up\n" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if err := h.Signal(ctx, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := collect(t, h, 10*time.Second)
	if got.end.Cause != CauseSignal || got.end.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("end %+v", got.end)
	}
	if n := marked(h.Info().ID); n != 0 {
		t.Errorf("%d processes of the tree left", n)
	}
	if err := h.Signal(ctx, syscall.SIGTERM); !errors.Is(err, ErrEnded) {
		t.Errorf("signal after the end: %v", err)
	}
}

func TestProcTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	// The setsid child leaves the group: the marker finds it.
	h := start(t, c, StartRequest{Argv: []string{"sh", "-c", "setsid sleep 60 & sleep 60"}, TimeoutMillis: 300})
	got := collect(t, h, 10*time.Second)
	if got.end.Cause != CauseTimeout || got.end.ExitCode != 137 {
		t.Errorf("end %+v", got.end)
	}
	time.Sleep(100 * time.Millisecond)
	if n := marked(h.Info().ID); n != 0 {
		t.Errorf("%d processes of the tree left", n)
	}
}

func TestProcOutputCap(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"head", "-c", "10000000", "/dev/zero"}, OutputCap: 100000})
	got := collect(t, h, 10*time.Second)
	if got.stdout.Len() != 100000 || !got.end.Truncated || got.end.Cause != CauseOutputCap || got.end.Output != 100000 {
		t.Errorf("%d bytes, end %+v", got.stdout.Len(), got.end)
	}
}

// TestProcSlowReaderWhole: a reader slower than the process, but reading,
// gets the stream whole through a small buffer (the process waits).
func TestProcSlowReaderWhole(t *testing.T) {
	t.Parallel()
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"head", "-c", "8000000", "/dev/zero"}, BufferBytes: 64 << 10})
	got := collect(t, h, 30*time.Second)
	if got.stdout.Len() != 8000000 || got.dropped != 0 || got.end.Dropped != 0 {
		t.Errorf("%d bytes, %d dropped, end %+v", got.stdout.Len(), got.dropped, got.end)
	}
}

// TestProcBackgroundReattach: a process outlives the channel that started
// it, is listed on another, and an attach replays what was missed.
func TestProcBackgroundReattach(t *testing.T) {
	t.Parallel()
	dial := procd(t)
	c1 := dial()
	h := start(t, c1, StartRequest{Argv: []string{"sh", "-c", "echo one; sleep 0.3; echo two; exec sleep 60"}, Name: "srv"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev, err := h.Next(ctx); err != nil || string(ev.Data) != "one\n" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	c1.Close()
	if _, err := h.Next(ctx); !errors.Is(err, ErrGone) {
		t.Errorf("next after close: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	c2 := dial()
	ps, err := c2.List(ctx)
	if err != nil || len(ps) != 1 || ps[0].Name != "srv" || ps[0].State != StateRunning || ps[0].ID != h.Info().ID {
		t.Fatalf("list %+v, %v", ps, err)
	}
	if _, err := c2.Start(ctx, StartRequest{Argv: []string{"true"}, Name: "srv"}); !errors.Is(err, ErrRefused) {
		t.Errorf("second start of the name: %v", err)
	}
	if _, err := c2.Attach(ctx, AttachRequest{Name: "nope"}); !errors.Is(err, ErrNoProcess) {
		t.Errorf("attach of an unknown name: %v", err)
	}
	h2, err := c2.Attach(ctx, AttachRequest{Name: "srv", From: 4})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := h2.Next(ctx); err != nil || string(ev.Data) != "two\n" || ev.Offset != 4 {
		t.Fatalf("replayed %+v, %v", ev, err)
	}
	h2.Signal(ctx, syscall.SIGKILL)
	got := collect(t, h2, 10*time.Second)
	if got.end.Cause != CauseSignal || got.end.ExitCode != 137 {
		t.Errorf("end %+v", got.end)
	}
}

// TestProcBufferOverflow: a process nobody reads loses its oldest output,
// counted, and never blocks.
func TestProcBufferOverflow(t *testing.T) {
	t.Parallel()
	dial := procd(t)
	c := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := start(t, c, StartRequest{Argv: []string{"head", "-c", "4000000", "/dev/zero"}, BufferBytes: 64 << 10})
	h.Detach(ctx)
	for {
		ps, err := c.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ps[0].State == StateEnded {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	h2, err := c.Attach(ctx, AttachRequest{ID: h.Info().ID})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, h2, 10*time.Second)
	if got.dropped != 4000000-int64(got.stdout.Len()) || got.stdout.Len() > 64<<10 || got.stdout.Len() == 0 || got.order[0] != TypeDropped || got.end.Dropped == 0 || got.end.Dropped > got.dropped {
		t.Errorf("%d bytes, %d dropped, order %q, end %+v", got.stdout.Len(), got.dropped, got.order, got.end)
	}
}

func TestProcTerminal(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skip("no /dev/ptmx")
	}
	c := procd(t)()
	h := start(t, c, StartRequest{Argv: []string{"sh", "-c", "stty size; read x; stty size; echo err >&2"}, Terminal: &Terminal{Rows: 24, Cols: 80}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	for !strings.Contains(out.String(), "24 80") {
		ev, err := h.Next(ctx)
		if err != nil {
			t.Fatalf("%v; output %q", err, out.String())
		}
		out.Write(ev.Data)
	}
	if err := h.Resize(ctx, Terminal{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	h.Write(ctx, []byte("\n"))
	got := collect(t, h, 10*time.Second)
	if !strings.Contains(got.stdout.String(), "30 100") || !strings.Contains(got.stdout.String(), "err") || got.stderr.Len() != 0 || got.end.ExitCode != 0 {
		t.Errorf("output %q, stderr %q, end %+v", got.stdout.String(), got.stderr.String(), got.end)
	}
}

// TestProcReaderOnGoneChannel: a reader waiting on a daemon that went
// silent gets an error within the bound.
func TestProcReaderOnGoneChannel(t *testing.T) {
	t.Parallel()
	host, far := net.Pipe()
	go func() {
		writeFrame(far, TypeHello, 0, []byte(`{"version":3}`))
		f, _ := readFrame(far, procBound)
		writeFrame(far, TypeAttached, f.id, []byte(`{"id":"x"}`))
		io.Copy(io.Discard, far) // then silence
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := OpenProcs(ctx, host, host, host)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Start(ctx, StartRequest{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := h.Next(ctx); !errors.Is(err, ErrGone) {
		t.Errorf("next: %v", err)
	}
	if d := time.Since(start); d > 4*PingInterval+time.Second {
		t.Errorf("the reader waited %v", d)
	}
}
