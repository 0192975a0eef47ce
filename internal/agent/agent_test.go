package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair is a host Conn and the far end of its channel: what the agent side
// reads (in) and writes (out).
type pair struct {
	conn    *Conn
	in      io.ReadCloser  // the host's frames
	out     io.WriteCloser // the agent's frames
	dropped chan error     // causes drop saw
}

// closers closes several things as one.
type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// open starts a Conn whose far end is driven by peer (nil: the real Serve).
// dropErr is what the drop hook answers.
func open(t *testing.T, peer func(in io.Reader, out io.Writer), dropErr error) *pair {
	t.Helper()
	hostR, agentW := io.Pipe() // agent -> host
	agentR, hostW := io.Pipe() // host -> agent
	p := &pair{in: agentR, out: agentW, dropped: make(chan error, 1)}
	if peer == nil {
		peer = func(in io.Reader, out io.Writer) {
			Serve(context.Background(), in, out, []string{"PATH=/usr/bin:/bin", "A=base"})
		}
	}
	go func() {
		peer(agentR, agentW)
		agentW.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, hostR, hostW, closers{hostR, hostW, agentR, agentW}, func(cause error) error {
		p.dropped <- cause
		return dropErr
	})
	if err != nil {
		t.Fatal(err)
	}
	p.conn = c
	t.Cleanup(func() { c.Close() })
	return p
}

// hello is a peer's valid first frame.
func hello(out io.Writer) { writeFrame(out, TypeHello, 0, []byte(`{"version":1,"pid":7}`)) }

// readRun reads the host's next frame, which must be a run.
func readRun(t *testing.T, in io.Reader) frame {
	f, err := readFrame(in, agentBound)
	if err != nil || f.typ != TypeRun {
		t.Errorf("host frame = %q, %v; want a run", f.typ, err)
	}
	return f
}

func wait(t *testing.T, k *Call) (int, error) {
	t.Helper()
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("call did not end")
	}
	return k.Result()
}

func TestServeRuns(t *testing.T) {
	p := open(t, nil, nil)
	if h := p.conn.Hello(); h.Version != Version || h.PID != os.Getpid() {
		t.Errorf("Hello() = %+v; want version %d, pid %d", h, Version, os.Getpid())
	}
	for _, tc := range []struct {
		name           string
		req            Request
		code           int
		stdout, stderr string
	}{
		{"exit", Request{Argv: []string{"/bin/sh", "-c", "exit 3"}}, 3, "", ""},
		{"streams", Request{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2"}}, 0, "out\n", "err\n"},
		{"env", Request{Argv: []string{"/bin/sh", "-c", `echo "$A $B"`}, Env: []string{"A=over", "B=new"}}, 0, "over new\n", ""},
		{"dir", Request{Argv: []string{"/bin/sh", "-c", "pwd"}, Dir: "/"}, 0, "/\n", ""},
		{"signal", Request{Argv: []string{"/bin/sh", "-c", "kill -9 $$"}}, 137, "", ""},
		{"stdin empty", Request{Argv: []string{"/bin/sh", "-c", "cat; echo done"}}, 0, "done\n", ""},
		{"stdin", Request{Argv: []string{"/bin/sh", "-c", "cat; echo done"}, Stdin: []byte("in\n")}, 0, "in\ndone\n", ""},
		{"stdin unread", Request{Argv: []string{"/bin/sh", "-c", "echo done"}, Stdin: bytes.Repeat([]byte("x"), 1<<20)}, 0, "done\n", ""},
		{"big", Request{Argv: []string{"/bin/sh", "-c", "head -c 300000 /dev/zero"}}, 0, strings.Repeat("\x00", 300000), ""},
		{"background holds stdout", Request{Argv: []string{"/bin/sh", "-c", "(sleep 0.3; echo late) & echo early"}}, 0, "early\nlate\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			k, err := p.conn.Run(tc.req, &out, &errb)
			if err != nil {
				t.Fatal(err)
			}
			code, err := wait(t, k)
			if err != nil || code != tc.code || out.String() != tc.stdout || errb.String() != tc.stderr {
				t.Errorf("Run = %d, %v, %q, %q; want %d, nil, %q, %q", code, err, trim(out.String()), errb.String(), tc.code, trim(tc.stdout), tc.stderr)
			}
			if !p.conn.Started(k) {
				t.Error("Started() = false after the command ran")
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestServeStartFails(t *testing.T) {
	p := open(t, nil, nil)
	k, err := p.conn.Run(Request{Argv: []string{"/nonexistent/program"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, k); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Result() = %v; want ErrNotStarted", err)
	}
}

func TestServeCancelKillsGroup(t *testing.T) {
	p := open(t, nil, nil)
	var out lockedBuffer
	k, err := p.conn.Run(Request{Argv: []string{"/bin/sh", "-c", "echo up; sleep 30 & sleep 30"}}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !bytes.Contains(out.Bytes(), []byte("up")); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
	}
	start := time.Now()
	p.conn.Cancel(k)
	code, err := wait(t, k)
	if err != nil || code != 137 || time.Since(start) > 10*time.Second {
		t.Errorf("after Cancel: %d, %v; want 137, nil (the group killed, the background sleep with it)", code, err)
	}
}

// TestServeEndsWithStdin: when the host's end closes, the agent kills what
// it runs and returns.
func TestServeEndsWithStdin(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan error, 1)
	var out lockedBuffer
	go func() { done <- Serve(context.Background(), r, &out, nil) }()
	writeFrame(w, TypeRun, 1, []byte(`{"argv":["/bin/sh","-c","sleep 30"]}`))
	for deadline := time.Now().Add(10 * time.Second); !bytes.Contains(out.Bytes(), []byte{TypeStarted, 0, 0, 0, 1}); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
	}
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve() = %v; want nil at the end of stdin", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after stdin ended")
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// TestServeRefuses: a frame the agent does not accept ends it.
func TestServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"unknown type", frameBytes('Z', 1, nil)},
		{"oversize run", func() []byte {
			b := frameBytes(TypeRun, 1, nil)
			binary.BigEndian.PutUint32(b[5:9], MaxRequest+1)
			return b
		}()},
		{"bad json", frameBytes(TypeRun, 1, []byte("{"))},
		{"id zero", frameBytes(TypeRun, 0, []byte(`{"argv":["/bin/true"]}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Serve(context.Background(), bytes.NewReader(tc.frame), io.Discard, nil)
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("Serve() = %v; want ErrProtocol", err)
			}
		})
	}
}

// TestOpenRefuses: a channel whose first frame is not a good hello is
// refused and closed.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		peer []byte
		want error
	}{
		{"nothing", nil, ErrGone},
		{"not hello", frameBytes(TypeStarted, 1, nil), ErrProtocol},
		{"newer version", frameBytes(TypeHello, 0, []byte(`{"version":3}`)), ErrProtocol},
		{"version 0", frameBytes(TypeHello, 0, []byte(`{"version":0}`)), ErrProtocol},
		{"bad json", frameBytes(TypeHello, 0, []byte(`{`)), ErrProtocol},
		{"oversize hello", frameBytes(TypeHello, 0, bytes.Repeat([]byte(" "), MaxHello+1)), ErrProtocol},
		{"cut header", []byte{TypeHello, 0}, ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := false
			_, err := Open(context.Background(), bytes.NewReader(tc.peer), io.Discard, closerFunc(func() { closed = true }), nil)
			if !errors.Is(err, tc.want) || !closed {
				t.Errorf("Open() = %v, closed %v; want %v, closed", err, closed, tc.want)
			}
		})
	}
	t.Run("late", func(t *testing.T) {
		r, w := io.Pipe()
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := Open(ctx, r, io.Discard, r, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Open() = %v; want the deadline", err)
		}
	})
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// TestHostileAgent: each frame a peer may not send drops the channel, and
// the call in flight ends as the protocol says: lost once started,
// not started otherwise (when drop made sure the agent is dead).
func TestHostileAgent(t *testing.T) {
	id := func(f frame) uint32 { return f.id }
	exit := func(code uint32) []byte { var b [4]byte; binary.BigEndian.PutUint32(b[:], code); return b[:] }
	for _, tc := range []struct {
		name string
		// reply is what the peer sends after reading the run frame.
		reply   func(f frame) []byte
		dropErr error
		want    error
	}{
		{"unknown type", func(f frame) []byte { return frameBytes('Z', id(f), nil) }, nil, ErrNotStarted},
		{"unknown id", func(f frame) []byte { return frameBytes(TypeStarted, id(f)+1, nil) }, nil, ErrNotStarted},
		{"second hello", func(f frame) []byte { return frameBytes(TypeHello, 0, []byte(`{"version":1}`)) }, nil, ErrNotStarted},
		{"output before start", func(f frame) []byte { return frameBytes(TypeStdout, id(f), []byte("x")) }, nil, ErrNotStarted},
		{"exit before start", func(f frame) []byte { return frameBytes(TypeExit, id(f), exit(0)) }, nil, ErrNotStarted},
		{"oversize chunk", func(f frame) []byte {
			b := append(frameBytes(TypeStarted, id(f), nil), frameBytes(TypeStdout, id(f), nil)...)
			binary.BigEndian.PutUint32(b[headerBytes+5:], MaxChunk+1)
			return b
		}, nil, ErrLost},
		{"empty chunk", func(f frame) []byte {
			return append(frameBytes(TypeStarted, id(f), nil), frameBytes(TypeStdout, id(f), nil)...)
		}, nil, ErrLost},
		{"second start", func(f frame) []byte {
			return append(frameBytes(TypeStarted, id(f), nil), frameBytes(TypeStarted, id(f), nil)...)
		}, nil, ErrLost},
		{"short exit", func(f frame) []byte {
			return append(frameBytes(TypeStarted, id(f), nil), frameBytes(TypeExit, id(f), []byte{0})...)
		}, nil, ErrLost},
		{"no-start after output", func(f frame) []byte {
			b := append(frameBytes(TypeStarted, id(f), nil), frameBytes(TypeStderr, id(f), []byte("x"))...)
			return append(b, frameBytes(TypeNoStart, id(f), nil)...)
		}, nil, ErrLost},
		{"cut frame", func(f frame) []byte { return frameBytes(TypeStarted, id(f), nil)[:5] }, nil, ErrNotStarted},
		{"dies before start", func(f frame) []byte { return nil }, nil, ErrNotStarted},
		{"dies after start", func(f frame) []byte { return frameBytes(TypeStarted, id(f), nil) }, nil, ErrLost},
		{"dies, drop fails", func(f frame) []byte { return nil }, errors.New("kill failed"), ErrLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := open(t, func(in io.Reader, out io.Writer) {
				hello(out)
				f := readRun(t, in)
				out.Write(tc.reply(f))
				// Then the agent is gone (its stream ends), unless the
				// host dropped it first.
			}, tc.dropErr)
			k, err := p.conn.Run(Request{Argv: []string{"x"}}, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wait(t, k); !errors.Is(err, tc.want) {
				t.Errorf("Result() = %v; want %v", err, tc.want)
			}
			select {
			case <-p.dropped:
			case <-time.After(10 * time.Second):
				t.Fatal("drop did not run")
			}
			if p.conn.Err() == nil {
				t.Error("Err() = nil after the channel broke")
			}
			if _, err := p.conn.Run(Request{Argv: []string{"x"}}, nil, nil); !errors.Is(err, ErrNotStarted) {
				t.Errorf("Run after the drop = %v; want ErrNotStarted", err)
			}
		})
	}
}

// TestHostBoundsReads: the host never takes a frame over its bound into
// memory: an agent declaring 4 GiB is refused after the header.
func TestHostBoundsReads(t *testing.T) {
	b := frameBytes(TypeStdout, 1, nil)
	binary.BigEndian.PutUint32(b[5:9], 1<<32-1)
	_, err := readFrame(io.MultiReader(bytes.NewReader(b), neverEnding{}), hostBound)
	if !errors.Is(err, ErrProtocol) {
		t.Errorf("readFrame() = %v; want ErrProtocol", err)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { return len(p), nil }

// TestAgentThatDoesNotRead: a peer that never reads its stdin is dropped
// once the queue is full, and Run never blocks on it.
func TestAgentThatDoesNotRead(t *testing.T) {
	block := make(chan struct{})
	p := open(t, func(in io.Reader, out io.Writer) { hello(out); <-block }, nil)
	defer close(block)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10*queueFrames && p.conn.Err() == nil; i++ {
			p.conn.Run(Request{Argv: []string{strings.Repeat("x", 1<<16)}}, nil, nil)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run blocked on an agent that does not read")
	}
	if !errors.Is(p.conn.Err(), ErrGone) {
		t.Errorf("Err() = %v; want ErrGone", p.conn.Err())
	}
}

// TestRunTooLarge: a request over MaxRequest is refused before sending.
func TestRunTooLarge(t *testing.T) {
	p := open(t, nil, nil)
	if _, err := p.conn.Run(Request{Argv: []string{strings.Repeat("x", MaxRequest)}}, nil, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Run() = %v; want ErrTooLarge", err)
	}
	if p.conn.Err() != nil {
		t.Errorf("Err() = %v; the channel should still run", p.conn.Err())
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4", "A="})
	if want := "A= B=3 C=4"; strings.Join(got, " ") != want {
		t.Errorf("mergeEnv = %q; want %q", got, want)
	}
}

// TestFloodAllocatesLittle: a command's output flood through the channel
// is copied into the caller's writers without a fresh buffer per frame.
func TestFloodAllocatesLittle(t *testing.T) {
	const total = 256 << 20
	chunk := frameBytes(TypeStdout, 1, bytes.Repeat([]byte("y"), MaxChunk))
	p := open(t, func(in io.Reader, out io.Writer) {
		hello(out)
		f := readRun(t, in)
		out.Write(frameBytes(TypeStarted, f.id, nil))
		for n := 0; n < total; n += MaxChunk {
			out.Write(chunk)
		}
		out.Write(frameBytes(TypeExit, f.id, []byte{0, 0, 0, 0}))
	}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	k, err := p.conn.Run(Request{Argv: []string{"flood"}}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, k); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("a %d MiB flood allocated %d MiB on the host; want < 32 MiB", total>>20, grew>>20)
	}
}
