package maintain

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/module"
)

const baseMod = `module example.com/app

go 1.24

require (
	example.com/t v1.0.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)
`

func mustManifest(t *testing.T, s string) *manifest {
	t.Helper()
	m, err := parseManifest("go.mod", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMaintain_Admit(t *testing.T) {
	target := module.Version{Path: "example.com/t", Version: "v1.1.0"}
	cl := closure{"example.com/x": "v1.2.0", "example.com/n": "v1.0.0"}
	for _, tc := range []struct {
		name, after string
		rule, mod   string  // "" admitted
		cl          closure // nil: the one above
	}{
		{"target only", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, "", "", nil},
		{"increase explained by the closure", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.2.0 // indirect
	example.com/n v1.0.0 // indirect
)`, "", "", nil},
		{"increase beyond the closure", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.3.0 // indirect
)`, RuleClosure, "example.com/x", nil},
		{"direct outside the closure moved up", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.1
	example.com/x v1.0.0 // indirect
)`, RuleClosure, "example.com/d", nil},
		{"target elsewhere", `module example.com/app
go 1.24
require (
	example.com/t v1.2.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleTarget, "example.com/t", nil},
		{"moved down", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v0.9.0
	example.com/x v1.0.0 // indirect
)`, RuleDown, "example.com/d", nil},
		{"indirect removed, the closure keeps it higher", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
)`, "", "", nil},
		{"indirect removed, nothing keeps it", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
)`, RuleDown, "example.com/x", closure{}},
		{"direct removed", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/x v1.0.0 // indirect
)`, RuleDirect, "example.com/d", nil},
		{"direct added", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/n v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleDirect, "example.com/n", nil},
		{"go directive", `module example.com/app
go 1.25
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleGo, "example.com/t", nil},
		{"go directive lowered", `module example.com/app
go 1.23
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleGo, "example.com/t", nil},
		{"toolchain added", `module example.com/app
go 1.24
toolchain go1.26.1
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleToolchain, "example.com/t", nil},
		{"replace added", `module example.com/app
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)
replace example.com/d => example.com/fork v1.0.0`, RuleReplace, "example.com/app", nil},
		{"module path", `module example.com/other
go 1.24
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`, RuleModule, "example.com/app", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cl
			if tc.cl != nil {
				c = tc.cl
			}
			ref := admit(mustManifest(t, baseMod), mustManifest(t, tc.after), target, c, goRule{imageGo: "go1.26.8"})
			switch {
			case tc.rule == "" && ref != nil:
				t.Errorf("admit = %v (%s %s); want admitted", ref, ref.Rule, ref.Module)
			case tc.rule != "" && ref == nil:
				t.Errorf("admit = admitted; want refused by %s", tc.rule)
			case tc.rule != "" && (ref.Rule != tc.rule || ref.Module != tc.mod):
				t.Errorf("admit = %s %s (%v); want %s %s", ref.Rule, ref.Module, ref, tc.rule, tc.mod)
			}
		})
	}
}

// TestMaintain_ReadClosure walks go.mod files laid out as the module
// cache's download directory holds them.
func TestMaintain_ReadClosure(t *testing.T) {
	cache := t.TempDir()
	write := func(path, version, body string) {
		ep, _ := module.EscapePath(path)
		p := filepath.Join(cache, "cache", "download", filepath.FromSlash(ep), "@v", version+".mod")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("example.com/t", "v1.1.0", "module example.com/t\nrequire (\n\texample.com/a v1.2.0\n\texample.com/B v1.0.0\n)\n")
	write("example.com/a", "v1.2.0", "module example.com/a\nrequire example.com/c v0.3.0\n")
	write("example.com/B", "v1.0.0", "module example.com/B\nrequire example.com/c v0.4.0\n")
	got := readClosure(cache, module.Version{Path: "example.com/t", Version: "v1.1.0"})
	want := closure{"example.com/a": "v1.2.0", "example.com/B": "v1.0.0", "example.com/c": "v0.4.0"}
	if len(got) != len(want) {
		t.Fatalf("closure %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("closure[%s] = %q; want %q", k, got[k], v)
		}
	}
}

// TestMaintain_AdmitGoRaise: a raise of the go line is admitted when it is
// exactly the highest go line of the requirements that moved (what go get
// does since Go 1.21) and the image's Go builds it; -keep-go refuses any.
func TestMaintain_AdmitGoRaise(t *testing.T) {
	target := module.Version{Path: "example.com/t", Version: "v1.1.0"}
	raised := `module example.com/app
go 1.25
require (
	example.com/t v1.1.0
	example.com/d v1.0.0
	example.com/x v1.0.0 // indirect
)`
	for _, tc := range []struct {
		name    string
		gr      goRule
		refused bool
	}{
		{"the target requires it", goRule{imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": "1.25"}}, false},
		{"an indirect that moved requires it", goRule{imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": "1.21", "example.com/x": "1.25"}}, false},
		{"-keep-go", goRule{keep: true, imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": "1.25"}}, true},
		{"nothing that moved requires it", goRule{imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": "1.22"}}, true},
		{"raised past what is required", goRule{imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": "1.24.3"}}, true},
		{"the target's go.mod is not in the cache", goRule{imageGo: "go1.26.8", goLines: map[string]string{"example.com/t": ""}}, true},
		{"the image's Go is older", goRule{imageGo: "go1.24.9", goLines: map[string]string{"example.com/t": "1.25"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := admit(mustManifest(t, baseMod), mustManifest(t, raised), target, closure{}, tc.gr)
			if (ref != nil) != tc.refused || ref != nil && ref.Rule != RuleGo {
				t.Errorf("admit = %v; want refused %v (by %s)", ref, tc.refused, RuleGo)
			}
		})
	}
}
