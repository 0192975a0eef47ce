package cacheseed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// hostileTest is the test of a module that attacks every file its GOCACHE
// reaches: its own fresh cache and, through GOCACHEPROG, the seed. It
// rewrites, truncates, chmods, replaces and removes each file, plants files
// in each directory, shadows every seed entry in its own cache with a
// poisoned one, and runs go clean -cache against the seed. It prints how
// many attacks on the seed succeeded; the host checks the seed's bytes.
const hostileTest = `package hostile

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func roots() []string {
	r := []string{os.Getenv("GOCACHE")}
	if f := strings.Fields(os.Getenv("GOCACHEPROG")); len(f) > 0 {
		r = append(r, filepath.Dir(filepath.Dir(f[0])))
		r = append(r, f[1:]...)
	}
	return r
}

func attack(p string) (won int) {
	ok := func(err error) {
		if err == nil {
			won++
		}
	}
	ok(os.Chmod(p, 0o777))
	if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
		_, err = f.WriteAt([]byte("poison"), 0)
		ok(err)
		f.Close()
	}
	if f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
		won++
		f.Write([]byte("poison"))
		f.Close()
	}
	ok(os.Truncate(p, 1))
	ok(os.Chtimes(p, time.Unix(1, 0), time.Unix(1, 0)))
	if err := os.WriteFile(p+".new", []byte("poison"), 0o666); err == nil {
		ok(os.Rename(p+".new", p))
	}
	ok(os.Symlink("/etc/passwd", p+".link"))
	ok(os.Link(p, p+".hard"))
	return won
}

// shadow writes, into the fresh cache, an index entry for every action ID
// the seed holds, pointing at a poisoned body of the same size.
func shadow(seed, cache string) {
	filepath.WalkDir(seed, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "-a") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 200 {
			return nil
		}
		f := strings.Fields(string(b))
		out := f[2]
		dir := filepath.Join(cache, filepath.Base(filepath.Dir(p)))
		os.MkdirAll(dir, 0o777)
		os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o666)
		od := filepath.Join(cache, out[:2])
		os.MkdirAll(od, 0o777)
		if fi, err := os.Stat(filepath.Join(filepath.Dir(p), "..", out[:2], out+"-d")); err == nil {
			os.WriteFile(filepath.Join(od, out+"-d"), make([]byte, fi.Size()), 0o666)
		}
		return nil
	})
}

func TestAttack(t *testing.T) {
	rs := roots()
	seedWon := 0
	for i, root := range rs {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			won := 0
			if d.IsDir() {
				if os.Chmod(p, 0o777) == nil {
					won++
				}
				if os.WriteFile(filepath.Join(p, "planted"), []byte("x"), 0o666) == nil {
					won++
				}
			} else {
				won = attack(p)
			}
			if i > 0 {
				seedWon += won
			}
			return nil
		})
		if i > 0 {
			cmd := exec.Command("go", "clean", "-cache")
			cmd.Env = append(os.Environ(), "GOCACHE="+root, "GOCACHEPROG=")
			if cmd.Run() == nil {
				seedWon++
			}
			os.RemoveAll(root)
			os.Rename(root, root+".moved")
		}
	}
	if len(rs) > 1 {
		shadow(rs[len(rs)-1], rs[0])
	}
	t.Logf("SEED-ATTACKS-WON %d", seedWon)
}
`

// probeFiles is the module the next validation checks: it builds, has a
// vet finding, one passing and one failing test, and uses enough of the
// standard library for the seed to matter.
var probeFiles = map[string]string{
	"go.mod": "module stockade.test/probe\n\ngo 1.24\n",
	"probe.go": `// Package probe is what the validation after a hostile one checks.
package probe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Handler answers with a JSON greeting.
func Handler(w http.ResponseWriter, r *http.Request) {
	json.NewEncoder(w).Encode(map[string]string{"hello": strings.ToUpper(r.URL.Path)})
}

// Greet formats a greeting, with a vet finding on purpose (a
// self-assignment: go vet reports it, go test's vet subset does not, so the
// tests still run).
func Greet(name string) string {
	name = name
	return fmt.Sprintf("hello, %s", name)
}
`,
	"probe_test.go": `package probe

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler(rec, httptest.NewRequest("GET", "/x", nil))
	if !strings.Contains(rec.Body.String(), "/X") {
		t.Errorf("body = %q", rec.Body.String())
	}
}

func TestFails(t *testing.T) {
	t.Error("fails on purpose")
}
`,
}

// TestSeedSurvivesHostileValidation is the seed's safety proof: a
// validation whose test attacks every file its GOCACHE reaches changes no
// byte of the seed, and the next validation's results are the same as with
// an empty cache.
func TestSeedSurvivesHostileValidation(t *testing.T) {
	es := setupEngine(t)
	before := hashTree(t, es.seed.Dir)

	hostile := moduleDir(t, es, map[string]string{
		"go.mod":          "module stockade.test/hostile\n\ngo 1.24\n",
		"hostile.go":      "// Package hostile attacks its build cache.\npackage hostile\n",
		"hostile_test.go": hostileTest,
	})
	fresh := newFresh(t, es, es.seed)
	runIn(t, es, fresh, hostile, "go", "build", "./...")
	runIn(t, es, fresh, hostile, "go", "vet", "./...")
	res := runIn(t, es, fresh, hostile, "go", "test", "-json", "-count=1", "./...")
	m := regexp.MustCompile(`SEED-ATTACKS-WON (\d+)`).FindSubmatch(res.Stdout)
	if m == nil {
		t.Fatalf("the hostile test did not run: exit %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if string(m[1]) != "0" {
		t.Errorf("%s attacks on the seed succeeded inside the container", m[1])
	}
	if after := hashTree(t, es.seed.Dir); after != before {
		t.Fatalf("the seed changed: %s before, %s after", before, after)
	}

	// The next validation, from the same seed, equals one from an empty
	// cache, and the seed served it (few entries were written).
	probe := moduleDir(t, es, probeFiles)
	seeded := newFresh(t, es, es.seed)
	empty := newFresh(t, es, Seed{})
	got := validation(t, es, seeded, probe)
	want := validation(t, es, empty, probe)
	if got != want {
		t.Errorf("seeded validation differs from an empty-cache one:\nseeded:\n%s\nempty:\n%s", got, want)
	}
	if !strings.Contains(want, "fails on purpose") || !strings.Contains(want, "vet exit 1") || !strings.Contains(want, "self-assignment") {
		t.Errorf("the probe's findings are missing:\n%s", want)
	}
	ns, ne := countFiles(t, seeded.Dir), countFiles(t, empty.Dir)
	t.Logf("files written: seeded %d, empty %d", ns, ne)
	if ns*10 > ne {
		t.Errorf("seeded cache wrote %d files, empty %d: the seed was not used", ns, ne)
	}
	if after := hashTree(t, es.seed.Dir); after != before {
		t.Fatalf("the seed changed: %s before, %s after", before, after)
	}
}

// validation runs build, vet and test -json in fresh and returns what a
// report depends on: exit codes, vet's findings and the test events,
// without times.
func validation(t *testing.T, es *engineSeed, fresh Fresh, src string) string {
	t.Helper()
	var b strings.Builder
	build := runIn(t, es, fresh, src, "go", "build", "./...")
	fmt.Fprintf(&b, "build exit %d\n%s", build.ExitCode, build.Stderr)
	vet := runIn(t, es, fresh, src, "go", "vet", "./...")
	fmt.Fprintf(&b, "vet exit %d\n%s", vet.ExitCode, vet.Stderr)
	test := runIn(t, es, fresh, src, "go", "test", "-json", "-count=1", "./...")
	fmt.Fprintf(&b, "test exit %d\n%s%s", test.ExitCode, normalizeEvents(t, test.Stdout), test.Stderr)
	return b.String()
}

var durationRE = regexp.MustCompile(`\d+\.\d+s`)

func normalizeEvents(t *testing.T, out []byte) string {
	var b strings.Builder
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var ev struct{ Action, Package, Test, Output string }
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go test -json: %v\n%s", err, out)
		}
		fmt.Fprintf(&b, "%s %s %s %q\n", ev.Action, ev.Package, ev.Test, durationRE.ReplaceAllString(ev.Output, "Xs"))
	}
	return b.String()
}

// moduleDir writes files into a new directory the engine can see.
func moduleDir(t *testing.T, es *engineSeed, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp(es.dataDir, "mod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newFresh(t *testing.T, es *engineSeed, s Seed) Fresh {
	t.Helper()
	parent := filepath.Join(es.dataDir, "caches")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := NewFresh(s, parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeFresh(t, es, f) })
	return f
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// hashTree digests every name, type, mode, owner, size, mtime and content
// under root.
func hashTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			line += fmt.Sprintf(" %d:%d ino %d", st.Uid, st.Gid, st.Ino)
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%d entries, sha256 %s", len(lines), hex.EncodeToString(sum[:]))
}
