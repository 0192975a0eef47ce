package imagetable

import (
	"errors"
	"strings"
	"testing"
)

const (
	id1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	id2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestDefault(t *testing.T) {
	tab := Default()
	es := tab.Entries()
	if len(es) < 2 || es[0].Minor != "1.22" || es[len(es)-1].Minor != "1.26" {
		t.Fatalf("Default() minors = %v..%v; want 1.22..1.26", es[0].Minor, es[len(es)-1].Minor)
	}
	for _, e := range es {
		if e.Verified {
			t.Errorf("%s is marked verified; its digest was written offline", e.Tag)
		}
	}
}

func TestSelect(t *testing.T) {
	tab := Default()
	ref := func(minor string) string {
		for _, e := range tab.Entries() {
			if e.Minor == minor {
				return e.Ref()
			}
		}
		t.Fatalf("no entry for %s", minor)
		return ""
	}
	tests := []struct {
		name      string
		directive string
		locals    []Local
		want      Choice // Directive is filled from directive
	}{
		{"exact minor", "1.24", nil, Choice{Image: ref("1.24"), Go: "1.24.13", Minor: "1.24"}},
		{"patch within image", "1.24.5", nil, Choice{Image: ref("1.24"), Go: "1.24.13", Minor: "1.24"}},
		{"rc within image", "1.25rc2", nil, Choice{Image: ref("1.25"), Go: "1.25.9", Minor: "1.25"}},
		{"older than table", "1.16", nil, Choice{Image: ref("1.22"), Go: "1.22.12", Minor: "1.22", StoodIn: true}},
		{"no go line", "", nil, Choice{Image: ref("1.22"), Go: "1.22.12", Minor: "1.22", StoodIn: true}},
		{"ancient", "1.11", nil, Choice{Image: ref("1.22"), Go: "1.22.12", Minor: "1.22", StoodIn: true}},
		{"patch newer than image", "1.24.14", nil, Choice{Image: ref("1.25"), Go: "1.25.9", Minor: "1.25", StoodIn: true}},
		{"local for its minor", "1.26", []Local{{ID: id1, Go: "go1.26.8"}},
			Choice{Image: id1, Go: "1.26.8", Minor: "1.26", Local: true, Verified: true}},
		{"local not oldest", "1.20", []Local{{ID: id1, Go: "1.26.8"}}, Choice{Image: ref("1.22"), Go: "1.22.12", Minor: "1.22", StoodIn: true}},
		{"local oldest stands in", "1.20", []Local{{ID: id1, Go: "1.22.3"}},
			Choice{Image: id1, Go: "1.22.3", Minor: "1.22", Local: true, StoodIn: true, Verified: true}},
		{"newest local of minor", "1.26", []Local{{ID: id1, Go: "1.26.1"}, {ID: id2, Go: "1.26.8"}},
			Choice{Image: id2, Go: "1.26.8", Minor: "1.26", Local: true, Verified: true}},
		{"local too old for patch", "1.26.5", []Local{{ID: id1, Go: "1.26.1"}}, Choice{Image: ref("1.26"), Go: "1.26.8", Minor: "1.26"}},
		{"local newer than table", "1.27", []Local{{ID: id1, Go: "1.27.0"}},
			Choice{Image: id1, Go: "1.27.0", Minor: "1.27", Local: true, Verified: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tab.Select(tt.directive, tt.locals)
			if err != nil {
				t.Fatalf("Select(%q) error = %v", tt.directive, err)
			}
			tt.want.Directive = tt.directive
			if tt.directive == "" {
				tt.want.Directive = "1.16"
			}
			if got != tt.want {
				t.Errorf("Select(%q, %v) = %+v; want %+v", tt.directive, tt.locals, got, tt.want)
			}
		})
	}
}

func TestSelect_Refusals(t *testing.T) {
	tab := Default()
	tests := []struct {
		directive string
		locals    []Local
		want      error
		msg       string // substring of the message
	}{
		{"1.99", nil, ErrTooNew, "supported are go 1.22 to 1.26.8"},
		{"1.26.9", nil, ErrTooNew, "go directive 1.26.9 is newer"},
		{"1.27", []Local{{ID: id1, Go: "1.26.8"}}, ErrTooNew, "to 1.26.8"},
		{"1.28", []Local{{ID: id1, Go: "1.27.1"}}, ErrTooNew, "to 1.27.1"},
		{"2.0", nil, ErrBadVersion, ""},
		{"1.21.x", nil, ErrBadVersion, ""},
		{"go1.21", nil, ErrBadVersion, ""},
		{"1.24", []Local{{ID: "abc", Go: "1.24.1"}}, ErrBadLocal, ""},
		{"1.24", []Local{{ID: id1, Go: "latest"}}, ErrBadLocal, ""},
	}
	for _, tt := range tests {
		_, err := tab.Select(tt.directive, tt.locals)
		if !errors.Is(err, tt.want) {
			t.Errorf("Select(%q, %v) = %v; want %v", tt.directive, tt.locals, err, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Select(%q) message %q; want it to contain %q", tt.directive, err, tt.msg)
		}
		var tn *TooNewError
		if errors.Is(tt.want, ErrTooNew) && (!errors.As(err, &tn) || tn.Directive != tt.directive) {
			t.Errorf("Select(%q) = %#v; want *TooNewError naming the directive", tt.directive, err)
		}
	}
	var zero Table
	if _, err := zero.Select("1.24", nil); !errors.Is(err, ErrBadTable) {
		t.Errorf("zero Table Select = %v; want ErrBadTable", err)
	}
}

func TestParse_Invalid(t *testing.T) {
	const d = "sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1"
	entry := func(minor, goV, tag, digest string) string {
		return `{"minor":"` + minor + `","go":"` + goV + `","tag":"` + tag + `","digest":"` + digest + `"}`
	}
	tests := []struct{ name, doc string }{
		{"not json", "{"},
		{"empty", `{"images":[]}`},
		{"minor mismatch", `{"images":[` + entry("1.23", "1.24.1", "golang:1.23-bookworm", d) + `]}`},
		{"go not a release", `{"images":[` + entry("1.24", "1.24", "golang:1.24-bookworm", d) + `]}`},
		{"wrong tag", `{"images":[` + entry("1.24", "1.24.1", "golang:1.24", d) + `]}`},
		{"unpinned", `{"images":[` + entry("1.24", "1.24.1", "golang:1.24-bookworm", "latest") + `]}`},
		{"descending", `{"images":[` + entry("1.25", "1.25.1", "golang:1.25-bookworm", d) + "," + entry("1.24", "1.24.1", "golang:1.24-bookworm", d) + `]}`},
		{"duplicate", `{"images":[` + entry("1.24", "1.24.1", "golang:1.24-bookworm", d) + "," + entry("1.24", "1.24.2", "golang:1.24-bookworm", d) + `]}`},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.doc)); !errors.Is(err, ErrBadTable) {
			t.Errorf("Parse(%s) = %v; want ErrBadTable", tt.name, err)
		}
	}
}

func TestCompareAndFits(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.21", "1.21rc1", -1},
		{"1.21rc1", "1.21.0", -1},
		{"1.21.0", "1.21.1", -1},
		{"1.21beta1", "1.21rc1", -1},
		{"1.20", "1.20.0", 0},
		{"1.9", "1.10", -1},
		{"1.26.8", "1.26.8", 0},
		{"1.27", "1.26.8", 1},
	}
	for _, tt := range tests {
		got, err := Compare(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
	fits := []struct {
		directive, goV string
		want           bool
	}{
		{"1.26", "go1.26.8", true},
		{"1.26.8", "1.26.8", true},
		{"1.26.9", "1.26.8", false},
		{"1.99", "1.26.8", false},
		{"1.16", "1.26.8", true},
	}
	for _, tt := range fits {
		got, err := Fits(tt.directive, tt.goV)
		if err != nil || got != tt.want {
			t.Errorf("Fits(%q, %q) = %v, %v; want %v", tt.directive, tt.goV, got, err, tt.want)
		}
	}
}
