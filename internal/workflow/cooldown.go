package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
)

// Cooldown is a minimum age for upgrade candidates: a version the module
// proxy published less than MinAge ago (by its own .info Time, the
// commit time the proxy records) is held back, and the newest older one of
// its class is the candidate instead. A day-one release is the supply-chain
// risk projects add 7- to 30-day cooldowns against. A version whose time
// the proxy does not give is held back too: its age is not known.
type Cooldown struct {
	// MinAge is the minimum age; zero holds back nothing.
	MinAge time.Duration
	// Now is the clock the age is measured against; nil means time.Now.
	// Tests fix it against the fixture proxy's times (modproxy.BaseTime).
	Now func() time.Time
}

func (c Cooldown) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// timesArgv asks the proxy for each module@version's .info: go list -m
// -json prints its Time; -e reports a query that fails as an object with
// an Error instead of failing them all.
func timesArgv(queries []string) []string {
	return append([]string{"go", "list", "-m", "-e", "-json"}, queries...)
}

// parseTimes reads go list -m -e -json output: the publication time of
// each path@version; a query without one maps to nothing.
func parseTimes(stdout []byte) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	for {
		var m struct {
			Path, Version string
			Time          *time.Time
			Error         *struct{ Err string }
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("workflow: reading go list -m output: %w", err)
		}
		if m.Error == nil && m.Time != nil && !m.Time.IsZero() {
			out[m.Path+"@"+m.Version] = m.Time.UTC()
		}
	}
}

// newer returns the queries (path@version) of the versions in avail
// newer than r: those a cooldown must date.
func newer(r module.Version, avail []module.Version) []string {
	var out []string
	for _, v := range avail {
		if v.Path != r.Path || semver.Compare(v.Version, r.Version) > 0 {
			out = append(out, v.Path+"@"+v.Version)
		}
	}
	return out
}

// times asks acq, in one command, for the publication times of queries.
func (c Cooldown) times(ctx context.Context, acq validate.Execer, queries []string) (map[string]time.Time, error) {
	if c.MinAge <= 0 || len(queries) == 0 {
		return nil, nil
	}
	out, err := acq.Exec(ctx, timesArgv(queries), 0)
	if err != nil {
		return nil, fmt.Errorf("workflow: reading publication times: %w", err)
	}
	if reason := validate.OutputReason(out); reason != "" {
		return nil, fmt.Errorf("workflow: reading publication times: %s", CommandFailure(out, reason))
	}
	return parseTimes(out.Stdout)
}

// keep returns the versions of avail (the listed versions of r's paths)
// the cooldown keeps, and the newer ones it holds back with their times
// (zero when unknown), by times.
func (c Cooldown) keep(r module.Version, avail []module.Version, times map[string]time.Time) (kept []module.Version, held map[module.Version]time.Time) {
	if c.MinAge <= 0 {
		return avail, nil
	}
	cutoff := c.now().Add(-c.MinAge)
	held = map[module.Version]time.Time{}
	for _, v := range avail {
		if v.Path == r.Path && semver.Compare(v.Version, r.Version) <= 0 {
			kept = append(kept, v)
			continue
		}
		t, ok := times[v.Path+"@"+v.Version]
		if ok && !t.After(cutoff) {
			kept = append(kept, v)
			continue
		}
		held[v] = t
	}
	return kept, held
}

// heldBack returns the held-back versions among would (the candidates
// without a cooldown), each with its time and the time it ages in.
func (c Cooldown) heldBack(r module.Version, would []report.Candidate, held map[module.Version]time.Time) []report.HeldBack {
	var out []report.HeldBack
	for _, w := range would {
		t, ok := held[module.Version{Path: w.Path, Version: w.Version}]
		if !ok {
			continue
		}
		h := report.HeldBack{Path: w.Path, Current: r.Version, Version: w.Version, Class: w.Class}
		if !t.IsZero() {
			h.Published, h.Until = t, t.Add(c.MinAge)
		} else {
			h.Reason = "the module proxy gives no publication time"
		}
		out = append(out, h)
	}
	return out
}
