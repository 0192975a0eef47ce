package programs

import (
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

var update = flag.Bool("update", false, "rebuild the committed programs")

// buildArgs and buildEnv are how the committed programs are built (then
// -o FILE PACKAGE): the same bytes on every machine for the same tree and
// Go release.
var (
	buildArgs = []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}
	buildEnv  = []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOAMD64=v1", "GOWORK=off"}
)

// TestProgramsAreBuilt rebuilds every shipped program with the host's go
// command and compares the bytes with the committed ones: what ships is
// exactly this tree's source.
func TestProgramsAreBuilt(t *testing.T) {
	for _, p := range All {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), p.Name)
			cmd := exec.Command("go", append(buildArgs, "-o", out, p.Package)...)
			cmd.Env = append(os.Environ(), buildEnv...)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, b)
			}
			built, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				var z bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
				zw.Write(built)
				if err := zw.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p.File(), z.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			shipped, err := p.For("amd64")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(built, shipped) {
				committed := "unreadable"
				if bi, err := buildinfo.Read(bytes.NewReader(shipped)); err == nil {
					committed = bi.GoVersion
				}
				t.Fatalf("the committed %s (%d bytes, sha256 %s, built by %s) is not what this tree builds with %s (%d bytes, sha256 %s): run go generate ./internal/programs",
					p.File(), len(shipped), Digest(shipped)[:12], committed, runtime.Version(), len(built), Digest(built)[:12])
			}
		})
	}
}

func TestFor(t *testing.T) {
	for _, p := range All {
		for _, tc := range []struct {
			arch string
			want bool
		}{{"x86_64", true}, {"amd64", true}, {"aarch64", false}, {"", false}} {
			bin, err := p.For(tc.arch)
			if got := err == nil && len(bin) > 0; got != tc.want {
				t.Errorf("%s.For(%q) = %d bytes, %v; want shipped %v", p.Name, tc.arch, len(bin), err, tc.want)
			}
			if !tc.want && !errors.Is(err, ErrNotShipped) {
				t.Errorf("%s.For(%q) error %v; want ErrNotShipped", p.Name, tc.arch, err)
			}
		}
		bin, _ := p.For("amd64")
		if bi, err := buildinfo.Read(bytes.NewReader(bin)); err != nil || bi.Path != p.Package {
			t.Errorf("%s: the committed binary's build info = %v, %v; want %s", p.Name, bi, err, p.Package)
		}
	}
}
