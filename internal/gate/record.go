package gate

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/stockade/stockade/domain"
)

// Record is one request through the gate (domain.EgressRecord, the type
// backends hand platforms).
type Record = domain.EgressRecord

// LogDump is the record as the gate hands it out (the answer to CmdLog,
// domain.EgressLog): its records and what its bounds dropped or cut.
type LogDump = domain.EgressLog

// Verdicts of a Record.
const (
	Allowed = domain.EgressAllowed
	Refused = domain.EgressRefused
	Failed  = domain.EgressFailed
	Invalid = domain.EgressInvalid
)

// DefaultLogRecords is how many records the gate keeps: the oldest go
// first once it holds this many.
const DefaultLogRecords = 2048

// MaxFieldBytes bounds each string of a Record, in bytes: the method,
// host and reason come from the sandbox (a Host header may be a megabyte).
// With every field at its bound a record is under 4 KiB of JSON, so a full
// log stays under what the host reads of it (egress.MaxLogBytes).
const MaxFieldBytes = 256

// Log is a bounded log of Records, oldest first. It is safe for
// concurrent use.
type Log struct {
	mu        sync.Mutex
	buf       []Record
	next      int   // where the next record goes once buf is full
	dropped   int64 // records overwritten
	truncated int64 // records Bound cut
}

// NewLog returns a log keeping the last n records (n <= 0 means
// DefaultLogRecords).
func NewLog(n int) *Log {
	if n <= 0 {
		n = DefaultLogRecords
	}
	return &Log{buf: make([]Record, 0, n)}
}

// Add appends r as Bound makes it, dropping the oldest record when the
// log is full, and returns what it appended.
func (l *Log) Add(r Record) Record {
	r, cut := Bound(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if cut {
		l.truncated++
	}
	if len(l.buf) < cap(l.buf) {
		l.buf = append(l.buf, r)
		return r
	}
	l.buf[l.next] = r
	l.next = (l.next + 1) % len(l.buf)
	l.dropped++
	return r
}

// Snapshot returns the records, oldest (by arrival) first, and how many
// were dropped and cut. A request is recorded when it ends, so one still
// running (a long download, an open tunnel) is not there yet.
func (l *Log) Snapshot() LogDump {
	l.mu.Lock()
	out := make([]Record, 0, len(l.buf))
	out = append(out, l.buf[l.next:]...)
	out = append(out, l.buf[:l.next]...)
	d := LogDump{Records: out, Dropped: l.dropped, Truncated: l.truncated}
	l.mu.Unlock()
	slices.SortStableFunc(d.Records, func(a, b Record) int { return a.Time.Compare(b.Time) })
	return d
}

// Bound returns r with each string field made valid UTF-8 without control
// characters (each invalid byte or control character becomes '?', so its
// JSON is at most twice as long) and cut to MaxFieldBytes at a character
// boundary; cut reports whether a field was longer.
func Bound(r Record) (_ Record, cut bool) {
	for _, f := range []*string{&r.Method, &r.Host, &r.Port, &r.Addr, &r.Verdict, &r.Reason} {
		var c bool
		*f, c = boundField(*f)
		cut = cut || c
	}
	return r, cut
}

func boundField(s string) (string, bool) {
	cut := len(s) > MaxFieldBytes
	if cut {
		// Room for the longest character a byte can become ('?' is one,
		// the rest are kept as they are).
		s = s[:MaxFieldBytes+utf8.UTFMax]
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
	if len(s) > MaxFieldBytes {
		n := MaxFieldBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s, cut = s[:n], true
	}
	return s, cut
}
