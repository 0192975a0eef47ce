// Package vulndbtest declares the fixture vulnerability database the scan
// tests use, for the fixture repository testdata/repos/vuln and the fixture
// modules stockade.test/vulnlib and stockade.test/othermod.
package vulndbtest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/vulndb"
)

// The fixture advisories' IDs and what testdata/repos/vuln reaches of each.
const (
	// CalledFixed: a.Bad, called (by two paths), fixed in vulnlib v1.1.0.
	CalledFixed = "GO-2099-0001"
	// Imported: b.Unused; package b is imported, Unused never called.
	Imported = "GO-2099-0002"
	// ModuleLevel: othermod with no packages named (every symbol
	// affected); the fixture calls othermod.Hello, so it is called.
	// Fixed in othermod v1.0.1.
	ModuleLevel = "GO-2099-0003"
	// Stdlib: strings.ToUpper in the standard library at the image's Go,
	// called, fixed in the image's next patch release.
	Stdlib = "GO-2099-0004"
	// NoFix: a.Worse, called, no fixed version.
	NoFix = "GO-2099-0005"
	// Withdrawn: a.Bad again, withdrawn; never reported.
	Withdrawn = "GO-2099-0006"
	// Required: package c of vulnlib, never imported: required only.
	Required = "GO-2099-0007"
)

var day = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Entries returns the fixture advisories for an image whose Go is
// goVersion ("go1.26.8"): the standard-library one affects that version.
func Entries(goVersion string) ([]vulndb.Entry, error) {
	v := strings.TrimPrefix(goVersion, "go")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("vulndbtest: %q is not a go1.N.P release", goVersion)
	}
	patch, err := strconv.Atoi(parts[2])
	if err != nil {
		return nil, fmt.Errorf("vulndbtest: %q: %v", goVersion, err)
	}
	stdFix := fmt.Sprintf("%s.%s.%d", parts[0], parts[1], patch+1)
	semver := func(events ...vulndb.RangeEvent) []vulndb.Range {
		return []vulndb.Range{{Type: "SEMVER", Events: events}}
	}
	from0 := vulndb.RangeEvent{Introduced: "0"}
	mod := func(path string) vulndb.Module { return vulndb.Module{Path: path, Ecosystem: "Go"} }
	imports := func(pkg string, symbols ...string) vulndb.EcosystemSpecific {
		return vulndb.EcosystemSpecific{Imports: []vulndb.Import{{Path: pkg, Symbols: symbols}}}
	}
	withdrawn := day.Add(time.Hour)
	entry := func(id, summary string, a vulndb.Affected) vulndb.Entry {
		return vulndb.Entry{ID: id, Modified: day, Published: day, Summary: summary, Details: summary + ".", Affected: []vulndb.Affected{a}}
	}
	es := []vulndb.Entry{
		entry(CalledFixed, "Bad does bad things in stockade.test/vulnlib", vulndb.Affected{
			Module: mod("stockade.test/vulnlib"), Ranges: semver(from0, vulndb.RangeEvent{Fixed: "1.1.0"}),
			EcosystemSpecific: imports("stockade.test/vulnlib/a", "Bad")}),
		entry(Imported, "Unused is unsafe in stockade.test/vulnlib", vulndb.Affected{
			Module: mod("stockade.test/vulnlib"), Ranges: semver(from0, vulndb.RangeEvent{Fixed: "1.1.0"}),
			EcosystemSpecific: imports("stockade.test/vulnlib/b", "Unused")}),
		entry(ModuleLevel, "Everything in stockade.test/othermod is unsafe", vulndb.Affected{
			Module: mod("stockade.test/othermod"), Ranges: semver(from0, vulndb.RangeEvent{Fixed: "1.0.1"})}),
		entry(Stdlib, "ToUpper is unsafe in strings", vulndb.Affected{
			Module: mod("stdlib"), Ranges: semver(from0, vulndb.RangeEvent{Fixed: stdFix}),
			EcosystemSpecific: imports("strings", "ToUpper")}),
		entry(NoFix, "Worse has no fix in stockade.test/vulnlib", vulndb.Affected{
			Module: mod("stockade.test/vulnlib"), Ranges: semver(from0),
			EcosystemSpecific: imports("stockade.test/vulnlib/a", "Worse")}),
		entry(Withdrawn, "Bad was thought unsafe again (withdrawn)", vulndb.Affected{
			Module: mod("stockade.test/vulnlib"), Ranges: semver(from0),
			EcosystemSpecific: imports("stockade.test/vulnlib/a", "Bad")}),
		entry(Required, "Risky is unsafe in stockade.test/vulnlib/c", vulndb.Affected{
			Module: mod("stockade.test/vulnlib"), Ranges: semver(from0, vulndb.RangeEvent{Fixed: "1.1.0"}),
			EcosystemSpecific: imports("stockade.test/vulnlib/c", "Risky")}),
	}
	for i := range es {
		if es[i].ID == Withdrawn {
			es[i].Withdrawn, es[i].Modified = &withdrawn, withdrawn
		}
	}
	return es, nil
}

// Write writes the fixture database for goVersion into a new directory
// under t.TempDir and returns it.
func Write(t testing.TB, goVersion string) string {
	t.Helper()
	es, err := Entries(goVersion)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := vulndb.Write(dir, es); err != nil {
		t.Fatal(err)
	}
	return dir
}
