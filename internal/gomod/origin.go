package gomod

import (
	"strings"

	"golang.org/x/mod/module"
)

// Origin is where the module proxy says a version came from: the Origin
// object of its .info (and of go mod download -json), which
// proxy.golang.org serves for versions it fetched from a repository. Any
// field may be empty.
type Origin struct {
	VCS    string // "git"
	URL    string // the repository, such as "https://github.com/spf13/pflag"
	Subdir string // the module's directory in the repository
	Ref    string // such as "refs/tags/v1.0.6"
	Hash   string // the commit
}

// Links returns the web page of the repository of module path and the
// view comparing versions from and to there, for a reviewer: from origin
// when it names a git repository, else from the path for the hosts whose
// layout is known (github.com/OWNER/REPO, gitlab.com/OWNER/REPO,
// golang.org/x/NAME). The compare view is GitHub's and GitLab's
// compare/FROM...TO, and Gitiles' +log/FROM..TO, between the versions'
// tags (the module's directory, then the version); empty when the host is
// not one of those. Both are empty when nothing names the repository.
func Links(path, from, to string, o *Origin) (repo, compare string) {
	var subdir string
	switch {
	case o != nil && o.VCS == "git" && strings.HasPrefix(o.URL, "https://"):
		repo, subdir = strings.TrimSuffix(o.URL, ".git"), o.Subdir
	default:
		prefix, _, ok := module.SplitPathVersion(path)
		if !ok {
			return "", ""
		}
		elems := strings.Split(prefix, "/")
		switch {
		case len(elems) >= 3 && (elems[0] == "github.com" || elems[0] == "gitlab.com"):
			repo, subdir = "https://"+strings.Join(elems[:3], "/"), strings.Join(elems[3:], "/")
		case len(elems) >= 3 && elems[0] == "golang.org" && elems[1] == "x":
			repo, subdir = "https://go.googlesource.com/"+elems[2], strings.Join(elems[3:], "/")
		default:
			return "", ""
		}
	}
	if from == "" || to == "" {
		return repo, ""
	}
	tag := func(v string) string {
		v = strings.TrimSuffix(v, "+incompatible")
		if subdir != "" {
			return subdir + "/" + v
		}
		return v
	}
	switch {
	case strings.HasPrefix(repo, "https://github.com/"):
		compare = repo + "/compare/" + tag(from) + "..." + tag(to)
	case strings.HasPrefix(repo, "https://gitlab.com/"):
		compare = repo + "/-/compare/" + tag(from) + "..." + tag(to)
	case strings.HasPrefix(repo, "https://go.googlesource.com/"):
		compare = repo + "/+log/" + tag(from) + ".." + tag(to)
	}
	return repo, compare
}
