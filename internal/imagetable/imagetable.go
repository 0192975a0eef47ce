// Package imagetable chooses the toolchain a module is validated in, from
// the module's go directive (and toolchain line), the images the engine
// has, and the Go releases Stockade can build an image of on demand: the
// host's Go and the releases listed in releases.json (embedded), which the
// go command fetches from the module proxy and verifies against the
// checksum database.
//
// The choice is part of the threat model: runs never pull, and every image
// is either built here from verified inputs (its ID is its pin) or named by
// the user by digest. With GOTOOLCHAIN=local the toolchain in the image is
// the only one that runs, so the choice must satisfy the module here,
// before anything runs, rather than fail inside the container.
//
// Selection: the Go the module wants is its go directive, or its toolchain
// line when that is newer (the go command switches to it). The image of
// that minor is used when one is present or can be built, with a release
// at least what the module wants; only when no release of the minor can be
// had does the oldest newer minor stand in (flagged). A module newer than
// every release available is refused with a *TooNewError naming the
// command that builds its image.
package imagetable

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed releases.json
var releasesJSON []byte

// ErrTooNew reports a module that wants a Go newer than every image
// available (present or buildable). The error is a *TooNewError.
var ErrTooNew = errors.New("imagetable: go directive newer than every toolchain image")

// ErrBadVersion reports a go directive or Go release that is not of the
// form 1.N, 1.N.P, 1.NrcK or 1.NbetaK.
var ErrBadVersion = errors.New("imagetable: malformed go version")

// ErrBadTable reports a table that fails validation: a release of the
// wrong form, a duplicate, or a registry reference not pinned by digest.
var ErrBadTable = errors.New("imagetable: invalid release table")

// ErrBadLocal reports a local image whose ID is not "sha256:" and 64
// lowercase hex digits, or whose Go version is malformed.
var ErrBadLocal = errors.New("imagetable: invalid local image")

// Sources of an Entry: where its image comes from when the engine lacks it.
const (
	// SourceProxy: built from the release the go command fetches from the
	// module proxy (image.FetchGo).
	SourceProxy = "proxy"
	// SourceHost: built from the host's own Go (the go command on PATH).
	SourceHost = "host"
	// SourceRegistry: a registry image the user named by digest; pulled
	// only when asked.
	SourceRegistry = "registry"
)

// Entry is a Go release Stockade can have an image of.
type Entry struct {
	// Minor is the Go minor, such as "1.27"; filled by Parse and With.
	Minor string `json:"minor,omitempty"`
	// Go is the Go release, such as "1.27.3".
	Go string `json:"go"`
	// Source is SourceProxy (the default in releases.json), SourceHost or
	// SourceRegistry.
	Source string `json:"source,omitempty"`
	// Ref is the registry reference, name@sha256:<hex>, with
	// SourceRegistry only.
	Ref string `json:"ref,omitempty"`
}

// Local is an image the engine has that Stockade built, known by its
// image ID.
type Local struct {
	// ID is the engine's image ID, "sha256:" and 64 hex digits.
	ID string
	// Go is the Go release the image holds, such as "1.26.8" ("go1.26.8"
	// is accepted too).
	Go string
}

// Choice is the image Select picked.
type Choice struct {
	// Directive is the go directive as given to Select ("1.16" for none).
	Directive string
	// Want is the Go the module wants: the directive, or the toolchain
	// line's release when that is newer.
	Want string
	// Image is the image ID when Local is true; otherwise the image must
	// be made from Source (a registry reference for SourceRegistry, else
	// empty).
	Image string
	// Go is the Go release of the image.
	Go string
	// Minor is the Go minor of the image, such as "1.27".
	Minor string
	// Local reports that the engine has the image (Image is its ID).
	Local bool
	// Source says where the image comes from when Local is false:
	// SourceHost, SourceProxy or SourceRegistry.
	Source string
	// StoodIn reports that the image serves a newer minor than the module
	// wants: no release of that minor is available.
	StoodIn bool
}

// Table is the set of Go releases available besides the images present,
// in ascending order. The zero value has none; use Default, Parse or With.
type Table struct {
	entries []Entry
}

// Default returns the releases embedded from releases.json. It panics if
// that file is invalid, which the package's tests rule out.
func Default() *Table {
	t, err := Parse(releasesJSON)
	if err != nil {
		panic(err)
	}
	return t
}

// Parse reads a table in the releases.json format and validates it.
func Parse(data []byte) (*Table, error) {
	var doc struct {
		Releases []Entry `json:"releases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTable, err)
	}
	return (&Table{}).With(doc.Releases...)
}

// refRE is a registry reference pinned by digest.
var refRE = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$`)

// IsPinnedRef reports whether ref is a registry reference pinned by
// digest, such as "golang:1.24-bookworm@sha256:<64 hex>".
func IsPinnedRef(ref string) bool { return refRE.MatchString(ref) }

// With returns a copy of t with es added, validated, in ascending order.
func (t *Table) With(es ...Entry) (*Table, error) {
	out := &Table{entries: append([]Entry(nil), t.entries...)}
	for _, e := range es {
		v, err := parse(strings.TrimPrefix(e.Go, "go"))
		if err != nil || v.kind == language {
			return nil, fmt.Errorf("%w: go %q is not a release such as 1.27.3", ErrBadTable, e.Go)
		}
		e.Go, e.Minor = v.String(), v.minorString()
		switch e.Source {
		case "":
			e.Source = SourceProxy
		case SourceProxy, SourceHost:
		case SourceRegistry:
			if !IsPinnedRef(e.Ref) {
				return nil, fmt.Errorf("%w: %q is not a registry reference pinned by digest", ErrBadTable, e.Ref)
			}
		default:
			return nil, fmt.Errorf("%w: source %q", ErrBadTable, e.Source)
		}
		if e.Source != SourceRegistry && e.Ref != "" {
			return nil, fmt.Errorf("%w: ref %q on a %s release", ErrBadTable, e.Ref, e.Source)
		}
		for _, o := range out.entries {
			if o.Go == e.Go && o.Source == e.Source && o.Ref == e.Ref {
				return nil, fmt.Errorf("%w: go %s from %s twice", ErrBadTable, e.Go, e.Source)
			}
		}
		out.entries = append(out.entries, e)
	}
	sort.SliceStable(out.entries, func(i, j int) bool {
		a, _ := parse(out.entries[i].Go)
		b, _ := parse(out.entries[j].Go)
		return compare(a, b) < 0
	})
	return out, nil
}

// Entries returns a copy of the table's releases, oldest first.
func (t *Table) Entries() []Entry {
	return append([]Entry(nil), t.entries...)
}

// TooNewError is the refusal for a module no available image can build.
// It matches ErrTooNew with errors.Is.
type TooNewError struct {
	// Directive is the go directive; Want what the module wants (the
	// toolchain line's release when newer).
	Directive, Want string
	// Available are the Go releases of the images present or buildable,
	// ascending, such as ["1.26.8", "1.27.3"].
	Available []string
}

// BuildRelease is the release `stockade image build -go` should make for
// the module: Want, with ".0" added to a language version ("1.28" gives
// "1.28.0").
func (e *TooNewError) BuildRelease() string {
	v, err := parse(e.Want)
	if err == nil && v.kind == language {
		return e.Want + ".0"
	}
	return e.Want
}

func (e *TooNewError) Error() string {
	what := "go directive " + e.Directive
	if e.Want != e.Directive {
		what = "toolchain go" + e.Want
	}
	have := "none"
	if len(e.Available) > 0 {
		have = "go " + strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("%s is newer than every toolchain image available (%s); make one with 'stockade image build -go %s'", what, have, e.BuildRelease())
}

// Is makes errors.Is(err, ErrTooNew) true.
func (e *TooNewError) Is(target error) bool { return target == ErrTooNew }

// Select is SelectFor without a toolchain line.
func (t *Table) Select(directive string, locals []Local) (Choice, error) {
	return t.SelectFor(directive, "", locals)
}

// SelectFor returns the image for a module whose go directive is directive
// ("1.21", "1.21.3", "1.21rc1"; "" means the go command's default for a
// go.mod without a go line, 1.16) and whose toolchain line is toolchain
// ("go1.27.3", "go1.27.3-custom"; "" or "default" for none). locals are
// the images the engine has and may be nil.
//
// The module wants the newer of the directive and the toolchain line. The
// image is, in order of preference: a local image of that minor (newest
// release first) whose release is at least that; a table release of that
// minor (the host's first, then the newest); else the same search in the
// next newer minor that has one, flagged StoodIn. It returns a
// *TooNewError when nothing qualifies.
func (t *Table) SelectFor(directive, toolchain string, locals []Local) (Choice, error) {
	if directive == "" {
		directive = "1.16"
	}
	d, err := parse(directive)
	if err != nil {
		return Choice{}, err
	}
	want := d
	if toolchain != "" && toolchain != "default" {
		tv, err := toolchainVersion(toolchain)
		if err != nil {
			return Choice{}, err
		}
		if compare(tv, want) > 0 {
			want = tv
		}
	}
	type cand struct {
		c    Choice
		v    version
		rank int // at one minor: 0 local, 1 host, 2 proxy, 3 registry
	}
	var cands []cand
	for _, l := range locals {
		if !digestRE.MatchString(l.ID) {
			return Choice{}, fmt.Errorf("%w: id %q", ErrBadLocal, l.ID)
		}
		v, err := parse(strings.TrimPrefix(l.Go, "go"))
		if err != nil {
			return Choice{}, fmt.Errorf("%w: %s: go %q", ErrBadLocal, l.ID, l.Go)
		}
		cands = append(cands, cand{Choice{Image: l.ID, Go: v.String(), Minor: v.minorString(), Local: true}, v, 0})
	}
	rank := map[string]int{SourceHost: 1, SourceProxy: 2, SourceRegistry: 3}
	for _, e := range t.entries {
		v, _ := parse(e.Go)
		cands = append(cands, cand{Choice{Image: e.Ref, Go: e.Go, Minor: e.Minor, Source: e.Source}, v, rank[e.Source]})
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.v.minor != b.v.minor {
			return a.v.minor < b.v.minor
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return compare(a.v, b.v) > 0
	})
	for _, c := range cands {
		if c.v.minor >= want.minor && compare(c.v, want) >= 0 {
			c.c.Directive, c.c.Want = directive, want.String()
			c.c.StoodIn = c.v.minor != want.minor
			return c.c, nil
		}
	}
	e := &TooNewError{Directive: directive, Want: want.String()}
	seen := map[string]bool{}
	for _, c := range cands {
		if !seen[c.c.Go] {
			seen[c.c.Go] = true
			e.Available = append(e.Available, c.c.Go)
		}
	}
	sort.Slice(e.Available, func(i, j int) bool {
		a, _ := parse(e.Available[i])
		b, _ := parse(e.Available[j])
		return compare(a, b) < 0
	})
	return Choice{}, e
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// toolchainRE is a toolchain line: go, a version, an optional -suffix.
var toolchainRE = regexp.MustCompile(`^go(1\.[0-9a-z.]+)(?:-[A-Za-z0-9._-]+)?$`)

// toolchainVersion returns the Go version a toolchain line names, as the
// go command reads it: "go1.27.3-custom" is 1.27.3.
func toolchainVersion(s string) (version, error) {
	m := toolchainRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("%w: toolchain %q", ErrBadVersion, s)
	}
	return parse(m[1])
}

// Fits reports whether a toolchain at Go release goVersion can build a
// module whose go directive is directive without downloading another
// toolchain (GOTOOLCHAIN=local): goVersion must be at least directive.
func Fits(directive, goVersion string) (bool, error) {
	d, err := parse(directive)
	if err != nil {
		return false, err
	}
	g, err := parse(strings.TrimPrefix(goVersion, "go"))
	if err != nil {
		return false, err
	}
	return compare(g, d) >= 0, nil
}

// Compare returns -1, 0 or +1 as Go version a is older than, equal to or
// newer than b, in the go command's order: 1.21 < 1.21rc1 < 1.21.0 < 1.21.1.
func Compare(a, b string) (int, error) {
	va, err := parse(a)
	if err != nil {
		return 0, err
	}
	vb, err := parse(b)
	if err != nil {
		return 0, err
	}
	return compare(va, vb), nil
}

// Pre-release kinds, in ascending order; a bare language version ("1.21")
// sorts before every pre-release of its minor and release after all.
const (
	language = iota
	alpha
	beta
	rc
	release
)

type version struct {
	minor, patch int
	kind, pre    int
	hasPatch     bool
}

var versionRE = regexp.MustCompile(`^1\.(0|[1-9][0-9]{0,3})(?:\.(0|[1-9][0-9]{0,3})|(alpha|beta|rc)([1-9][0-9]{0,3}))?$`)

func parse(s string) (version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("%w: %q", ErrBadVersion, s)
	}
	var v version
	v.minor, _ = strconv.Atoi(m[1])
	switch {
	case m[2] != "":
		v.patch, _ = strconv.Atoi(m[2])
		v.kind, v.hasPatch = release, true
	case m[3] != "":
		v.kind = map[string]int{"alpha": alpha, "beta": beta, "rc": rc}[m[3]]
		v.pre, _ = strconv.Atoi(m[4])
	default:
		// Before Go 1.21 a release had no ".0": "1.20" is the release.
		if v.minor < 21 {
			v.kind = release
		}
	}
	return v, nil
}

func compare(a, b version) int {
	for _, d := range [...]int{a.minor - b.minor, a.kind - b.kind, a.pre - b.pre, a.patch - b.patch} {
		if d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

func (v version) minorString() string { return "1." + strconv.Itoa(v.minor) }

func (v version) String() string {
	s := v.minorString()
	switch {
	case v.hasPatch:
		s += "." + strconv.Itoa(v.patch)
	case v.kind == alpha:
		s += "alpha" + strconv.Itoa(v.pre)
	case v.kind == beta:
		s += "beta" + strconv.Itoa(v.pre)
	case v.kind == rc:
		s += "rc" + strconv.Itoa(v.pre)
	}
	return s
}
