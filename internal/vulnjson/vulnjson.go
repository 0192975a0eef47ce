// Package vulnjson reads the output of `govulncheck -format json` into one
// finding per vulnerability, fail-closed.
//
// The stream is a sequence of JSON objects, each with exactly one of
// "config", "progress", "SBOM", "osv" or "finding", in no guaranteed order.
// govulncheck emits a finding for a vulnerability at each level it
// reaches: module (a trace of one frame naming only the module), package
// (the frame names the package too) and symbol (the first frame is the
// vulnerable function, the last the entry point in the scanned code), and
// may emit several of each. Parse keeps one per vulnerability at the
// strongest level reached (called > imported > required), with the
// affected module and version, the fixed version and, when called, one
// call trace (the shortest; ties broken by its text, so the choice does not
// depend on the order).
//
// Threat model: the scanner ran over hostile code and its output passed
// through the container, so nothing in it is assumed: a stream that is cut
// short, a value that is not one of those objects, a finding without a
// trace or naming an advisory the stream never described, no config, a
// scanner that is not govulncheck, a non-zero exit, a timeout or a
// truncated stream make the scan inconclusive, never "no vulnerabilities".
package vulnjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/report"
)

// Output is what the scanner's command did.
type Output struct {
	ExitCode  int
	Stdout    []byte
	Stderr    []byte
	Truncated bool // a stream passed its cap
	// StdoutBytes is how many bytes the scanner wrote to stdout, kept or
	// not; zero when unknown.
	StdoutBytes int64
	TimedOut    bool
	OOMKilled   bool
}

// maxStderr caps the scanner's stderr quoted in a reason, in bytes.
const maxStderr = 2 << 10

type message struct {
	Config   *config         `json:"config"`
	Progress json.RawMessage `json:"progress"`
	SBOM     json.RawMessage `json:"SBOM"`
	OSV      *entry          `json:"osv"`
	Finding  *finding        `json:"finding"`
}

type config struct {
	ProtocolVersion string `json:"protocol_version"`
	ScannerName     string `json:"scanner_name"`
	ScannerVersion  string `json:"scanner_version"`
	GoVersion       string `json:"go_version"`
	ScanLevel       string `json:"scan_level"`
}

type entry struct {
	ID               string     `json:"id"`
	Summary          string     `json:"summary"`
	Aliases          []string   `json:"aliases"`
	Withdrawn        *time.Time `json:"withdrawn"`
	DatabaseSpecific *struct {
		URL string `json:"url"`
	} `json:"database_specific"`
}

type finding struct {
	OSV          string   `json:"osv"`
	FixedVersion string   `json:"fixed_version"`
	Trace        []*frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
		Column   int    `json:"column"`
	} `json:"position"`
}

// known are the keys a message may have; exactly one is set.
var known = map[string]bool{"config": true, "progress": true, "SBOM": true, "osv": true, "finding": true}

// Parse reads out into a scan whose Scanner and DB the caller fills in.
func Parse(out Output) report.VulnScan {
	s := report.VulnScan{Status: report.ScanComplete, Vulns: []report.Vuln{}}
	fail := func(format string, args ...any) {
		s.Status = report.ScanInconclusive
		s.Reasons = append(s.Reasons, fmt.Sprintf(format, args...))
	}
	switch {
	case out.TimedOut:
		fail("the scanner timed out")
	case out.OOMKilled:
		fail("the scanner was killed for using too much memory")
	case out.Truncated && out.StdoutBytes > int64(len(out.Stdout)):
		fail("the scanner's output passed its cap and was cut: %d of %d bytes kept", len(out.Stdout), out.StdoutBytes)
	case out.Truncated:
		fail("the scanner's output passed its cap and was cut")
	}
	if out.ExitCode != 0 {
		msg := strings.TrimSpace(string(out.Stderr))
		if len(msg) > maxStderr {
			msg = msg[len(msg)-maxStderr:]
		}
		fail("the scanner exited %d: %s", out.ExitCode, msg)
	}
	var cfg *config
	osvs := map[string]*entry{}
	withdrawn := map[string]bool{}
	var findings []*finding
	dec := json.NewDecoder(bytes.NewReader(out.Stdout))
	for n := 0; ; n++ {
		var raw map[string]json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail("the stream is not govulncheck JSON after %d messages: %v", n, err)
			break
		}
		if len(raw) != 1 {
			fail("message %d has %d fields, not one", n, len(raw))
			break
		}
		for k := range raw {
			if !known[k] {
				fail("message %d is of an unknown kind %q", n, k)
			}
		}
		var m message
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &m); err != nil {
			fail("message %d does not decode: %v", n, err)
			break
		}
		switch {
		case m.Config != nil:
			cfg = m.Config
		case m.OSV != nil:
			if m.OSV.ID == "" {
				fail("message %d: an advisory without an id", n)
				continue
			}
			osvs[m.OSV.ID] = m.OSV
			if m.OSV.Withdrawn != nil {
				withdrawn[m.OSV.ID] = true
			}
		case m.Finding != nil:
			findings = append(findings, m.Finding)
		}
	}
	switch {
	case cfg == nil:
		fail("the stream has no config message: the scanner did not start its report")
	case cfg.ScannerName != "govulncheck":
		fail("the stream's scanner is %q, not govulncheck", cfg.ScannerName)
	case cfg.ScanLevel != "" && cfg.ScanLevel != "symbol":
		fail("the scan level is %q, not symbol: called vulnerabilities would not be seen", cfg.ScanLevel)
	}
	if cfg != nil {
		s.Scanner.Name, s.Scanner.Version = cfg.ScannerName, cfg.ScannerVersion
	}

	best := map[string]report.Vuln{}
	bestKey := map[string]string{}
	for _, f := range findings {
		e := osvs[f.OSV]
		if e == nil {
			fail("a finding names %q, which the stream never described", f.OSV)
			continue
		}
		if len(f.Trace) == 0 || f.Trace[0] == nil || f.Trace[0].Module == "" {
			fail("a finding for %s has no trace", f.OSV)
			continue
		}
		if e.Withdrawn != nil {
			continue // withdrawn: never a vulnerability
		}
		v, key := vulnOf(e, f)
		if v.Level == "" {
			fail("a finding for %s has a frame with no package but a function", f.OSV)
			continue
		}
		old, seen := best[e.ID]
		if !seen || v.Level.Rank() > old.Level.Rank() || v.Level == old.Level && key < bestKey[e.ID] {
			best[e.ID], bestKey[e.ID] = v, key
		}
	}
	for _, v := range best {
		s.Vulns = append(s.Vulns, v)
	}
	report.SortVulns(s.Vulns)
	for id := range withdrawn {
		s.Withdrawn = append(s.Withdrawn, id)
	}
	sort.Strings(s.Withdrawn)
	return s
}

// vulnOf is one finding as a Vuln, with the key that orders findings of the
// same level: a called one's trace length and text, so the shortest trace
// wins whatever the stream's order.
func vulnOf(e *entry, f *finding) (report.Vuln, string) {
	top := f.Trace[0]
	v := report.Vuln{
		ID: e.ID, Aliases: e.Aliases, Summary: e.Summary,
		Module: top.Module, Version: top.Version, Package: top.Package, Fixed: f.FixedVersion,
	}
	if e.DatabaseSpecific != nil {
		v.URL = e.DatabaseSpecific.URL
	}
	switch {
	case top.Function != "" && top.Package != "":
		v.Level = report.LevelCalled
	case top.Function != "":
		return v, "" // a symbol outside any package: malformed
	case top.Package != "":
		v.Level = report.LevelImported
	default:
		v.Level = report.LevelRequired
	}
	var key strings.Builder
	fmt.Fprintf(&key, "%06d|%s|%s|%s", len(f.Trace), v.Module, v.Version, v.Fixed)
	if v.Level == report.LevelCalled {
		for i := len(f.Trace) - 1; i >= 0; i-- {
			fr := f.Trace[i]
			if fr == nil {
				continue
			}
			fn := fr.Function
			if fr.Receiver != "" {
				fn = strings.TrimPrefix(fr.Receiver, "*") + "." + fn
			}
			out := report.Frame{Package: fr.Package, Function: fn}
			if p := fr.Position; p != nil && p.Line > 0 {
				out.Position = fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
			}
			v.Trace = append(v.Trace, out)
			fmt.Fprintf(&key, "|%s.%s@%s", out.Package, out.Function, out.Position)
		}
	}
	return v, key.String()
}
