// Package imagetable chooses the toolchain image a module is validated in,
// from the module's go directive and a table of pinned images kept as data
// (images.json, embedded).
//
// The table is part of the threat model: runs never pull, and an image is
// named by digest, so a compromised tag cannot change the toolchain that
// builds untrusted code. With GOTOOLCHAIN=local the toolchain in the image
// is the only one that runs, so the choice must satisfy the directive here,
// before anything runs, rather than fail inside the container.
//
// Selection: the image with the lowest Go minor that can build the
// directive (its Go release is at least the directive). A directive whose
// minor has an image gets that image; an older directive gets the oldest
// image, flagged as standing in; a directive newer than every image is
// refused with ErrTooNew. A locally built image (Local) serves in place of
// the pinned one for its own minor, and so also stands in for older
// directives when it is the oldest image available.
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

//go:embed images.json
var imagesJSON []byte

// ErrTooNew reports a go directive newer than every available image.
// The error's message names the supported range.
var ErrTooNew = errors.New("imagetable: go directive newer than every toolchain image")

// ErrBadVersion reports a go directive or Go release that is not of the
// form 1.N, 1.N.P, 1.NrcK or 1.NbetaK.
var ErrBadVersion = errors.New("imagetable: malformed go version")

// ErrBadTable reports a table that fails validation: no images, a duplicate
// or unordered minor, a tag or digest of the wrong form.
var ErrBadTable = errors.New("imagetable: invalid image table")

// ErrBadLocal reports a local image whose ID is not "sha256:" and 64
// lowercase hex digits, or whose Go version is malformed.
var ErrBadLocal = errors.New("imagetable: invalid local image")

// Entry is one pinned toolchain image.
type Entry struct {
	// Minor is the Go minor the image serves, such as "1.24".
	Minor string `json:"minor"`
	// Go is the Go release the image holds, such as "1.24.13".
	Go string `json:"go"`
	// Tag is the image tag, "golang:<Minor>-bookworm".
	Tag string `json:"tag"`
	// Digest is the manifest digest the tag is pinned to, "sha256:<hex>".
	Digest string `json:"digest"`
	// Verified is false while Digest has not been checked against a
	// registry; a report should say so.
	Verified bool `json:"verified"`
}

// Ref returns the pinned reference, Tag@Digest.
func (e Entry) Ref() string { return e.Tag + "@" + e.Digest }

// Local is an image built on this machine (by `stockade image build`),
// known by its image ID rather than by a pinned digest.
type Local struct {
	// ID is the engine's image ID, "sha256:" and 64 hex digits.
	ID string
	// Go is the Go release the image holds, such as "1.26.8" ("go1.26.8"
	// is accepted too).
	Go string
}

// Choice is the image Select picked for a directive.
type Choice struct {
	// Directive is the go directive as given to Select.
	Directive string
	// Image is what to run: a pinned reference (Tag@Digest) or, when
	// Local is true, a local image ID.
	Image string
	// Go is the Go release in Image.
	Go string
	// Minor is the Go minor of Image, such as "1.22".
	Minor string
	// Local reports that Image is a locally built image, not a pinned one.
	Local bool
	// StoodIn reports that Image serves a newer minor than the directive
	// names: the directive is older than every image, or its minor has none.
	StoodIn bool
	// Verified is false when Image is a pinned reference whose digest has
	// not been checked against a registry. Always true for local images.
	Verified bool
}

// Table is an ordered set of pinned images, oldest minor first. The zero
// value has no images and refuses every directive; use Default or Parse.
type Table struct {
	entries []Entry
}

// Default returns the table embedded from images.json. It panics if that
// file is invalid, which the package's tests rule out.
func Default() *Table {
	t, err := Parse(imagesJSON)
	if err != nil {
		panic(err)
	}
	return t
}

// Parse reads a table in the images.json format and validates it.
func Parse(data []byte) (*Table, error) {
	var doc struct {
		Images []Entry `json:"images"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTable, err)
	}
	if len(doc.Images) == 0 {
		return nil, fmt.Errorf("%w: no images", ErrBadTable)
	}
	for i, e := range doc.Images {
		if err := checkEntry(e); err != nil {
			return nil, err
		}
		if i > 0 {
			prev, _ := parse(doc.Images[i-1].Go)
			cur, _ := parse(e.Go)
			if cur.minor <= prev.minor {
				return nil, fmt.Errorf("%w: %s after %s; minors must be unique and ascending", ErrBadTable, e.Minor, doc.Images[i-1].Minor)
			}
		}
	}
	return &Table{entries: doc.Images}, nil
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func checkEntry(e Entry) error {
	v, err := parse(e.Go)
	if err != nil || v.kind != release || !v.hasPatch {
		return fmt.Errorf("%w: go %q is not a release such as 1.24.3", ErrBadTable, e.Go)
	}
	if e.Minor != v.minorString() {
		return fmt.Errorf("%w: minor %q does not match go %q", ErrBadTable, e.Minor, e.Go)
	}
	if want := "golang:" + e.Minor + "-bookworm"; e.Tag != want {
		return fmt.Errorf("%w: tag %q; want %q", ErrBadTable, e.Tag, want)
	}
	if !digestRE.MatchString(e.Digest) {
		return fmt.Errorf("%w: digest %q of %s", ErrBadTable, e.Digest, e.Tag)
	}
	return nil
}

// Entries returns a copy of the table's images, oldest minor first.
func (t *Table) Entries() []Entry {
	return append([]Entry(nil), t.entries...)
}

// TooNewError is the refusal for a directive no image can build. It
// matches ErrTooNew with errors.Is.
type TooNewError struct {
	// Directive is the go directive that was refused.
	Directive string
	// Oldest and Newest are the Go releases of the oldest and newest
	// available images (table and local), such as "1.22.12" and "1.26.8".
	Oldest, Newest string
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("go directive %s is newer than every toolchain image: supported are go %s to %s (older directives use the go %s image)",
		e.Directive, minorOf(e.Oldest), e.Newest, minorOf(e.Oldest))
}

// Is makes errors.Is(err, ErrTooNew) true.
func (e *TooNewError) Is(target error) bool { return target == ErrTooNew }

// Select returns the image for a module whose go directive is directive
// ("1.21", "1.21.3", "1.21rc1"; "" means the go command's default for a
// go.mod without a go line, 1.16). locals are images built on this machine
// and may be nil.
//
// It picks, among the table's images and locals, the one with the lowest
// minor whose Go release is at least the directive; at equal minors a local
// image wins, and among locals of one minor the newest release. It returns
// a *TooNewError when none qualifies.
func (t *Table) Select(directive string, locals []Local) (Choice, error) {
	if directive == "" {
		directive = "1.16"
	}
	d, err := parse(directive)
	if err != nil {
		return Choice{}, err
	}
	type cand struct {
		c Choice
		v version
	}
	var cands []cand
	for _, e := range t.entries {
		v, _ := parse(e.Go)
		cands = append(cands, cand{Choice{Image: e.Ref(), Go: e.Go, Minor: e.Minor, Verified: e.Verified}, v})
	}
	for _, l := range locals {
		if !digestRE.MatchString(l.ID) {
			return Choice{}, fmt.Errorf("%w: id %q", ErrBadLocal, l.ID)
		}
		g := strings.TrimPrefix(l.Go, "go")
		v, err := parse(g)
		if err != nil {
			return Choice{}, fmt.Errorf("%w: %s: go %q", ErrBadLocal, l.ID, l.Go)
		}
		cands = append(cands, cand{Choice{Image: l.ID, Go: g, Minor: v.minorString(), Local: true, Verified: true}, v})
	}
	if len(cands) == 0 {
		return Choice{}, fmt.Errorf("%w: no images", ErrBadTable)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.v.minor != b.v.minor {
			return a.v.minor < b.v.minor
		}
		if a.c.Local != b.c.Local {
			return a.c.Local
		}
		return compare(a.v, b.v) > 0
	})
	for _, c := range cands {
		if compare(c.v, d) >= 0 {
			c.c.Directive = directive
			c.c.StoodIn = c.v.minor != d.minor
			return c.c, nil
		}
	}
	newest := cands[0].v
	for _, c := range cands {
		if compare(c.v, newest) > 0 {
			newest = c.v
		}
	}
	return Choice{}, &TooNewError{Directive: directive, Oldest: cands[0].c.Go, Newest: newest.String()}
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

func minorOf(goVersion string) string {
	v, err := parse(goVersion)
	if err != nil {
		return goVersion
	}
	return v.minorString()
}
