package docker

import (
	"testing"
)

// TestWriteOverSymlink checks that a write over a symlink replaces the link
// with a file of the mode a plain write gives (0644), leaving what the link
// pointed to alone.
func TestWriteOverSymlink(t *testing.T) {
	ctx, b := session(t)
	sh(t, ctx, b, "cd /workspace && echo s >secret && chmod 600 secret && ln -s secret link && ln -s /nonexistent dangling")
	for _, p := range []string{"/workspace/plain", "/workspace/link", "/workspace/dangling"} {
		if err := b.WriteFile(ctx, p, []byte("new")); err != nil {
			t.Fatalf("WriteFile(%s) = %v", p, err)
		}
	}
	got := sh(t, ctx, b, "cd /workspace && stat -c '%n %F %a' plain link dangling secret && cat secret")
	want := "plain regular file 644\nlink regular file 644\ndangling regular file 644\nsecret regular file 600\ns\n"
	if got != want {
		t.Errorf("after writing over symlinks:\n%s\nwant\n%s", got, want)
	}
}
