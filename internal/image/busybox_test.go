package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBusyboxPackage: the pin is one exact busybox-static version.
func TestBusyboxPackage(t *testing.T) {
	p := BusyboxPackage()
	if p.Name != "busybox-static" || !debVersionRE.MatchString(p.Version) {
		t.Errorf("BusyboxPackage() = %v; want busybox-static=<version>", p)
	}
}

// TestFindBusybox is the resolution's table: NoBusybox and an explicit
// Busybox never look at the host or fetch; a host without a usable
// static busybox and nothing to fetch into is ErrNoBusybox, not an image
// without a shell. The fetch itself is TestDebianBusybox's.
func TestFindBusybox(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "not-elf")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dynamic, err := exec.LookPath("ls") // a dynamically linked executable
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	type want struct {
		none bool   // nil busybox, no error
		is   error  // errors.Is the error
		text string // or the error says this
	}
	tests := []struct {
		name string
		host string
		opts Options
		want want
	}{
		{"no busybox", missing, Options{NoBusybox: true}, want{none: true}},
		{"no busybox, host dynamic", dynamic, Options{NoBusybox: true}, want{none: true}},
		{"explicit missing", missing, Options{Busybox: missing, CacheDir: dir}, want{text: "no such file"}},
		{"explicit not elf", missing, Options{Busybox: notELF, CacheDir: dir}, want{text: "not a Linux executable"}},
		{"explicit dynamic", missing, Options{Busybox: dynamic, CacheDir: dir}, want{text: "dynamically linked"}},
		{"host missing, no cache", missing, Options{}, want{is: ErrNoBusybox, text: "Options.CacheDir"}},
		{"host dynamic, no cache", dynamic, Options{}, want{is: ErrNoBusybox, text: "dynamically linked"}},
		{"host not elf, no cache", notELF, Options{}, want{is: ErrNoBusybox, text: "not a Linux executable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetHostBusybox(t, tt.host)
			bb, err := findBusybox(context.Background(), tt.opts, runtime.GOARCH)
			switch {
			case tt.want.none:
				if bb != nil || err != nil {
					t.Errorf("findBusybox = %v, %v; want none", bb, err)
				}
			case err == nil:
				t.Errorf("findBusybox = %s; want an error", bb.path)
			case tt.want.is != nil && !errors.Is(err, tt.want.is), !strings.Contains(err.Error(), tt.want.text):
				t.Errorf("findBusybox = %v; want %v saying %q", err, tt.want.is, tt.want.text)
			case tt.want.is == nil && errors.Is(err, ErrNoBusybox):
				t.Errorf("findBusybox = %v; an explicit busybox must not fall back", err)
			}
		})
	}
}

// TestDebianBusybox fetches Debian's busybox-static through the host's apt
// into a cache, twice (the second fetches nothing), and runs its shell.
func TestDebianBusybox(t *testing.T) {
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: not a Debian host", tool)
		}
	}
	if debArch[runtime.GOARCH] != busyboxArch {
		t.Skipf("busybox-static is pinned for %s", busyboxArch)
	}
	SetHostBusybox(t, filepath.Join(t.TempDir(), "missing"))
	cache := testCacheDir(t)
	ctx := context.Background()
	bb, err := findBusybox(ctx, Options{CacheDir: cache}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bb.path, cache+"/busybox-") || bb.arch != runtime.GOARCH || !strings.HasPrefix(bb.digest, "sha256:") {
		t.Errorf("busybox = %+v; want a static %s one unpacked under %s", bb, runtime.GOARCH, cache)
	}
	deb := filepath.Join(cache, "debs", debFile(BusyboxPackage(), busyboxArch))
	before, err := os.Stat(deb)
	if err != nil {
		t.Fatalf("the fetched package is not kept: %v", err)
	}
	again, err := findBusybox(ctx, Options{CacheDir: cache}, runtime.GOARCH)
	if err != nil || *again != *bb {
		t.Errorf("second findBusybox = %+v, %v; want %+v", again, err, bb)
	}
	if after, err := os.Stat(deb); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the package was fetched again: %v", err)
	}
	out, err := exec.Command(bb.path, "sh", "-c", "echo ok").CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Errorf("busybox sh -c 'echo ok' = %q, %v", out, err)
	}
}
