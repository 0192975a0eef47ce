package gate

import (
	"sync"
	"time"
)

// Verdicts of a Record.
const (
	Allowed = "allowed" // admitted, and the upstream answered or the tunnel ran
	Refused = "refused" // the policy refused it (403)
	Failed  = "failed"  // admitted, but the upstream could not be reached (502)
	Invalid = "invalid" // not a proxy request the gate understands (400)
)

// Record is one request through the gate, as EgressLog returns it.
type Record struct {
	Time     time.Time     `json:"time"`             // when the request arrived
	Method   string        `json:"method"`           // "CONNECT", "GET", ...
	Host     string        `json:"host"`             // as the client named it
	Port     string        `json:"port"`             // destination port
	Addr     string        `json:"addr,omitempty"`   // the address dialled; "" when none was
	Verdict  string        `json:"verdict"`          // Allowed, Refused, Failed or Invalid
	Reason   string        `json:"reason,omitempty"` // why, for anything but Allowed
	Status   int           `json:"status"`           // HTTP status the client got
	BytesUp  int64         `json:"bytes_up"`         // client to upstream, body or tunnel bytes
	BytesDn  int64         `json:"bytes_down"`       // upstream to client
	Duration time.Duration `json:"duration_ns"`      // until the response or tunnel ended
}

// DefaultLogRecords is how many records the gate keeps: the oldest go
// first once it holds this many (about 300 bytes each in JSON, so the
// whole log stays under the exec output cap of 1 MiB).
const DefaultLogRecords = 2048

// Log is a bounded log of Records, oldest first. It is safe for
// concurrent use.
type Log struct {
	mu      sync.Mutex
	buf     []Record
	next    int   // where the next record goes once buf is full
	dropped int64 // records overwritten
}

// NewLog returns a log keeping the last n records (n <= 0 means
// DefaultLogRecords).
func NewLog(n int) *Log {
	if n <= 0 {
		n = DefaultLogRecords
	}
	return &Log{buf: make([]Record, 0, n)}
}

// Add appends r, dropping the oldest record when the log is full.
func (l *Log) Add(r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) < cap(l.buf) {
		l.buf = append(l.buf, r)
		return
	}
	l.buf[l.next] = r
	l.next = (l.next + 1) % len(l.buf)
	l.dropped++
}

// Snapshot returns the records, oldest first, and how many were dropped.
func (l *Log) Snapshot() ([]Record, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Record, 0, len(l.buf))
	out = append(out, l.buf[l.next:]...)
	out = append(out, l.buf[:l.next]...)
	return out, l.dropped
}
