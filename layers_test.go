package stockade_test

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// These tests keep docs/ARCHITECTURE.md's drawing of the packages the
// truth, and keep each package importing only what sits below it.

var update = flag.Bool("update", false, "rewrite docs/ARCHITECTURE.md's package drawing from go list")

const module = "github.com/stockade/stockade/"

// pkg is one package of this module with code outside tests, as go list
// sees it: its imports and every package it links, both without the
// module's path for its imports.
type pkg struct {
	path    string
	imports []string // this module's packages it imports
	deps    []string // every package it links, by its full import path
}

// packages lists the module's packages that have non-test code.
func packages(t *testing.T) map[string]*pkg {
	t.Helper()
	out := goTool(t, "list", "-f", "{{if .GoFiles}}{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}{{end}}", "./...")
	pkgs := map[string]*pkg{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		p := &pkg{path: strings.TrimPrefix(parts[0], module)}
		for _, i := range strings.Fields(parts[1]) {
			if strings.HasPrefix(i, module) {
				p.imports = append(p.imports, strings.TrimPrefix(i, module))
			}
		}
		p.deps = strings.Fields(parts[2])
		pkgs[p.path] = p
	}
	return pkgs
}

// floors places each package one floor above the highest package it
// imports; a package that imports nothing of this module is on floor 0.
func floors(pkgs map[string]*pkg) map[string]int {
	floor := map[string]int{}
	var place func(p string) int
	place = func(p string) int {
		if f, ok := floor[p]; ok {
			return f
		}
		f := 0
		for _, i := range pkgs[p].imports {
			f = max(f, place(i)+1)
		}
		floor[p] = f
		return f
	}
	for p := range pkgs {
		place(p)
	}
	return floor
}

// drawing renders the packages floor by floor, the highest first, each
// with what it imports of this module.
func drawing(pkgs map[string]*pkg) string {
	floor := floors(pkgs)
	top := 0
	for _, f := range floor {
		top = max(top, f)
	}
	var b strings.Builder
	for f := top; f >= 0; f-- {
		var on []string
		for p, pf := range floor {
			if pf == f {
				on = append(on, p)
			}
		}
		slices.Sort(on)
		fmt.Fprintf(&b, "floor %d\n", f)
		for _, p := range on {
			if len(pkgs[p].imports) == 0 {
				fmt.Fprintf(&b, "  %s\n", p)
				continue
			}
			imps := slices.Clone(pkgs[p].imports)
			slices.Sort(imps)
			// One line per package, wrapped so that the file stays readable.
			line := "  " + p + " → "
			indent := strings.Repeat(" ", len([]rune(line)))
			for i, imp := range imps {
				if i > 0 && len([]rune(line))+1+len(imp) > 100 {
					b.WriteString(line + "\n")
					line = indent
				} else if i > 0 {
					line += " "
				}
				line += imp
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

const (
	drawingBegin = "<!-- The package drawing: made by `go test -run TestArchitectureDrawing -update .` from go list; do not edit by hand. -->\n```text\n"
	drawingEnd   = "```\n<!-- end of the package drawing -->\n"
)

// TestArchitectureDrawing: docs/ARCHITECTURE.md draws what go list says
// the packages import. After a change to the imports, -update redraws it.
func TestArchitectureDrawing(t *testing.T) {
	const file = "docs/ARCHITECTURE.md"
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), drawingBegin)
	drawn, after, ok2 := strings.Cut(rest, drawingEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no package drawing between %q and %q", file, drawingBegin, drawingEnd)
	}
	want := drawing(packages(t))
	if drawn == want {
		return
	}
	if *update {
		if err := os.WriteFile(file, []byte(before+drawingBegin+want+drawingEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's package drawing disagrees with go list; run go test -run TestArchitectureDrawing -update . and read the diff.\ndrawn:\n%s\ngo list:\n%s", file, drawn, want)
}

// TestLayers: edges that must not exist, directly or through another
// package. A rule's to is a package of this module, or "..." for every
// package of this module.
func TestLayers(t *testing.T) {
	rules := []struct {
		from, to, why string
	}{
		{"sandbox", "internal/container", "the public session API must not link the engine client: platforms compile against it"},
		{"sandbox", "sandbox/dockerapi", "the public session API must not link the engine client"},
		{"sandbox", "internal/image", "the public session API must not link the image builder"},
		{"sandbox", "internal/egress", "the gate topology is the backends', not the API's"},
		{"sandbox/sandboxtest", "internal/container", "the contract suite tests the API, not Docker"},
		{"sandbox/sandboxtest", "sandbox/dockerapi", "the contract suite tests the API, not Docker"},
		{"sandbox/dockerapi", "...", "the engine client stands alone: the standard library only"},
		{"internal/defaults", "...", "the defaults sit below everything"},
		{"domain", "...", "the shared small types sit below everything"},
		{"internal/label", "...", "the label keys sit below everything"},
		{"internal/container", "sandbox", "what every container shares sits below the session API"},
		{"internal/container", "internal/image", "what every container shares sits below the image builder"},
		{"internal/egress", "sandbox", "the gate topology sits below both faces; the session side is sandbox/internal/sessiongate"},
		{"internal/egress", "internal/image", "the gate topology runs the gate, it does not build its image"},
		{"internal/toolchain", "sandbox", "the toolchain face does not use the session API"},
		{"internal/toolchain", "sandbox/docker", "the toolchain face does not use the session backends"},
		{"sandbox/kubernetes", "internal/image", "the Kubernetes backend does not build images"},
		{"sandbox/kubernetes", "sandbox/docker", "the backends are peers"},
		{"sandbox/kubernetes", "internal/programs", "a pod's gate runs an image: the programs' bytes (7 MB) are the Docker backend's"},
		{"internal/egress", "internal/programs", "the gate topology runs the gate; the programs' bytes are the image builder's"},
		{"sandbox/docker", "sandbox/kubernetes", "the backends are peers"},
		{"sandbox/docker", "internal/toolchain", "the session face does not use the toolchain face"},
	}
	pkgs := packages(t)
	for _, r := range rules {
		p, ok := pkgs[r.from]
		if !ok {
			t.Errorf("rule from %s: no such package", r.from)
			continue
		}
		for _, d := range p.deps {
			if d == module+r.to || (r.to == "..." && strings.HasPrefix(d, module)) {
				t.Errorf("%s links %s: %s", r.from, strings.TrimPrefix(d, module), r.why)
			}
		}
	}
	// Only the Kubernetes backend, and what runs it, link client-go.
	for _, p := range pkgs {
		if p.path == "sandbox/kubernetes" {
			continue
		}
		for _, d := range p.deps {
			if strings.HasPrefix(d, "k8s.io/") {
				t.Errorf("%s links %s; only sandbox/kubernetes may", p.path, d)
				break
			}
		}
	}
}
