package main

import (
	"os"
	"path/filepath"
)

// The fixture repositories under testdata/repos are modules of their own,
// not subdirectories of this checkout (which inspect would validate as
// committed): git stops looking for a repository above them
// (GIT_CEILING_DIRECTORIES, which Stockade's git honours).
func init() {
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", "repos"))
	if err != nil {
		return
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	os.Setenv("GIT_CEILING_DIRECTORIES", abs)
}
