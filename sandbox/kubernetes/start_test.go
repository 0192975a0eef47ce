package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartFindsImageVolumes runs start.sh's st_volumes on the host over a
// mountinfo of a pod's sandbox container: a writable directory mounted
// outside the writable places (an image VOLUME made by the runtime) is
// found; the places, read-only mounts, /proc, /sys, /dev and files are not.
func TestStartFindsImageVolumes(t *testing.T) {
	i := strings.Index(startScript, "st_volumes() {")
	j := strings.Index(startScript[i:], "\n}\n")
	if i < 0 || j < 0 {
		t.Fatal("start.sh has no st_volumes")
	}
	fn := startScript[i : i+j+3]
	dir := t.TempDir()
	vol, ro, place := filepath.Join(dir, "vol"), filepath.Join(dir, "ro"), filepath.Join(dir, "work")
	for _, d := range []string{vol, ro, place} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "hosts")
	os.WriteFile(file, nil, 0o666)
	line := func(mp, opts string) string { return "1 2 0:1 / " + mp + " " + opts + " - tmpfs tmpfs rw\n" }
	base := line("/", "ro,relatime") + line("/proc", "rw") + line("/dev/shm", "rw") + line(file, "rw") + line(ro, "ro,nosuid") + line(place, "rw,nosuid")
	for _, tt := range []struct {
		name, mountinfo, want string
	}{
		{"none", base, ""},
		{"image volume", base + line(vol, "rw,relatime"), vol},
	} {
		mi := filepath.Join(dir, "mountinfo")
		if err := os.WriteFile(mi, []byte(tt.mountinfo), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sh := range []string{"sh", "busybox"} {
			argv := []string{"-c", fn + "\nst_volumes \"$@\"", "start", mi, place}
			if sh == "busybox" {
				if _, err := exec.LookPath("busybox"); err != nil {
					continue
				}
				argv = append([]string{"sh"}, argv...)
			}
			out, _ := exec.Command(sh, argv...).Output()
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("%s, %s: st_volumes = %q; want %q", tt.name, sh, got, tt.want)
			}
		}
	}
}
