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

const pinned = "golang:1.24-bookworm@sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1"

func TestDefault(t *testing.T) {
	es := Default().Entries()
	if len(es) == 0 {
		t.Fatal("Default() has no releases")
	}
	for _, e := range es {
		if e.Source != SourceProxy || e.Ref != "" {
			t.Errorf("Default() entry %+v; want module-proxy releases only, no registry image", e)
		}
	}
}

// testTable is the host's go1.26.8 and the proxy's go1.27.3, as on our
// machines, with an older proxy release and a registry image.
func testTable(t *testing.T) *Table {
	t.Helper()
	tab, err := (&Table{}).With(
		Entry{Go: "1.27.3"},
		Entry{Go: "1.26.8", Source: SourceHost},
		Entry{Go: "1.26.11"},
		Entry{Go: "1.24.13", Source: SourceRegistry, Ref: pinned},
	)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestSelectFor(t *testing.T) {
	tab := testTable(t)
	tests := []struct {
		name                 string
		directive, toolchain string
		locals               []Local
		want                 Choice // Directive is filled from directive
	}{
		{"host for its minor", "1.26", "", nil, Choice{Want: "1.26", Go: "1.26.8", Minor: "1.26", Source: SourceHost}},
		{"proxy for its minor", "1.27", "", nil, Choice{Want: "1.27", Go: "1.27.3", Minor: "1.27", Source: SourceProxy}},
		{"patch beyond the host", "1.26.9", "", nil, Choice{Want: "1.26.9", Go: "1.26.11", Minor: "1.26", Source: SourceProxy}},
		{"rc within release", "1.27rc2", "", nil, Choice{Want: "1.27rc2", Go: "1.27.3", Minor: "1.27", Source: SourceProxy}},
		{"toolchain line newer", "1.26", "go1.27.1", nil, Choice{Want: "1.27.1", Go: "1.27.3", Minor: "1.27", Source: SourceProxy}},
		{"toolchain line with suffix", "1.26", "go1.27.2-custom", nil, Choice{Want: "1.27.2", Go: "1.27.3", Minor: "1.27", Source: SourceProxy}},
		{"toolchain line older", "1.27", "go1.26.1", nil, Choice{Want: "1.27", Go: "1.27.3", Minor: "1.27", Source: SourceProxy}},
		{"toolchain default", "1.26", "default", nil, Choice{Want: "1.26", Go: "1.26.8", Minor: "1.26", Source: SourceHost}},
		{"registry image for its minor", "1.24", "", nil, Choice{Want: "1.24", Image: pinned, Go: "1.24.13", Minor: "1.24", Source: SourceRegistry}},
		{"older than every release", "1.16", "", nil, Choice{Want: "1.16", Image: pinned, Go: "1.24.13", Minor: "1.24", Source: SourceRegistry, StoodIn: true}},
		{"no go line", "", "", nil, Choice{Want: "1.16", Image: pinned, Go: "1.24.13", Minor: "1.24", Source: SourceRegistry, StoodIn: true}},
		{"minor without release", "1.25", "", nil, Choice{Want: "1.25", Go: "1.26.8", Minor: "1.26", Source: SourceHost, StoodIn: true}},
		{"present image wins", "1.27", "", []Local{{ID: id1, Go: "go1.27.3"}},
			Choice{Want: "1.27", Image: id1, Go: "1.27.3", Minor: "1.27", Local: true}},
		{"newest present of the minor", "1.26", "", []Local{{ID: id1, Go: "1.26.1"}, {ID: id2, Go: "1.26.8"}},
			Choice{Want: "1.26", Image: id2, Go: "1.26.8", Minor: "1.26", Local: true}},
		{"present too old for the patch", "1.26.5", "", []Local{{ID: id1, Go: "1.26.1"}},
			Choice{Want: "1.26.5", Go: "1.26.8", Minor: "1.26", Source: SourceHost}},
		{"exact minor buildable beats newer present", "1.26", "", []Local{{ID: id1, Go: "1.27.3"}},
			Choice{Want: "1.26", Go: "1.26.8", Minor: "1.26", Source: SourceHost}},
		{"present older minor stands in", "1.20", "", []Local{{ID: id1, Go: "1.22.3"}},
			Choice{Want: "1.20", Image: id1, Go: "1.22.3", Minor: "1.22", Local: true, StoodIn: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tab.SelectFor(tt.directive, tt.toolchain, tt.locals)
			if err != nil {
				t.Fatalf("SelectFor(%q, %q) error = %v", tt.directive, tt.toolchain, err)
			}
			tt.want.Directive = tt.directive
			if tt.directive == "" {
				tt.want.Directive = "1.16"
			}
			if got != tt.want {
				t.Errorf("SelectFor(%q, %q, %v) = %+v; want %+v", tt.directive, tt.toolchain, tt.locals, got, tt.want)
			}
		})
	}
}

func TestSelect_Refusals(t *testing.T) {
	tab := testTable(t)
	tests := []struct {
		directive, toolchain string
		locals               []Local
		want                 error
		msg                  string // substring of the message
	}{
		{"1.99", "", nil, ErrTooNew, "go directive 1.99 is newer than every toolchain image available (go 1.24.13, 1.26.8, 1.26.11, 1.27.3); make one with 'stockade image build -go 1.99.0'"},
		{"1.27.4", "", nil, ErrTooNew, "'stockade image build -go 1.27.4'"},
		{"1.28rc1", "", nil, ErrTooNew, "-go 1.28rc1'"},
		{"1.26", "go1.28.1", nil, ErrTooNew, "toolchain go1.28.1 is newer"},
		{"1.28", "", []Local{{ID: id1, Go: "1.27.9"}}, ErrTooNew, "1.27.3, 1.27.9)"},
		{"2.0", "", nil, ErrBadVersion, ""},
		{"1.21.x", "", nil, ErrBadVersion, ""},
		{"go1.21", "", nil, ErrBadVersion, ""},
		{"1.24", "1.27.3", nil, ErrBadVersion, ""},
		{"1.24", "", []Local{{ID: "abc", Go: "1.24.1"}}, ErrBadLocal, ""},
		{"1.24", "", []Local{{ID: id1, Go: "latest"}}, ErrBadLocal, ""},
	}
	for _, tt := range tests {
		_, err := tab.SelectFor(tt.directive, tt.toolchain, tt.locals)
		if !errors.Is(err, tt.want) {
			t.Errorf("SelectFor(%q, %q, %v) = %v; want %v", tt.directive, tt.toolchain, tt.locals, err, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("SelectFor(%q, %q) message %q; want it to contain %q", tt.directive, tt.toolchain, err, tt.msg)
		}
		var tn *TooNewError
		if errors.Is(tt.want, ErrTooNew) && (!errors.As(err, &tn) || tn.Directive != tt.directive) {
			t.Errorf("SelectFor(%q) = %#v; want *TooNewError naming the directive", tt.directive, err)
		}
	}
	var zero Table
	var tn *TooNewError
	if _, err := zero.Select("1.24", nil); !errors.As(err, &tn) || len(tn.Available) != 0 {
		t.Errorf("zero Table Select = %v; want a *TooNewError with nothing available", err)
	}
}

func TestParse_Invalid(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"not json", "{"},
		{"language version", `{"releases":[{"go":"1.24"}]}`},
		{"not a version", `{"releases":[{"go":"latest"}]}`},
		{"duplicate", `{"releases":[{"go":"1.24.1"},{"go":"1.24.1"}]}`},
		{"unknown source", `{"releases":[{"go":"1.24.1","source":"web"}]}`},
		{"registry unpinned", `{"releases":[{"go":"1.24.1","source":"registry","ref":"golang:1.24-bookworm"}]}`},
		{"ref on a proxy release", `{"releases":[{"go":"1.24.1","ref":"` + pinned + `"}]}`},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.doc)); !errors.Is(err, ErrBadTable) {
			t.Errorf("Parse(%s) = %v; want ErrBadTable", tt.name, err)
		}
	}
	tab, err := Parse([]byte(`{"releases":[{"go":"1.27.3"},{"go":"go1.25.1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if es := tab.Entries(); len(es) != 2 || es[0].Go != "1.25.1" || es[0].Minor != "1.25" || es[1].Go != "1.27.3" {
		t.Errorf("Parse sorted = %+v; want 1.25.1 then 1.27.3", es)
	}
}

func TestIsPinnedRef(t *testing.T) {
	for ref, want := range map[string]bool{
		pinned: true,
		"registry.example.com:5000/team/go@sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1": true,
		"golang:1.24-bookworm": false,
		"golang@sha256:abc":    false,
		"Golang@sha256:0ae225dec8ae7e6d97a664c8a6b641e82202e0dcb8b06da3ef604d817d2616b1": false,
	} {
		if got := IsPinnedRef(ref); got != want {
			t.Errorf("IsPinnedRef(%q) = %v; want %v", ref, got, want)
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
