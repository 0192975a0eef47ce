package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Errors of the host's end.
var (
	// ErrNotStarted reports a command the agent never started and never
	// will: the caller may run it another way.
	ErrNotStarted = errors.New("agent: command not started")
	// ErrLost reports a command the agent may have started whose end it
	// never reported: the caller must end it itself.
	ErrLost = errors.New("agent: command lost")
	// ErrGone reports a channel that ended or was dropped.
	ErrGone = errors.New("agent: channel gone")
	// ErrTooLarge reports a request over MaxRequest, never sent.
	ErrTooLarge = errors.New("agent: request too large")
)

// Bounds of the frames waiting to be written to the agent: an agent that
// lets more pile up is dropped.
const (
	queueFrames = 64
	queueBytes  = 2 * MaxRequest // bytes
)

// Conn is the host's end of an agent's channel. Its methods are safe for
// concurrent use.
type Conn struct {
	w      io.Writer
	closer io.Closer
	drop   func(cause error) error
	queue  chan []byte
	queued atomic.Int64 // bytes in queue
	hello  Hello

	mu    sync.Mutex
	calls map[uint32]*Call
	next  uint32
	err   error         // why the channel ended; nil while it runs
	dead  chan struct{} // closed when err is set
	ended chan struct{} // closed when every call is resolved after dead
}

// Open reads the agent's hello from r within ctx and returns the channel:
// r gives the agent's frames (its stdout), w takes the host's (its stdin),
// closer ends both. drop runs once when the channel ends for any reason
// after Open (nil: nothing to run) and must make sure the agent is dead;
// it returning nil is what lets commands that never got 'S' end in
// ErrNotStarted rather than ErrLost. A hello that is late, malformed or of
// a version outside MinVersion to Version closes the channel and is an
// error.
func Open(ctx context.Context, r io.Reader, w io.Writer, closer io.Closer, drop func(cause error) error) (*Conn, error) {
	hello, err := readHello(ctx, r, closer, hostBound, MinVersion, Version)
	if err != nil {
		return nil, err
	}
	if drop == nil {
		drop = func(error) error { return nil }
	}
	c := &Conn{w: w, closer: closer, drop: drop, queue: make(chan []byte, queueFrames), hello: hello,
		calls: map[uint32]*Call{}, dead: make(chan struct{}), ended: make(chan struct{})}
	go c.readLoop(r)
	go c.writeLoop()
	return c, nil
}

// Hello returns what the agent said in its hello.
func (c *Conn) Hello() Hello { return c.hello }

// Done is closed when the channel has ended.
func (c *Conn) Done() <-chan struct{} { return c.dead }

// Err returns why the channel ended, nil while it runs.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close drops the channel (running drop) and waits until every command
// waited for has ended.
func (c *Conn) Close() error {
	c.Fail(fmt.Errorf("%w: closed by the host", ErrGone))
	<-c.ended
	return nil
}

// Fail drops the channel for cause, as a protocol error would: the host
// decided the agent cannot be trusted with more (it hangs, say). It
// returns at once; drop runs in the background.
func (c *Conn) Fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	close(c.dead)
	c.mu.Unlock()
	c.closer.Close()
	go c.resolve(cause)
}

// resolve runs drop and ends every call still waited for.
func (c *Conn) resolve(cause error) {
	dropErr := c.drop(cause)
	c.mu.Lock()
	calls := c.calls
	c.calls = map[uint32]*Call{}
	c.mu.Unlock()
	for _, k := range calls {
		switch {
		case k.started || dropErr != nil:
			k.end(-1, fmt.Errorf("%w: %v", ErrLost, errors.Join(cause, dropErr)))
		default:
			k.end(-1, fmt.Errorf("%w: %v", ErrNotStarted, cause))
		}
	}
	close(c.ended)
}

// Call is one command sent to the agent.
type Call struct {
	id             uint32
	stdout, stderr io.Writer
	started        bool          // under Conn.mu
	output         bool          // under Conn.mu: 'O' or 'E' seen
	acked          chan struct{} // closed at 'S'
	done           chan struct{}
	code           int
	err            error
}

// Done is closed when the call has ended.
func (k *Call) Done() <-chan struct{} { return k.done }

// Acked is closed when the agent said it was starting the command.
func (k *Call) Acked() <-chan struct{} { return k.acked }

// Result returns the exit status once Done is closed: err nil means the
// command exited with code; else err wraps ErrNotStarted or ErrLost.
func (k *Call) Result() (code int, err error) {
	<-k.done
	return k.code, k.err
}

func (k *Call) end(code int, err error) {
	k.code, k.err = code, err
	close(k.done)
}

// Started reports whether the agent said it was starting the command.
func (c *Conn) Started(k *Call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return k.started
}

// Run sends req and returns its call; its output goes to stdout and
// stderr (from the channel's reader goroutine: they must not block for
// long). A channel that has ended is ErrNotStarted; a request over
// MaxRequest is ErrTooLarge (both sent nothing).
func (c *Conn) Run(req Request, stdout, stderr io.Writer) (*Call, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("agent: encode request: %w", err)
	}
	return c.send(TypeRun, b, MaxRequest, stdout, stderr)
}

// Write sends a write of files (data[i] the bytes of req.Files[i]), which
// the agent does in its own process as WriteFiles: its exit code is the
// call's, its fault lines go to stderr. An agent older than FileVersion,
// or a channel that has ended, is ErrNotStarted; a request over
// MaxRequest is ErrTooLarge (both sent nothing).
func (c *Conn) Write(req WriteRequest, data [][]byte, stderr io.Writer) (*Call, error) {
	if err := c.files(); err != nil {
		return nil, err
	}
	b, err := EncodeWrite(req, data)
	if err != nil {
		return nil, err
	}
	return c.send(TypeWrite, b, MaxRequest, nil, stderr)
}

// Read sends a read of one file, which the agent does in its own process
// as ReadFile: the size line and the bytes go to stdout, the exit code is
// the call's. The caller bounds what it keeps of stdout. Errors as Write's
// (MaxRead for the bound).
func (c *Conn) Read(req ReadRequest, stdout io.Writer) (*Call, error) {
	if err := c.files(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("agent: encode read: %w", err)
	}
	return c.send(TypeRead, b, MaxRead, stdout, nil)
}

// files refuses file operations to an agent of a version without them.
func (c *Conn) files() error {
	if c.hello.Version < FileVersion {
		return fmt.Errorf("%w: the agent speaks version %d, without file operations", ErrNotStarted, c.hello.Version)
	}
	return nil
}

// send sends one request frame of typ and returns its call.
func (c *Conn) send(typ byte, b []byte, bound int, stdout, stderr io.Writer) (*Call, error) {
	if len(b) > bound {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(b))
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", ErrNotStarted, err)
	}
	c.next++
	k := &Call{id: c.next, stdout: stdout, stderr: stderr, acked: make(chan struct{}), done: make(chan struct{})}
	c.calls[k.id] = k
	c.mu.Unlock()
	c.enqueue(frameBytes(typ, k.id, b))
	return k, nil
}

// Cancel asks the agent not to start k, or to kill it (an optimisation:
// the caller kills it through the engine).
func (c *Conn) Cancel(k *Call) { c.enqueue(frameBytes(TypeCancel, k.id, nil)) }

// enqueue hands a frame to the writer; an agent that lets queueFrames pile
// up is dropped.
func (c *Conn) enqueue(b []byte) {
	if c.queued.Add(int64(len(b))) > queueBytes {
		c.Fail(fmt.Errorf("%w: the agent does not read its requests", ErrGone))
		return
	}
	select {
	case <-c.dead:
	case c.queue <- b:
	default:
		c.Fail(fmt.Errorf("%w: the agent does not read its requests", ErrGone))
	}
}

func (c *Conn) writeLoop() {
	for {
		select {
		case <-c.dead:
			return
		case b := <-c.queue:
			_, err := c.w.Write(b)
			c.queued.Add(-int64(len(b)))
			if err != nil {
				c.Fail(fmt.Errorf("%w: write: %v", ErrGone, err))
				return
			}
		}
	}
}

func (c *Conn) readLoop(r io.Reader) {
	buf := make([]byte, MaxChunk)
	for {
		f, err := readFrameInto(r, hostBound, buf)
		if err == nil {
			err = c.dispatch(f)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the agent's stream ended", ErrGone)
			}
			c.Fail(err)
			return
		}
	}
}

// dispatch applies one frame from the agent, or reports how it breaks the
// protocol.
func (c *Conn) dispatch(f frame) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	k := c.calls[f.id]
	if f.typ == TypeHello || k == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q frame for id %d, which is not waited for", ErrProtocol, f.typ, f.id)
	}
	var bad string
	switch f.typ {
	case TypeStarted:
		if k.started {
			bad = "second start"
		} else {
			k.started = true
			close(k.acked)
		}
	case TypeStdout, TypeStderr:
		switch {
		case !k.started:
			bad = "output before start"
		case len(f.payload) == 0:
			bad = "empty output"
		}
		k.output = true
	case TypeExit:
		switch {
		case !k.started:
			bad = "exit before start"
		case len(f.payload) != 4:
			bad = "exit status not 4 bytes"
		}
	case TypeNoStart:
		if k.output {
			bad = "no-start after output"
		}
	}
	if bad == "" && (f.typ == TypeExit || f.typ == TypeNoStart) {
		delete(c.calls, f.id)
	}
	c.mu.Unlock()
	if bad != "" {
		return fmt.Errorf("%w: id %d: %s", ErrProtocol, f.id, bad)
	}
	switch f.typ {
	case TypeStdout:
		k.stdout.Write(f.payload)
	case TypeStderr:
		k.stderr.Write(f.payload)
	case TypeExit:
		k.end(int(int32(binary.BigEndian.Uint32(f.payload))), nil)
	case TypeNoStart:
		k.end(-1, fmt.Errorf("%w: %q", ErrNotStarted, f.payload))
	}
	return nil
}

// readHello reads the first frame from r within ctx: a hello (bound gives
// what the reader accepts) of a version from lo to hi. Anything else, or
// none in time, closes closer and is an error.
func readHello(ctx context.Context, r io.Reader, closer io.Closer, bound func(byte) int, lo, hi int) (Hello, error) {
	type result struct {
		h   Hello
		err error
	}
	got := make(chan result, 1)
	go func() {
		f, err := readFrame(r, bound)
		var h Hello
		switch {
		case err != nil:
		case f.typ != TypeHello || f.id != 0:
			err = fmt.Errorf("%w: first frame %q, want hello", ErrProtocol, f.typ)
		default:
			if err = json.Unmarshal(f.payload, &h); err != nil {
				err = fmt.Errorf("%w: hello: %v", ErrProtocol, err)
			} else if h.Version < lo || h.Version > hi {
				err = fmt.Errorf("%w: agent speaks version %d, want %d to %d", ErrProtocol, h.Version, lo, hi)
			}
		}
		got <- result{h, err}
	}()
	var res result
	select {
	case res = <-got:
	case <-ctx.Done():
		closer.Close()
		<-got
		return Hello{}, fmt.Errorf("agent: waiting for hello: %w", ctx.Err())
	}
	if res.err != nil {
		closer.Close()
		if errors.Is(res.err, io.EOF) {
			res.err = fmt.Errorf("%w: ended before its hello", ErrGone)
		}
		return Hello{}, fmt.Errorf("agent: %w", res.err)
	}
	return res.h, nil
}
