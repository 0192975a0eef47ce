package sandbox

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stockade/stockade/sandbox/internal/scriptgen"
)

// exitConsts returns the Exit… constants declared in shell.go with their
// values, read from the source so that a constant added there is known here
// without a list to keep.
func exitConsts(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "shell.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Exit") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					t.Fatalf("%s is not an integer literal", n.Name)
				}
				v, err := strconv.Atoi(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Exit… constants in shell.go")
	}
	return out
}

var (
	// A literal exit status: exit N, return N (a function's status, which
	// callers pass on with c=$?), or NAME=N (a code kept in a variable).
	codeRE = regexp.MustCompile(`\b(?:exit|return)\s+([0-9]+)\b|\b[A-Za-z_][A-Za-z0-9_]*=([0-9]+)\b`)
	// The trailing comment naming the constants of the codes on a line.
	noteRE = regexp.MustCompile(`\s#\s*((?:Exit[A-Za-z]+[ ,]*)+)$`)
)

// scriptCodeProblems checks one script's literal exit codes against consts:
// 0 and 1 are the shell's own (success, a function's "no"); every other
// code must be the value of an Exit… constant named in a comment at the end
// of its line. It returns what is wrong, and records the constants it saw
// in used.
func scriptCodeProblems(name, text string, consts map[string]int, used map[string]bool) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		code, names := line, []string(nil)
		if m := noteRE.FindStringSubmatchIndex(line); m != nil {
			code = line[:m[0]]
			names = strings.FieldsFunc(line[m[2]:m[3]], func(r rune) bool { return r == ' ' || r == ',' })
		} else if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range codeRE.FindAllStringSubmatch(code, -1) {
			lit := m[1] + m[2]
			v, _ := strconv.Atoi(lit)
			if v <= 1 {
				continue
			}
			found := false
			for _, n := range names {
				if want, ok := consts[n]; ok && want == v {
					found, used[n] = true, true
				}
			}
			if !found {
				out = append(out, name+":"+strconv.Itoa(i+1)+": code "+lit+" is not an Exit… constant named in a comment on its line ("+strings.Join(names, ", ")+")")
			}
		}
	}
	return out
}

// TestScriptExitCodes checks that every exit code the scripts use is the Go
// constant its comment names, and that every constant is used.
func TestScriptExitCodes(t *testing.T) {
	consts := exitConsts(t)
	t.Run("checker", func(t *testing.T) {
		for _, tt := range []struct {
			text string
			ok   bool
		}{
			{"exit 0\nreturn 1\ni=0\n", true},
			{"exit 97\n", false},
			{"exit 97 # ExitPathIsDirectory\n", false},
			{"exit 90 # ExitPathIsDirectory\n", true},
			{"c=93 # ExitPathNotWritable\n", true},
			{"c=93\n", false},
			{"if x; then return 91; fi # ExitPathNotWritable\n", false},
			{"# exit 99 in prose\n", true},
		} {
			got := scriptCodeProblems("t.sh", tt.text, consts, map[string]bool{})
			if (len(got) == 0) != tt.ok {
				t.Errorf("scriptCodeProblems(%q) = %q; want ok %v", tt.text, got, tt.ok)
			}
		}
	})
	files, err := filepath.Glob("scripts/*.sh")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	used := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range scriptCodeProblems(f, string(b), consts, used) {
			t.Error(p)
		}
	}
	for n := range consts {
		if !used[n] {
			t.Errorf("%s is used by no script", n)
		}
	}
}

// TestScriptsGenerated checks that zscripts.go is what go generate makes of
// scripts/*.sh now, and that shell.go uses every script's constant, so no
// script is tested on the host but never shipped, or shipped stale.
func TestScriptsGenerated(t *testing.T) {
	want, err := scriptgen.Render("scripts")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(scriptgen.Output)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate ./sandbox", scriptgen.Output)
	}
	src, err := os.ReadFile("shell.go")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("scripts/*.sh")
	for _, f := range files {
		if !regexp.MustCompile(`\b` + scriptgen.ConstName(filepath.Base(f)) + `\b`).Match(src) {
			t.Errorf("%s (%s) is not used by shell.go", f, scriptgen.ConstName(filepath.Base(f)))
		}
	}
}

// TestScriptsParse checks that every script, as the backends run it, is
// valid under each shell (sh -n), including those whose behaviour the other
// tests reach only in part.
func TestScriptsParse(t *testing.T) {
	scripts := map[string]string{
		"PathFaultShell":     PathFaultShell,
		"UnreplaceableShell": UnreplaceableShell,
		"PreserveModeShell":  PreserveModeShell,
		"BulkPrepareShell":   BulkPrepareShell,
		"BulkRenameShell":    BulkRenameShell,
		"BulkDiscardShell":   BulkDiscardShell,
		"StatShell":          StatShell,
		"ListShell":          ListShell,
		"MakeDirShell":       MakeDirShell,
		"RemoveShell":        RemoveShell,
		"RenameShell":        RenameShell,
	}
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			sh.need(t)
			for name, s := range scripts {
				if _, stderr, code := runScript(t, sh, "set -n\n"+s); code != 0 {
					t.Errorf("%s does not parse: exit %d: %s", name, code, stderr)
				}
			}
		})
	}
}
