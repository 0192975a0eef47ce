package maintain

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/stockade/stockade/internal/imagetable"
)

// Rules of the admission gate; a refusal names one and a module.
const (
	RuleTarget    = "target_version"   // the target did not move to exactly the candidate
	RuleDown      = "moved_down"       // a requirement moved down or was removed
	RuleClosure   = "outside_closure"  // a requirement moved up beyond what the target's requirements explain
	RuleDirect    = "direct_changed"   // a direct dependency was added or removed, or became indirect
	RuleModule    = "module_path"      // the module directive changed
	RuleGo        = "go_directive"     // the go directive changed, other than a raise the upgrade requires
	RuleToolchain = "toolchain"        // the toolchain directive changed
	RuleReplace   = "replace"          // replace directives changed
	RuleExclude   = "exclude"          // exclude directives changed
	RuleRetract   = "retract"          // retract directives changed
	RuleSettled   = "tidy_not_settled" // a second go mod tidy changed the manifests
)

// Refusal is why the gate or normalization refused an upgrade.
type Refusal struct {
	Rule   string
	Module string
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// manifest is a parsed go.mod.
type manifest struct {
	f    *modfile.File
	reqs map[string]requirement
}

type requirement struct {
	version  string
	indirect bool
}

func parseManifest(name string, data []byte) (*manifest, error) {
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, fmt.Errorf("maintain: %w", err)
	}
	m := &manifest{f: f, reqs: map[string]requirement{}}
	for _, r := range f.Require {
		m.reqs[r.Mod.Path] = requirement{version: r.Mod.Version, indirect: r.Indirect}
	}
	return m, nil
}

func (m *manifest) modulePath() string {
	if m.f.Module == nil {
		return ""
	}
	return m.f.Module.Mod.Path
}

func (m *manifest) goVersion() string {
	if m.f.Go == nil {
		return ""
	}
	return m.f.Go.Version
}

func (m *manifest) toolchain() string {
	if m.f.Toolchain == nil {
		return ""
	}
	return m.f.Toolchain.Name
}

func (m *manifest) replaces() []string {
	var out []string
	for _, r := range m.f.Replace {
		out = append(out, r.Old.String()+" => "+r.New.String())
	}
	sort.Strings(out)
	return out
}

func (m *manifest) excludes() []string {
	var out []string
	for _, e := range m.f.Exclude {
		out = append(out, e.Mod.String())
	}
	sort.Strings(out)
	return out
}

func (m *manifest) retracts() []string {
	var out []string
	for _, r := range m.f.Retract {
		out = append(out, r.Low+".."+r.High)
	}
	sort.Strings(out)
	return out
}

// moves lists every requirement that differs between before and after,
// sorted by path.
func moves(before, after *manifest) []Move {
	var out []Move
	for p, a := range after.reqs {
		b, ok := before.reqs[p]
		if !ok || b.version != a.version || b.indirect != a.indirect {
			out = append(out, Move{Path: p, From: b.version, To: a.version, Direct: !a.indirect})
		}
	}
	for p, b := range before.reqs {
		if _, ok := after.reqs[p]; !ok {
			out = append(out, Move{Path: p, From: b.version, Direct: !b.indirect})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// closure maps each module path reachable from a module version through
// go.mod requirements to the highest version required of it there.
type closure map[string]string

// goRule is how the admission gate judges a change of the go line: since
// Go 1.21 go get raises it to the highest go line of the build list, so a
// minor upgrade of a dependency on a newer Go raises it.
type goRule struct {
	// keep refuses any change of the go line (-keep-go).
	keep bool
	// imageGo is the Go release both trees are validated with, such as
	// "go1.26.8": a raised line must be one it builds.
	imageGo string
	// goLines maps each requirement that moved up (or was added) to the
	// go line of its go.mod at its new version, as the module cache holds
	// it ("" when it has none or the cache does not hold it).
	goLines map[string]string
}

// judge returns why the change of the go line from before to after is
// refused, or nil: unchanged, or raised to exactly the highest go line of
// the requirements that moved (what go get does), one imageGo builds,
// without keep.
func (g goRule) judge(before, after *manifest, target module.Version) *Refusal {
	b, a := before.goVersion(), after.goVersion()
	if a == b {
		return nil
	}
	refuse := func(format string, args ...any) *Refusal {
		return &Refusal{Rule: RuleGo, Module: target.Path, Reason: fmt.Sprintf("the go directive changed from %q to %q: ", b, a) + fmt.Sprintf(format, args...)}
	}
	if g.keep {
		return refuse("-keep-go refuses any change of it")
	}
	old := b
	if old == "" {
		old = "1.16" // the go command's default for a go.mod without a go line
	}
	if c, err := imagetable.Compare(a, old); err != nil || c <= 0 {
		return refuse("only a raise the upgrade requires is admitted")
	}
	need, by := g.highest()
	if need != a {
		return refuse("the requirements that moved need go %q at most (%s), so the raise is not explained by the upgrade", need, by)
	}
	if ok, err := imagetable.Fits(a, g.imageGo); err != nil || !ok {
		return refuse("%s requires it, and the image's %s is older: it cannot validate the raised module", by, g.imageGo)
	}
	return nil
}

// highest returns the highest go line of goLines and the requirement
// that has it (the first by path of those that do); "" when none has one.
func (g goRule) highest() (goLine, by string) {
	for p, v := range g.goLines {
		if _, err := imagetable.Compare(v, v); err != nil {
			continue // none, or not a go line
		}
		c := 1
		if goLine != "" {
			c, _ = imagetable.Compare(v, goLine)
		}
		if c > 0 || c == 0 && p < by {
			goLine, by = v, p
		}
	}
	return goLine, by
}

// admit is the admission gate: after is what go get made of before for
// target. Every requirement that moved up, other than the target, must be
// explained by the target's requirement closure (at most the version
// required there); the go line may change only as gr admits.
func admit(before, after *manifest, target module.Version, cl closure, gr goRule) *Refusal {
	return admitAll(before, after, []module.Version{target}, cl, gr)
}

// admitAll is the admission gate of go get of several targets at once (a
// group): each must be at exactly its version, and cl is the union of
// their closures (closure.add), so a move any target's requirements
// explain is admitted.
func admitAll(before, after *manifest, targets []module.Version, cl closure, gr goRule) *Refusal {
	refuse := func(rule, mod, format string, args ...any) *Refusal {
		return &Refusal{Rule: rule, Module: mod, Reason: fmt.Sprintf(format, args...)}
	}
	first := targets[0]
	isTarget := map[string]bool{}
	for _, t := range targets {
		isTarget[t.Path] = true
	}
	of := fmt.Sprint(targets[0])
	if len(targets) > 1 {
		of = fmt.Sprint(targets)
	}
	if a, b := after.modulePath(), before.modulePath(); a != b {
		return refuse(RuleModule, b, "the module path changed from %s to %s", b, a)
	}
	if ref := gr.judge(before, after, first); ref != nil {
		return ref
	}
	if a, b := after.toolchain(), before.toolchain(); a != b {
		return refuse(RuleToolchain, first.Path, "the toolchain directive changed from %q to %q", b, a)
	}
	for _, c := range []struct {
		rule string
		a, b []string
	}{{RuleReplace, after.replaces(), before.replaces()}, {RuleExclude, after.excludes(), before.excludes()}, {RuleRetract, after.retracts(), before.retracts()}} {
		if fmt.Sprint(c.a) != fmt.Sprint(c.b) {
			return refuse(c.rule, before.modulePath(), "the %s directives changed from %v to %v", c.rule, c.b, c.a)
		}
	}
	for _, target := range targets {
		if got := after.reqs[target.Path]; got.version != target.Version {
			return refuse(RuleTarget, target.Path, "%s is at %q after go get, not %s", target.Path, got.version, target.Version)
		}
	}
	for _, mv := range moves(before, after) {
		b, had := before.reqs[mv.Path]
		a, has := after.reqs[mv.Path]
		switch {
		case had && !has:
			if !b.indirect {
				return refuse(RuleDirect, mv.Path, "the direct dependency %s was removed", mv.Path)
			}
			// go get drops an indirect requirement another one implies;
			// admitted only when the target's own requirements imply it
			// at that version or higher, so nothing selected moved down.
			if need, ok := cl[mv.Path]; !ok || semver.Compare(need, b.version) < 0 {
				return refuse(RuleDown, mv.Path, "%s@%s was removed, and the requirements of %s do not keep it at that version (%s)", mv.Path, b.version, of, explain(need, ok))
			}
		case !had && !a.indirect:
			return refuse(RuleDirect, mv.Path, "the direct dependency %s@%s was added", mv.Path, a.version)
		case had && b.indirect != a.indirect:
			return refuse(RuleDirect, mv.Path, "%s changed from %s to %s", mv.Path, directness(b.indirect), directness(a.indirect))
		case had && semver.Compare(a.version, b.version) < 0:
			return refuse(RuleDown, mv.Path, "%s moved down from %s to %s", mv.Path, b.version, a.version)
		case isTarget[mv.Path]:
		default:
			if need, ok := cl[mv.Path]; !ok || semver.Compare(a.version, need) > 0 {
				return refuse(RuleClosure, mv.Path, "%s moved to %s, which the requirements of %s do not explain (%s)", mv.Path, a.version, of, explain(need, ok))
			}
		}
	}
	return nil
}

// add raises cl to every version o requires higher: the union of two
// closures.
func (cl closure) add(o closure) {
	for p, v := range o {
		if cur, ok := cl[p]; !ok || semver.Compare(v, cur) > 0 {
			cl[p] = v
		}
	}
}

func directness(indirect bool) string {
	if indirect {
		return "indirect"
	}
	return "direct"
}

func explain(need string, ok bool) string {
	if !ok {
		return "not required there"
	}
	return "required there at " + need
}

// maxModFile bounds one go.mod read from the module cache, in bytes.
const maxModFile = 1 << 20

// maxClosure bounds the modules a closure walks.
const maxClosure = 10_000

// readClosure walks go.mod requirements from target through the module
// cache's download directory (modCache/cache/download/<path>/@v/<v>.mod)
// on the host. A go.mod the cache does not hold is not walked: the go
// command did not need it, so it explains nothing, and a move it would
// have explained is refused (fail closed).
func readClosure(modCache string, target module.Version) closure {
	cl := closure{}
	queue := []module.Version{target}
	seen := map[module.Version]bool{target: true}
	for len(queue) > 0 && len(seen) < maxClosure {
		v := queue[0]
		queue = queue[1:]
		data, err := readCacheMod(modCache, v)
		if err != nil {
			continue
		}
		f, err := modfile.ParseLax(v.Path+"@"+v.Version+"/go.mod", data, nil)
		if err != nil {
			continue
		}
		for _, r := range f.Require {
			if cur, ok := cl[r.Mod.Path]; !ok || semver.Compare(r.Mod.Version, cur) > 0 {
				cl[r.Mod.Path] = r.Mod.Version
			}
			if !seen[r.Mod] {
				seen[r.Mod] = true
				queue = append(queue, r.Mod)
			}
		}
	}
	return cl
}

// readGoLines returns the go line of each requirement of moves that moved
// up or was added, from its go.mod in the module cache (goRule.goLines).
func readGoLines(modCache string, moves []Move) map[string]string {
	out := map[string]string{}
	for _, mv := range moves {
		if mv.To == "" || mv.From != "" && semver.Compare(mv.To, mv.From) <= 0 {
			continue
		}
		out[mv.Path] = ""
		data, err := readCacheMod(modCache, module.Version{Path: mv.Path, Version: mv.To})
		if err != nil {
			continue
		}
		if f, err := modfile.ParseLax(mv.Path+"@"+mv.To+"/go.mod", data, nil); err == nil && f.Go != nil {
			out[mv.Path] = f.Go.Version
		}
	}
	return out
}

func readCacheMod(modCache string, v module.Version) ([]byte, error) {
	ep, err := module.EscapePath(v.Path)
	if err != nil {
		return nil, err
	}
	ev, err := module.EscapeVersion(v.Version)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(modCache, "cache", "download", filepath.FromSlash(ep), "@v", ev+".mod")
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxModFile {
		return nil, fmt.Errorf("maintain: %s is not a regular file of at most %d bytes", p, maxModFile)
	}
	return os.ReadFile(p)
}
