package enginetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/label"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// Dir is a directory DerivedImage adds to an image, made by root (as a
// Dockerfile's WORKDIR or RUN mkdir makes it).
type Dir struct {
	Path string // absolute, clean
	Mode int64  // permission bits; 0 means 0755
	UID  int    // owner (and group); 0 is root
}

// ImageChanges are what DerivedImage changes of its base: the image
// features sandboxes meet in images they did not compose.
type ImageChanges struct {
	Dirs       []Dir    // added directories (parents come from the base)
	Entrypoint []string // the image's ENTRYPOINT; nil keeps none
	Volumes    []string // the image's VOLUMEs; nil declares none
}

// DerivedImage loads, and removes when t ends, an image made of base's
// files (one layer, read through the archive API of a container created
// from it and never started) and ch, with base's user, environment and
// command, labelled with owner (label.Owner) and tagged with a name of its
// own. It returns the image's ID. Nothing is pulled or built: the engine
// only loads the archive, as `docker load` does, on Docker and Podman
// alike.
func DerivedImage(t testing.TB, c *dockerapi.Client, owner, base string, ch ImageChanges) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := c.ImageInspect(ctx, base)
	if err != nil {
		t.Fatalf("derived image: inspect %s: %v", base, err)
	}
	layer, err := baseFiles(ctx, c, owner, base, ch.Dirs)
	if err != nil {
		t.Fatalf("derived image: %v", err)
	}
	diff := sha256.Sum256(layer)
	epoch := time.Unix(0, 0).UTC().Format(time.RFC3339)
	vols := map[string]struct{}{}
	for _, v := range ch.Volumes {
		vols[v] = struct{}{}
	}
	cfg := map[string]any{"User": img.Config.User, "Env": img.Config.Env, "Cmd": []string{"/bin/sh"},
		"Labels": map[string]string{label.Managed: label.ManagedValue, label.Owner: owner, label.Kind: "test-image"}}
	if ch.Entrypoint != nil {
		cfg["Entrypoint"] = ch.Entrypoint
	}
	if len(vols) > 0 {
		cfg["Volumes"] = vols
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "created": epoch, "config": cfg,
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
		"history": []map[string]any{{"created": epoch, "created_by": "stockade enginetest.DerivedImage"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(config)
	id := hex.EncodeToString(sum[:])
	tag := "stockade/test-derived:" + container.RandomHex(6)
	layerName := hex.EncodeToString(diff[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": id + ".json", "RepoTags": []string{tag}, "Layers": []string{layerName}}})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	for _, m := range []struct {
		name string
		body []byte
	}{{id + ".json", config}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Mode: 0o644, Size: int64(len(m.body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImageLoad(ctx, &archive); err != nil {
		t.Fatalf("derived image: load: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The ID is this test's own: its config carries the test's owner.
		if err := c.ImageRemove(ctx, "sha256:"+id, true); err != nil && !errors.Is(err, dockerapi.ErrNotFound) {
			t.Errorf("remove derived image %s: %v", tag, err)
		}
	})
	return "sha256:" + id
}

// engineMade are what an engine adds to a container's root besides the
// image's files; a derived image leaves them out.
var engineMade = []string{".dockerenv", "dev", "proc", "sys", "run", "etc/hostname", "etc/hosts", "etc/resolv.conf", "etc/mtab"}

// baseFiles returns one layer holding the files of image base and dirs.
func baseFiles(ctx context.Context, c *dockerapi.Client, owner, base string, dirs []Dir) ([]byte, error) {
	spec := container.Spec{Image: base, Cmd: []string{"true"}, Labels: label.Base(owner, "test-image")}
	cfg, err := spec.Config()
	if err != nil {
		return nil, err
	}
	id, err := c.ContainerCreate(ctx, container.RandomName("derive"), cfg)
	if err != nil {
		return nil, err
	}
	defer c.ContainerRemove(context.WithoutCancel(ctx), id, dockerapi.RemoveOptions{Force: true, Volumes: true})
	rc, _, err := c.ArchiveGet(ctx, id, "/")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		// Docker names the members "./x" under a top "/", Podman "x".
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "."), "/")
		if name == "" || engineAdded(name) {
			continue
		}
		h.Name = name
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	for _, d := range dirs {
		mode := d.Mode
		if mode == 0 {
			mode = 0o755
		}
		h := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d.Path, "/") + "/", Mode: mode, Uid: d.UID, Gid: d.UID}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func engineAdded(name string) bool {
	name = strings.TrimSuffix(name, "/")
	for _, e := range engineMade {
		if name == e || strings.HasPrefix(name, e+"/") {
			return true
		}
	}
	return false
}
