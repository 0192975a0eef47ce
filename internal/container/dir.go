package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MkdirFresh creates parent/<prefix>-<16 random hex digits> with mode
// (chmod'ed past the umask) and returns it: every directory Stockade mounts
// gets a new name, as a mounted path is never deleted and recreated within
// a run (engines in a VM cache path lookups).
func MkdirFresh(parent, prefix string, mode fs.FileMode) (string, error) {
	for range 4 {
		p := filepath.Join(parent, prefix+"-"+RandomHex(8))
		err := os.Mkdir(p, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("container: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return "", fmt.Errorf("container: %w", err)
		}
		return p, nil
	}
	return "", fmt.Errorf("container: could not make a fresh %s directory in %s", prefix, parent)
}

// CleanAbs reports whether p is an absolute, clean slash path without NUL
// bytes: the form of every path Stockade mounts or names in a container.
func CleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// Within reports whether p is root or below it, for clean absolute paths.
// Mind the order: the directory first, the path tested second.
func Within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
