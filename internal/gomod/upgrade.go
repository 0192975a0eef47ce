package gomod

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// Kind classifies an upgrade of a dependency. Values are stable: reports
// print them.
type Kind string

const (
	// Patch keeps major and minor: v1.2.3 -> v1.2.4.
	Patch Kind = "patch"
	// Minor keeps the major version: v1.2.3 -> v1.3.0 (also v0.1.0 -> v0.2.0).
	Minor Kind = "minor"
	// Major changes the major version: a new module path (.../v2 ->
	// .../v3), v0 -> v1, or a higher +incompatible version.
	Major Kind = "major"
)

// ErrNotUpgrade reports a pair of versions that is not an upgrade: the
// same or an older version, an invalid version, or two unrelated modules.
var ErrNotUpgrade = errors.New("gomod: not an upgrade")

// Classify reports what kind of upgrade moving from from to to is. Both
// must be valid module versions (module.Check) of the same module family:
// their paths may differ only in the major version suffix.
func Classify(from, to module.Version) (Kind, error) {
	for _, v := range []module.Version{from, to} {
		if err := module.Check(v.Path, v.Version); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotUpgrade, err)
		}
	}
	fp, _, _ := module.SplitPathVersion(from.Path)
	tp, _, _ := module.SplitPathVersion(to.Path)
	if fp != tp {
		return "", fmt.Errorf("%w: %s and %s are different modules", ErrNotUpgrade, from.Path, to.Path)
	}
	fm, tm := majorNum(from.Version), majorNum(to.Version)
	switch {
	case tm < fm, tm == fm && semver.Compare(to.Version, from.Version) <= 0:
		return "", fmt.Errorf("%w: %s is not newer than %s", ErrNotUpgrade, to, from)
	case tm > fm:
		return Major, nil
	case semver.MajorMinor(to.Version) != semver.MajorMinor(from.Version):
		return Minor, nil
	}
	return Patch, nil
}

func majorNum(v string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(semver.Major(v), "v"))
	return n
}

// Candidate is an available upgrade of a dependency.
type Candidate struct {
	module.Version
	Kind Kind
}

// Candidates returns the newest available upgrade of cur of each kind, in
// the order patch, minor, major, omitting kinds with none. available may
// hold versions of cur's path and of its other major paths (.../v2, ...),
// in any order; pre-releases are skipped unless cur is one, versions that
// are not upgrades are ignored.
func Candidates(cur module.Version, available []module.Version) []Candidate {
	best := make(map[Kind]module.Version)
	for _, v := range available {
		if semver.Prerelease(v.Version) != "" && semver.Prerelease(cur.Version) == "" {
			continue
		}
		k, err := Classify(cur, v)
		if err != nil {
			continue
		}
		if b, ok := best[k]; !ok || newer(v, b) {
			best[k] = v
		}
	}
	var out []Candidate
	for _, k := range []Kind{Patch, Minor, Major} {
		if v, ok := best[k]; ok {
			out = append(out, Candidate{Version: v, Kind: k})
		}
	}
	return out
}

// newer orders versions of one module family: by major, then by semver.
func newer(a, b module.Version) bool {
	if ma, mb := majorNum(a.Version), majorNum(b.Version); ma != mb {
		return ma > mb
	}
	return semver.Compare(a.Version, b.Version) > 0
}

// NextMajorPath returns the module path of the next major version after
// path's: "example.com/m" and "example.com/m/v2" give "example.com/m/v2" and
// "example.com/m/v3"; "gopkg.in/yaml.v2" gives "gopkg.in/yaml.v3". Callers
// query the proxy for each in turn to find major upgrades.
func NextMajorPath(path string) (string, error) {
	prefix, suffix, ok := module.SplitPathVersion(path)
	if !ok {
		return "", fmt.Errorf("gomod: invalid module path %q", path)
	}
	switch {
	case suffix == "":
		return prefix + "/v2", nil
	case strings.HasPrefix(suffix, ".v"): // gopkg.in
		n, _ := strconv.Atoi(suffix[2:])
		return prefix + ".v" + strconv.Itoa(n+1), nil
	}
	n, _ := strconv.Atoi(suffix[2:])
	return prefix + "/v" + strconv.Itoa(n+1), nil
}
