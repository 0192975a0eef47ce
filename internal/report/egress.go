package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stockade/stockade/domain"
)

// Egress is what the run's egress gates recorded during one phase with
// network (internal/toolchain: acquire, mutate and tool behind the gate):
// every request the go command made through them, with the gate's verdict.
type Egress struct {
	// Phase is the phase of Timings it belongs to: "scanner" (the
	// scanner's build, when this run built it), "acquire", "candidates".
	Phase string `json:"phase"`
	// Records are the gate's records of the phase, oldest first
	// (domain.EgressRecord: time, method, host, port, address dialled,
	// verdict and reason, status, bytes each way, duration); [] when the
	// phase asked for nothing.
	Records []domain.EgressRecord `json:"records"`
	// Lost counts the phase's records the gate's bound dropped before
	// they could be read.
	Lost int64 `json:"lost,omitempty"`
}

// NewEgress returns the record of phase: recs (nil becomes []) and how
// many records were lost.
func NewEgress(phase string, recs []domain.EgressRecord, lost int64) Egress {
	if recs == nil {
		recs = []domain.EgressRecord{}
	}
	return Egress{Phase: phase, Records: recs, Lost: lost}
}

// RefusedHosts returns the hosts recs' gate refused, sorted, each once.
func RefusedHosts(recs []domain.EgressRecord) []string {
	return hostsOf(recs, domain.EgressRefused)
}

// hostsOf returns the hosts of recs with verdict, sorted, each once.
func hostsOf(recs []domain.EgressRecord, verdict string) []string {
	var hs []string
	for _, rec := range recs {
		if rec.Verdict == verdict {
			hs = append(hs, rec.Host)
		}
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// maxEgressHosts bounds the hosts named per verdict in the text summary.
const maxEgressHosts = 3

// egressVerdicts are the verdicts in the order the summary names them.
var egressVerdicts = []string{domain.EgressAllowed, domain.EgressRefused, domain.EgressFailed, domain.EgressInvalid}

// EgressLine is the text reports' one line about egress: per phase, how
// many requests got each verdict and to which hosts, such as "egress:
// acquire 3 allowed (proxy.golang.org), 1 refused (evil.example)".
func EgressLine(es []Egress) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		var vs []string
		for _, v := range egressVerdicts {
			n := 0
			for _, rec := range e.Records {
				if rec.Verdict == v {
					n++
				}
			}
			if n == 0 {
				continue
			}
			hs := hostsOf(e.Records, v)
			if len(hs) > maxEgressHosts {
				hs = append(hs[:maxEgressHosts], fmt.Sprintf("+%d more", len(hs)-maxEgressHosts))
			}
			vs = append(vs, fmt.Sprintf("%d %s (%s)", n, v, strings.Join(hs, ", ")))
		}
		if len(vs) == 0 {
			vs = append(vs, "no requests")
		}
		if e.Lost > 0 {
			vs = append(vs, fmt.Sprintf("%d not recorded (the gate's record was full)", e.Lost))
		}
		parts = append(parts, e.Phase+" "+strings.Join(vs, ", "))
	}
	return "egress: " + strings.Join(parts, "; ")
}
