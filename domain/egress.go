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
// EgressLog return them.
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
