package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/stockade/stockade/internal/label"
)

// formatVersion names the layout this file composes. Bump it whenever the
// layers or config change for the same inputs, so the inputs digest says so.
const formatVersion = "2"

// applets are the busybox applets linked into /bin: what sh scripts and the
// session helpers call, nothing that administers a machine. A busybox built
// without one of them answers "applet not found" for that name only.
var applets = []string{
	"[", "awk", "base64", "basename", "cat", "chmod", "cmp", "cp", "cut",
	"date", "dd", "diff", "dirname", "du", "echo", "egrep", "env", "expr",
	"false", "fgrep", "find", "grep", "gunzip", "gzip", "head", "hostname",
	"id", "kill", "ln", "ls", "md5sum", "mkdir", "mkfifo", "mktemp", "mv",
	"nproc", "od", "pidof", "printf", "ps", "pwd", "readlink", "realpath",
	"rm", "rmdir", "sed", "seq", "setsid", "sh", "sha256sum", "sleep", "sort",
	"stat", "sync", "tail", "tar", "tee", "test", "timeout", "touch", "tr",
	"true", "truncate", "uname", "uniq", "unzip", "wc", "which", "whoami",
	"xargs", "yes", "zcat",
}

// The files of /etc. Root and nobody (65534:65534) are the only users;
// nobody's home is /tmp because it is the only place a read-only root leaves
// writable, and tools that default to $HOME then work.
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/tmp:/bin/false\n"
	etcGroup = "root:x:0:\n" +
		"nobody:x:65534:\n"
	etcNsswitch = "hosts: files dns\n"
)

// baseLayer plans the layer every Stockade image starts with: /etc, a
// sticky world-writable /tmp (a tmpfs mounted over a 0755 /tmp keeps that
// mode on some engines, leaving it unwritable for nobody), busybox with
// its applet links when bb is not empty, and the CA bundle ca at
// DefaultCABundle when ca is not nil.
func baseLayer(bb string, bbSize int64, ca []byte) *layer {
	l := &layer{what: "base"}
	dir := func(name string, mode int64) {
		l.entries = append(l.entries, entry{name: name + "/", typ: tar.TypeDir, mode: mode})
	}
	file := func(name, data string) {
		l.entries = append(l.entries, entry{name: name, typ: tar.TypeReg, mode: 0o644, size: int64(len(data)), data: []byte(data)})
	}
	link := func(name, target string) {
		l.entries = append(l.entries, entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target})
	}
	dir("bin", 0o755)
	if bb != "" {
		l.entries = append(l.entries, entry{name: "bin/busybox", typ: tar.TypeReg, mode: 0o755, size: bbSize, src: bb})
		for _, a := range applets {
			link("bin/"+a, "busybox")
		}
	}
	dir("etc", 0o755)
	file("etc/group", etcGroup)
	file("etc/nsswitch.conf", etcNsswitch)
	file("etc/passwd", etcPasswd)
	if ca != nil {
		dir("etc/ssl", 0o755)
		dir("etc/ssl/certs", 0o755)
		file(strings.TrimPrefix(DefaultCABundle, "/"), string(ca))
	}
	dir("root", 0o700)
	dir("tmp", 0o1777)
	dir("usr", 0o755)
	dir("usr/bin", 0o755)
	if bb != "" {
		link("usr/bin/env", "/bin/busybox") // for #!/usr/bin/env scripts
	}
	sort.Slice(l.entries, func(i, j int) bool { return l.entries[i].name < l.entries[j].name })
	return l
}

// ProgramDir is where Options.Program sits in the image.
const ProgramDir = "/usr/local/bin"

// programLayer plans the layer holding Options.Program in ProgramDir.
func programLayer(prog *staticExe) *layer {
	return &layer{what: "program", entries: []entry{
		{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/local/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "usr/local/bin/" + path.Base(prog.path), typ: tar.TypeReg, mode: 0o755, size: prog.size, src: prog.path},
	}}
}

// config is the image config (the JSON whose sha256 is the image ID), with
// only the fields Stockade sets.
type config struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Created      string          `json:"created"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
	History      []history       `json:"history"`
}

type containerConfig struct {
	User   string            `json:"User,omitempty"`
	Env    []string          `json:"Env,omitempty"`
	Cmd    []string          `json:"Cmd,omitempty"`
	Labels map[string]string `json:"Labels,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// manifestEntry is one image of a docker-archive's manifest.json.
type manifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// plan is an image ready to be written: layers hashed, config and manifest
// encoded. Writing it twice gives the same bytes as long as the inputs on
// the host have not changed.
type plan struct {
	tc         *toolchain  // nil for a base image
	c          *cToolchain // nil without the C toolchain
	busybox    string      // host path, "" for none
	bbDigest   string
	caPath     string // host path of the CA bundle, "" for none
	caDigest   string
	program    string // host path of Options.Program, "" for none
	progDigest string
	arch       string // GOARCH of the binaries
	layers     []*layer
	config     []byte
	id         string // "sha256:<hex>" of config
	inputs     string
	tags       []string
	manifest   []byte
}

// compose hashes the layers and builds the config and manifest.
func compose(ctx context.Context, tc *toolchain, c *cToolchain, bb *staticExe, ca *caBundle, prog *staticExe, tag string) (*plan, error) {
	p := &plan{tc: tc, c: c}
	arch := ""
	var bbSize int64
	if bb != nil {
		p.busybox, p.bbDigest, bbSize, arch = bb.path, bb.digest, bb.size, bb.arch
	}
	var caData []byte
	if ca != nil {
		p.caPath, p.caDigest, caData = ca.path, ca.digest, ca.data
	}
	p.layers = append(p.layers, baseLayer(p.busybox, bbSize, caData))
	if tc != nil {
		arch = tc.goarch
		gl, err := goLayer(ctx, tc)
		if err != nil {
			return nil, err
		}
		p.layers = append(p.layers, gl)
	}
	if c != nil {
		cl, err := cLayer(ctx, c)
		if err != nil {
			return nil, err
		}
		p.layers = append(p.layers, cl)
	}
	if prog != nil {
		p.program, p.progDigest = prog.path, prog.digest
		if arch == "" {
			arch = prog.arch
		}
		p.layers = append(p.layers, programLayer(prog))
	}
	for _, l := range p.layers {
		if err := l.hash(ctx); err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
	}

	labels := map[string]string{
		label.Managed: label.ManagedValue,
		label.Kind:    label.KindImage,
		LabelFormat:   formatVersion,
	}
	inputs := "format " + formatVersion + "\n"
	env := []string{"PATH=" + Path}
	cmd := []string{"/bin/sh"}
	if p.busybox != "" {
		labels[LabelBusybox] = p.bbDigest
		inputs += "busybox " + p.bbDigest + "\n"
	}
	if p.caPath != "" {
		labels[LabelCABundle] = p.caDigest
		inputs += "ca-bundle " + p.caDigest + "\n"
	}
	if tc != nil {
		gl := p.layers[1]
		labels[LabelGoVersion] = tc.version
		labels[LabelGoRoot] = gl.diffID
		inputs += "go " + tc.version + " " + gl.diffID + "\n"
		env = []string{
			"PATH=" + GoPath,
			"GOROOT=" + GoRootInImage,
			"GOTOOLCHAIN=local", // never download another Go
		}
		if c == nil {
			env = append(env, "CGO_ENABLED=0") // the image has no C compiler
		}
		if p.busybox == "" {
			cmd = []string{GoRootInImage + "/bin/go", "version"}
		}
	}
	if c != nil {
		// With gcc on PATH the go command enables cgo itself, as on a
		// developer's machine.
		labels[LabelCToolchain] = c.digest
		labels[LabelCPackages] = CPackagesDigest(c.pkgs)
		inputs += "c-toolchain " + c.digest + "\n"
	}
	if prog != nil {
		labels[LabelProgram] = p.progDigest
		inputs += "program " + path.Base(prog.path) + " " + p.progDigest + "\n"
		cmd = []string{ProgramDir + "/" + path.Base(prog.path)}
	}
	p.arch = arch
	sum := sha256.Sum256([]byte(inputs))
	p.inputs = "sha256:" + hex.EncodeToString(sum[:])
	labels[LabelInputs] = p.inputs

	created := epoch.Format("2006-01-02T15:04:05Z")
	cfg := config{
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		Config:       containerConfig{User: "65534:65534", Env: env, Cmd: cmd, Labels: labels},
		RootFS:       rootFS{Type: "layers"},
	}
	for _, l := range p.layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		by := "stockade image build: " + l.what
		switch {
		case l.what == "base":
			if p.busybox != "" {
				by += " with busybox " + p.bbDigest
			}
			if p.caPath != "" {
				by += " with CA bundle " + p.caDigest
			}
		case l.what == "go":
			by += " " + tc.version + " at " + GoRootInImage
		case l.what == "program":
			by += " " + path.Base(p.program) + " " + p.progDigest
		case l.what == "c":
			by += " toolchain, " + fmt.Sprint(len(c.pkgs)) + " Debian packages " + c.digest
		}
		cfg.History = append(cfg.History, history{Created: created, CreatedBy: by})
	}
	var err error
	if p.config, err = json.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("image: encode config: %w", err)
	}
	cs := sha256.Sum256(p.config)
	p.id = "sha256:" + hex.EncodeToString(cs[:])

	p.tags = []string{tag}
	m := []manifestEntry{{Config: p.configName(), RepoTags: p.tags}}
	for _, l := range p.layers {
		m[0].Layers = append(m[0].Layers, layerName(l))
	}
	if p.manifest, err = json.Marshal(m); err != nil {
		return nil, fmt.Errorf("image: encode manifest: %w", err)
	}
	return p, nil
}

func (p *plan) configName() string { return strings.TrimPrefix(p.id, "sha256:") + ".json" }

func layerName(l *layer) string { return strings.TrimPrefix(l.diffID, "sha256:") + "/layer.tar" }

// headers returns the archive's tar headers in write order.
func (p *plan) headers() []*tar.Header {
	file := func(name string, size int64) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: epoch, Format: tar.FormatPAX}
	}
	hs := []*tar.Header{
		file("manifest.json", int64(len(p.manifest))),
		file(p.configName(), int64(len(p.config))),
	}
	for _, l := range p.layers {
		dir := strings.TrimPrefix(l.diffID, "sha256:") + "/"
		hs = append(hs,
			&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX},
			file(layerName(l), l.size))
	}
	return hs
}

// writeArchive writes the docker-archive (manifest.json, the config named
// by its digest, one directory per layer) to w, streaming each layer from
// the host files. A layer whose bytes differ from the hashing pass (a file
// changed meanwhile) is an error before the archive ends, so the engine
// never loads an image whose ID lies.
func (p *plan) writeArchive(ctx context.Context, w io.Writer) error {
	tw := tar.NewWriter(w)
	hs := p.headers()
	if err := tw.WriteHeader(hs[0]); err != nil {
		return err
	}
	if _, err := tw.Write(p.manifest); err != nil {
		return err
	}
	if err := tw.WriteHeader(hs[1]); err != nil {
		return err
	}
	if _, err := tw.Write(p.config); err != nil {
		return err
	}
	for i, l := range p.layers {
		if err := tw.WriteHeader(hs[2+2*i]); err != nil {
			return err
		}
		if err := tw.WriteHeader(hs[3+2*i]); err != nil {
			return err
		}
		h := sha256.New()
		cw := &countWriter{w: io.MultiWriter(tw, h)}
		if err := l.write(ctx, cw); err != nil {
			return fmt.Errorf("image: %w", err)
		}
		if got := digest(h); got != l.diffID || cw.n != l.size {
			return fmt.Errorf("image: %s layer changed while building: %s (%d bytes), planned %s (%d bytes)", l.what, got, cw.n, l.diffID, l.size)
		}
	}
	return tw.Close()
}

// staticExe is a checked static Linux executable on the host: the
// busybox, or Options.Program.
type staticExe struct {
	path   string
	digest string // sha256 of the file
	size   int64
	arch   string
}

// inspectStatic checks that name is a static Linux executable and hashes it.
func inspectStatic(name string) (*staticExe, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	arch, err := elfArch(name)
	if err != nil {
		return nil, err
	}
	static, err := isStatic(name)
	if err != nil {
		return nil, err
	}
	if !static {
		return nil, fmt.Errorf("%s: dynamically linked (install busybox-static)", name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	if n != fi.Size() {
		return nil, fmt.Errorf("%s: changed while reading", name)
	}
	return &staticExe{path: name, digest: digest(h), size: n, arch: arch}, nil
}

// maxCABundleBytes bounds the CA bundle read into memory and the image;
// Debian's holds about 150 certificates in 220 kB.
const maxCABundleBytes = 4 << 20

// caBundle is a checked PEM bundle of CA certificates on the host, held in
// memory so that the bytes hashed are the bytes written.
type caBundle struct {
	path   string
	digest string // sha256 of data
	data   []byte
}

// readCABundle reads name and checks that it holds PEM certificates and
// nothing else in PEM form: a key given by mistake must not end up in an
// image that untrusted code reads.
func readCABundle(name string) (*caBundle, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCABundleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxCABundleBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxCABundleBytes)
	}
	if err := checkCABundle(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sum := sha256.Sum256(data)
	return &caBundle{path: name, digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}, nil
}

// errNoCertificates reports a CA bundle without a certificate that parses.
var errNoCertificates = errors.New("no PEM certificate")

// checkCABundle accepts data whose PEM blocks are all certificates, at
// least one of which parses; text between blocks (comments) is allowed.
func checkCABundle(data []byte) error {
	parsed := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a %q PEM block; want certificates only", b.Type)
		}
		// Some bundles carry a root Go does not parse; the toolchain
		// skips it too.
		if _, err := x509.ParseCertificate(b.Bytes); err == nil {
			parsed++
		}
	}
	if parsed == 0 {
		return errNoCertificates
	}
	return nil
}
