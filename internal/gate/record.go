package gate

import (
	"slices"
	"sync"

	"github.com/stockade/stockade/domain"
)

// Record is one request through the gate (domain.EgressRecord, the type
// backends hand platforms).
type Record = domain.EgressRecord

// Verdicts of a Record.
const (
	Allowed = domain.EgressAllowed
	Refused = domain.EgressRefused
	Failed  = domain.EgressFailed
	Invalid = domain.EgressInvalid
)

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

// Snapshot returns the records, oldest (by arrival) first, and how many
// were dropped. A request is recorded when it ends, so one still running
// (a long download, an open tunnel) is not there yet.
func (l *Log) Snapshot() ([]Record, int64) {
	l.mu.Lock()
	out := make([]Record, 0, len(l.buf))
	out = append(out, l.buf[l.next:]...)
	out = append(out, l.buf[:l.next]...)
	dropped := l.dropped
	l.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Record) int { return a.Time.Compare(b.Time) })
	return out, dropped
}
