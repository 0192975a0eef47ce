package maintain

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
)

// Errors of the policy, before anything runs.
var (
	// ErrPolicy reports a -allow or -module that cannot be read.
	ErrPolicy = errors.New("maintain: invalid policy")
	// ErrMajor reports a policy allowing major upgrades, which change the
	// import path: rewriting imports is out of scope for now.
	ErrMajor = errors.New("maintain: major upgrades change the import path and are not supported yet")
)

// DefaultAllow is the policy's classes when none are given.
var DefaultAllow = []gomod.Kind{gomod.Patch, gomod.Minor}

// Policy says which candidates may be tried. The zero value allows patch
// and minor upgrades of every direct dependency.
type Policy struct {
	// Allow lists the classes that may be tried; nil means DefaultAllow.
	// Major is refused (ErrMajor).
	Allow []gomod.Kind
	// Module narrows the choice to one direct dependency; "" means any.
	Module string
	// Version narrows it to one version of Module; "" means the newest of
	// each allowed class.
	Version string
	// KeepGo refuses an upgrade that changes the go line at all; by
	// default a raise the upgrade requires (go get's, since Go 1.21) is
	// admitted when the image's Go builds the new line.
	KeepGo bool
}

// ParseAllow reads a comma-separated list of classes ("patch,minor").
func ParseAllow(s string) ([]gomod.Kind, error) {
	var out []gomod.Kind
	for _, f := range strings.Split(s, ",") {
		switch k := gomod.Kind(strings.TrimSpace(f)); k {
		case gomod.Patch, gomod.Minor:
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		case gomod.Major:
			return nil, ErrMajor
		default:
			return nil, fmt.Errorf("%w: -allow: %q is not patch, minor or major", ErrPolicy, f)
		}
	}
	return out, nil
}

// ParseModule reads "path" or "path@version".
func ParseModule(s string) (path, version string, err error) {
	path, version, _ = strings.Cut(s, "@")
	if err := module.CheckPath(path); err != nil {
		return "", "", fmt.Errorf("%w: -module: %v", ErrPolicy, err)
	}
	if version != "" {
		if err := module.Check(path, version); err != nil || semver.Canonical(version) != version {
			return "", "", fmt.Errorf("%w: -module: %q is not a canonical version of %s", ErrPolicy, version, path)
		}
	}
	return path, version, nil
}

// Validate refuses a policy that cannot be applied.
func (p Policy) Validate() error {
	for _, k := range p.Allow {
		if k == gomod.Major {
			return ErrMajor
		}
		if k != gomod.Patch && k != gomod.Minor {
			return fmt.Errorf("%w: class %q", ErrPolicy, k)
		}
	}
	if p.Version != "" && p.Module == "" {
		return fmt.Errorf("%w: a version needs a module", ErrPolicy)
	}
	return nil
}

func (p Policy) allows(k gomod.Kind) bool {
	allow := p.Allow
	if allow == nil {
		allow = DefaultAllow
	}
	return slices.Contains(allow, k)
}

// judge marks each listed candidate eligible or says why not, and returns
// the eligible ones in selection order: patch before minor, then the
// highest version, then module path.
func judge(listed []report.Candidate, p Policy) (all []Candidate, order []report.Candidate) {
	for _, c := range listed {
		j := Candidate{Candidate: c}
		switch {
		case p.Module != "" && c.Path != p.Module:
			j.Why = "not the -module asked for"
		case p.Version != "" && c.Version != p.Version:
			j.Why = "not the -module version asked for"
		case gomod.Kind(c.Class) == gomod.Major:
			j.Why = "major upgrades change the import path: not supported yet"
		case !p.allows(gomod.Kind(c.Class)):
			j.Why = "class " + c.Class + " is not allowed (-allow)"
		case semver.Prerelease(c.Version) != "":
			j.Why = "pre-releases are not eligible"
		case module.IsPseudoVersion(c.Version):
			j.Why = "pseudo-versions are not eligible"
		default:
			j.Eligible = true
			order = append(order, c)
		}
		all = append(all, j)
	}
	rank := map[string]int{string(gomod.Patch): 0, string(gomod.Minor): 1}
	sort.SliceStable(order, func(i, k int) bool {
		a, b := order[i], order[k]
		if rank[a.Class] != rank[b.Class] {
			return rank[a.Class] < rank[b.Class]
		}
		if c := semver.Compare(a.Version, b.Version); c != 0 {
			return c > 0
		}
		return a.Path < b.Path
	})
	return all, order
}

// checkModule applies -module to the module's direct requirements before
// anything runs: the module must be one of them, and with a version
// (pinned) an upgrade of it of a class p allows (Major is ErrMajor); it
// returns that candidate. Whether the version is a listed release needs
// the proxy (listed).
func (p Policy) checkModule(direct []module.Version) (pinned *report.Candidate, err error) {
	if p.Module == "" {
		return nil, nil
	}
	for _, d := range direct {
		if d.Path != p.Module {
			continue
		}
		if p.Version == "" {
			return nil, nil
		}
		k, err := gomod.Classify(d, module.Version{Path: p.Module, Version: p.Version})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
		}
		if k == gomod.Major {
			return nil, ErrMajor
		}
		if !p.allows(k) {
			return nil, fmt.Errorf("%w: -module %s@%s is a %s upgrade, a class -allow leaves out", ErrPolicy, p.Module, p.Version, k)
		}
		return &report.Candidate{Path: p.Module, Current: d.Version, Version: p.Version, Class: string(k)}, nil
	}
	return nil, fmt.Errorf("%w: %s is not a direct requirement of the module", ErrPolicy, p.Module)
}

// listed refuses a pinned candidate whose version is not a listed release
// of versions (go list -m -versions leaves out retracted ones).
func listed(c report.Candidate, versions map[string][]string) error {
	if !slices.Contains(versions[c.Path], c.Version) {
		return fmt.Errorf("%w: %s@%s is not a listed release (retracted, or unknown to the proxy)", ErrPolicy, c.Path, c.Version)
	}
	return nil
}

// whyChosen says why a candidate was tried after tried others, for the
// report and the commit message.
func whyChosen(c report.Candidate, p Policy, each bool, tried int) string {
	switch {
	case p.Version != "":
		return "asked for with -module " + c.Path + "@" + c.Version
	case each:
		return "eligible " + c.Class + " upgrade (-each tries every eligible candidate)"
	case tried > 0:
		return fmt.Sprintf("next in selection order (patch, minor; highest; path): the %d tried before it did not pass", tried)
	}
	return "first in selection order (patch, minor; highest; path)"
}
