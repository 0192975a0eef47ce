package inspect

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// FidelityEnv turns TestFidelity on: it downloads and validates
// twenty-one published modules and takes tens of minutes, so it is not part of the
// normal suite (TestInspect_RealModules is its small subset there).
const FidelityEnv = "STOCKADE_FIDELITY"

// FidelityOutEnv names a file TestFidelity writes its Markdown table to.
const FidelityOutEnv = "STOCKADE_FIDELITY_OUT"

// fidelityCorpus are published modules at pinned versions, chosen for
// variety; docs/FIDELITY.md holds the table and explains each difference.
var fidelityCorpus = []struct{ mod, why string }{
	{"github.com/google/uuid@v1.6.0", "no go directive"},
	{"github.com/dustin/go-humanize@v1.1.0", "two packages"},
	{"github.com/rs/xid@v1.6.0", "reads /etc/machine-id, hostname"},
	{"github.com/cespare/xxhash/v2@v2.3.0", "assembly; a test builds a plugin (cgo)"},
	{"github.com/mattn/go-sqlite3@v1.14.22", "cgo: compiles SQLite"},
	{"golang.org/x/sync@v0.10.0", "concurrency"},
	{"github.com/hashicorp/golang-lru/v2@v2.0.7", "generics"},
	{"github.com/BurntSushi/toml@v1.4.0", "go:embed, testdata-heavy"},
	{"github.com/stretchr/testify@v1.9.0", "dependencies"},
	{"github.com/gorilla/mux@v1.8.1", "net/http tests (loopback)"},
	{"github.com/mitchellh/go-homedir@v1.1.0", "tests read $HOME"},
	{"github.com/otiai10/copy@v1.14.0", "tests write beside their files"},
	{"github.com/fsnotify/fsnotify@v1.8.0", "inotify; build tags per OS"},
	{"github.com/tidwall/gjson@v1.18.0", "dependencies; large test file"},
	{"github.com/google/go-cmp@v0.6.0", "large test suite; purego tag"},
	{"github.com/klauspost/cpuid/v2@v2.2.9", "assembly, CPU feature tags"},
	{"github.com/go-chi/chi/v5@v5.2.3", "tests dial localhost (httptest, HTTP/2)"},
	{"github.com/golang-jwt/jwt/v5@v5.2.1", "an example serves and dials localhost"},
	{"github.com/sirupsen/logrus@v1.9.3", "a test dials syslog on localhost:514 (UDP)"},
	{"github.com/sirupsen/logrus@v1.8.1", "the same, older"},
	{"gopkg.in/yaml.v3@v3.0.1", "no go.sum: the test dependency's entry is added as go test -mod=mod does"},
}

// downloadWithDeps is download, then the module's own requirements into
// the same module cache, so the host's commands and the fixture proxy
// have them with no network.
func downloadWithDeps(t *testing.T, mod string) (dir, proxy string) {
	t.Helper()
	dir, proxy = download(t, mod)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return dir, proxy
	}
	cmd := exec.Command("go", "mod", "download")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOMODCACHE="+filepath.Dir(filepath.Dir(proxy)), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod download in %s: %v\n%s", mod, err, out)
	}
	return dir, proxy
}

// TestFidelity inspects every module of fidelityCorpus with the C
// toolchain (as the CLI does) and runs go build, go vet and go test on the
// host with the same Go, then reports the verdicts side by side. A
// difference is not a failure here: docs/FIDELITY.md names its category.
func TestFidelity(t *testing.T) {
	if os.Getenv(FidelityEnv) != "1" {
		t.Skipf("set %s=1: downloads and validates %d published modules (tens of minutes)", FidelityEnv, len(fidelityCorpus))
	}
	eng, _, dataDir := engine(t)
	var rows []string
	for _, c := range fidelityCorpus {
		t.Run(filepath.Base(c.mod), func(t *testing.T) {
			dir, proxy := downloadWithDeps(t, c.mod)
			host := hostStatus(t, dir, filepath.Dir(filepath.Dir(proxy)))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			start := time.Now()
			rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
				Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Timeout: 20 * time.Minute, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t), Cgo: true,
			}})
			if err != nil {
				t.Fatalf("Inspect(%s) = %v", c.mod, err)
			}
			took := time.Since(start).Round(100 * time.Millisecond)
			var text bytes.Buffer
			report.WriteText(&text, rep)
			t.Logf("%s in %v:\n%s", c.mod, took, text.String())
			var hostCol, boxCol []string
			agree := true
			kinds := map[string]bool{}
			for _, name := range []string{validate.CheckBuild, validate.CheckVet, validate.CheckTest} {
				box := report.Status("-")
				for _, ch := range rep.Checks {
					if ch.Name == name {
						box = ch.Status
						for _, f := range ch.Findings {
							kinds[f.Kind] = true
						}
					}
				}
				hostCol = append(hostCol, string(host[name]))
				boxCol = append(boxCol, string(box))
				agree = agree && box == host[name]
			}
			var ks []string
			for k := range kinds {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			img := "-"
			if rep.Image != nil {
				img = strings.TrimPrefix(rep.Image.GoVersion, "go")
				if rep.Image.StandIn {
					img += " (stand-in)"
				}
			}
			directive := rep.Go
			if directive == "" {
				directive = "none"
			}
			same := "yes"
			if !agree {
				same = "**no**"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %v |",
				c.mod, c.why, directive, img, strings.Join(hostCol, " / "), strings.Join(boxCol, " / "), rep.Verdict, same, strings.Join(ks, ", "), took))
		})
	}
	table := "| module | why | go | image | host build / vet / test | inspect build / vet / test | verdict | same | finding kinds | inspect time |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("\n%s", table)
	if out := os.Getenv(FidelityOutEnv); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
