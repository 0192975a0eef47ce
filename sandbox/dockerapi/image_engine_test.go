package dockerapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stockade/stockade/sandbox/dockerapi"
)

// busyboxPath is the static busybox the test image is made of (Debian's
// busybox-static; .ci/run installs it).
const busyboxPath = "/bin/busybox"

// applets are the commands the test image links to busybox.
var applets = []string{"sh", "cat", "sleep", "echo", "dd", "head", "id", "ls", "mkdir", "touch", "printf", "true", "false"}

// epoch is the time of every file and of the image, so the same inputs make
// the same image.
var epoch = time.Unix(0, 0).UTC()

// testImage is a docker-archive (the format of docker save and of POST
// /images/load) holding one image.
type testImage struct {
	Tar []byte
	ID  string // sha256:… of the config: the ID the engine gives the image
}

// composeImage builds, in memory, a one-layer image of the static busybox
// with the applets, /etc/passwd and /etc/group naming root and nobody
// (65534), and /tmp with mode 1777, tagged tag and labelled labels.
func composeImage(t *testing.T, tag string, labels map[string]string) testImage {
	t.Helper()
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		t.Fatalf("the engine tests need a static busybox at %s (apt-get install busybox-static): %v", busyboxPath, err)
	}

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	add := func(h *tar.Header, body []byte) {
		h.ModTime, h.Format = epoch, tar.FormatPAX
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name string, mode int64) { add(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}, nil) }
	file := func(name string, mode int64, body string) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, []byte(body))
	}
	dir("bin/", 0o755)
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, bb)
	for _, a := range applets {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	dir("etc/", 0o755)
	file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
	file("etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n")
	dir("tmp/", 0o1777)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	diffID := sha256.Sum256(layer.Bytes())

	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Env":    []string{"PATH=/bin"},
			"Labels": labels,
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])},
		},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "stockade dockerapi test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	configSum := sha256.Sum256(config)
	configHex := hex.EncodeToString(configSum[:])
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configHex + ".json",
		"RepoTags": []string{tag},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		t.Fatal(err)
	}

	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	for _, m := range []struct {
		name string
		body []byte
	}{
		{configHex + ".json", config},
		{layerName, layer.Bytes()},
		{"manifest.json", manifest},
	} {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Mode: 0o644, Size: int64(len(m.body)), ModTime: epoch}); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	return testImage{Tar: archive.Bytes(), ID: "sha256:" + configHex}
}

// loadImage loads img, checks the engine names it as composed, and removes
// it when t ends. Only an image this test loaded is removed: its labels carry
// the test's owner, so its ID is the test's own.
func loadImage(t *testing.T, c *dockerapi.Client, tag string, img testImage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.ImageLoad(ctx, bytes.NewReader(img.Tar))
	if err != nil {
		t.Fatalf("ImageLoad: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Force removes every tag a test added; the ID is this test's own.
		if err := c.ImageRemove(ctx, img.ID, true); err != nil && !isNotFound(err) {
			t.Errorf("remove test image %s: %v", tag, err)
		}
	})
	if len(res.Tags) != 1 || res.Tags[0] != tag {
		t.Errorf("ImageLoad = %+v; want tag %s", res, tag)
	}
}
