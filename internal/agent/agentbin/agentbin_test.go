package agentbin

import (
	"bytes"
	"debug/buildinfo"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rebuild the committed agent binary")

// buildArgs are how the committed binary is built; the result is the same
// bytes on every machine for the same tree and Go release.
var buildArgs = []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o"}

// TestBinaryIsBuilt rebuilds cmd/stockade-agent with the host's go command
// and compares the bytes with the committed binary: the shipped agent is
// exactly this tree's source.
func TestBinaryIsBuilt(t *testing.T) {
	out := filepath.Join(t.TempDir(), File)
	cmd := exec.Command("go", append(buildArgs, out, "github.com/stockade/stockade/cmd/stockade-agent")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOAMD64=v1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(File, built, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(built, amd64) {
		committed := "unreadable"
		if bi, err := buildinfo.Read(bytes.NewReader(amd64)); err == nil {
			committed = bi.GoVersion
		}
		t.Fatalf("the committed %s (%d bytes, sha256 %s, built by %s) is not what this tree builds with %s (%d bytes, sha256 %s): run go generate ./internal/agent/agentbin",
			File, len(amd64), Digest(amd64)[:12], committed, runtime.Version(), len(built), Digest(built)[:12])
	}
}

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		arch string
		want bool
	}{{"x86_64", true}, {"amd64", true}, {"aarch64", false}, {"", false}} {
		if got := For(tc.arch) != nil; got != tc.want {
			t.Errorf("For(%q) != nil = %v; want %v", tc.arch, got, tc.want)
		}
	}
	if bi, err := buildinfo.Read(bytes.NewReader(amd64)); err != nil || !strings.HasSuffix(bi.Path, "cmd/stockade-agent") {
		t.Errorf("the committed binary's build info = %v, %v; want cmd/stockade-agent's", bi, err)
	}
}
