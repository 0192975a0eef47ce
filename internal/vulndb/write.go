package vulndb

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"golang.org/x/mod/semver"
)

// Entry is an OSV entry as the Go vulnerability database writes it: the
// fields Stockade reads and writes (tests declare fixture advisories as
// Entries).
type Entry struct {
	SchemaVersion    string            `json:"schema_version,omitempty"`
	ID               string            `json:"id"`
	Modified         time.Time         `json:"modified"`
	Published        time.Time         `json:"published"`
	Withdrawn        *time.Time        `json:"withdrawn,omitempty"`
	Aliases          []string          `json:"aliases,omitempty"`
	Summary          string            `json:"summary,omitempty"`
	Details          string            `json:"details"`
	Affected         []Affected        `json:"affected"`
	DatabaseSpecific *DatabaseSpecific `json:"database_specific,omitempty"`
}

// Affected is one module an entry affects.
type Affected struct {
	Module            Module            `json:"package"`
	Ranges            []Range           `json:"ranges,omitempty"`
	EcosystemSpecific EcosystemSpecific `json:"ecosystem_specific"`
}

// Module names the module: ecosystem "Go", path (or "stdlib",
// "toolchain").
type Module struct {
	Path      string `json:"name"`
	Ecosystem string `json:"ecosystem"`
}

// Range is a SEMVER range: versions without the "v" prefix.
type Range struct {
	Type   string       `json:"type"`
	Events []RangeEvent `json:"events"`
}

// RangeEvent is introduced or fixed ("0" introduces from the start).
type RangeEvent struct {
	Introduced string `json:"introduced,omitempty"`
	Fixed      string `json:"fixed,omitempty"`
}

// EcosystemSpecific lists the affected packages and symbols; none makes
// the entry module-level.
type EcosystemSpecific struct {
	Imports []Import `json:"imports,omitempty"`
}

// Import is an affected package and its affected symbols (none: the whole
// package).
type Import struct {
	Path    string   `json:"path"`
	Symbols []string `json:"symbols,omitempty"`
}

// DatabaseSpecific carries the entry's page.
type DatabaseSpecific struct {
	URL string `json:"url,omitempty"`
}

var idPattern = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]{4,}$`)

// Write writes entries as a database into dir (which must not hold one):
// ID/<id>.json for each, index/vulns.json, index/modules.json with each
// module's newest fix, and index/db.json whose modified is the newest
// entry's. Files are written with sorted keys and entries, so the same
// entries make the same bytes and the same Hash.
func Write(dir string, entries []Entry) error {
	if len(entries) == 0 {
		return fmt.Errorf("vulndb: no entries")
	}
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, d := range []string{"ID", "index"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("vulndb: %w", err)
		}
	}
	type vulnMeta struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
		Aliases  []string  `json:"aliases,omitempty"`
	}
	type modVuln struct {
		ID       string    `json:"id"`
		Modified time.Time `json:"modified"`
		Fixed    string    `json:"fixed,omitempty"`
	}
	var vulns []vulnMeta
	mods := map[string][]modVuln{}
	var newest time.Time
	for _, e := range sorted {
		if !idPattern.MatchString(e.ID) {
			return fmt.Errorf("vulndb: %q is not a GO-YYYY-NNNN id", e.ID)
		}
		if e.SchemaVersion == "" {
			e.SchemaVersion = "1.3.1"
		}
		if e.DatabaseSpecific == nil {
			e.DatabaseSpecific = &DatabaseSpecific{URL: "https://pkg.go.dev/vuln/" + e.ID}
		}
		if e.Modified.After(newest) {
			newest = e.Modified
		}
		if err := writeJSON(filepath.Join(dir, "ID", e.ID+".json"), e); err != nil {
			return err
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		for _, a := range e.Affected {
			mods[a.Module.Path] = append(mods[a.Module.Path], modVuln{ID: e.ID, Modified: e.Modified, Fixed: latestFix(a)})
		}
	}
	type modMeta struct {
		Path  string    `json:"path"`
		Vulns []modVuln `json:"vulns"`
	}
	var modList []modMeta
	for p, v := range mods {
		modList = append(modList, modMeta{Path: p, Vulns: v})
	}
	sort.Slice(modList, func(i, j int) bool { return modList[i].Path < modList[j].Path })
	if err := writeJSON(filepath.Join(dir, "index", "vulns.json"), vulns); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "index", "modules.json"), modList); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "index", "db.json"), map[string]time.Time{"modified": newest})
}

// latestFix is the newest fixed version of a's ranges, without "v".
func latestFix(a Affected) string {
	best := ""
	for _, r := range a.Ranges {
		for _, e := range r.Events {
			if e.Fixed != "" && (best == "" || semver.Compare("v"+e.Fixed, "v"+best) > 0) {
				best = e.Fixed
			}
		}
	}
	return best
}

func writeJSON(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("vulndb: %w", err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("vulndb: %w", err)
	}
	return nil
}
