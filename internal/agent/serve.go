package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Harden makes the calling process non-dumpable, so processes of its uid
// can neither trace it nor open its /proc/<pid>/fd entries (and so cannot
// write on its channel). The agent's main calls it first.
func Harden() error {
	const prSetDumpable = 4
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return fmt.Errorf("agent: prctl(PR_SET_DUMPABLE, 0): %w", e)
	}
	return nil
}

// Serve is the agent: it writes the hello frame to out, then runs the
// commands in reads from in, each as a child in a process group of its
// own with environ plus the request's environment, and writes their
// frames to out. It returns nil when in ends (after killing the process
// group of every command still running) and an error when in breaks the
// protocol or out fails.
func Serve(ctx context.Context, in io.Reader, out io.Writer, environ []string) error {
	s := &server{out: out, environ: environ, cmds: map[uint32]*command{}}
	hello, _ := json.Marshal(Hello{Version: Version, PID: os.Getpid()})
	if err := s.send(TypeHello, 0, hello); err != nil {
		return err
	}
	defer s.killAll()
	for {
		f, err := readFrame(in, agentBound)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch f.typ {
		case TypeRun:
			var req Request
			if err := json.Unmarshal(f.payload, &req); err != nil {
				return fmt.Errorf("%w: run %d: %v", ErrProtocol, f.id, err)
			}
			c, err := s.add(f.id)
			if err != nil {
				return err
			}
			go s.run(c, req)
		case TypeWrite, TypeRead:
			c, err := s.add(f.id)
			if err != nil {
				return err
			}
			go s.file(c, f.typ, f.payload)
		case TypeCancel:
			s.cancel(f.id)
		}
	}
}

// server is one Serve's state.
type server struct {
	out     io.Writer
	environ []string

	wmu  sync.Mutex // serializes frames on out
	werr error

	mu   sync.Mutex
	cmds map[uint32]*command
}

// command is one command's state in the agent.
type command struct {
	id        uint32
	started   bool // 'S' sent
	cancelled bool
	pid       int // once forked
}

func (s *server) send(typ byte, id uint32, payload []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr == nil {
		s.werr = writeFrame(s.out, typ, id, payload)
	}
	return s.werr
}

func (s *server) add(id uint32) (*command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 0 || s.cmds[id] != nil {
		return nil, fmt.Errorf("%w: run id %d in use", ErrProtocol, id)
	}
	c := &command{id: id}
	s.cmds[id] = c
	return c, nil
}

func (s *server) remove(id uint32) {
	s.mu.Lock()
	delete(s.cmds, id)
	s.mu.Unlock()
}

// cancel ends command id: before its start it never starts; after, its
// process group is killed.
func (s *server) cancel(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	if c == nil {
		return
	}
	c.cancelled = true
	if c.pid > 0 {
		syscall.Kill(-c.pid, syscall.SIGKILL)
	}
}

func (s *server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cmds {
		c.cancelled = true
		if c.pid > 0 {
			syscall.Kill(-c.pid, syscall.SIGKILL)
		}
	}
}

// run runs one command and reports it.
func (s *server) run(c *command, req Request) {
	defer s.remove(c.id)
	s.mu.Lock()
	if c.cancelled {
		s.mu.Unlock()
		s.send(TypeNoStart, c.id, []byte("cancelled"))
		return
	}
	c.started = true
	s.mu.Unlock()
	// 'S' goes out before the fork: a host that never sees it knows the
	// command never ran.
	if s.send(TypeStarted, c.id, nil) != nil {
		return
	}
	code, err := s.start(c, req)
	if err != nil {
		reason := err.Error()
		if len(reason) > MaxReason {
			reason = reason[:MaxReason]
		}
		s.send(TypeNoStart, c.id, []byte(reason))
		return
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	s.send(TypeExit, c.id, b[:])
}

// start runs req to its end and returns its exit status: once it exited
// and every holder of its stdout and stderr closed them. An error means it
// did not start.
func (s *server) start(c *command, req Request) (int, error) {
	if len(req.Argv) == 0 {
		return 0, errors.New("no command")
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, err
	}
	cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Env: mergeEnv(s.environ, req.Env), Dir: req.Dir,
		Stdout: outW, Stderr: errW, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	s.mu.Lock()
	if c.cancelled {
		s.mu.Unlock()
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return 0, errors.New("cancelled")
	}
	err = cmd.Start()
	if err == nil {
		c.pid = cmd.Process.Pid
	}
	s.mu.Unlock()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return 0, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go s.pump(&wg, c.id, TypeStdout, outR)
	go s.pump(&wg, c.id, TypeStderr, errR)
	wg.Wait()
	err = cmd.Wait()
	st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && st.Signaled():
		return 128 + int(st.Signal()), nil
	case ok:
		return st.ExitStatus(), nil
	case err != nil:
		return 0, err
	}
	return cmd.ProcessState.ExitCode(), nil
}

// file runs one file operation (typ TypeWrite or TypeRead) in the agent's
// own process and reports it as a command: 'S', its output ('O' the
// file's bytes for a read, 'E' the fault lines), 'X' its exit code. A
// request it cannot decode is 'N', never started.
func (s *server) file(c *command, typ byte, payload []byte) {
	defer s.remove(c.id)
	var (
		wreq WriteRequest
		data [][]byte
		rreq ReadRequest
		err  error
	)
	if typ == TypeWrite {
		wreq, data, err = decodeWrite(payload)
	} else if err = json.Unmarshal(payload, &rreq); err == nil && !strings.HasPrefix(rreq.Path, "/") {
		err = fmt.Errorf("bad path %q", rreq.Path)
	}
	s.mu.Lock()
	cancelled := c.cancelled
	c.started = err == nil && !cancelled
	s.mu.Unlock()
	switch {
	case cancelled:
		s.send(TypeNoStart, c.id, []byte("cancelled"))
		return
	case err != nil:
		reason := "bad request: " + err.Error()
		s.send(TypeNoStart, c.id, []byte(reason[:min(len(reason), MaxReason)]))
		return
	}
	if s.send(TypeStarted, c.id, nil) != nil {
		return
	}
	out := &chunker{s: s, id: c.id, typ: TypeStdout}
	errw := &chunker{s: s, id: c.id, typ: TypeStderr}
	var code int
	if typ == TypeWrite {
		code = WriteFiles(wreq, data, errw)
	} else {
		code = ReadFile(rreq, out)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	s.send(TypeExit, c.id, b[:])
}

// chunker sends what is written to it as frames of typ, at most MaxChunk
// bytes each.
type chunker struct {
	s   *server
	id  uint32
	typ byte
}

func (w *chunker) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), MaxChunk)
		if err := w.s.send(w.typ, w.id, p[:k]); err != nil {
			return n, err
		}
		n, p = n+k, p[k:]
	}
	return n, nil
}

// pump sends what r gives as frames of typ until r ends.
func (s *server) pump(wg *sync.WaitGroup, id uint32, typ byte, r *os.File) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, MaxChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if s.send(typ, id, buf[:n]) != nil {
				io.Copy(io.Discard, r) // keep the command from blocking
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// mergeEnv returns base with add's KEY=value pairs replacing the same
// keys or appended, as an engine merges an exec's environment.
func mergeEnv(base, add []string) []string {
	out := append([]string(nil), base...)
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, o := range out {
			if ok, _, _ := strings.Cut(o, "="); ok == k {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
