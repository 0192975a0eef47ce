package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// pause sleeps and reaps until SIGTERM or SIGINT.
func pause() error {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return nil
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return nil
}

// epoch is every member's mtime, so the same binary gives the same image.
var epoch = time.Unix(0, 0)

// pauseImage writes a docker-archive of an image with this binary as
// /pause, its entrypoint, tagged tag.
func pauseImage(file, tag string) error {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "pause", Mode: 0o755, Size: int64(len(self)), ModTime: epoch}); err != nil {
		return err
	}
	tw.Write(self)
	if err := tw.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": epoch.UTC().Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": []string{"/pause"}, "User": "65535:65535"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	csum := sha256.Sum256(config)
	cname := hex.EncodeToString(csum[:]) + ".json"
	lname := hex.EncodeToString(sum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cname, "RepoTags": []string{tag}, "Layers": []string{lname}}})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".pause-image-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	out := tar.NewWriter(tmp)
	for _, m := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {cname, config}, {lname, layer.Bytes()}} {
		if err := out.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Mode: 0o644, Size: int64(len(m.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := io.Copy(out, bytes.NewReader(m.data)); err != nil {
			return err
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	return nil
}
