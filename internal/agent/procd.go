package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// markerEnv names the variable every process of the daemon carries, with
// its ID: how a kill finds the children that left its process group.
const markerEnv = "STOCKADE_PROC"

// Daemon owns a sandbox's interactive processes (see process.go). Its
// methods are safe for concurrent use.
type Daemon struct {
	environ []string

	mu      sync.Mutex
	procs   map[string]*proc
	names   map[string]*proc
	ended   []*proc // in the order they ended
	running int
}

// NewDaemon returns a daemon whose processes get environ plus their
// request's environment.
func NewDaemon(environ []string) *Daemon {
	return &Daemon{environ: environ, procs: map[string]*proc{}, names: map[string]*proc{}}
}

// Listen serves connections on the abstract unix socket name until ctx
// ends, then kills every process. An error means it could not listen (one
// listens already).
func (d *Daemon) Listen(ctx context.Context, name string) error {
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	defer d.KillAll()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go d.ServeConn(c)
	}
}

// KillAll kills the tree of every running process.
func (d *Daemon) KillAll() {
	d.mu.Lock()
	ps := make([]*proc, 0, len(d.procs))
	for _, p := range d.procs {
		ps = append(ps, p)
	}
	d.mu.Unlock()
	for _, p := range ps {
		p.kill(CauseKilled)
	}
}

// dconn is one connection of the daemon.
type dconn struct {
	rw   io.ReadWriteCloser
	wmu  sync.Mutex
	werr error

	mu   sync.Mutex
	atts map[uint32]*attachment
	gone bool
}

func (c *dconn) send(typ byte, id uint32, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, headerBytes, headerBytes+n)
	b[0] = typ
	copy(b[1:5], be32(id))
	copy(b[5:9], be32(uint32(n)))
	for _, p := range parts {
		b = append(b, p...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr == nil {
		if _, c.werr = c.rw.Write(b); c.werr != nil {
			c.rw.Close()
		}
	}
	return c.werr
}

func (c *dconn) refuse(id uint32, reason string) {
	c.send(TypeRefused, id, []byte(reason[:min(len(reason), MaxReason)]))
}

// ServeConn serves one connection until it ends or breaks the protocol;
// the processes it started or attached run on.
func (d *Daemon) ServeConn(rw io.ReadWriteCloser) error {
	c := &dconn{rw: rw, atts: map[uint32]*attachment{}}
	defer func() {
		rw.Close()
		c.mu.Lock()
		c.gone = true
		atts := c.atts
		c.atts = map[uint32]*attachment{}
		c.mu.Unlock()
		for _, a := range atts {
			a.p.detach(a, false)
		}
	}()
	hello, _ := json.Marshal(Hello{Version: ProcVersion, PID: os.Getpid()})
	if err := c.send(TypeHello, 0, hello); err != nil {
		return err
	}
	for {
		f, err := readFrame(rw, procBound)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		a := c.atts[f.id]
		c.mu.Unlock()
		switch f.typ {
		case TypePing:
			c.send(TypePing, 0)
		case TypeList:
			b, _ := json.Marshal(d.list())
			if len(b) > MaxList {
				c.refuse(f.id, "list too large")
				continue
			}
			c.send(TypeListed, f.id, b)
		case TypeStart, TypeAttach:
			if f.id == 0 || a != nil {
				return fmt.Errorf("%w: id %d in use", ErrProtocol, f.id)
			}
			var p *proc
			a := &attachment{c: c, id: f.id, credit: OutputWindow, granted: time.Now()}
			if f.typ == TypeStart {
				var req StartRequest
				if err := json.Unmarshal(f.payload, &req); err != nil {
					c.refuse(f.id, "bad request: "+err.Error())
					continue
				}
				if p, err = d.start(req, a); err != nil {
					c.refuse(f.id, err.Error())
					continue
				}
			} else {
				var req AttachRequest
				if err := json.Unmarshal(f.payload, &req); err != nil {
					c.refuse(f.id, "bad request: "+err.Error())
					continue
				}
				if p = d.find(req.ID, req.Name); p == nil {
					c.refuse(f.id, "no such process")
					continue
				}
				a.next = max(req.From, 0)
			}
			d.attach(a, p)
		case TypeStdin, TypeEOF:
			if a != nil {
				if err := a.p.write(a, f.typ == TypeEOF, f.payload); err != nil {
					return err
				}
			}
		case TypeSignal:
			if a != nil {
				a.p.signal(syscall.Signal(f.payload[0]))
			}
		case TypeResize:
			if a != nil {
				a.p.resize(Terminal{Rows: uint16(u32(f.payload) >> 16), Cols: uint16(u32(f.payload))})
			}
		case TypeCredit:
			if a != nil {
				a.p.credit(a, int64(u32(f.payload)))
			}
		case TypeDetach:
			if a != nil {
				a.p.detach(a, true)
			}
		}
	}
}

// attachment is one id streaming one process on one connection.
type attachment struct {
	c        *dconn
	id       uint32
	p        *proc
	next     int64 // the offset of the next byte to send
	credit   int64
	granted  time.Time // when the host last granted credit
	detached bool      // by the host ('X' Detached follows)
	gone     bool      // the connection ended
}

// chunk is a piece of a process's buffered output.
type chunk struct {
	off int64
	typ byte
	b   []byte
}

// proc is one process of the daemon.
type proc struct {
	d     *Daemon
	cmd   *exec.Cmd
	pty   *os.File   // the terminal's master, when it has one
	pipes []*os.File // what the pumps read: the pipes' read ends, or pty
	stdin *os.File   // the write end of its stdin pipe, or pty
	cap   int64

	mu       sync.Mutex
	cond     *sync.Cond
	info     ProcessInfo
	chunks   []chunk
	buffered int   // bytes in chunks
	bufCap   int   // bound of buffered
	total    int64 // bytes of output read (the next chunk's offset)
	dropped  int64 // bytes dropped before any reader streamed them
	streamed int64 // the highest offset a reader streamed to
	trunc    bool
	readers  map[*attachment]bool
	end      *EndInfo
	killed   string // the cause the daemon killed it for; "" when it did not
	inq      []stdinItem
	inBytes  int
	inClosed bool
}

type stdinItem struct {
	a   *attachment
	b   []byte
	eof bool
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start starts a process from req, with a as its first reader from its
// first byte.
func (d *Daemon) start(req StartRequest, a *attachment) (*proc, error) {
	switch {
	case len(req.Argv) == 0:
		return nil, errors.New("no command")
	case req.BufferBytes < 0 || req.BufferBytes > MaxBuffer:
		return nil, fmt.Errorf("buffer of %d bytes: at most %d", req.BufferBytes, MaxBuffer)
	case req.Terminal != nil && (req.Terminal.Rows == 0 || req.Terminal.Cols == 0):
		return nil, errors.New("a terminal needs rows and columns")
	}
	for _, kv := range req.Env {
		if k, _, _ := strings.Cut(kv, "="); strings.EqualFold(k, markerEnv) {
			return nil, fmt.Errorf("%s is reserved", markerEnv)
		}
	}
	p := &proc{d: d, cap: req.OutputCap, bufCap: req.BufferBytes, readers: map[*attachment]bool{a: true}}
	a.p = p
	if p.bufCap == 0 {
		p.bufCap = DefaultBuffer
	}
	p.cond = sync.NewCond(&p.mu)
	id := newID()
	d.mu.Lock()
	switch {
	case d.running >= MaxProcesses:
		d.mu.Unlock()
		return nil, fmt.Errorf("%d processes run already", MaxProcesses)
	case req.Name != "" && d.names[req.Name] != nil:
		d.mu.Unlock()
		return nil, fmt.Errorf("name %q in use", req.Name)
	}
	d.running++
	p.info = ProcessInfo{ID: id, Name: req.Name, Argv: req.Argv, State: StateRunning, Terminal: req.Terminal != nil}
	d.procs[id] = p
	if req.Name != "" {
		d.names[req.Name] = p
	}
	d.mu.Unlock()
	env := append(mergeEnv(d.environ, req.Env), markerEnv+"="+id)
	pumps, err := p.fork(req, env)
	if err != nil {
		d.mu.Lock()
		d.running--
		delete(d.procs, id)
		if req.Name != "" {
			delete(d.names, req.Name)
		}
		d.mu.Unlock()
		return nil, err
	}
	oom := oomKills()
	if req.TimeoutMillis > 0 {
		t := time.AfterFunc(time.Duration(req.TimeoutMillis)*time.Millisecond, func() { p.kill(CauseTimeout) })
		defer func() { go func() { p.wait(pumps, oom); t.Stop() }() }()
	} else {
		defer func() { go p.wait(pumps, oom) }()
	}
	if p.stdin != nil {
		go p.stdinLoop()
	}
	return p, nil
}

// fork starts p's process and the readers of its output; pumps is closed
// when they all ended.
func (p *proc) fork(req StartRequest, env []string) (pumps *sync.WaitGroup, err error) {
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Env: env, Dir: req.Dir, SysProcAttr: &syscall.SysProcAttr{}}
	if !strings.Contains(req.Argv[0], "/") {
		if lp, err := lookPath(req.Argv[0], env); err == nil {
			cmd.Path = lp
		}
	}
	var readers []*os.File
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
		if err != nil {
			for _, f := range readers {
				f.Close()
			}
			if p.stdin != nil {
				p.stdin.Close()
			}
		}
	}()
	if req.Terminal != nil {
		master, slave, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("terminal: %w", err)
		}
		if err := setSize(master, *req.Terminal); err != nil {
			master.Close()
			slave.Close()
			return nil, fmt.Errorf("terminal: %w", err)
		}
		p.pty, p.stdin = master, master
		readers = append(readers, master)
		closeAfter = append(closeAfter, slave)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		readers, closeAfter = append(readers, outR), append(closeAfter, outW)
		errR, errW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		readers, closeAfter = append(readers, errR), append(closeAfter, errW)
		cmd.Stdout, cmd.Stderr = outW, errW
		if req.Stdin {
			inR, inW, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			p.stdin, closeAfter = inW, append(closeAfter, inR)
			cmd.Stdin = inR
		}
		cmd.SysProcAttr.Setpgid = true
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.cmd, p.pipes = cmd, readers
	p.mu.Lock()
	p.info.PID, p.info.Started = cmd.Process.Pid, time.Now()
	p.mu.Unlock()
	pumps = &sync.WaitGroup{}
	for i, r := range readers {
		typ := byte(TypeStdout)
		if i == 1 {
			typ = TypeStderr
		}
		pumps.Add(1)
		go p.pump(pumps, typ, r)
	}
	return pumps, nil
}

// lookPath finds file in env's PATH, as a shell would.
func lookPath(file string, env []string) (string, error) {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		f := dir + "/" + file
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", exec.ErrNotFound
}

// pump reads r into p's buffer until r ends or is closed.
func (p *proc) pump(wg *sync.WaitGroup, typ byte, r *os.File) {
	defer wg.Done()
	defer r.Close()
	for {
		buf := make([]byte, MaxChunk)
		n, err := r.Read(buf)
		if n > 0 {
			p.add(typ, buf[:n:n])
		}
		if err != nil {
			return
		}
	}
}

// add appends output to the buffer, making room as the bounds say.
func (p *proc) add(typ byte, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cap > 0 && p.total+int64(len(b)) > p.cap {
		b = b[:max(p.cap-p.total, 0)]
		if !p.trunc {
			p.trunc = true
			go p.kill(CauseOutputCap)
		}
		if len(b) == 0 {
			return
		}
	}
	for p.buffered+len(b) > p.bufCap && len(p.chunks) > 0 {
		first := p.chunks[0]
		if p.end == nil && p.behind(first.off+int64(len(first.b))) {
			// A reader that reads has not sent the oldest bytes yet: wait
			// for it (checking again at least every StallGrace).
			t := time.AfterFunc(StallGrace, func() {
				p.mu.Lock()
				p.cond.Broadcast()
				p.mu.Unlock()
			})
			p.cond.Wait()
			t.Stop()
			continue
		}
		p.chunks = p.chunks[1:]
		p.buffered -= len(first.b)
		end := first.off + int64(len(first.b))
		p.dropped += end - min(max(p.streamed, first.off), end)
	}
	if len(b) > p.bufCap {
		p.dropped += int64(len(b) - p.bufCap)
		p.total += int64(len(b) - p.bufCap)
		b = b[len(b)-p.bufCap:]
	}
	p.chunks = append(p.chunks, chunk{off: p.total, typ: typ, b: b})
	p.buffered += len(b)
	p.total += int64(len(b))
	p.info.Output = p.total
	p.cond.Broadcast()
}

// behind reports whether a reader that reads (it has credit, or was
// granted some within StallGrace) has not sent the bytes before off; p.mu
// is held.
func (p *proc) behind(off int64) bool {
	for a := range p.readers {
		if a.next < off && !a.gone && !a.detached && (a.credit > 0 || time.Since(a.granted) < StallGrace) {
			return true
		}
	}
	return false
}

// wait waits for p's end and records it.
func (p *proc) wait(pumps *sync.WaitGroup, oom int64) {
	err := p.cmd.Wait()
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(DrainGrace):
		// Children hold its output open: stop reading, so the process
		// ends in bounded time; they get EPIPE (or the terminal hangs up).
		p.closeReaders()
		<-drained
	}
	end := &EndInfo{Cause: CauseExit}
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && st.Signaled():
		end.ExitCode = 128 + int(st.Signal())
		end.Cause = CauseSignal
	case ok:
		end.ExitCode = st.ExitStatus()
	case err != nil:
		end.ExitCode = -1
	}
	p.mu.Lock()
	if end.Cause == CauseSignal {
		switch {
		case p.killed != "":
			end.Cause = p.killed
		case st.Signal() == syscall.SIGKILL && oomKills() > oom:
			end.Cause = CauseOOM
		}
	}
	end.Truncated, end.Output, end.Dropped = p.trunc, p.total, p.dropped
	p.end = end
	p.info.State, p.info.End = StateEnded, end
	p.inClosed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	if p.stdin != nil && p.pty == nil {
		p.stdin.Close()
	}
	d := p.d
	d.mu.Lock()
	d.running--
	d.ended = append(d.ended, p)
	for len(d.ended) > MaxEnded {
		old := d.ended[0]
		d.ended = d.ended[1:]
		delete(d.procs, old.info.ID)
		if old.info.Name != "" && d.names[old.info.Name] == old {
			delete(d.names, old.info.Name)
		}
	}
	d.mu.Unlock()
}

// closeReaders closes the read ends of p's output.
func (p *proc) closeReaders() {
	for _, f := range p.pipes {
		f.Close()
	}
}

// kill kills p's tree for cause (the first cause given is kept).
func (p *proc) kill(cause string) {
	p.mu.Lock()
	if p.end != nil || p.cmd == nil {
		p.mu.Unlock()
		return
	}
	if p.killed == "" {
		p.killed = cause
	}
	pid, id := p.info.PID, p.info.ID
	p.mu.Unlock()
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
	killMarked(markerEnv + "=" + id)
}

// killMarked kills every process whose environment holds kv: the children
// of a process that left its group (setsid) keep its environment.
func killMarked(kv string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	want := []byte(kv + "\x00")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// signal sends sig to p's process group; only TERM, INT, KILL and HUP.
func (p *proc) signal(sig syscall.Signal) {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL, syscall.SIGHUP:
	default:
		return
	}
	p.mu.Lock()
	pid, ended := p.info.PID, p.end != nil
	p.mu.Unlock()
	if !ended {
		syscall.Kill(-pid, sig)
	}
}

// resize sets the size of p's terminal.
func (p *proc) resize(t Terminal) {
	if p.pty != nil && t.Rows > 0 && t.Cols > 0 {
		setSize(p.pty, t)
	}
}

// write queues stdin bytes (or its end) from a.
func (p *proc) write(a *attachment, eof bool, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inBytes+len(b) > StdinWindow {
		return fmt.Errorf("%w: more than %d stdin bytes in flight", ErrProtocol, StdinWindow)
	}
	p.inq = append(p.inq, stdinItem{a: a, b: bytes.Clone(b), eof: eof})
	p.inBytes += len(b)
	p.cond.Broadcast()
	return nil
}

// stdinLoop writes queued stdin to the process and acknowledges it.
func (p *proc) stdinLoop() {
	for {
		p.mu.Lock()
		for len(p.inq) == 0 && !p.inClosed {
			p.cond.Wait()
		}
		if len(p.inq) == 0 {
			p.mu.Unlock()
			return
		}
		it := p.inq[0]
		p.inq = p.inq[1:]
		p.mu.Unlock()
		switch {
		case it.eof && p.pty != nil:
			p.stdin.Write([]byte{4})
		case it.eof:
			p.stdin.Close()
		default:
			p.stdin.Write(it.b) // a process that ended takes nothing: acknowledged all the same
		}
		p.mu.Lock()
		p.inBytes -= len(it.b)
		p.mu.Unlock()
		if len(it.b) > 0 {
			it.a.c.send(TypeWritten, it.a.id, be32(uint32(len(it.b))))
		}
		if it.eof && p.pty == nil {
			p.mu.Lock()
			p.inClosed = true
			for _, rest := range p.inq {
				if len(rest.b) > 0 {
					rest.a.c.send(TypeWritten, rest.a.id, be32(uint32(len(rest.b))))
				}
			}
			p.inq, p.inBytes = nil, 0
			p.mu.Unlock()
			return
		}
	}
}

// credit grants a more output bytes.
func (p *proc) credit(a *attachment, n int64) {
	p.mu.Lock()
	a.credit += n
	a.granted = time.Now()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// detach ends a's stream: by the host (answered by 'X' Detached) or as
// its connection ended.
func (p *proc) detach(a *attachment, byHost bool) {
	p.mu.Lock()
	if byHost {
		a.detached = true
	} else {
		a.gone = true
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// find returns the process of id, or else of name; nil when none.
func (d *Daemon) find(id, name string) *proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id != "" {
		return d.procs[id]
	}
	if name != "" {
		return d.names[name]
	}
	return nil
}

// list describes every process the daemon knows, in the order they started.
func (d *Daemon) list() []ProcessInfo {
	d.mu.Lock()
	ps := make([]*proc, 0, len(d.procs))
	for _, p := range d.procs {
		ps = append(ps, p)
	}
	d.mu.Unlock()
	out := make([]ProcessInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

func (p *proc) snapshot() ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// attach streams p on a (its connection, id and offset set).
func (d *Daemon) attach(a *attachment, p *proc) {
	a.p = p
	c := a.c
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		p.detach(a, false)
		p.mu.Lock()
		delete(p.readers, a)
		p.mu.Unlock()
		return
	}
	c.atts[a.id] = a
	c.mu.Unlock()
	p.mu.Lock()
	p.readers[a] = true
	info := p.info
	p.mu.Unlock()
	b, _ := json.Marshal(info)
	c.send(TypeAttached, a.id, b)
	go p.stream(a)
}

// stream sends p's output to a until p ended and all was sent, or a was
// detached or its connection ended.
func (p *proc) stream(a *attachment) {
	defer func() {
		p.mu.Lock()
		delete(p.readers, a)
		p.cond.Broadcast()
		p.mu.Unlock()
		a.c.mu.Lock()
		if a.c.atts[a.id] == a {
			delete(a.c.atts, a.id)
		}
		a.c.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		for !a.gone && !a.detached && !(a.next < p.total && a.credit > 0) && p.end == nil {
			p.cond.Wait()
		}
		switch {
		case a.gone:
			p.mu.Unlock()
			return
		case a.detached:
			p.mu.Unlock()
			b, _ := json.Marshal(EndInfo{Detached: true})
			a.c.send(TypeEnd, a.id, b)
			return
		case a.next < p.total && a.credit <= 0:
			// Ended, output left, no credit: wait for credit.
			p.cond.Wait()
			p.mu.Unlock()
			continue
		case a.next >= p.total:
			end := *p.end
			p.mu.Unlock()
			b, _ := json.Marshal(end)
			a.c.send(TypeEnd, a.id, b)
			return
		}
		head := p.total - int64(p.buffered)
		if a.next < head {
			gap := head - a.next
			a.next = head
			p.mu.Unlock()
			if a.c.send(TypeDropped, a.id, u64(gap)) != nil {
				return
			}
			continue
		}
		i := sort.Search(len(p.chunks), func(i int) bool {
			return p.chunks[i].off+int64(len(p.chunks[i].b)) > a.next
		})
		ch := p.chunks[i]
		data := ch.b[a.next-ch.off:]
		off := a.next
		a.next += int64(len(data))
		a.credit -= int64(len(data))
		p.streamed = max(p.streamed, a.next)
		p.cond.Broadcast()
		p.mu.Unlock()
		if a.c.send(ch.typ, a.id, u64(off), data) != nil {
			return
		}
	}
}

// oomKills returns the sandbox cgroup's count of out-of-memory kills (-1
// when it cannot be read).
func oomKills() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.events")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// openPTY opens a new terminal: its master and its slave.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock: %w", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// setSize sets the terminal's size.
func setSize(f *os.File, t Terminal) error {
	ws := [4]uint16{t.Rows, t.Cols, 0, 0}
	return ioctl(f, syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
