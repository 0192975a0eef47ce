package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/gate"
	"github.com/stockade/stockade/internal/imagetable"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// fakeGoRoot makes a small GOROOT: a bare ELF header of the host's
// architecture stands in for bin/go, with the directories the image keeps
// and the ones it trims.
func fakeGoRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	goBin := elfHeader(t, runtime.GOARCH)
	other := "linux_arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux_amd64"
	}
	files := map[string]string{
		"VERSION":                "go1.99.1\ntime 2026-01-01T00:00:00Z\n",
		"go.env":                 "GOPROXY=https://proxy.golang.org,direct\n",
		"src/runtime/runtime.go": "package runtime\n",
		"src/fmt/testdata/x.txt": "kept: go test std reads testdata\n",
		"lib/time/zoneinfo.zip":  "zip",
		"pkg/include/textflag.h": "#define NOSPLIT 4\n",
		"pkg/tool/linux_" + runtime.GOARCH + "/vet": "#!vet\n",
		"pkg/tool/" + other + "/vet":                "#!other arch\n",
		"pkg/obj/go-build/x":                        "droppings",
		"api/go1.txt":                               "pkg fmt\n",
		"test/fixedbugs/issue1.go":                  "package p\n",
		"doc/go_spec.html":                          "<html>",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.Contains(name, "pkg/tool/") {
			mode = 0o700 // normalised to 0755 in the image
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "go"), goBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../src/runtime/runtime.go", filepath.Join(dir, "bin", "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// elfHeader returns the 64-byte header of a little-endian ELF64 executable
// for goarch: enough for debug/elf, nothing to run.
func elfHeader(t *testing.T, goarch string) []byte {
	t.Helper()
	var machine elf.Machine
	for m, a := range elfArchs {
		if a == goarch {
			machine = m
		}
	}
	if machine == 0 {
		t.Skipf("no ELF machine for %s", goarch)
	}
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(machine))
	le.PutUint32(h[20:], 1)  // version
	le.PutUint16(h[52:], 64) // header size
	le.PutUint16(h[54:], 56) // program header entry size
	le.PutUint16(h[58:], 64) // section header entry size
	return h
}

// caPEM returns a PEM self-signed CA certificate named cn, the same bytes
// on every call (ed25519 signatures are deterministic).
func caPEM(t *testing.T, cn string) []byte {
	t.Helper()
	seed := sha256.Sum256([]byte(cn))
	key := ed25519.NewKeyFromSeed(seed[:])
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// caFile writes data to a new file and returns its path.
func caFile(t *testing.T, data []byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// hostBusybox returns the static busybox a build takes: DefaultBusybox,
// or Debian's busybox-static fetched into testCacheDir. It skips on a host
// with neither a static busybox nor apt.
func hostBusybox(t *testing.T) string {
	t.Helper()
	bb, err := findBusybox(context.Background(), Options{CacheDir: testCacheDir(t)}, "")
	if errors.Is(err, ErrNoDebian) {
		t.Skipf("no static busybox at %s and no Debian one: %v", hostBusyboxPath, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bb.path
}

// testCacheDir is where tests keep what builds fetch (Options.CacheDir):
// outside the repository and any test's temporary directory, so a second
// run fetches nothing.
func testCacheDir(t testing.TB) string {
	t.Helper()
	d, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory: %v", err)
	}
	return filepath.Join(d, "stockade-test", "toolchains")
}

func archive(t *testing.T, opts Options) (*plan, []byte) {
	t.Helper()
	p, err := prepare(context.Background(), opts)
	if err != nil {
		t.Fatalf("prepare(%+v) = %v", opts, err)
	}
	var buf bytes.Buffer
	if err := p.writeArchive(context.Background(), &buf); err != nil {
		t.Fatalf("writeArchive = %v", err)
	}
	return p, buf.Bytes()
}

// readTar returns the files of a tar by name, and the headers in order.
func readTar(t *testing.T, b []byte) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var hs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hs
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := files[h.Name]; dup {
			t.Fatalf("duplicate entry %q", h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
		hs = append(hs, h)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestArchiveDeterministic(t *testing.T) {
	ca := caPEM(t, "test root A")
	opts := Options{GoRoot: fakeGoRoot(t), NoBusybox: true, CABundle: caFile(t, ca)}
	p1, a1 := archive(t, opts)
	p2, a2 := archive(t, opts)
	if p1.id != p2.id {
		t.Errorf("image IDs differ: %s, %s", p1.id, p2.id)
	}
	if !bytes.Equal(a1, a2) {
		t.Errorf("archives differ (%d and %d bytes)", len(a1), len(a2))
	}
	if got := sha(p1.config); got != p1.id {
		t.Errorf("id = %s; want sha256 of config %s", p1.id, got)
	}

	// A copy of the GOROOT and the CA bundle elsewhere, with another
	// umask's modes and mtimes, is the same image.
	other := t.TempDir()
	copyTree(t, opts.GoRoot, other)
	os.Chmod(filepath.Join(other, "VERSION"), 0o600)
	otherCA := caFile(t, ca)
	os.Chmod(otherCA, 0o644)
	p3, a3 := archive(t, Options{GoRoot: other, NoBusybox: true, CABundle: otherCA})
	if p3.id != p1.id || !bytes.Equal(a3, a1) {
		t.Errorf("GOROOT and CA bundle copies: id %s; want %s", p3.id, p1.id)
	}

	// The CA bundle is an input: another one, or none, is another image
	// with other inputs; only the base layer differs.
	for name, o := range map[string]Options{
		"other CA bundle": {GoRoot: opts.GoRoot, NoBusybox: true, CABundle: caFile(t, caPEM(t, "test root B"))},
		"no CA bundle":    {GoRoot: opts.GoRoot, NoBusybox: true, NoCABundle: true},
	} {
		p4, _ := archive(t, o)
		if p4.id == p1.id || p4.inputs == p1.inputs {
			t.Errorf("%s: id %s, inputs %s; want both to differ from %s, %s", name, p4.id, p4.inputs, p1.id, p1.inputs)
		}
		if p4.layers[0].diffID == p1.layers[0].diffID || p4.layers[1].diffID != p1.layers[1].diffID {
			t.Errorf("%s: base layer %s, go layer %s; want a new base layer and the same go layer as %s, %s", name, p4.layers[0].diffID, p4.layers[1].diffID, p1.layers[0].diffID, p1.layers[1].diffID)
		}
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, dst)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, fi.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestArchiveLayout(t *testing.T) {
	bb := hostBusybox(t)
	ca := caPEM(t, "test root A")
	p, a := archive(t, Options{GoRoot: fakeGoRoot(t), Busybox: bb, CABundle: caFile(t, ca)})
	files, _ := readTar(t, a)

	var m []manifestEntry
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m) != 1 {
		t.Fatalf("manifest has %d images; want 1", len(m))
	}
	if want := strings.TrimPrefix(p.id, "sha256:") + ".json"; m[0].Config != want {
		t.Errorf("manifest Config = %q; want %q", m[0].Config, want)
	}
	if got, want := strings.Join(m[0].RepoTags, ","), "stockade/go:1.99.1-local"; got != want {
		t.Errorf("RepoTags = %q; want %q", got, want)
	}
	cfgBytes := files[m[0].Config]
	if sha(cfgBytes) != p.id {
		t.Errorf("config in archive does not hash to %s", p.id)
	}
	var c config
	if err := json.Unmarshal(cfgBytes, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.RootFS.DiffIDs) != 2 || len(m[0].Layers) != 2 {
		t.Fatalf("diff_ids %v, layers %v; want 2 each", c.RootFS.DiffIDs, m[0].Layers)
	}
	for i, name := range m[0].Layers {
		if got := sha(files[name]); got != c.RootFS.DiffIDs[i] {
			t.Errorf("layer %s hashes to %s; config says %s", name, got, c.RootFS.DiffIDs[i])
		}
	}
	if c.Created != "1970-01-01T00:00:00Z" || c.OS != "linux" || c.Architecture != runtime.GOARCH {
		t.Errorf("created, os, arch = %q %q %q", c.Created, c.OS, c.Architecture)
	}
	if c.Config.User != "65534:65534" {
		t.Errorf("User = %q; want 65534:65534", c.Config.User)
	}
	env := strings.Join(c.Config.Env, "\n")
	for _, want := range []string{"PATH=/usr/local/go/bin:", "GOROOT=/usr/local/go", "GOTOOLCHAIN=local"} {
		if !strings.Contains(env, want) {
			t.Errorf("Env %q lacks %q", c.Config.Env, want)
		}
	}
	bbDigest, _ := inspectStatic(bb)
	wantLabels := map[string]string{
		label.Managed:  label.ManagedValue,
		label.Kind:     label.KindImage,
		LabelGoVersion: "go1.99.1",
		LabelGoRoot:    c.RootFS.DiffIDs[1],
		LabelBusybox:   bbDigest.digest,
		LabelCABundle:  sha(ca),
		LabelInputs:    p.inputs,
		LabelFormat:    formatVersion,
	}
	for k, want := range wantLabels {
		if got := c.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q; want %q", k, got, want)
		}
	}

	base, baseHdrs := readTar(t, files[m[0].Layers[0]])
	goL, goHdrs := readTar(t, files[m[0].Layers[1]])
	for _, hs := range [][]*tar.Header{baseHdrs, goHdrs} {
		for _, h := range hs {
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(epoch) {
				t.Errorf("%s: uid %d gid %d uname %q mtime %v; want root, no names, epoch", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
			}
		}
	}
	if !sort.SliceIsSorted(baseHdrs, func(i, j int) bool { return baseHdrs[i].Name < baseHdrs[j].Name }) {
		t.Error("base layer entries are not sorted")
	}
	modes := map[string]int64{}
	types := map[string]byte{}
	links := map[string]string{}
	for _, h := range append(baseHdrs, goHdrs...) {
		modes[h.Name], types[h.Name], links[h.Name] = h.Mode, h.Typeflag, h.Linkname
	}
	if modes["tmp/"] != 0o1777 || types["tmp/"] != tar.TypeDir {
		t.Errorf("tmp/: mode %o type %c; want dir 1777", modes["tmp/"], types["tmp/"])
	}
	if !strings.Contains(string(base["etc/passwd"]), "nobody:x:65534:65534:") || !strings.Contains(string(base["etc/passwd"]), "root:x:0:0:") {
		t.Errorf("etc/passwd = %q", base["etc/passwd"])
	}
	if !strings.Contains(string(base["etc/group"]), ":x:65534:") {
		t.Errorf("etc/group = %q", base["etc/group"])
	}
	const caName = "etc/ssl/certs/ca-certificates.crt" // DefaultCABundle
	if !bytes.Equal(base[caName], ca) || modes[caName] != 0o644 || types[caName] != tar.TypeReg {
		t.Errorf("%s: mode %o type %c, %d bytes; want the bundle's %d bytes, 0644", caName, modes[caName], types[caName], len(base[caName]), len(ca))
	}
	for _, d := range []string{"etc/ssl/", "etc/ssl/certs/"} {
		if types[d] != tar.TypeDir || modes[d] != 0o755 {
			t.Errorf("%s: type %c mode %o; want dir 0755", d, types[d], modes[d])
		}
	}
	for _, a := range []string{"sh", "tar", "timeout", "setsid", "mktemp"} {
		if links["bin/"+a] != "busybox" || types["bin/"+a] != tar.TypeSymlink {
			t.Errorf("bin/%s: type %c -> %q; want symlink to busybox", a, types["bin/"+a], links["bin/"+a])
		}
	}
	if links["usr/bin/env"] != "/bin/busybox" {
		t.Errorf("usr/bin/env -> %q", links["usr/bin/env"])
	}

	kept := []string{
		"usr/local/go/bin/go", "usr/local/go/VERSION", "usr/local/go/go.env",
		"usr/local/go/src/runtime/runtime.go", "usr/local/go/src/fmt/testdata/x.txt",
		"usr/local/go/pkg/include/textflag.h", "usr/local/go/lib/time/zoneinfo.zip",
		"usr/local/go/pkg/tool/linux_" + runtime.GOARCH + "/vet",
	}
	for _, name := range kept {
		if _, ok := goL[name]; !ok {
			t.Errorf("go layer lacks %s", name)
		}
	}
	for name := range goL {
		for _, dropped := range []string{"/api/", "/test/", "/doc/", "/pkg/obj/", "/pkg/tool/linux_arm64/", "/pkg/tool/linux_amd64/"} {
			if strings.Contains(name, dropped) && !strings.Contains(name, "/pkg/tool/linux_"+runtime.GOARCH+"/") {
				t.Errorf("go layer holds trimmed %s", name)
			}
		}
	}
	if modes["usr/local/go/pkg/tool/linux_"+runtime.GOARCH+"/vet"] != 0o755 || modes["usr/local/go/VERSION"] != 0o644 {
		t.Errorf("modes not normalised: vet %o, VERSION %o", modes["usr/local/go/pkg/tool/linux_"+runtime.GOARCH+"/vet"], modes["usr/local/go/VERSION"])
	}
	if links["usr/local/go/bin/link"] != "../src/runtime/runtime.go" {
		t.Errorf("symlink bin/link -> %q", links["usr/local/go/bin/link"])
	}
	for _, d := range []string{"usr/", "usr/local/", "usr/local/go/"} {
		if types[d] != tar.TypeDir {
			t.Errorf("%s missing from the go layer", d)
		}
	}
}

func TestBaseImage(t *testing.T) {
	bb := hostBusybox(t)
	p, a := archive(t, Options{NoGo: true, Busybox: bb})
	files, _ := readTar(t, a)
	var c config
	if err := json.Unmarshal(files[p.configName()], &c); err != nil {
		t.Fatal(err)
	}
	if len(c.RootFS.DiffIDs) != 1 {
		t.Errorf("diff_ids = %v; want the base layer only", c.RootFS.DiffIDs)
	}
	if _, ok := c.Config.Labels[LabelGoVersion]; ok {
		t.Error("base image has a Go version label")
	}
	if strings.Join(p.tags, ",") != BaseTag {
		t.Errorf("tags = %v; want %s", p.tags, BaseTag)
	}

	// The base layer is the Go image's first layer, so the engine stores
	// it once.
	g, _ := archive(t, Options{GoRoot: fakeGoRoot(t), Busybox: bb})
	if g.layers[0].diffID != p.layers[0].diffID {
		t.Errorf("base layer %s differs from the Go image's %s", p.layers[0].diffID, g.layers[0].diffID)
	}
}

func TestArgvOnlyImage(t *testing.T) {
	p, a := archive(t, Options{GoRoot: fakeGoRoot(t), NoBusybox: true})
	files, _ := readTar(t, a)
	var c config
	if err := json.Unmarshal(files[p.configName()], &c); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Config.Cmd, " "); got != "/usr/local/go/bin/go version" {
		t.Errorf("Cmd = %q; want go version (no shell)", got)
	}
	if _, ok := c.Config.Labels[LabelBusybox]; ok {
		t.Error("busybox label without busybox")
	}
}

func TestNoCABundle(t *testing.T) {
	p, a := archive(t, Options{GoRoot: fakeGoRoot(t), NoBusybox: true, NoCABundle: true})
	files, _ := readTar(t, a)
	var c config
	if err := json.Unmarshal(files[p.configName()], &c); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Config.Labels[LabelCABundle]; ok || p.caPath != "" {
		t.Errorf("CA bundle label %q, path %q with NoCABundle", c.Config.Labels[LabelCABundle], p.caPath)
	}
	_, hs := readTar(t, files[layerName(p.layers[0])])
	for _, h := range hs {
		if strings.HasPrefix(h.Name, "etc/ssl") {
			t.Errorf("base layer holds %s with NoCABundle", h.Name)
		}
	}
}

// TestDefaultCABundle checks that the zero Options take the host's bundle
// when it has one, and none otherwise.
func TestDefaultCABundle(t *testing.T) {
	p, err := prepare(context.Background(), Options{GoRoot: fakeGoRoot(t), NoBusybox: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(DefaultCABundle); err != nil {
		if p.caPath != "" {
			t.Errorf("CA bundle %q; want none: the host has no %s", p.caPath, DefaultCABundle)
		}
		return
	}
	ca, err := readCABundle(DefaultCABundle)
	if err != nil {
		t.Fatalf("the host's bundle: %v", err)
	}
	if p.caPath != DefaultCABundle || p.caDigest != ca.digest || p.result().CABundle != DefaultCABundle {
		t.Errorf("CA bundle %q %s; want %s %s", p.caPath, p.caDigest, DefaultCABundle, ca.digest)
	}
}

func TestChangedInputIsAnError(t *testing.T) {
	root := fakeGoRoot(t)
	p, err := prepare(context.Background(), Options{GoRoot: root, NoBusybox: true})
	if err != nil {
		t.Fatal(err)
	}
	// Same size, other bytes: only the digest can tell.
	if err := os.WriteFile(filepath.Join(root, "src/runtime/runtime.go"), []byte("package runtimX\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.writeArchive(context.Background(), io.Discard); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("writeArchive after a change = %v; want a changed-while-building error", err)
	}
	if err := os.WriteFile(filepath.Join(root, "src/runtime/runtime.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.writeArchive(context.Background(), io.Discard); err == nil {
		t.Error("writeArchive after truncation = nil; want error")
	}
}

func TestPrepareErrors(t *testing.T) {
	root := fakeGoRoot(t)
	notELF := filepath.Join(t.TempDir(), "busybox")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		name string
		opts Options
		is   error
		text string
	}{
		{"nothing", Options{NoGo: true, NoBusybox: true}, ErrNothingToBuild, ""},
		{"goroot with nogo", Options{NoGo: true, GoRoot: root}, nil, "GoRoot set with NoGo"},
		{"busybox with nobusybox", Options{GoRoot: root, Busybox: notELF, NoBusybox: true}, nil, "NoBusybox"},
		{"bad tag", Options{GoRoot: root, NoBusybox: true, Tag: "Stockade/Go"}, ErrInvalidTag, ""},
		{"tag without tag", Options{GoRoot: root, NoBusybox: true, Tag: "stockade/go"}, ErrInvalidTag, ""},
		{"busybox not elf", Options{GoRoot: root, Busybox: notELF}, nil, "not a Linux executable"},
		{"missing busybox", Options{GoRoot: root, Busybox: notELF + "x"}, nil, "no such file"},
		{"goroot not go", Options{GoRoot: t.TempDir(), NoBusybox: true}, nil, "not a Linux executable"},
		{"ca with noca", Options{GoRoot: root, NoBusybox: true, CABundle: caFile(t, caPEM(t, "a")), NoCABundle: true}, nil, "NoCABundle"},
		{"missing ca", Options{GoRoot: root, NoBusybox: true, CABundle: notELF + "x"}, nil, "no such file"},
		{"ca is a dir", Options{GoRoot: root, NoBusybox: true, CABundle: t.TempDir()}, nil, "not a regular file"},
		{"ca not pem", Options{GoRoot: root, NoBusybox: true, CABundle: notELF}, errNoCertificates, ""},
		{"ca empty", Options{GoRoot: root, NoBusybox: true, CABundle: caFile(t, nil)}, errNoCertificates, ""},
		{"ca bad certificate", Options{GoRoot: root, NoBusybox: true, CABundle: caFile(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}))}, errNoCertificates, ""},
		{"ca with a key", Options{GoRoot: root, NoBusybox: true, CABundle: caFile(t, append(caPEM(t, "a"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})...))}, nil, `"PRIVATE KEY"`},
		{"ca too big", Options{GoRoot: root, NoBusybox: true, CABundle: caFile(t, append(caPEM(t, "a"), make([]byte, maxCABundleBytes)...))}, nil, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepare(context.Background(), tc.opts)
			if err == nil {
				t.Fatal("prepare = nil; want error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("prepare = %v; want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("prepare = %v; want it to mention %q", err, tc.text)
			}
		})
	}
}

func TestGoTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"go1.26.8", "stockade/go:1.26.8-local"},
		{"go1.27rc1", "stockade/go:1.27rc1-local"},
		{"devel go1.27-abcdef Tue Jan 1 +0000", "stockade/go:devel-go1.27-abcdef-Tue-Jan-1--0000-local"},
		{"go", "stockade/go:unknown-local"},
	} {
		if got := goTag(tc.in); got != tc.want {
			t.Errorf("goTag(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if !tagRE.MatchString(goTag(tc.in)) {
			t.Errorf("goTag(%q) = %q does not match tagRE", tc.in, goTag(tc.in))
		}
	}
}

func TestSkipGoRoot(t *testing.T) {
	tc := &toolchain{goos: "linux", goarch: "amd64"}
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"api", true},
		{"api/go1.txt", true},
		{"test", true},
		{"doc", true},
		{".git", true},
		{"src/cmd/api", false},
		{"src/go/doc", false},
		{"pkg", false},
		{"pkg/tool", false},
		{"pkg/tool/linux_amd64", false},
		{"pkg/tool/linux_amd64/vet", false},
		{"pkg/tool/linux_arm64", true},
		{"pkg/tool/darwin_arm64/vet", true},
		{"pkg/obj", true},
		{"pkg/include", false},
		{"lib/time/zoneinfo.zip", false},
		{"go.env", false},
	} {
		if got := skipGoRoot(c.rel, tc); got != c.want {
			t.Errorf("skipGoRoot(%q) = %v; want %v", c.rel, got, c.want)
		}
	}
}

// fakeEngine records loads; it answers inspect from what it loaded.
type fakeEngine struct {
	images  map[string]dockerapi.Image
	loads   int
	tags    int
	loadErr error
}

func (f *fakeEngine) ImageTag(ctx context.Context, ref, repo, tag string) error {
	im, ok := f.images[ref]
	if !ok {
		return &dockerapi.Error{StatusCode: 404, Message: "No such image: " + ref}
	}
	f.tags++
	im.RepoTags = append(im.RepoTags, repo+":"+tag)
	f.images[ref] = im
	return nil
}

func (f *fakeEngine) ImageInspect(ctx context.Context, ref string) (dockerapi.Image, error) {
	if im, ok := f.images[ref]; ok {
		return im, nil
	}
	return dockerapi.Image{}, &dockerapi.Error{StatusCode: 404, Message: "No such image: " + ref}
}

func (f *fakeEngine) ImageLoad(ctx context.Context, r io.Reader) (dockerapi.LoadResult, error) {
	f.loads++
	if f.loadErr != nil {
		return dockerapi.LoadResult{}, f.loadErr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return dockerapi.LoadResult{}, err
	}
	tr := tar.NewReader(bytes.NewReader(b))
	var m []manifestEntry
	cfgs := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return dockerapi.LoadResult{}, err
		}
		data, _ := io.ReadAll(tr)
		if h.Name == "manifest.json" {
			json.Unmarshal(data, &m)
		} else if strings.HasSuffix(h.Name, ".json") {
			cfgs[h.Name] = data
		}
	}
	for _, e := range m {
		id := sha(cfgs[e.Config])
		f.images[id] = dockerapi.Image{ID: id, RepoTags: e.RepoTags, Size: int64(len(b))}
	}
	return dockerapi.LoadResult{Tags: m[0].RepoTags}, nil
}

func TestBuildLoadsOnce(t *testing.T) {
	opts := Options{GoRoot: fakeGoRoot(t), NoBusybox: true}
	eng := &fakeEngine{images: map[string]dockerapi.Image{}}
	ctx := context.Background()
	r1, err := Build(ctx, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Loaded || eng.loads != 1 {
		t.Errorf("first Build: Loaded %v, %d loads; want a load", r1.Loaded, eng.loads)
	}
	if r1.GoVersion != "go1.99.1" || r1.Platform != "linux/"+runtime.GOARCH || r1.Size == 0 {
		t.Errorf("first Build = %+v", r1)
	}
	r2, err := Build(ctx, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Loaded || eng.loads != 1 || r2.ID != r1.ID {
		t.Errorf("second Build: Loaded %v, %d loads, id %s; want no load, id %s", r2.Loaded, eng.loads, r2.ID, r1.ID)
	}

	// A lost tag is restored with a tag call, not a second upload.
	im := eng.images[r1.ID]
	im.RepoTags = nil
	eng.images[r1.ID] = im
	if _, err := Build(ctx, eng, opts); err != nil || eng.loads != 1 || eng.tags != 1 {
		t.Errorf("Build without the tag: %v, %d loads, %d tags; want one tag call", err, eng.loads, eng.tags)
	}
	if got := eng.images[r1.ID].RepoTags; len(got) != 1 || got[0] != "stockade/go:1.99.1-local" {
		t.Errorf("tags after Build = %v", got)
	}
}

func TestBuildLoadError(t *testing.T) {
	boom := errors.New("boom")
	eng := &fakeEngine{images: map[string]dockerapi.Image{}, loadErr: boom}
	_, err := Build(context.Background(), eng, Options{GoRoot: fakeGoRoot(t), NoBusybox: true})
	if !errors.Is(err, boom) {
		t.Errorf("Build = %v; want the load's error", err)
	}
}

func TestBuildCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	eng := &fakeEngine{images: map[string]dockerapi.Image{}}
	if _, err := Build(ctx, eng, Options{GoRoot: fakeGoRoot(t), NoBusybox: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("Build(cancelled) = %v; want context.Canceled", err)
	}
	if eng.loads != 0 {
		t.Errorf("cancelled Build loaded %d times", eng.loads)
	}
}

func (f *fakeEngine) ImageList(ctx context.Context, filters dockerapi.Filters) ([]dockerapi.ImageSummary, error) {
	want := strings.Join(filters["label"], ",")
	if want != label.Managed+"=true,"+label.Kind+"=image" {
		return nil, errors.New("unexpected filter " + want)
	}
	var out []dockerapi.ImageSummary
	for id, im := range f.images {
		out = append(out, dockerapi.ImageSummary{ID: id, RepoTags: im.RepoTags, Size: im.Size, Labels: im.Config.Labels})
	}
	return out, nil
}

func TestListAndListPinned(t *testing.T) {
	eng := &fakeEngine{images: map[string]dockerapi.Image{}}
	add := func(id, goVersion string, tags ...string) {
		im := dockerapi.Image{ID: id, RepoTags: tags, Size: 7}
		im.Config.Labels = map[string]string{LabelGoVersion: goVersion, LabelInputs: "sha256:in" + id}
		eng.images[id] = im
	}
	add("sha256:b", "go1.26.8", "stockade/go:1.26.8-local", "<none>:<none>")
	add("sha256:a", "", "stockade/base:local")
	got, err := List(context.Background(), eng)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "sha256:a" || got[1].GoVersion != "go1.26.8" || len(got[1].Tags) != 1 || got[1].Inputs != "sha256:insha256:b" || got[1].Pinned != "" {
		t.Errorf("List = %+v", got)
	}

	digest := "sha256:" + strings.Repeat("ab", 32)
	table, err := imagetable.Parse([]byte(`{"releases": [
		{"go": "1.27.3"},
		{"go": "1.25.9", "source": "registry", "ref": "golang:1.25-bookworm@sha256:` + strings.Repeat("cd", 32) + `"},
		{"go": "1.26.8", "source": "registry", "ref": "golang:1.26-bookworm@` + digest + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ref := "golang:1.26-bookworm@" + digest
	eng.images[ref] = dockerapi.Image{ID: "sha256:c", RepoTags: []string{"golang:1.26-bookworm"}}
	pinned, err := ListPinned(context.Background(), eng, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(pinned) != 1 || pinned[0].ID != "sha256:c" || pinned[0].Pinned != ref || pinned[0].GoVersion != "go1.26.8" {
		t.Errorf("ListPinned = %+v; want the one present image, pinned as %s", pinned, ref)
	}
}

// discardEngine reads the whole archive without keeping it, and never has
// the image.
type discardEngine struct {
	fakeEngine
	read int64
}

func (d *discardEngine) ImageLoad(ctx context.Context, r io.Reader) (dockerapi.LoadResult, error) {
	n, err := io.Copy(io.Discard, r)
	d.read += n
	return dockerapi.LoadResult{}, err
}

func TestBuildStreams(t *testing.T) {
	root := fakeGoRoot(t)
	const big = 64 << 20
	f, err := os.Create(filepath.Join(root, "src", "runtime", "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(big); err != nil { // sparse: cheap to make and read
		t.Fatal(err)
	}
	f.Close()

	eng := &discardEngine{fakeEngine: fakeEngine{images: map[string]dockerapi.Image{}}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Build(context.Background(), eng, Options{GoRoot: root, NoBusybox: true})
	runtime.ReadMemStats(&after)
	// The engine read it all but kept nothing, so the confirming inspect
	// does not find the image.
	if err == nil || !strings.Contains(err.Error(), "is not there") {
		t.Errorf("Build = %v; want the confirming inspect to fail", err)
	}
	if eng.read < big {
		t.Errorf("engine read %d bytes; want more than %d", eng.read, big)
	}
	// Hashing and streaming 64 MiB twice must not allocate anything like it.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes while streaming %d", alloc, eng.read)
	if alloc > big/4 {
		t.Errorf("Build allocated %d bytes for a %d-byte file; want it streamed", alloc, big)
	}
}

// TestAppletsExist checks every applet linked into /bin against the host's
// busybox: a link to a missing applet would fail only when called.
func TestAppletsExist(t *testing.T) {
	bb := hostBusybox(t)
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Skipf("%s --list: %v", bb, err)
	}
	have := map[string]bool{}
	for _, a := range strings.Fields(string(out)) {
		have[a] = true
	}
	for _, a := range applets {
		if !have[a] {
			t.Errorf("applet %q is linked but %s lacks it", a, bb)
		}
	}
	if !sort.StringsAreSorted(applets) {
		t.Error("applets are not sorted")
	}
}

func TestGoRootTooBig(t *testing.T) {
	root := fakeGoRoot(t)
	f, err := os.Create(filepath.Join(root, "src", "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxGoRootBytes + 1); err != nil { // sparse; only stat'ed
		t.Fatal(err)
	}
	f.Close()
	if _, err := prepare(context.Background(), Options{GoRoot: root, NoBusybox: true}); err == nil || !strings.Contains(err.Error(), "not a Go toolchain") {
		t.Errorf("prepare = %v; want a refusal of a GOROOT past maxGoRootBytes", err)
	}
}

func TestCheckCABundle(t *testing.T) {
	a, b := caPEM(t, "a"), caPEM(t, "b")
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"one", a, true},
		{"two", append(append([]byte{}, a...), b...), true},
		{"comments between blocks", []byte("# Root A\n" + string(a) + "\n# Root B\n" + string(b)), true},
		{"one unparsable among good", append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), a...), true},
		{"text only", []byte("not a certificate\n"), false},
		{"public key", append(append([]byte{}, a...), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("k")})...), false},
	} {
		if err := checkCABundle(tc.data); (err == nil) != tc.ok {
			t.Errorf("checkCABundle(%s) = %v; want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestCleanRelease(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"1.27.3", "1.27.3", true},
		{"go1.27.3", "1.27.3", true},
		{"1.27rc1", "1.27rc1", true},
		{"1.27beta2", "1.27beta2", true},
		{"1.27", "", false}, // a language version, not a release
		{"1.27.3.linux-amd64", "", false},
		{"1.27.3 ", "", false},
		{"../1.27.3", "", false},
		{"1.027.3", "", false},
		{"", "", false},
	} {
		got, err := CleanRelease(tc.in)
		if got != tc.want || (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadRelease)) {
			t.Errorf("CleanRelease(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestFetchedGoRoot(t *testing.T) {
	got := FetchedGoRoot("/c", "go1.27.3")
	want := filepath.Join("/c", "gopath", "pkg", "mod", "golang.org", "toolchain@v0.0.1-go1.27.3.linux-"+runtime.GOARCH)
	if got != want {
		t.Errorf("FetchedGoRoot = %q; want %q", got, want)
	}
}

func TestFetchGoRefusesBadInput(t *testing.T) {
	if _, err := FetchGo(context.Background(), "1.27", t.TempDir()); !errors.Is(err, ErrBadRelease) {
		t.Errorf("FetchGo(1.27) = %v; want ErrBadRelease", err)
	}
	if _, err := FetchGo(context.Background(), "1.27.3", ""); err == nil {
		t.Error("FetchGo without a cache directory succeeded")
	}
	if _, err := prepare(context.Background(), Options{GoVersion: "1.27.3", GoRoot: "/x"}); err == nil {
		t.Error("prepare with GoVersion and GoRoot succeeded")
	}
}

func TestProgramImage(t *testing.T) {
	bb := hostBusybox(t)
	// Any static executable stands in for the gate.
	prog := filepath.Join(t.TempDir(), "stockade-gate")
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p, a := archive(t, Options{NoGo: true, Busybox: bb, Program: prog, Tag: "stockade/gate:test"})
	files, _ := readTar(t, a)
	var c config
	if err := json.Unmarshal(files[p.configName()], &c); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Config.Cmd, " "); got != gate.Program {
		t.Errorf("Cmd = %q; want the program", got)
	}
	if len(c.RootFS.DiffIDs) != 2 || c.Config.Labels[LabelProgram] != sha(data) {
		t.Errorf("diff_ids %v, program label %q; want base and program layers, the program's digest", c.RootFS.DiffIDs, c.Config.Labels[LabelProgram])
	}
	layer, _ := readTar(t, files[layerName(p.layers[1])])
	if !bytes.Equal(layer["usr/local/bin/stockade-gate"], data) {
		t.Errorf("program layer holds %d entries, not the program", len(layer))
	}
	// Without busybox and Go, the program alone is an image.
	if _, err := prepare(context.Background(), Options{NoGo: true, NoBusybox: true, Program: prog}); err != nil {
		t.Errorf("program-only image: %v", err)
	}
	if _, err := prepare(context.Background(), Options{NoGo: true, NoBusybox: true, Program: filepath.Join(t.TempDir(), "absent")}); err == nil {
		t.Error("a missing program was accepted")
	}
}

// TestWriteArchive checks that WriteArchive writes the archive Build would
// load, byte for byte, and reports its ID.
func TestWriteArchive(t *testing.T) {
	bb := hostBusybox(t)
	p, want := archive(t, Options{NoGo: true, Busybox: bb})
	var buf bytes.Buffer
	res, err := WriteArchive(context.Background(), Options{NoGo: true, Busybox: bb}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != p.id || !bytes.Equal(buf.Bytes(), want) || res.Loaded {
		t.Errorf("WriteArchive = %s (%d bytes, loaded %v); want %s (%d bytes), not loaded", res.ID, buf.Len(), res.Loaded, p.id, len(want))
	}
}
