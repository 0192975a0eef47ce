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
	"syscall"
	"time"
)

// Errors of the process channel's host end.
var (
	// ErrRefused reports a start or attach the daemon refused (its reason
	// follows); nothing was started or attached.
	ErrRefused = errors.New("agent: refused")
	// ErrNoProcess reports an attach to a process the daemon does not know.
	ErrNoProcess = errors.New("agent: no such process")
	// ErrEnded reports stdin, a signal or a resize for a process whose
	// stream has ended.
	ErrEnded = errors.New("agent: process stream ended")
)

// procQueue bounds the frames waiting to be written on a process channel.
const procQueue = 256

// ProcConn is the host's end of a process channel (see process.go). Its
// methods are safe for concurrent use.
type ProcConn struct {
	w        io.Writer
	closer   io.Closer
	queue    chan []byte
	lastRead atomic.Int64 // unix nanoseconds of the last frame read

	mu      sync.Mutex
	handles map[uint32]*Proc
	lists   map[uint32]chan []byte
	next    uint32
	err     error
	dead    chan struct{}
}

// OpenProcs reads the daemon's hello from r within ctx and returns the
// channel; w takes the host's frames, closer ends both. A hello that is
// late, malformed or not of ProcVersion closes the channel and is an
// error.
func OpenProcs(ctx context.Context, r io.Reader, w io.Writer, closer io.Closer) (*ProcConn, error) {
	if _, err := readHello(ctx, r, closer, procHostBound, ProcVersion, ProcVersion); err != nil {
		return nil, err
	}
	c := &ProcConn{w: w, closer: closer, queue: make(chan []byte, procQueue), handles: map[uint32]*Proc{},
		lists: map[uint32]chan []byte{}, dead: make(chan struct{})}
	c.lastRead.Store(time.Now().UnixNano())
	go c.readLoop(r)
	go c.writeLoop()
	go c.pingLoop()
	return c, nil
}

// Done is closed when the channel has ended.
func (c *ProcConn) Done() <-chan struct{} { return c.dead }

// Err is why the channel ended; nil while it runs.
func (c *ProcConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the channel; its processes run on in the daemon.
func (c *ProcConn) Close() error {
	c.fail(fmt.Errorf("%w: closed by the host", ErrGone))
	return nil
}

func (c *ProcConn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	close(c.dead)
	hs := c.handles
	c.handles = map[uint32]*Proc{}
	c.mu.Unlock()
	c.closer.Close()
	for _, h := range hs {
		h.fail(cause)
	}
}

// send queues one frame, waiting while the queue is full.
func (c *ProcConn) send(ctx context.Context, typ byte, id uint32, payload []byte) error {
	b := frameBytes(typ, id, payload)
	select {
	case c.queue <- b:
		return nil
	case <-c.dead:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *ProcConn) writeLoop() {
	for {
		select {
		case <-c.dead:
			return
		case b := <-c.queue:
			if _, err := c.w.Write(b); err != nil {
				c.fail(fmt.Errorf("%w: write: %v", ErrGone, err))
				return
			}
		}
	}
}

// pingLoop pings a quiet channel and fails one silent for 3 intervals.
func (c *ProcConn) pingLoop() {
	t := time.NewTicker(PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-t.C:
		}
		quiet := time.Since(time.Unix(0, c.lastRead.Load()))
		if quiet > 3*PingInterval {
			c.fail(fmt.Errorf("%w: the process daemon is silent for %v", ErrGone, quiet.Round(time.Millisecond)))
			return
		}
		if quiet >= PingInterval {
			select {
			case c.queue <- frameBytes(TypePing, 0, nil):
			default:
			}
		}
	}
}

func (c *ProcConn) readLoop(r io.Reader) {
	for {
		f, err := readFrame(r, procHostBound)
		if err == nil {
			c.lastRead.Store(time.Now().UnixNano())
			err = c.dispatch(f)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the process daemon's stream ended", ErrGone)
			}
			c.fail(err)
			return
		}
	}
}

func (c *ProcConn) dispatch(f frame) error {
	if f.typ == TypePing {
		return nil
	}
	c.mu.Lock()
	h := c.handles[f.id]
	lc := c.lists[f.id]
	last := f.typ == TypeEnd || f.typ == TypeRefused || f.typ == TypeListed
	if last {
		delete(c.handles, f.id)
		delete(c.lists, f.id)
	}
	c.mu.Unlock()
	if lc != nil {
		if f.typ == TypeRefused {
			lc <- nil
		} else if f.typ == TypeListed {
			lc <- f.payload
		} else {
			return fmt.Errorf("%w: %q frame for a list", ErrProtocol, f.typ)
		}
		return nil
	}
	if h == nil {
		return fmt.Errorf("%w: %q frame for id %d, which is not waited for", ErrProtocol, f.typ, f.id)
	}
	return h.frame(f)
}

// Proc is the host's handle on one process streaming on a channel.
type Proc struct {
	c  *ProcConn
	id uint32

	attached chan struct{} // closed at 'A' or at the end
	info     ProcessInfo
	refused  error

	mu       sync.Mutex
	events   []Event
	held     int64 // output bytes in events
	taken    int64 // output bytes taken and not yet credited
	notify   chan struct{}
	ended    bool // the last event is queued (or err is set)
	err      error
	inFlight int64 // stdin bytes not acknowledged
	inNotify chan struct{}
}

// Event is one event of a process's stream.
type Event struct {
	// Type is TypeStdout, TypeStderr (Data at Offset), TypeDropped
	// (Dropped bytes lost before the next chunk) or TypeEnd (End).
	Type    byte
	Offset  int64
	Data    []byte
	Dropped int64
	End     *EndInfo
}

// Start starts a process and returns its handle once the daemon attached
// it. A refusal is ErrRefused.
func (c *ProcConn) Start(ctx context.Context, req StartRequest) (*Proc, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxStart {
		return nil, fmt.Errorf("%w: start request of %d bytes", ErrTooLarge, len(b))
	}
	return c.open(ctx, TypeStart, b)
}

// Attach attaches to a process the daemon knows; one it does not is
// ErrNoProcess.
func (c *ProcConn) Attach(ctx context.Context, req AttachRequest) (*Proc, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return c.open(ctx, TypeAttach, b)
}

// reserve takes a fresh id and records it with c.mu held (add); an ended
// channel is its error.
func (c *ProcConn) reserve(add func(id uint32)) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.next++
	add(c.next)
	return c.next, nil
}

func (c *ProcConn) open(ctx context.Context, typ byte, payload []byte) (*Proc, error) {
	h := &Proc{c: c, attached: make(chan struct{}), notify: make(chan struct{}, 1), inNotify: make(chan struct{}, 1)}
	if _, err := c.reserve(func(id uint32) { h.id = id; c.handles[id] = h }); err != nil {
		return nil, err
	}
	if err := c.send(ctx, typ, h.id, payload); err != nil {
		c.forget(h.id)
		return nil, err
	}
	select {
	case <-h.attached:
	case <-ctx.Done():
		// The daemon may attach it yet: detach whatever it attaches.
		dctx, cancel := context.WithTimeout(context.Background(), PingInterval)
		c.send(dctx, TypeDetach, h.id, nil)
		cancel()
		return nil, ctx.Err()
	}
	if h.refused != nil {
		return nil, h.refused
	}
	h.mu.Lock()
	err := h.err
	h.mu.Unlock()
	if err != nil && h.info.ID == "" {
		return nil, err
	}
	return h, nil
}

func (c *ProcConn) forget(id uint32) {
	c.mu.Lock()
	delete(c.handles, id)
	c.mu.Unlock()
}

// List lists the daemon's processes.
func (c *ProcConn) List(ctx context.Context) ([]ProcessInfo, error) {
	ch := make(chan []byte, 1)
	id, err := c.reserve(func(id uint32) { c.lists[id] = ch })
	if err != nil {
		return nil, err
	}
	if err := c.send(ctx, TypeList, id, nil); err != nil {
		return nil, err
	}
	select {
	case b := <-ch:
		if b == nil {
			return nil, fmt.Errorf("%w: list", ErrRefused)
		}
		var out []ProcessInfo
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%w: list: %v", ErrProtocol, err)
		}
		return out, nil
	case <-c.dead:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// frame applies one frame of h's stream.
func (h *Proc) frame(f frame) error {
	select {
	case <-h.attached:
	default:
		switch f.typ {
		case TypeAttached:
			if err := json.Unmarshal(f.payload, &h.info); err != nil || h.info.ID == "" {
				return fmt.Errorf("%w: bad attached frame", ErrProtocol)
			}
		case TypeRefused:
			if string(f.payload) == "no such process" {
				h.refused = fmt.Errorf("%w", ErrNoProcess)
			} else {
				h.refused = fmt.Errorf("%w: %s", ErrRefused, f.payload)
			}
		default:
			return fmt.Errorf("%w: %q frame before attached", ErrProtocol, f.typ)
		}
		close(h.attached)
		return nil
	}
	ev := Event{Type: f.typ}
	switch f.typ {
	case TypeStdout, TypeStderr:
		if len(f.payload) <= 8 {
			return fmt.Errorf("%w: empty output", ErrProtocol)
		}
		ev.Offset = int64(binary.BigEndian.Uint64(f.payload))
		ev.Data = append([]byte(nil), f.payload[8:]...)
	case TypeDropped:
		if len(f.payload) != 8 {
			return fmt.Errorf("%w: dropped frame of %d bytes", ErrProtocol, len(f.payload))
		}
		ev.Dropped = int64(binary.BigEndian.Uint64(f.payload))
	case TypeEnd:
		ev.End = &EndInfo{}
		if err := json.Unmarshal(f.payload, ev.End); err != nil {
			return fmt.Errorf("%w: bad end frame", ErrProtocol)
		}
	case TypeWritten:
		if len(f.payload) != 4 {
			return fmt.Errorf("%w: written frame of %d bytes", ErrProtocol, len(f.payload))
		}
		h.mu.Lock()
		h.inFlight -= int64(u32(f.payload))
		h.mu.Unlock()
		select {
		case h.inNotify <- struct{}{}:
		default:
		}
		return nil
	default:
		return fmt.Errorf("%w: %q frame in a stream", ErrProtocol, f.typ)
	}
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.held += int64(len(ev.Data))
	over := h.held > OutputWindow+MaxChunk
	if f.typ == TypeEnd {
		h.ended = true
	}
	h.mu.Unlock()
	if over {
		return fmt.Errorf("%w: output past the granted credit", ErrProtocol)
	}
	h.wake()
	return nil
}

func (h *Proc) wake() {
	select {
	case h.notify <- struct{}{}:
	default:
	}
	select {
	case h.inNotify <- struct{}{}:
	default:
	}
}

func (h *Proc) fail(err error) {
	h.mu.Lock()
	if h.err == nil && !h.ended {
		h.err = err
	}
	h.mu.Unlock()
	select {
	case <-h.attached:
	default:
		close(h.attached)
	}
	h.wake()
}

// Info is what the daemon said of the process when it attached it.
func (h *Proc) Info() ProcessInfo { return h.info }

// Next returns the next event; after the TypeEnd event, io.EOF. When the
// channel ends first, the events already received come first, then its
// error (wrapping ErrGone).
func (h *Proc) Next(ctx context.Context) (Event, error) {
	for {
		h.mu.Lock()
		if len(h.events) > 0 {
			ev := h.events[0]
			h.events[0] = Event{}
			h.events = h.events[1:]
			h.held -= int64(len(ev.Data))
			h.taken += int64(len(ev.Data))
			grant := int64(0)
			if h.taken >= OutputWindow/4 && !h.ended && h.err == nil {
				grant, h.taken = h.taken, 0
			}
			h.mu.Unlock()
			if grant > 0 {
				if err := h.c.send(ctx, TypeCredit, h.id, be32(uint32(grant))); err != nil {
					return ev, nil // the channel's end shows on the next call
				}
			}
			return ev, nil
		}
		ended, err := h.ended, h.err
		h.mu.Unlock()
		if ended {
			return Event{}, io.EOF
		}
		if err != nil {
			return Event{}, err
		}
		select {
		case <-h.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// usable reports why h takes no more requests.
func (h *Proc) usable() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if h.ended {
		return ErrEnded
	}
	return nil
}

// Write sends b to the process's stdin, waiting while StdinWindow bytes
// are in flight.
func (h *Proc) Write(ctx context.Context, b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if err := h.usable(); err != nil {
			return n, err
		}
		k := min(len(b), MaxChunk)
		h.mu.Lock()
		if h.inFlight+int64(k) > StdinWindow {
			h.mu.Unlock()
			select {
			case <-h.inNotify:
			case <-ctx.Done():
				return n, ctx.Err()
			}
			continue
		}
		h.inFlight += int64(k)
		h.mu.Unlock()
		if err := h.c.send(ctx, TypeStdin, h.id, b[:k]); err != nil {
			return n, err
		}
		n, b = n+k, b[k:]
	}
	return n, nil
}

// CloseStdin closes the process's stdin (sends ^D to a terminal).
func (h *Proc) CloseStdin(ctx context.Context) error {
	if err := h.usable(); err != nil {
		return err
	}
	return h.c.send(ctx, TypeEOF, h.id, nil)
}

// Signal sends sig (TERM, INT, KILL or HUP) to the process's group.
func (h *Proc) Signal(ctx context.Context, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL, syscall.SIGHUP:
	default:
		return fmt.Errorf("agent: signal %v not supported", sig)
	}
	if err := h.usable(); err != nil {
		return err
	}
	return h.c.send(ctx, TypeSignal, h.id, []byte{byte(sig)})
}

// Resize sets the size of the process's terminal.
func (h *Proc) Resize(ctx context.Context, t Terminal) error {
	if err := h.usable(); err != nil {
		return err
	}
	return h.c.send(ctx, TypeResize, h.id, be32(uint32(t.Rows)<<16|uint32(t.Cols)))
}

// Detach stops the stream; the process runs on. Next then returns the
// events already received and an end with Detached.
func (h *Proc) Detach(ctx context.Context) error {
	if err := h.usable(); err != nil {
		return nil
	}
	return h.c.send(ctx, TypeDetach, h.id, nil)
}
