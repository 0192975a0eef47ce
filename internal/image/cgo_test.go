package image

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestCToolchainPackages(t *testing.T) {
	pkgs := CToolchainPackages()
	have := map[string]bool{}
	for i, p := range pkgs {
		have[p.Name] = true
		if i > 0 && pkgs[i-1].Name >= p.Name {
			t.Errorf("packages not sorted: %s before %s", pkgs[i-1].Name, p.Name)
		}
	}
	for _, want := range []string{"gcc", "gcc-12", "binutils", "libc6", "libc6-dev", "linux-libc-dev", "libc-bin"} {
		if !have[want] {
			t.Errorf("the C toolchain lacks %s", want)
		}
	}
}

func TestParsePackages(t *testing.T) {
	got, err := parsePackages("# comment\nzlib1g=1:1.2.13.dfsg-1+deb12u1\n\ngcc=4:12.2.0-3\n")
	if err != nil || len(got) != 2 || got[0] != (DebPackage{"gcc", "4:12.2.0-3"}) || got[1].Name != "zlib1g" {
		t.Errorf("parsePackages = %v, %v", got, err)
	}
	for _, bad := range []string{"", "gcc", "gcc=", "Gcc=1", "gcc=1 2", "gcc=1\ngcc=2", "../x=1", "gcc=$(x)"} {
		if _, err := parsePackages(bad); err == nil {
			t.Errorf("parsePackages(%q) succeeded", bad)
		}
	}
}

func TestDebFile(t *testing.T) {
	if got := debFile(DebPackage{"libcrypt1", "1:4.4.33-2"}, "amd64"); got != "libcrypt1_1%3a4.4.33-2_amd64.deb" {
		t.Errorf("debFile = %q; want apt-get download's name", got)
	}
}

// TestAptSHA256 asks the host's apt for the set's checksums: every
// package version must be known to apt with a SHA256.
func TestAptSHA256(t *testing.T) {
	if _, err := exec.LookPath("apt-cache"); err != nil {
		t.Skip("no apt-cache: not a Debian host")
	}
	pkgs := CToolchainPackages()
	sums, err := aptSHA256(context.Background(), pkgs, cToolchainArch)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if m := sums[p]; len(m.sha256) != 64 || (m.arch != cToolchainArch && m.arch != "all") {
			t.Errorf("%s: %+v", p, m)
		}
	}
	_, err = aptSHA256(context.Background(), []DebPackage{{"gcc", "0.0.0-nonexistent"}}, "amd64")
	if !errors.Is(err, ErrNoDebian) || !strings.Contains(err.Error(), "gcc=0.0.0-nonexistent") {
		t.Errorf("aptSHA256(unknown version) = %v; want ErrNoDebian naming it", err)
	}
}

// TestCPackagesDigest: the label names the set, whatever its order, and
// changes with any version.
func TestCPackagesDigest(t *testing.T) {
	a := []DebPackage{{"gcc", "4:12.2.0-3"}, {"libc-bin", "2.36-9+deb12u14"}}
	b := []DebPackage{a[1], a[0]}
	c := []DebPackage{a[0], {"libc-bin", "2.36-9+deb12u13"}}
	if CPackagesDigest(a) != CPackagesDigest(b) || CPackagesDigest(a) == CPackagesDigest(c) || !strings.HasPrefix(CPackagesDigest(a), "sha256:") {
		t.Errorf("digests %s %s %s", CPackagesDigest(a), CPackagesDigest(b), CPackagesDigest(c))
	}
}

// TestWithPackages: extra packages join the set sorted; one the layer has
// is accepted at its version only; malformed ones are refused.
func TestWithPackages(t *testing.T) {
	base := CToolchainPackages()
	got, err := WithPackages([]DebPackage{{"zlib1g-dev", "1:1.2.13.dfsg-1+deb12u1"}, base[0]})
	if err != nil || len(got) != len(base)+1 || CPackagesDigest(got) == CPackagesDigest(base) {
		t.Fatalf("WithPackages = %d packages, %v", len(got), err)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Name >= got[i].Name {
			t.Errorf("not sorted: %s before %s", got[i-1], got[i])
		}
	}
	for _, bad := range [][]DebPackage{{{base[0].Name, "0.0-other"}}, {{"Bad Name", "1.0"}}, {{"zlib1g-dev", ""}}} {
		if _, err := WithPackages(bad); !errors.Is(err, ErrAptPackage) {
			t.Errorf("WithPackages(%v) = %v; want ErrAptPackage", bad, err)
		}
	}
}

// TestResolvePackages asks the host's apt: zlib1g-dev needs nothing the
// layer lacks but itself, at apt's candidate; a version can be named; an
// unknown or malformed package is refused.
func TestResolvePackages(t *testing.T) {
	if _, err := exec.LookPath("apt-cache"); err != nil {
		t.Skip("no apt-cache on this host")
	}
	ctx := context.Background()
	got, err := ResolvePackages(ctx, []string{"zlib1g-dev"})
	if err != nil || len(got) != 1 || got[0].Name != "zlib1g-dev" || got[0].Version == "" {
		t.Fatalf("ResolvePackages(zlib1g-dev) = %v, %v", got, err)
	}
	again, err := ResolvePackages(ctx, []string{got[0].String()})
	if err != nil || len(again) != 1 || again[0] != got[0] {
		t.Errorf("ResolvePackages(%s) = %v, %v", got[0], again, err)
	}
	for _, bad := range []string{"no-such-package-stockade", "Bad Name", "zlib1g-dev=not a version"} {
		if _, err := ResolvePackages(ctx, []string{bad}); !errors.Is(err, ErrAptPackage) {
			t.Errorf("ResolvePackages(%q) = %v; want ErrAptPackage", bad, err)
		}
	}
}
