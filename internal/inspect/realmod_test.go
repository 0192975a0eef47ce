package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/hosttest"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/validate"
	"github.com/stockade/stockade/internal/workflow"
)

// realModules are published modules no one here wrote: small, without
// dependencies, with tests. docs/MODULES.md records their figures.
var realModules = []string{
	"github.com/google/uuid@v1.6.0",        // no go directive: 1.16, an image stands in
	"github.com/dustin/go-humanize@v1.1.0", // go 1.21, two packages
	"github.com/rs/xid@v1.6.0",             // go 1.16, two packages
}

// hostEnv is the environment of the host's go commands, as a user would
// run them with GOFLAGS=-mod=mod (the go command adds a missing go line
// or go.sum entry, as acquisition does on a staging copy), with no network
// and the host's toolchain.
func hostEnv(gomodcache string) []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off", "GOMODCACHE="+gomodcache, "GOWORK=off")
}

// download fetches mod (path@version) into a temporary module cache on
// the host with the go command and copies the extracted module into a
// fresh directory, as a user's checkout would look. It returns that
// directory and the module cache's download directory, which is in
// GOPROXY file layout and serves as the fixture proxy.
func download(t *testing.T, mod string) (dir, proxy string) {
	t.Helper()
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "modcache")
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOMODCACHE="+cache, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		if enginetest.Required() {
			t.Fatalf("go mod download %s: %v\n%s", mod, err, out)
		}
		t.Skipf("cannot download %s from the module proxy (set %s=1 to fail instead): %v", mod, enginetest.RequireEnv, err)
	}
	var d struct{ Dir, Error string }
	if err := json.Unmarshal(out, &d); err != nil || d.Error != "" || d.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", mod, err, d.Error)
	}
	dir = filepath.Join(tmp, "module")
	if err := hosttest.CopyTree(d.Dir, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(cache) }) // the module cache is read-only
	return dir, filepath.Join(cache, "cache", "download")
}

// hostStatus runs the same go build, go vet and go test a validation runs
// on the host, in a copy of dir (the go command may add a go line to
// go.mod), and returns pass or fail for each.
func hostStatus(t *testing.T, src, gomodcache string) map[string]report.Status {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host")
	if err := hosttest.CopyTree(src, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]report.Status{}
	for _, c := range []struct {
		name string
		args []string
	}{
		// The directory is a writable copy: no -o needed on the host.
		{validate.CheckBuild, []string{"build", "./..."}},
		{validate.CheckVet, []string{"vet", "./..."}},
		{validate.CheckTest, []string{"test", "-count=1", "./..."}},
	} {
		cmd := exec.Command("go", c.args...)
		cmd.Dir = dir
		cmd.Env = hostEnv(gomodcache)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		got[c.name] = report.StatusPass
		if err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("go %v on the host: %v", c.args, err)
			}
			got[c.name] = report.StatusFail
			t.Logf("host go %s:\n%s", c.args[0], out.String())
		}
		t.Logf("host go %s: %s", c.args[0], got[c.name])
	}
	return got
}

// TestInspect_RealModules inspects published modules and checks that each
// check's verdict matches the same go build, go vet and go test on the
// host.
func TestInspect_RealModules(t *testing.T) {
	eng, _, dataDir := engine(t)
	for _, mod := range realModules {
		t.Run(filepath.Base(mod), func(t *testing.T) {
			dir, proxy := download(t, mod)
			host := hostStatus(t, dir, filepath.Dir(filepath.Dir(proxy)))
			ctx, cancel := context.WithTimeout(context.Background(), fixtureTimeout+5*time.Minute)
			defer cancel()
			start := time.Now()
			rep, err := Inspect(ctx, eng, Options{Options: workflow.Options{
				Dir: dir, FixtureProxy: proxy, DataDir: dataDir, Timeout: fixtureTimeout, LockTimeout: 10 * time.Minute, Owner: enginetest.Owner(t),
			}})
			if err != nil {
				t.Fatalf("Inspect(%s) = %v", mod, err)
			}
			var text bytes.Buffer
			report.WriteText(&text, rep)
			t.Logf("%s in %v:\n%s", mod, time.Since(start).Round(time.Millisecond), text.String())
			wantVerdict := report.Clean
			for _, c := range rep.Checks {
				if c.Name == validate.CheckList {
					continue
				}
				if c.Status != host[c.Name] {
					t.Errorf("%s: %s = %s in the container, %s on the host", mod, c.Name, c.Status, host[c.Name])
				}
				if host[c.Name] == report.StatusFail {
					wantVerdict = report.Failing
				}
			}
			if rep.Verdict != wantVerdict {
				t.Errorf("%s: verdict %s; the host says %s", mod, rep.Verdict, wantVerdict)
			}
		})
	}
}
