// Package agent is the resident exec agent of session sandboxes: the logic
// of cmd/stockade-agent (Serve), which runs inside every Docker sandbox as
// the sandbox user, and the host's end of its channel (Conn). It uses the
// standard library only, so the program stays small.
//
// An engine exec costs a create, a start, an inspect and a process start in
// the container; through the agent, started once per sandbox by one engine
// exec with stdin attached, a command costs one frame each way and a fork.
//
// The agent is the session's peer, not trusted: it runs as the sandbox user,
// so session code can kill, stop or starve it (it makes itself non-dumpable,
// so it cannot be traced). The host bounds every frame, caps every stream,
// keeps its own timer for every command and kills commands through the
// engine, never through the agent; a frame the protocol does not allow drops
// the channel, and commands go through the engine again.
//
// The channel carries frames of a 9-byte header (type: 1 byte; id:
// big-endian uint32; payload length: big-endian uint32) and a payload: run
// ('R'), cancel ('C'), bulk write ('W') and read ('F') from the host; hello
// ('H'), started ('S'), stdout ('O'), stderr ('E'), exit ('X') and no start
// ('N') from the agent. The hello names the protocol Version; the host
// accepts MinVersion to Version. docs/design/agent.md has every frame, its
// bounds and the order the host enforces, and how a command ends when the
// channel breaks.
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
