package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Interactive processes. Exec runs one buffered command; a backend that
// implements Processes also runs processes that stream: Start returns a
// Process at once, whose output comes as ordered events, whose stdin takes
// writes, which takes signals and a terminal's resize, and which runs on
// in the background when the caller's context ends or its handle is
// dropped. A later caller finds it again with List and Attach (by ID or
// by name), from another goroutine or another process after a restart.
//
// Bounds: the sandbox keeps each process's output in a buffer of
// ProcessRequest.BufferBytes. When it is full, a process whose handle
// reads waits (its pipe fills) until the handle took its oldest bytes, so
// a reader that keeps reading gets the stream whole. A handle that stopped
// reading (it holds ProcessOutputWindow bytes unread, for 10 seconds) does
// not hold the process: the oldest buffered output is dropped and counted
// (an EventDropped event, ProcessResult.Dropped); with no handle attached
// it is dropped at once. A handle holds at most ProcessOutputWindow bytes
// of events not yet read, and has at most ProcessStdinWindow bytes of
// stdin in flight. A
// reader whose sandbox or channel is gone gets ErrProcessGone within
// ProcessGoneBound. See the package documentation of the backend for what
// it supports.

// Processes is what a sandbox that runs interactive processes implements
// besides Sandbox; ProcessesOf finds it.
type Processes interface {
	// Start starts a process and returns its handle once it runs. What
	// the process does is its events and its result; an error means it
	// did not start (ErrCommandNotStarted when the sandbox could not start
	// it, ErrProcessNameInUse, ErrInvalidEnv, ...).
	Start(ctx context.Context, req ProcessRequest) (Process, error)
	// Attach returns a new handle on a process the sandbox knows (running,
	// or ended and still remembered), replaying its buffered output from
	// req.From. An unknown ID or name is ErrProcessNotFound.
	Attach(ctx context.Context, req AttachRequest) (Process, error)
	// List describes the processes the sandbox knows, in the order they
	// started.
	List(ctx context.Context) ([]ProcessInfo, error)
}

// ProcessesOf returns sb's Processes, or ErrUnsupported naming the
// capability when its backend has none.
func ProcessesOf(sb Sandbox) (Processes, error) {
	if p, ok := sb.(Processes); ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w: interactive processes (%T)", ErrUnsupported, sb)
}

// Process is a handle on one process. Its methods are safe for concurrent
// use; Next is meant for one reader.
type Process interface {
	// Info describes the process as it was when the handle was made.
	Info() ProcessInfo
	// Next returns the next event of the process's output; the last is
	// EventEnd, after which Next returns io.EOF. A process whose sandbox
	// or channel is gone is ErrProcessGone (after the events received).
	Next(ctx context.Context) (ProcessEvent, error)
	// Write writes to the process's stdin (its terminal when it has one);
	// it waits while the sandbox has ProcessStdinWindow bytes not yet taken by
	// the process.
	Write(ctx context.Context, p []byte) (int, error)
	// CloseStdin closes its stdin; on a terminal it sends end of file
	// (^D).
	CloseStdin(ctx context.Context) error
	// Signal sends sig to the process and its process group.
	Signal(ctx context.Context, sig Signal) error
	// Resize sets the size of its terminal.
	Resize(ctx context.Context, size TerminalSize) error
	// Wait reads (and discards) the events left and returns the result.
	Wait(ctx context.Context) (ProcessResult, error)
	// Detach ends this handle's stream; the process runs on.
	Detach(ctx context.Context) error
}

// ProcessRequest is a process to start.
type ProcessRequest struct {
	// Command is a /bin/sh -c script (as ExecRequest.Command); Argv, when
	// set instead, is the program and its arguments, looked up in PATH.
	Command string
	Argv    []string
	// Env is added to the sandbox's environment (Spec.Env), checked as
	// Spec.Env is (ValidateEnv).
	Env map[string]string
	// Dir is the absolute working directory; "" means the sandbox's
	// workdir.
	Dir string
	// Stdin keeps the process's stdin open for Write; false gives it an
	// empty stdin. A terminal always takes input.
	Stdin bool
	// Terminal, when set, runs the process on a terminal of that size:
	// stdout and stderr are then one stream (EventStdout).
	Terminal *TerminalSize
	// Timeout bounds the process's wall-clock time: at it, its tree is
	// killed (CauseTimeout). Zero means none: a background process runs
	// until it ends, is signalled, or the sandbox is reaped.
	Timeout time.Duration
	// OutputCap bounds its output, both streams together, in bytes: past
	// it, the tree is killed (CauseOutputCap, Truncated). Zero means
	// none.
	OutputCap int64
	// Name, when set, names the process so that Attach finds it: unique
	// among the sandbox's processes (ErrProcessNameInUse).
	Name string
	// BufferBytes is the output buffer kept for replay and slow readers;
	// zero means DefaultProcessBuffer, at most MaxProcessBuffer.
	BufferBytes int
}

// AttachRequest names a process to attach to.
type AttachRequest struct {
	// ID is the process's ID; when empty, Name is used.
	ID   string
	Name string
	// From is the output offset (ProcessEvent.Offset) to replay from; 0
	// replays everything still buffered.
	From int64
}

// TerminalSize is the size of a terminal, in characters.
type TerminalSize struct {
	Rows, Cols uint16
}

// Signal is a signal a process may be sent.
type Signal int

// The signals Process.Signal sends (their Linux numbers).
const (
	SignalHUP  Signal = 1
	SignalINT  Signal = 2
	SignalKILL Signal = 9
	SignalTERM Signal = 15
)

// EventType says what a ProcessEvent is.
type EventType int

// Event types.
const (
	EventStdout EventType = iota + 1
	EventStderr
	// EventDropped: Dropped bytes of output were lost before the next
	// chunk (the buffer overflowed).
	EventDropped
	// EventEnd: the process ended (Result), or the handle was detached
	// (Result.Cause CauseDetached); the last event.
	EventEnd
)

// ProcessEvent is one event of a process's output.
type ProcessEvent struct {
	Type EventType
	// Data is a chunk of output, at Offset in the process's output (both
	// streams counted together, in order).
	Data    []byte
	Offset  int64
	Dropped int64
	Result  *ProcessResult
}

// EndCause says why a process ended.
type EndCause string

// Causes of a process's end.
const (
	CauseExit      EndCause = "exit"       // it exited by itself
	CauseSignal    EndCause = "signal"     // a signal killed it
	CauseTimeout   EndCause = "timeout"    // killed at ProcessRequest.Timeout
	CauseOOM       EndCause = "oom"        // killed by the kernel for memory
	CauseOutputCap EndCause = "output-cap" // killed past ProcessRequest.OutputCap
	CauseKilled    EndCause = "killed"     // killed as the sandbox's process daemon ended
	CauseDetached  EndCause = "detached"   // the handle was detached; the process runs on
)

// ProcessResult is how a process ended: data about the untrusted code.
type ProcessResult struct {
	// ExitCode is its exit status, 128+n when signal n killed it.
	ExitCode int
	Cause    EndCause
	// TimedOut is Cause == CauseTimeout, as ExecResult's.
	TimedOut bool
	// Truncated: its output passed OutputCap.
	Truncated bool
	// Output is the bytes of output it wrote; Dropped how many of them
	// were dropped before any handle read them.
	Output, Dropped int64
}

// ProcessState is a process's state.
type ProcessState string

// Process states.
const (
	ProcessRunning ProcessState = "running"
	ProcessEnded   ProcessState = "ended"
)

// ProcessInfo describes one process.
type ProcessInfo struct {
	ID       string
	Name     string
	Argv     []string
	Started  time.Time
	State    ProcessState
	Terminal bool
	// Output is how many bytes of output it wrote so far.
	Output int64
	// Result is set once it ended.
	Result *ProcessResult
}

// Bounds of processes.
const (
	// DefaultProcessBuffer is a process's output buffer when the request
	// sets none, in bytes: 1 MiB.
	DefaultProcessBuffer = 1 << 20
	// MaxProcessBuffer bounds ProcessRequest.BufferBytes: 16 MiB.
	MaxProcessBuffer = 16 << 20
	// ProcessOutputWindow bounds the output a handle holds unread, in
	// bytes: 1 MiB.
	ProcessOutputWindow = 1 << 20
	// ProcessStdinWindow bounds the stdin bytes a handle has in flight:
	// 256 KiB.
	ProcessStdinWindow = 256 << 10
	// ProcessGoneBound bounds how long a reader waits after a sandbox's
	// process channel went silent before Next returns ErrProcessGone.
	ProcessGoneBound = 8 * time.Second
)

// Errors of processes.
var (
	// ErrUnsupported: the backend (or this engine) cannot do what was
	// asked; the error names the capability.
	ErrUnsupported = errors.New("sandbox: not supported")
	// ErrProcessNotFound: no process of that ID or name.
	ErrProcessNotFound = errors.New("sandbox: no such process")
	// ErrProcessNameInUse: another process has that name.
	ErrProcessNameInUse = errors.New("sandbox: process name in use")
	// ErrProcessGone: the channel to the sandbox's processes ended (the
	// sandbox was reaped or stopped, or its process daemon was killed);
	// the process may still run: Attach again to find out.
	ErrProcessGone = errors.New("sandbox: process channel gone")
	// ErrProcessEnded: stdin, a signal or a resize for a handle whose
	// stream has ended.
	ErrProcessEnded = errors.New("sandbox: process ended")
)

// CheckProcessRequest checks req as Start must before anything runs.
func CheckProcessRequest(req ProcessRequest) error {
	switch {
	case req.Command == "" && len(req.Argv) == 0:
		return errors.New("sandbox: a process needs Command or Argv")
	case req.Command != "" && len(req.Argv) > 0:
		return errors.New("sandbox: a process has Command or Argv, not both")
	case req.BufferBytes < 0 || req.BufferBytes > MaxProcessBuffer:
		return fmt.Errorf("sandbox: BufferBytes %d: 0 to %d", req.BufferBytes, MaxProcessBuffer)
	case req.OutputCap < 0:
		return fmt.Errorf("sandbox: OutputCap %d is negative", req.OutputCap)
	case req.Terminal != nil && (req.Terminal.Rows == 0 || req.Terminal.Cols == 0):
		return errors.New("sandbox: a terminal needs rows and columns")
	case len(req.Name) > 256:
		return errors.New("sandbox: a process name has at most 256 bytes")
	}
	if req.Command != "" {
		if err := CheckCommand(req.Command); err != nil {
			return err
		}
	}
	if req.Dir != "" {
		if err := CheckPath(req.Dir); err != nil {
			return err
		}
	}
	return ValidateEnv(req.Env)
}
