package domain

import "time"

// Verdicts of an EgressRecord.
const (
	EgressAllowed = "allowed" // admitted: the upstream answered, or the tunnel ran
	EgressRefused = "refused" // the gate's policy refused it (403)
	EgressFailed  = "failed"  // admitted, but the upstream could not be reached (502)
	EgressInvalid = "invalid" // not a proxy request the gate understands (400)
)

// EgressRecord is one request a session's egress gate saw, as backends'
// EgressLog return them. The strings the sandbox chose (method, host,
// reason) are kept to a bound of bytes each (EgressLog.Truncated counts
// the records cut).
type EgressRecord struct {
	Time     time.Time     `json:"time"`             // when the request arrived, UTC
	Method   string        `json:"method"`           // "CONNECT", "GET", ...
	Host     string        `json:"host"`             // as the client named it
	Port     string        `json:"port"`             // destination port
	Addr     string        `json:"addr,omitempty"`   // "ip:port" dialled; "" when none was
	Verdict  string        `json:"verdict"`          // one of the Egress… verdicts
	Reason   string        `json:"reason,omitempty"` // why, for anything but allowed
	Status   int           `json:"status"`           // HTTP status the client got
	BytesUp  int64         `json:"bytes_up"`         // client to upstream: body or tunnel bytes
	BytesDn  int64         `json:"bytes_down"`       // upstream to client
	Duration time.Duration `json:"duration_ns"`      // until the response or tunnel ended
}

// EgressLog is what a session's egress gate recorded, as backends'
// EgressLog return it.
type EgressLog struct {
	// Records are the requests the gate saw, oldest first: at most the
	// gate's bound (the newest ones).
	Records []EgressRecord `json:"records"`
	// Dropped is how many older records the gate's bound dropped; zero
	// when it dropped none.
	Dropped int64 `json:"dropped"`
	// Truncated is how many records (kept or dropped) had a value cut to
	// the gate's bound on a field (a host of a million bytes, say); zero
	// when none had.
	Truncated int64 `json:"truncated"`
}
