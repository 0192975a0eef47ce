package maintain

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"

	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// API diff: before the upgraded tree's tests run, the exported API of
// every package the module imports from a module the upgrade moved is
// compared between the old and the new version, so a reviewer reads
// "func Old removed" before any test output. The comparison is of the
// declarations go doc prints (go doc -all of each package's directory in
// the module cache), in a fresh execute container on the upgraded tree:
// no network, the module cache read-only with both versions already
// acquired, and go doc and go list only read source, never run it.
//
// It is a declaration-level comparison, not a type checker's: a removed
// function, method, type, constant or variable, and a function or method
// whose signature text changed, or a type whose kind changed, are
// incompatible; a change inside a struct or interface body, or of a
// constant's value, is not seen.

// maxAPIPackages bounds how many imported packages are compared per
// attempt; the rest are counted in a note.
const maxAPIPackages = 50

// APIChange is an incompatible change of an imported package's exported
// API between the version the baseline requires and the upgrade's.
type APIChange struct {
	Package string `json:"package"`
	// Change is what changed: "func Old removed", "method T.M removed",
	// "func F changed: func F(int) error => func F(int, int) error".
	Change string `json:"change"`
}

// apiListArgv lists every package the tree builds with, with its module.
func apiListArgv() []string {
	return []string{"go", "list", "-mod=readonly", "-deps", "-f", "{{if .Module}}{{.Module.Path}}\t{{.Module.Dir}}\t{{.Dir}}\t{{.ImportPath}}{{end}}", "./..."}
}

// apiDiff compares the API of the packages the upgraded tree at t.post
// imports from each module t moved up (From and To both set), in one
// execute container within d; the changes are t.a.APIChanges. A run
// that cannot be trusted is a note on the attempt, never a finding.
func (t *try) apiDiff(ctx context.Context, d time.Duration) error {
	moved := map[string]Move{}
	for _, m := range t.a.Moved {
		if m.From != "" && m.To != "" && m.From != m.To {
			moved[m.Path] = m
		}
	}
	if len(moved) == 0 {
		return nil
	}
	until := time.Now().Add(d)
	c, err := validate.StartValidation(ctx, t.p.Runner, t.post.Dir, d, t.p.Seed)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	ex := validate.NewExecExecer(c)
	out, err := ex.Exec(ctx, apiListArgv(), time.Until(until))
	if err != nil {
		return err
	}
	if why := validate.OutputReason(out); why != "" || out.ExitCode != 0 {
		t.a.APINote = fmt.Sprintf("not compared: go list failed (%s)", workflow.CommandFailure(out, why))
		return nil
	}
	type pkg struct{ path, oldDir, newDir string }
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out.Stdout))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			continue
		}
		m, ok := moved[f[0]]
		if !ok || !strings.HasPrefix(f[2], f[1]) {
			continue
		}
		oldRoot, ok := versionDir(f[1], m.Path, m.To, m.From)
		if !ok {
			continue
		}
		pkgs = append(pkgs, pkg{path: f[3], oldDir: oldRoot + strings.TrimPrefix(f[2], f[1]), newDir: f[2]})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	if len(pkgs) > maxAPIPackages {
		t.a.APINote = fmt.Sprintf("%d imported packages of moved modules; the first %d compared", len(pkgs), maxAPIPackages)
		pkgs = pkgs[:maxAPIPackages]
	}
	for _, p := range pkgs {
		var docs [2]map[string]string
		for i, dir := range []string{p.oldDir, p.newDir} {
			left := time.Until(until)
			if left < validate.MinStep {
				t.a.APINote = "not compared in full: the API diff's time ran out"
				return nil
			}
			o, err := ex.Exec(ctx, []string{"go", "doc", "-all", dir}, left)
			if err != nil {
				return err
			}
			if why := validate.OutputReason(o); why != "" || o.ExitCode != 0 {
				t.a.APINote = fmt.Sprintf("%s not compared: go doc failed (%s)", p.path, workflow.CommandFailure(o, why))
				return nil
			}
			docs[i] = apiDecls(o.Stdout)
		}
		for _, ch := range diffDecls(docs[0], docs[1]) {
			t.a.APIChanges = append(t.a.APIChanges, APIChange{Package: p.path, Change: ch})
		}
	}
	return nil
}

// versionDir turns the module cache directory of path@have into the one
// of path@want, as the go command lays it out (escaped path and version).
func versionDir(dir, path, have, want string) (string, bool) {
	eh, err1 := module.EscapeVersion(have)
	ew, err2 := module.EscapeVersion(want)
	if err1 != nil || err2 != nil || !strings.HasSuffix(dir, "@"+eh) {
		return "", false
	}
	return strings.TrimSuffix(dir, "@"+eh) + "@" + ew, true
}

// apiDecls reads go doc -all output into its exported declarations, by
// key ("func F", "method T.M", "type T", "const C", "var V"): the
// declaration's first line. The package's own doc comes first, at column
// 0, until the first section heading (CONSTANTS, VARIABLES, FUNCTIONS,
// TYPES); after it declarations start at column 0, doc text is indented,
// and const and var blocks list one name a line.
func apiDecls(doc []byte) map[string]string {
	out := map[string]string{}
	block, started := "", false
	for _, line := range strings.Split(string(doc), "\n") {
		switch line {
		case "CONSTANTS", "VARIABLES", "FUNCTIONS", "TYPES":
			started = true
			continue
		}
		if !started {
			continue
		}
		if block != "" {
			if line == ")" {
				block = ""
				continue
			}
			if strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "\t\t") {
				name := strings.FieldsFunc(strings.TrimSpace(line), func(r rune) bool { return r == ' ' || r == ',' || r == '=' })
				if len(name) > 0 && exported(name[0]) {
					out[block+" "+name[0]] = block + " " + strings.TrimSpace(line)
				}
			}
			continue
		}
		switch {
		case line == "const (" || line == "var (":
			block = strings.TrimSuffix(line, " (")
		case strings.HasPrefix(line, "func ("):
			// func (r *T) M(...) ...
			recv, rest, ok := strings.Cut(strings.TrimPrefix(line, "func ("), ") ")
			if !ok {
				continue
			}
			f := strings.Fields(recv)
			typ := strings.TrimLeft(f[len(f)-1], "*")
			if i := strings.IndexByte(typ, '['); i >= 0 {
				typ = typ[:i]
			}
			name := identAt(rest)
			if exported(name) {
				out["method "+typ+"."+name] = line
			}
		case strings.HasPrefix(line, "func "), strings.HasPrefix(line, "type "), strings.HasPrefix(line, "const "), strings.HasPrefix(line, "var "):
			kind, rest, _ := strings.Cut(line, " ")
			name := identAt(rest)
			if exported(name) {
				out[kind+" "+name] = line
			}
		}
	}
	return out
}

// identAt returns the identifier s begins with.
func identAt(s string) string {
	for i, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127) {
			return s[:i]
		}
	}
	return s
}

func exported(name string) bool {
	return name != "" && name[0] >= 'A' && name[0] <= 'Z'
}

// diffDecls lists the incompatible changes from old to new, sorted: a
// declaration removed; a function or method whose line changed; a type
// whose kind (the word after its name) changed.
func diffDecls(old, new map[string]string) []string {
	var out []string
	for k, o := range old {
		n, ok := new[k]
		switch {
		case !ok:
			out = append(out, k+" removed")
		case o == n:
		case strings.HasPrefix(k, "func ") || strings.HasPrefix(k, "method "):
			out = append(out, k+" changed: "+o+" => "+n)
		case strings.HasPrefix(k, "type ") && typeKind(o) != typeKind(n):
			out = append(out, k+" changed: "+o+" => "+n)
		}
	}
	sort.Strings(out)
	return out
}

// typeKind is the word after a type's name: "struct", "interface", "int".
func typeKind(decl string) string {
	f := strings.Fields(decl)
	if len(f) < 3 {
		return ""
	}
	if f[2] == "=" && len(f) > 3 { // an alias
		return "= " + f[3]
	}
	return strings.TrimSuffix(f[2], "{")
}
