package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stockade/stockade/sandbox"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

// member is one tar member as the export tests write and compare it.
type member struct {
	name, link string
	flag       byte
	body       string
}

func tarOf(t *testing.T, ms []member) io.ReadCloser {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.flag, Mode: 0o755, Size: int64(len(m.body))}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, m.body)
	}
	tw.Close()
	return io.NopCloser(&b)
}

func members(rc io.ReadCloser) ([]member, error) {
	defer rc.Close()
	var out []member
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		b, _ := io.ReadAll(tr)
		out = append(out, member{h.Name, h.Linkname, h.Typeflag, string(b)})
	}
}

// TestExportShape: the archives both engines give of a directory root (as
// recorded from Docker 20.10 and Podman 4.3, a stopped container's volume)
// come out the same; a symlink root is the link alone, whatever the engine
// archived; a member outside the root is refused.
func TestExportShape(t *testing.T) {
	dir := dockerapi.PathStat{Name: "workspace", Mode: os.ModeDir | 0o755}
	want := []member{
		{"workspace/", "", tar.TypeDir, ""},
		{"workspace/ex/", "", tar.TypeDir, ""},
		{"workspace/ex/one", "", tar.TypeReg, "one\n"},
		{"workspace/ex/up", "..", tar.TypeSymlink, ""},
		{"workspace/hard", "workspace/ex/one", tar.TypeLink, ""},
	}
	link := dockerapi.PathStat{Name: "etc", Mode: os.ModeSymlink | os.ModeDir | 0o777, LinkTarget: "/etc", Mtime: "2026-12-02T20:34:25.42358506Z"}
	tests := []struct {
		name    string
		st      dockerapi.PathStat
		in      []member
		want    []member
		wantErr string
	}{
		{"docker", dir, want, want, ""},
		{"podman, stopped", dir, []member{
			{"/", "", tar.TypeDir, ""},
			{"/ex/", "", tar.TypeDir, ""},
			{"/ex/one", "", tar.TypeReg, "one\n"},
			{"/ex/up", "..", tar.TypeSymlink, ""},
			{"/hard", "/ex/one", tar.TypeLink, ""},
		}, want, ""},
		{"dot root", dir, []member{{"./", "", tar.TypeDir, ""}, {"./p", "", tar.TypeReg, "p"}},
			[]member{{"workspace/", "", tar.TypeDir, ""}, {"workspace/p", "", tar.TypeReg, "p"}}, ""},
		{"a file", dockerapi.PathStat{Name: "p", Mode: 0o644}, []member{{"p", "", tar.TypeReg, "p"}},
			[]member{{"p", "", tar.TypeReg, "p"}}, ""},
		{"symlink root, docker", link, []member{{"exlink", "/etc", tar.TypeSymlink, ""}},
			[]member{{"exlink", "/etc", tar.TypeSymlink, ""}}, ""},
		{"symlink root, podman follows it", link, []member{{"exlink/", "", tar.TypeDir, ""}, {"exlink/passwd", "", tar.TypeReg, "root:x:0:0"}},
			[]member{{"exlink", "/etc", tar.TypeSymlink, ""}}, ""},
		{"member outside", dir, []member{{"workspace/", "", tar.TypeDir, ""}, {"other/p", "", tar.TypeReg, "p"}}, nil, "outside"},
		{"top named otherwise", dir, []member{{"elsewhere/", "", tar.TypeDir, ""}}, nil, "outside"},
		{"escape from a slash root", dir, []member{{"/", "", tar.TypeDir, ""}, {"/../p", "", tar.TypeReg, "p"}}, nil, "not a clean name"},
		{"hard link outside", dir, []member{{"workspace/", "", tar.TypeDir, ""}, {"workspace/h", "etc/passwd", tar.TypeLink, ""}}, nil, "hard link"},
		{"empty", dir, nil, nil, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := "/workspace"
			if tt.st.Mode&os.ModeSymlink != 0 {
				root = "/workspace/exlink"
			} else if !tt.st.Mode.IsDir() {
				root = "/workspace/p"
			}
			rc, err := exportShape(tarOf(t, tt.in), tt.st, root)
			if err != nil {
				t.Fatal(err)
			}
			got, err := members(rc)
			if tt.wantErr != "" {
				if !errors.Is(err, sandbox.ErrBadArchive) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("exportShape(%s) = %v, %v; want ErrBadArchive saying %q", tt.name, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("exportShape(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		})
	}
}

// TestSameVolumeOptions: adoption compares what the spec asks of a volume,
// not its owner (volumes made before the owner was named have none) nor
// the keys an engine adds (Podman's UID and GID).
func TestSameVolumeOptions(t *testing.T) {
	want := volumeOptions("/workspace", 1<<20, 4242)
	for _, tt := range []struct {
		name string
		got  map[string]string
		same bool
	}{
		{"equal", volumeOptions("/workspace", 1<<20, 4242), true},
		{"podman's keys", map[string]string{"type": "tmpfs", "device": "tmpfs", "o": want["o"], "UID": "4242", "GID": "4242"}, true},
		{"no owner", map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "nr_blocks=256,mode=0777,nosuid,nodev"}, true},
		{"another user", volumeOptions("/workspace", 1<<20, 65534), true},
		{"another size", volumeOptions("/workspace", 2<<20, 4242), false},
		{"another mode", volumeOptions("/tmp", 1<<20, 4242), false},
		{"no type", map[string]string{"device": "tmpfs", "o": want["o"]}, false},
	} {
		if got := sameVolumeOptions(tt.got, want); got != tt.same {
			t.Errorf("%s: sameVolumeOptions(%q) = %v; want %v", tt.name, tt.got, got, tt.same)
		}
	}
}
