package maintain

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/gomod"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
)

func TestMaintain_JudgeOrder(t *testing.T) {
	listed := []report.Candidate{
		{Path: "example.com/b", Current: "v1.0.0", Version: "v1.1.0", Class: "minor"},
		{Path: "example.com/a", Current: "v1.0.0", Version: "v1.0.3", Class: "patch"},
		{Path: "example.com/c", Current: "v0.1.0", Version: "v0.1.5", Class: "patch"},
		{Path: "example.com/a/v2", Current: "v1.0.0", Version: "v2.0.0", Class: "major"},
		{Path: "example.com/d", Current: "v1.0.0", Version: "v1.0.1-rc.1", Class: "patch"},
		{Path: "example.com/a", Current: "v1.0.0", Version: "v1.1.0", Class: "minor"},
	}
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"default", Policy{}, "example.com/a@v1.0.3 example.com/c@v0.1.5 example.com/a@v1.1.0 example.com/b@v1.1.0"},
		{"patch only", Policy{Allow: []gomod.Kind{gomod.Patch}}, "example.com/a@v1.0.3 example.com/c@v0.1.5"},
		{"one module", Policy{Module: "example.com/a"}, "example.com/a@v1.0.3 example.com/a@v1.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, order := judge(listed, tc.p)
			var got []string
			for _, c := range order {
				got = append(got, c.Path+"@"+c.Version)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("order %v; want %s", got, tc.want)
			}
			if len(all) != len(listed) {
				t.Errorf("judged %d of %d candidates", len(all), len(listed))
			}
			for _, c := range all {
				if !c.Eligible && c.Why == "" {
					t.Errorf("%s@%s is not eligible and no reason is given", c.Path, c.Version)
				}
			}
		})
	}
}

func TestMaintain_ParsePolicy(t *testing.T) {
	if got, err := ParseAllow("minor, patch"); err != nil || len(got) != 2 {
		t.Errorf("ParseAllow(minor, patch) = %v, %v", got, err)
	}
	if _, err := ParseAllow("patch,major"); !errors.Is(err, ErrMajor) {
		t.Errorf("ParseAllow(major) = %v; want ErrMajor", err)
	}
	if _, err := ParseAllow("huge"); !errors.Is(err, ErrPolicy) {
		t.Errorf("ParseAllow(huge) = %v; want ErrPolicy", err)
	}
	if p, v, err := ParseModule("example.com/m@v1.2.3"); err != nil || p != "example.com/m" || v != "v1.2.3" {
		t.Errorf("ParseModule = %q, %q, %v", p, v, err)
	}
	for _, bad := range []string{"example.com/m@1.2", "-x", "example.com/m@v1.2.3@v2"} {
		if _, _, err := ParseModule(bad); !errors.Is(err, ErrPolicy) {
			t.Errorf("ParseModule(%q) = %v; want ErrPolicy", bad, err)
		}
	}
}

// TestMaintain_Pinned: -module path@version is checked before anything
// runs (a direct requirement, newer, of a class -allow allows, not major),
// then against the proxy's listed releases.
func TestMaintain_Pinned(t *testing.T) {
	direct := []module.Version{{Path: "example.com/m", Version: "v1.0.0"}}
	versions := map[string][]string{"example.com/m": {"v1.0.0", "v1.0.1", "v1.2.0"}}
	c, err := Policy{Module: "example.com/m", Version: "v1.0.1"}.checkModule(direct)
	if err != nil || c == nil || c.Class != "patch" || listed(*c, versions) != nil {
		t.Errorf("checkModule(v1.0.1) = %+v, %v; want a listed patch", c, err)
	}
	if c, err := (Policy{Module: "example.com/m", Version: "v1.1.0"}).checkModule(direct); err != nil || listed(*c, versions) == nil {
		t.Errorf("v1.1.0 (not listed: retracted or unknown) = %+v, %v; want refused by listed", c, err)
	}
	for _, tc := range []struct {
		p    Policy
		want error
	}{
		{Policy{Module: "example.com/m", Version: "v1.0.0"}, ErrPolicy},                                   // not newer
		{Policy{Module: "example.com/other", Version: "v1.0.1"}, ErrPolicy},                               // not a direct requirement
		{Policy{Module: "example.com/other"}, ErrPolicy},                                                  // not a direct requirement
		{Policy{Module: "example.com/m", Version: "v1.2.0", Allow: []gomod.Kind{gomod.Patch}}, ErrPolicy}, // a minor -allow leaves out
		{Policy{Module: "example.com/m", Version: "v2.0.0"}, ErrPolicy},                                   // another module path: not an upgrade
	} {
		if _, err := tc.p.checkModule(direct); !errors.Is(err, tc.want) {
			t.Errorf("checkModule(%+v) = %v; want %v", tc.p, err, tc.want)
		}
	}
}

func TestMaintain_RunPattern(t *testing.T) {
	for in, want := range map[string]string{
		"TestX":           "^TestX$",
		"TestTable/#01":   "^TestTable$/^#01$",
		"TestA/b.c/(d)+e": `^TestA$/^b\.c$/^\(d\)\+e$`,
	} {
		if got := runPattern(in); got != want {
			t.Errorf("runPattern(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestMaintain_TestStatus(t *testing.T) {
	const pkg = "example.com/m"
	ev := func(lines ...string) validate.Output {
		return validate.Output{Stdout: []byte(strings.Join(lines, "\n") + "\n")}
	}
	for _, tc := range []struct {
		name string
		out  validate.Output
		want string
	}{
		{"pass", ev(`{"Action":"run","Package":"example.com/m","Test":"TestA"}`, `{"Action":"pass","Package":"example.com/m","Test":"TestA"}`, `{"Action":"pass","Package":"example.com/m"}`), "pass"},
		{"fail", ev(`{"Action":"run","Package":"example.com/m","Test":"TestA"}`, `{"Action":"fail","Package":"example.com/m","Test":"TestA"}`, `{"Action":"fail","Package":"example.com/m"}`), "fail"},
		{"exit inside the test", ev(`{"Action":"run","Package":"example.com/m","Test":"TestA"}`, `{"Action":"output","Package":"example.com/m","Test":"TestA","Output":"boom\n"}`, `{"Action":"fail","Package":"example.com/m"}`), "fail"},
		{"no such test", ev(`{"Action":"output","Package":"example.com/m","Output":"testing: warning: no tests to run\n"}`, `{"Action":"pass","Package":"example.com/m"}`), ""},
	} {
		tc.out.ExitCode = 0
		if tc.want == "fail" {
			tc.out.ExitCode = 1
		}
		if got := testStatus(tc.out, pkg, pkg, "TestA"); got != tc.want {
			t.Errorf("%s: testStatus = %q; want %q", tc.name, got, tc.want)
		}
	}
}
