package dockerapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Stream numbers in the engine's multiplexed stream header.
const (
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamSystem = 3
)

// maxFrame caps one frame's declared size, in bytes; a larger header means a
// corrupt stream (the engine writes frames of at most 32 KiB).
const maxFrame = 16 << 20

// ErrCorruptStream reports a multiplexed stream whose header makes no sense.
var ErrCorruptStream = errors.New("dockerapi: corrupt multiplexed stream")

// Demux copies the engine's multiplexed stream (8-byte header: stream, three
// zero bytes, big-endian uint32 size; then the payload) from r to stdout and
// stderr until r ends. A nil writer discards its stream. Stdin frames go to
// stdout; an error the engine reports in band (the system stream) ends the
// copy as a *StreamError. Frames may arrive split across reads; a stream cut
// inside a frame is ErrCorruptStream. The copy never buffers more than one
// read buffer; a writer that stops keeping bytes (see Buffer) still lets the
// copy go on, so the producing process is never blocked.
func Demux(r io.Reader, stdout, stderr io.Writer) error {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var hdr [8]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			if err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%w: stream ended inside a frame header", ErrCorruptStream)
			}
			return err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if n > maxFrame {
			return fmt.Errorf("%w: frame of %d bytes", ErrCorruptStream, n)
		}
		var w io.Writer
		switch hdr[0] {
		case streamStdin, streamStdout:
			w = stdout
		case streamStderr:
			w = stderr
		case streamSystem:
			// The engine reports an error in band: keep its start as the
			// message, like the engine's own client does.
			msg, err := io.ReadAll(io.LimitReader(r, min(n, maxErrorBody)))
			if err != nil {
				return err
			}
			return &StreamError{Op: "stream", Message: string(msg)}
		default:
			return fmt.Errorf("%w: stream id %d", ErrCorruptStream, hdr[0])
		}
		// io.Copy stops quietly at EOF; a frame cut short is a broken stream,
		// not a short one.
		if got, err := io.CopyBuffer(w, io.LimitReader(r, n), buf); err != nil {
			return err
		} else if got < n {
			return fmt.Errorf("%w: stream ended inside a frame (%d of %d bytes)", ErrCorruptStream, got, n)
		}
	}
}

// Buffer is an io.Writer that keeps at most Max bytes and counts, but
// discards, the rest. The zero value keeps nothing and counts everything;
// it is safe for concurrent use.
type Buffer struct {
	// Max is how many bytes to keep. Zero or negative keeps none.
	Max int64

	mu    sync.Mutex
	buf   []byte
	total int64
}

// NewBuffer returns a Buffer keeping at most max bytes.
func NewBuffer(max int64) *Buffer { return &Buffer{Max: max} }

// Write keeps what fits under Max and reports all of p written.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.Max - int64(len(b.buf)); room > 0 {
		keep := p
		if int64(len(keep)) > room {
			keep = keep[:room]
		}
		b.buf = append(b.buf, keep...)
	}
	return len(p), nil
}

// Bytes returns the kept bytes.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

// String returns the kept bytes as a string.
func (b *Buffer) String() string { return string(b.Bytes()) }

// Total returns how many bytes were written, kept or not.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Truncated reports whether more was written than kept.
func (b *Buffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total > int64(len(b.buf))
}

// CapReader reads at most n bytes from R and then reports ErrCapExceeded if
// R has more; it is how callers bound streams they must keep whole (archives
// they parse), as opposed to Buffer, which truncates.
type CapReader struct {
	R io.Reader
	N int64 // bytes still allowed
}

// ErrCapExceeded reports a stream longer than its cap.
var ErrCapExceeded = errors.New("dockerapi: stream exceeds its cap")

func (c *CapReader) Read(p []byte) (int, error) {
	if c.N <= 0 {
		var one [1]byte
		n, err := c.R.Read(one[:])
		if n > 0 {
			return 0, ErrCapExceeded
		}
		return 0, err
	}
	if int64(len(p)) > c.N {
		p = p[:c.N]
	}
	n, err := c.R.Read(p)
	c.N -= int64(n)
	return n, err
}
