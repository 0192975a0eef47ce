package scanner_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/image"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/scanner"
	"github.com/stockade/stockade/internal/workflow"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// shared is the scanner the engine tests of this package build once per
// data directory: the directory outlives the test process (it is the one
// the validate and maintain tests share), so later runs reuse it.
var shared struct {
	once sync.Once
	err  error
	eng  *dockerapi.Client
	img  report.Image
	dir  string // data directory
	s    scanner.Scanner
}

// buildBudget bounds the shared build: downloading x/vuln's modules
// through the real proxy and compiling them on a shared machine.
const buildBudget = 25 * time.Minute

func testDataDir() (string, error) { return enginetest.SharedDataDir() }

func ensure(t *testing.T) (*dockerapi.Client, report.Image, string, scanner.Scanner) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the scanner in a container; skipped with -short")
	}
	c := enginetest.Client(t)
	shared.once.Do(func() {
		shared.eng = c
		ctx, cancel := context.WithTimeout(context.Background(), buildBudget)
		defer cancel()
		if _, shared.err = image.Build(ctx, c, image.Options{}); shared.err != nil {
			return
		}
		if shared.img, _, shared.err = workflow.SelectImage(ctx, c, workflow.ImageRequest{Directive: "1.26"}, nil); shared.err != nil {
			return
		}
		if shared.dir, shared.err = testDataDir(); shared.err != nil {
			return
		}
		shared.s, shared.err = scanner.Ensure(ctx, c, scanner.Config{
			DataDir: shared.dir, DefaultDataDir: true, Image: shared.img.ID, GoVersion: shared.img.GoVersion,
			Owner: "scanner-test", LockTimeout: 15 * time.Minute,
		})
	})
	if shared.err != nil {
		t.Fatalf("building the scanner: %v", shared.err)
	}
	return shared.eng, shared.img, shared.dir, shared.s
}

// TestEnsure_BuildsVerifiesAndReuses: the scanner built in the Tool
// profile through the real module proxy passes verification, records the
// image's Go, and a second Ensure reuses it without building.
func TestEnsure_BuildsVerifiesAndReuses(t *testing.T) {
	eng, img, dir, s := ensure(t)
	if err := s.VerifyCopy(s.Dir); err != nil {
		t.Fatalf("the stored scanner fails verification: %v", err)
	}
	if s.Built {
		// The build reached the module proxy only through its gate.
		if len(s.Egress) == 0 {
			t.Error("a build without an egress record")
		}
		for _, r := range s.Egress {
			if r.Host != "proxy.golang.org" || r.Method != "CONNECT" || r.Verdict != domain.EgressAllowed {
				t.Errorf("build egress %+v; want CONNECTs to proxy.golang.org only, admitted", r)
			}
		}
	}
	if s.Meta.GoVersion != img.GoVersion || s.Meta.Version != "v1.9.0" || s.Meta.Image != img.ID {
		t.Errorf("meta = %+v; want go %s, v1.9.0, image %s", s.Meta, img.GoVersion, img.ID)
	}
	if filepath.Base(s.Dir) != scanner.Key("v1.9.0", img.ID) {
		t.Errorf("stored in %s; want a directory named by version and image", s.Dir)
	}
	again, err := scanner.Ensure(context.Background(), eng, scanner.Config{DataDir: dir, DefaultDataDir: true, Image: img.ID, GoVersion: img.GoVersion, Owner: "scanner-test"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.Meta.SHA256 != s.Meta.SHA256 {
		t.Errorf("second Ensure: built %v, sha256 %s; want the stored scanner (%s)", again.Built, again.Meta.SHA256, s.Meta.SHA256)
	}
	t.Logf("scanner %s, sha256 %s, built in %v", s.Meta.Version, s.Meta.SHA256, time.Duration(s.Meta.BuildMS)*time.Millisecond)
}

// TestVerify_RefusesTampered: a copy with one byte changed, a copy whose
// build info says something else (re-recorded sha256, so only the build
// info can catch it), another program, and a different Go version are
// each refused with ErrUnverified and a reason naming what differs.
func TestVerify_RefusesTampered(t *testing.T) {
	_, _, _, s := ensure(t)
	orig, err := os.ReadFile(s.Binary())
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Meta.Want()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	hello := filepath.Join(tmp, "hello")
	src := filepath.Join(tmp, "hellosrc")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module golang.org/x/vuln\n\ngo 1.24\n"), 0o644)
	os.MkdirAll(filepath.Join(src, "cmd", "govulncheck"), 0o755)
	os.WriteFile(filepath.Join(src, "cmd", "govulncheck", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	cmd := exec.Command("go", "build", "-trimpath", "-o", hello, "./cmd/govulncheck")
	cmd.Dir, cmd.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a stand-in: %v\n%s", err, out)
	}
	flipped := bytes.Clone(orig)
	flipped[len(flipped)/2] ^= 0x01
	cgo := bytes.Replace(orig, []byte("build\tCGO_ENABLED=0\n"), []byte("build\tCGO_ENABLED=1\n"), -1)
	if bytes.Equal(cgo, orig) {
		t.Fatal("the build info holds no CGO_ENABLED=0 to change")
	}
	for _, tc := range []struct {
		name   string
		bin    []byte
		file   string // when set, the binary is this file
		rehash bool   // record the tampered binary's own sha256
		goVer  string // when set, the image's Go version
		reason string
	}{
		{name: "one byte changed", bin: flipped, reason: "sha256"},
		{name: "cgo in the build info", bin: cgo, rehash: true, reason: "CGO_ENABLED"},
		{name: "another program", file: hello, rehash: true, reason: "module golang.org/x/vuln@(devel)"},
		{name: "another image's Go", bin: orig, goVer: "go1.26.0", reason: "the image has go1.26.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), scanner.BinaryName)
			b := tc.bin
			if tc.file != "" {
				if b, err = os.ReadFile(tc.file); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(p, b, 0o555); err != nil {
				t.Fatal(err)
			}
			w := want
			if tc.rehash {
				w.SHA256 = scanner.SHA256(b)
			}
			if tc.goVer != "" {
				w.GoVersion = tc.goVer
			}
			err := scanner.Verify(p, w)
			var ve *scanner.VerifyError
			if !errors.Is(err, scanner.ErrUnverified) || !errors.As(err, &ve) || !strings.Contains(ve.Reason, tc.reason) {
				t.Fatalf("Verify = %v; want a *VerifyError whose reason names %q", err, tc.reason)
			}
		})
	}
}
