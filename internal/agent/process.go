package agent

// Processes (protocol version 3): the interactive processes of a sandbox,
// owned by one process daemon per sandbox user (Daemon, `stockade-agent
// procd`), which listens on an abstract unix socket (ProcSocket) in the
// sandbox's network namespace. The host reaches it through `stockade-agent
// attach MARKER`, started by an engine exec as the agent is: it connects
// to the daemon (starting one when none listens) and relays its stdin and
// stdout to the socket, byte for byte. A process so belongs to the
// daemon, not to a channel: it keeps running when the channel that
// started it ends, and any later channel (another host process after a
// restart) lists it and attaches to it. The Exec channel (Serve) is not
// involved: Exec keeps its own agent, its own kill through the engine and
// its latency.
//
// # Frames
//
// The framing is the agent's (a 9-byte header, then the payload); the
// daemon says hello ('H', Version) on every connection. The id of a frame
// is a handle the host chose on this connection (> 0): one start or
// attach, and then the stream of the process it names.
//
// Host to daemon:
//
//	'P' start    a JSON StartRequest: start a process, attach it to the id
//	'T' attach   a JSON AttachRequest: attach an existing process (by ID or
//	             name) to the id, replaying its buffer from an offset
//	'I' stdin    1 to MaxChunk bytes for the process's stdin (its terminal
//	             when it has one); the host keeps at most StdinWindow bytes
//	             not yet acknowledged by 'J'
//	'D' eof      no payload: close the process's stdin (on a terminal,
//	             send ^D)
//	'G' signal   1 byte, the signal number (TERM, INT, KILL or HUP): sent to
//	             the process's group
//	'Z' resize   4 bytes, rows and columns (big-endian uint16 each) of its
//	             terminal
//	'K' credit   4 bytes (big-endian uint32): how many more output bytes the
//	             host takes on this id; the daemon starts each id at
//	             OutputWindow
//	'U' detach   no payload: stop streaming on the id (answered by 'X' with
//	             Detached); the process runs on
//	'L' list     no payload, on a fresh id: answered by one 'Y'
//	'p' ping     id 0, no payload: answered by 'p'
//
// Daemon to host:
//
//	'H' hello    id 0, a JSON Hello
//	'A' attached a JSON ProcessInfo: the id streams this process from now on
//	'N' refused  a reason: nothing was started or attached; the id's last
//	             frame
//	'O' stdout   8 bytes, the big-endian offset of the chunk in the
//	'E' stderr   process's output (stdout and stderr counted together, in
//	             the order the daemon read them), then 1 to MaxChunk bytes
//	'V' dropped  8 bytes, how many bytes of output the host will never see
//	             before the next chunk: the buffer overflowed while the host
//	             read too slowly, or before it attached
//	'J' written  4 bytes, how many stdin bytes the process took
//	'X' end      a JSON EndInfo: the process ended (its output streamed
//	             whole) or the id was detached; the id's last frame
//	'Y' list     a JSON []ProcessInfo (at most MaxList bytes); the id's last
//	             frame
//	'p' pong     id 0, no payload
//
// # Bounds
//
// The daemon reads every process's output as it comes into a buffer of
// BufferBytes (StartRequest.BufferBytes, at most MaxBuffer) and streams
// from there. When the buffer is full and an attached host that reads has
// not been sent its oldest bytes, the process waits (its pipe fills): a
// reader that reads gets the stream whole, however slow the channel. A
// host that stopped reading (no credit left, none granted for StallGrace)
// does not hold the process: the oldest bytes are dropped and counted;
// with no host attached they are dropped at once. The host holds at most
// OutputWindow bytes per id, since it
// grants credit only as its reader takes events. Processes are bounded by
// MaxProcesses running; ended ones are kept (for Wait and Attach) up to
// MaxEnded, the oldest forgotten first.

import (
	"encoding/binary"
	"strconv"
	"time"
)

// ProcVersion is the protocol version of the process daemon.
const ProcVersion = 3

// Frame types of the process channel (see above).
const (
	TypeStart    = 'P'
	TypeAttach   = 'T'
	TypeStdin    = 'I'
	TypeEOF      = 'D'
	TypeSignal   = 'G'
	TypeResize   = 'Z'
	TypeCredit   = 'K'
	TypeDetach   = 'U'
	TypeList     = 'L'
	TypePing     = 'p'
	TypeAttached = 'A'
	TypeRefused  = 'N'
	TypeDropped  = 'V'
	TypeWritten  = 'J'
	TypeEnd      = 'X'
	TypeListed   = 'Y'
)

// Bounds of the process channel and the daemon.
const (
	// MaxStart bounds a 'P' or 'T' payload: argv and environment.
	MaxStart = 1 << 20
	// MaxList bounds a 'Y' payload.
	MaxList = 4 << 20
	// MaxInfo bounds an 'A' or 'X' payload.
	MaxInfo = MaxStart + 4<<10
	// OutputWindow is the output credit of a fresh id, in bytes: what the
	// host holds at most per attached process.
	OutputWindow = 1 << 20
	// StdinWindow bounds the stdin bytes in flight per process.
	StdinWindow = 256 << 10
	// DefaultBuffer is a process's output buffer when the request sets
	// none, in bytes.
	DefaultBuffer = 1 << 20
	// MaxBuffer bounds StartRequest.BufferBytes.
	MaxBuffer = 16 << 20
	// MaxProcesses bounds the running processes of a daemon.
	MaxProcesses = 1024
	// MaxEnded bounds the ended processes a daemon remembers.
	MaxEnded = 256
	// StallGrace is how long a process waits for an attached host that
	// does not read before its oldest buffered output is dropped.
	StallGrace = 10 * time.Second
	// DrainGrace is how long the daemon reads a process's output after
	// its main process exited, for children that keep its pipes open;
	// then the pipes are closed and the process has ended.
	DrainGrace = 2 * time.Second
	// PingInterval is how often the host pings an idle channel; a channel
	// silent for 3 intervals is gone.
	PingInterval = 2 * time.Second
)

// ProcSocket is the abstract unix socket (without its leading NUL) the
// daemon of uid listens on.
func ProcSocket(uid int) string { return "stockade-procd-" + strconv.Itoa(uid) }

// Terminal is the size of a process's terminal.
type Terminal struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// StartRequest is the payload of a start frame.
type StartRequest struct {
	Argv []string `json:"argv"`
	// Env is KEY=value pairs added to the daemon's environment (the
	// container's, as an engine exec gets it).
	Env []string `json:"env,omitempty"`
	// Dir is the working directory; empty means the daemon's.
	Dir string `json:"dir,omitempty"`
	// Stdin keeps the process's stdin open for 'I' frames; false gives
	// it an empty stdin (a terminal always takes input).
	Stdin bool `json:"stdin,omitempty"`
	// Terminal, when set, runs the process on a new terminal of that
	// size: its stdin, stdout and stderr, one stream ('O').
	Terminal *Terminal `json:"terminal,omitempty"`
	// TimeoutMillis bounds the process's life; at it, its tree is killed.
	// Zero means no bound.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
	// OutputCap bounds its output (both streams), in bytes: past it, the
	// tree is killed. Zero means no bound.
	OutputCap int64 `json:"output_cap,omitempty"`
	// Name names the process (unique among the daemon's processes, running
	// or remembered); empty means none.
	Name string `json:"name,omitempty"`
	// BufferBytes is its output buffer; zero means DefaultBuffer.
	BufferBytes int `json:"buffer_bytes,omitempty"`
}

// AttachRequest is the payload of an attach frame.
type AttachRequest struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"` // used when ID is empty
	// From is the output offset to replay from: what is still buffered
	// from there is sent first (a 'V' says what is lost before it).
	From int64 `json:"from,omitempty"`
}

// Process states.
const (
	StateRunning = "running"
	StateEnded   = "ended"
)

// Causes of a process's end.
const (
	CauseExit      = "exit"       // it exited
	CauseSignal    = "signal"     // a signal killed it (one sent through the API, or its own)
	CauseTimeout   = "timeout"    // killed at its timeout
	CauseOOM       = "oom"        // killed by the kernel for memory
	CauseOutputCap = "output-cap" // killed past its output cap
	CauseKilled    = "killed"     // killed because the daemon ended
)

// ProcessInfo describes one process.
type ProcessInfo struct {
	ID       string    `json:"id"`
	Name     string    `json:"name,omitempty"`
	Argv     []string  `json:"argv"`
	Started  time.Time `json:"started"`
	State    string    `json:"state"`
	PID      int       `json:"pid"`
	Terminal bool      `json:"terminal,omitempty"`
	// Output is how many bytes of output the process wrote so far.
	Output int64 `json:"output"`
	// End is set once it ended.
	End *EndInfo `json:"end,omitempty"`
}

// EndInfo is the payload of an end frame.
type EndInfo struct {
	// Detached says the id was detached: the process may run on, and
	// nothing else here is set.
	Detached bool `json:"detached,omitempty"`
	// ExitCode is 128+n when a signal n killed it.
	ExitCode int    `json:"exit_code"`
	Cause    string `json:"cause,omitempty"`
	// Truncated says the output cap was passed.
	Truncated bool `json:"truncated,omitempty"`
	// Output is the bytes of output it wrote in all; Dropped how many of
	// them the buffer dropped over its life.
	Output  int64 `json:"output"`
	Dropped int64 `json:"dropped"`
}

// procHostBound is what the host accepts from the daemon.
func procHostBound(typ byte) int {
	switch typ {
	case TypeHello:
		return MaxHello
	case TypeAttached, TypeEnd:
		return MaxInfo
	case TypeRefused:
		return MaxReason
	case TypeStdout, TypeStderr:
		return 8 + MaxChunk
	case TypeDropped:
		return 8
	case TypeWritten:
		return 4
	case TypeListed:
		return MaxList
	case TypePing:
		return 0
	}
	return -1
}

// procBound is what the daemon accepts from the host.
func procBound(typ byte) int {
	switch typ {
	case TypeStart, TypeAttach:
		return MaxStart
	case TypeStdin:
		return MaxChunk
	case TypeEOF, TypeDetach, TypeList, TypePing:
		return 0
	case TypeSignal:
		return 1
	case TypeResize, TypeCredit:
		return 4
	}
	return -1
}

func u32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func u64(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b[:]
}

func be32(v uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return b[:]
}
