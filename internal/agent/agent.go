// Package agent is the resident exec agent of session sandboxes: the logic
// of cmd/stockade-agent (Serve), which runs inside every Docker sandbox as
// the sandbox user, and the host's end of its channel (Conn). It uses the
// standard library only, so the program stays small.
//
// # Why
//
// An engine exec costs a create, a start, an inspect and a process start in
// the container (tens of milliseconds). The agent is started once per
// sandbox by one engine exec with stdin attached, and then runs each
// command as its own child: a command costs one frame each way and a fork.
//
// # Threat model
//
// The agent runs as the sandbox user, beside the session's own processes:
// session code can kill it, stop it, starve it, or (were it dumpable)
// trace it and take over its channel. The agent makes itself non-dumpable
// (prctl PR_SET_DUMPABLE 0), so processes of its uid can neither trace it
// nor open its /proc fd entries; they can still signal it. Nothing it says
// is trusted beyond the session's own business: the host (Conn and its
// caller) bounds every frame, caps every stream, keeps its own timer for
// every command, and kills commands through the engine, never through the
// agent. A frame the protocol does not allow is a protocol error: the host
// drops the channel and kills the agent, and commands go through the
// engine again.
//
// # Protocol
//
// The channel is the agent's stdin (host to agent) and stdout (agent to
// host); its stderr is diagnostics, capped by the host. Both directions
// carry frames: a 9-byte header (type: 1 byte; id: big-endian uint32;
// payload length: big-endian uint32) and the payload. The id names a
// command, chosen by the host; 0 is the channel itself.
//
// Host to agent:
//
//	'R' run      id > 0, payload a JSON Request (at most MaxRequest bytes):
//	             argv, the environment added to the agent's own, the
//	             working directory (empty: the agent's), and the bytes of
//	             its stdin (none: empty)
//	'C' cancel   id of a command sent earlier, no payload: if the agent has
//	             not started it, it never will (it answers 'N'); if it has,
//	             the agent kills its process group (an optimisation: the
//	             host kills the command itself); a file operation once
//	             started runs to its end
//	'W' write    (version 2) id > 0, payload (at most MaxRequest bytes) a
//	             4-byte big-endian length, a JSON WriteRequest of that
//	             length (staging name, mtime, each target's path and size),
//	             then every file's bytes in order: a bulk write done in the
//	             agent's own process as WriteFiles
//	'F' read     (version 2) id > 0, payload a JSON ReadRequest (at most
//	             MaxRead bytes): one file read in the agent's process as
//	             ReadFile
//
// Agent to host:
//
//	'H' hello    id 0, payload a JSON Hello (at most MaxHello bytes); the
//	             agent's first frame, and only then
//	'S' started  no payload: the agent is about to start the command, and
//	             has not before; sent before the fork, so a host that never
//	             got it knows the command never ran (when the agent is dead)
//	'O' stdout   a chunk of the command's stdout (1 to MaxChunk bytes)
//	'E' stderr   a chunk of its stderr (1 to MaxChunk bytes)
//	'X' exit     4 bytes, the big-endian exit status (128+n for signal n):
//	             the command exited and its stdout and stderr were closed
//	             by every process holding them (as an engine exec's stream
//	             ends); the command's last frame
//	'N' no start a reason (at most MaxReason bytes): the command did not
//	             start and will not (cancelled, or its fork failed); after
//	             'S' or without it, never after 'O', 'E' or 'X'; its last
//	             frame
//
// A file operation is answered as a command is: 'S' (or 'N' for a request
// it cannot decode), its output ('O' the size line and bytes of a read,
// 'E' the fault lines of a write), 'X' with the exit code the sandbox
// package's scripts would give (BulkPrepareShell and BulkRenameShell
// together; ReadFileShell), plus ExitStage for a file that could not be
// staged and ExitReadRefused for a file the agent cannot read as the
// sandbox user. No process is forked for it.
//
// # Versions
//
// The hello says which version the agent speaks (Version); the host
// accepts MinVersion to Version and sends an agent only the frames of its
// version: to a version 1 agent, file operations are ErrNotStarted without
// a frame sent, and the backend uses its scripts. An agent reads a frame
// of a type it does not know as a protocol error and exits.
//
// # File operations
//
// They trust nothing the host does not check again: they run as the
// sandbox user, inside the sandbox, on paths the host validated, with the
// permissions any session process has, so a session that replaces the
// agent gains nothing it could not do itself. The host bounds what it
// keeps of a read (the size asked and the size line), keeps its own timer
// on each operation (the agent's acknowledgement within a grace, its end
// within a budget), and drops (kills) an agent that misses either; it
// then discards what a write staged and does it again with the scripts.
//
// The host refuses (protocol error) any other type, an id it has not sent
// or has seen end, a payload over its type's bound, a second 'H' or 'S',
// output or 'X' before 'S'. The agent refuses a request with an id in use or
// a payload over its bound by exiting: the host sees the channel end.
//
// # Ending
//
// When stdin ends, the agent kills the process group of every command it
// still runs and exits. When the channel breaks or a frame breaks the
// protocol, Conn ends every command it was waiting for: one that got 'S'
// is lost (ErrLost: its caller kills it through the engine), one that did
// not is ErrNotStarted once Conn's Drop hook has made sure the agent is
// dead (it kills it through the engine), ErrLost otherwise.
package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version the agent speaks, in its Hello. The host
// accepts MinVersion to Version and sends an agent only what its version
// has: version 1 has run and cancel, version 2 adds write and read.
const (
	Version    = 2
	MinVersion = 1
	// FileVersion is the first version with write and read.
	FileVersion = 2
)

// Bounds of the protocol, in bytes.
const (
	// MaxChunk bounds an 'O' or 'E' payload.
	MaxChunk = 32 << 10
	// MaxRequest bounds an 'R' payload: argv and environment (which the
	// kernel bounds at about 2 MiB anyway) and stdin, base64 in the JSON.
	MaxRequest = 24 << 20
	// MaxHello bounds the 'H' payload.
	MaxHello = 1 << 10
	// MaxRead bounds an 'F' payload: a path (PATH_MAX) and a bound.
	MaxRead = 8 << 10
	// MaxReason bounds the 'N' payload.
	MaxReason = 1 << 10
	// headerBytes is the frame header's size.
	headerBytes = 9
)

// Frame types.
const (
	TypeRun     = 'R'
	TypeCancel  = 'C'
	TypeWrite   = 'W'
	TypeRead    = 'F'
	TypeHello   = 'H'
	TypeStarted = 'S'
	TypeStdout  = 'O'
	TypeStderr  = 'E'
	TypeExit    = 'X'
	TypeNoStart = 'N'
)

// Request is the payload of a run frame.
type Request struct {
	Argv []string `json:"argv"`
	// Env is KEY=value pairs added to (or replacing in) the agent's own
	// environment, which is the container's as the engine gives an exec.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory; empty means the agent's (the
	// container's working directory).
	Dir string `json:"dir,omitempty"`
	// Stdin is what the command reads on its stdin (then end of file);
	// nil gives it an empty stdin.
	Stdin []byte `json:"stdin,omitempty"`
}

// Hello is the payload of the agent's first frame.
type Hello struct {
	Version int `json:"version"`
	// PID is the agent's PID in the container (what it claims: used by
	// tests, never to kill anything).
	PID int `json:"pid"`
}

// ErrProtocol reports a frame the protocol does not allow.
var ErrProtocol = errors.New("agent: protocol error")

// frame is one decoded frame.
type frame struct {
	typ     byte
	id      uint32
	payload []byte
}

// writeFrame writes one frame to w in a single Write.
func writeFrame(w io.Writer, typ byte, id uint32, payload []byte) error {
	_, err := w.Write(frameBytes(typ, id, payload))
	return err
}

// frameBytes encodes one frame.
func frameBytes(typ byte, id uint32, payload []byte) []byte {
	b := make([]byte, headerBytes+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], id)
	binary.BigEndian.PutUint32(b[5:9], uint32(len(payload)))
	copy(b[headerBytes:], payload)
	return b
}

// readFrame reads one frame from r; bound gives each type's payload
// limit, and a type it does not know (limit < 0) or a payload over the
// limit is ErrProtocol, read no further. io.EOF means r ended between
// frames.
func readFrame(r io.Reader, bound func(typ byte) int) (frame, error) {
	return readFrameInto(r, bound, nil)
}

// readFrameInto is readFrame with the payload read into buf when it fits
// (valid until the next call), so a stream of output chunks allocates
// nothing per frame.
func readFrameInto(r io.Reader, bound func(typ byte) int, buf []byte) (frame, error) {
	var h [headerBytes]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return frame{}, fmt.Errorf("%w: stream ended inside a frame header", ErrProtocol)
		}
		return frame{}, err
	}
	f := frame{typ: h[0], id: binary.BigEndian.Uint32(h[1:5])}
	n := binary.BigEndian.Uint32(h[5:9])
	max := bound(f.typ)
	if max < 0 {
		return frame{}, fmt.Errorf("%w: frame type %q", ErrProtocol, f.typ)
	}
	if int64(n) > int64(max) {
		return frame{}, fmt.Errorf("%w: %q frame of %d bytes (at most %d)", ErrProtocol, f.typ, n, max)
	}
	if int(n) <= cap(buf) {
		f.payload = buf[:n]
	} else {
		f.payload = make([]byte, n)
	}
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return frame{}, fmt.Errorf("%w: stream ended inside a %q frame", ErrProtocol, f.typ)
		}
		return frame{}, err
	}
	return f, nil
}

// hostBound is what the host accepts from the agent.
func hostBound(typ byte) int {
	switch typ {
	case TypeHello:
		return MaxHello
	case TypeStarted:
		return 0
	case TypeStdout, TypeStderr:
		return MaxChunk
	case TypeExit:
		return 4
	case TypeNoStart:
		return MaxReason
	}
	return -1
}

// agentBound is what the agent accepts from the host.
func agentBound(typ byte) int {
	switch typ {
	case TypeRun:
		return MaxRequest
	case TypeCancel:
		return 0
	case TypeWrite:
		return MaxRequest
	case TypeRead:
		return MaxRead
	}
	return -1
}
