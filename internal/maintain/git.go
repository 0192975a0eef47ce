package maintain

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/internal/gitcmd"
)

// ErrBranchExists reports a -branch that already exists: maintain never
// moves a branch.
var ErrBranchExists = errors.New("maintain: the branch already exists")

// maxGitOutput caps what one git command may print, in bytes.
const maxGitOutput = 64 << 20

// gitRepo runs git in a user's checkout with an environment built from
// scratch: no system or global configuration, HOME an empty directory, no
// prompts, no optional locks (nothing refreshes the index), and the
// repository's fsmonitor and hooks off, so neither the user's identity
// and configuration nor the repository's programs play any part.
type gitRepo struct {
	dir  string // the top of the checkout
	sub  string // the module's directory below it, slash-separated; "" at the top
	home string // an empty directory
	env  []string
}

func newGitRepo(dir, sub, home string) *gitRepo {
	return &gitRepo{dir: dir, sub: sub, home: home}
}

// inModule reports whether name, a path from the top, is in the module's
// directory.
func (g *gitRepo) inModule(name string) bool {
	return g.sub == "" || strings.HasPrefix(name, g.sub+"/")
}

func (g *gitRepo) run(ctx context.Context, stdin io.Reader, extraEnv []string, args ...string) (string, error) {
	var stdout bytes.Buffer
	env := append([]string{"HOME=" + g.home}, extraEnv...)
	err := gitcmd.Run(ctx, g.dir, gitcmd.Options{Stdin: stdin, Stdout: &capped{w: &stdout, n: maxGitOutput}, Env: env}, args...)
	return stdout.String(), err
}

type capped struct {
	w io.Writer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if len(p) > c.n {
		return 0, fmt.Errorf("maintain: git printed more than %d bytes", maxGitOutput)
	}
	c.n -= len(p)
	return c.w.Write(p)
}

// objectFormat returns "sha1" or "sha256".
func (g *gitRepo) objectFormat(ctx context.Context) (string, error) {
	out, err := g.run(ctx, nil, nil, "rev-parse", "--show-object-format")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// treeEntry is one line of git ls-tree.
type treeEntry struct {
	mode, typ, hash, name string
}

func (g *gitRepo) lsTree(ctx context.Context, recursive bool, rev string) ([]treeEntry, error) {
	args := []string{"ls-tree", "-z", "--full-tree"}
	if recursive {
		args = append(args, "-r")
	}
	out, err := g.run(ctx, nil, nil, append(args, rev)...)
	if err != nil {
		return nil, err
	}
	var es []treeEntry
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("maintain: git ls-tree printed %q", rec)
		}
		es = append(es, treeEntry{mode: f[0], typ: f[1], hash: f[2], name: name})
	}
	return es, nil
}

// newHash returns the object hash of a repository's format.
func newHash(format string) hash.Hash {
	if format == "sha256" {
		return sha256.New()
	}
	return sha1.New()
}

// objectID is git's ID of an object of type typ holding data.
func objectID(format, typ string, data []byte) string {
	h := newHash(format)
	fmt.Fprintf(h, "%s %d\x00", typ, len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// uncommitted lists the tracked files of the module's directory (those of
// commit's tree, and those the index adds), paths from the top, whose
// working copy differs from commit: changed content, executable bit or
// symlink target, deleted, or staged as new. The rest of a monorepo does
// not count: neither validated nor in the proposal. It reads
// the working tree and the object database itself, so no filter, hook or
// fsmonitor the repository configures runs; a line-ending conversion the
// user configured counts as a change.
func (g *gitRepo) uncommitted(ctx context.Context, commit string) ([]string, error) {
	format, err := g.objectFormat(ctx)
	if err != nil {
		return nil, err
	}
	es, err := g.lsTree(ctx, true, commit)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(g.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var out []string
	inTree := map[string]bool{}
	for _, e := range es {
		inTree[e.name] = true
		if e.typ != "blob" || !g.inModule(e.name) {
			continue // submodules are refused before this
		}
		same, err := sameAsBlob(root, e, format)
		if err != nil {
			return nil, err
		}
		if !same {
			out = append(out, e.name)
		}
	}
	idx, err := g.run(ctx, nil, nil, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(idx, "\x00") {
		if name != "" && !inTree[name] && g.inModule(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// sameAsBlob reports whether the working copy of e matches it.
func sameAsBlob(root *os.Root, e treeEntry, format string) (bool, error) {
	fi, err := root.Lstat(e.name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
		return false, nil
	}
	if err != nil {
		return false, nil // unreadable as a file (a parent became a file): changed
	}
	switch e.mode {
	case "120000":
		if fi.Mode()&fs.ModeSymlink == 0 {
			return false, nil
		}
		t, err := root.Readlink(e.name)
		if err != nil {
			return false, err
		}
		return objectID(format, "blob", []byte(t)) == e.hash, nil
	case "100644", "100755":
		if !fi.Mode().IsRegular() || (fi.Mode()&0o100 != 0) != (e.mode == "100755") {
			return false, nil
		}
		f, err := root.Open(e.name)
		if err != nil {
			return false, err
		}
		defer f.Close()
		h := newHash(format)
		fmt.Fprintf(h, "blob %d\x00", fi.Size())
		if _, err := io.Copy(h, f); err != nil {
			return false, err
		}
		return hex.EncodeToString(h.Sum(nil)) == e.hash, nil
	}
	return true, nil
}

// Identity is who a proposal commit is by, and when: fixed by
// configuration, never the user's git identity or the clock.
type Identity struct {
	Name, Email string
	// Date is the author and committer date; the zero value means the
	// validated commit's committer date.
	Date time.Time
}

// DefaultIdentity is the proposal commits' author and committer when
// none is configured.
var DefaultIdentity = Identity{Name: "Stockade", Email: "stockade@localhost"}

// recipe is everything a proposal commit is made from: the same recipe
// gives the same commit ID on every machine.
type recipe struct {
	parent  string // the validated commit
	goMod   []byte
	goSum   []byte // nil: no go.sum
	who     Identity
	message string
}

// proposalTree writes the parent's root tree with the module's go.mod and
// go.sum replaced (git hash-object, git mktree; in a monorepo each tree on
// the way to the module's directory too) and returns its ID.
func (g *gitRepo) proposalTree(ctx context.Context, r recipe) (string, error) {
	blob := func(data []byte) (string, error) {
		out, err := g.run(ctx, bytes.NewReader(data), nil, "hash-object", "-w", "--no-filters", "--stdin")
		return strings.TrimSpace(out), err
	}
	mk := func(es []treeEntry) (string, error) {
		var in bytes.Buffer
		for _, e := range es {
			fmt.Fprintf(&in, "%s %s %s\t%s\x00", e.mode, e.typ, e.hash, e.name)
		}
		out, err := g.run(ctx, &in, nil, "mktree", "-z")
		return strings.TrimSpace(out), err
	}
	return g.withManifests(ctx, r.parent, g.sub, r.goMod, r.goSum, blob, mk)
}

// withManifests returns the ID of the tree rev (a commit or a tree) with
// go.mod and go.sum of its directory sub ("" the tree itself) replaced by
// goMod and goSum (nil: none), blob making each file's blob and mk each
// changed tree, from the one holding them up to rev's.
func (g *gitRepo) withManifests(ctx context.Context, rev, sub string, goMod, goSum []byte, blob func([]byte) (string, error), mk func([]treeEntry) (string, error)) (string, error) {
	es, err := g.lsTree(ctx, false, rev)
	if err != nil {
		return "", err
	}
	if sub != "" {
		first, rest, _ := strings.Cut(sub, "/")
		for i, e := range es {
			if e.name == first && e.typ == "tree" {
				if es[i].hash, err = g.withManifests(ctx, e.hash, rest, goMod, goSum, blob, mk); err != nil {
					return "", err
				}
				return mk(es)
			}
		}
		return "", fmt.Errorf("maintain: %s is not a directory of %s", sub, rev)
	}
	var kept []treeEntry
	for _, e := range es {
		if e.name != "go.mod" && e.name != "go.sum" {
			kept = append(kept, e)
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"go.mod", goMod}, {"go.sum", goSum}} {
		if f.data == nil {
			continue
		}
		h, err := blob(f.data)
		if err != nil {
			return "", err
		}
		kept = append(kept, treeEntry{mode: "100644", typ: "blob", hash: h, name: f.name})
	}
	return mk(kept)
}

// committerDate returns commit's committer date as git stores it
// ("<unix seconds> <zone>").
func (g *gitRepo) committerDate(ctx context.Context, commit string) (string, error) {
	out, err := g.run(ctx, nil, nil, "cat-file", "commit", commit)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			break
		}
		if rest, ok := strings.CutPrefix(l, "committer "); ok {
			if i := strings.LastIndex(rest, "> "); i >= 0 {
				return rest[i+2:], nil
			}
		}
	}
	return "", fmt.Errorf("maintain: commit %s has no committer date", commit)
}

// commit makes the proposal commit of r (git commit-tree) and returns its
// ID and its tree's.
func (g *gitRepo) commit(ctx context.Context, r recipe) (commit, tree string, err error) {
	tree, err = g.proposalTree(ctx, r)
	if err != nil {
		return "", "", err
	}
	date := ""
	if r.who.Date.IsZero() {
		if date, err = g.committerDate(ctx, r.parent); err != nil {
			return "", "", err
		}
	} else {
		date = fmt.Sprintf("%d +0000", r.who.Date.Unix())
	}
	env := []string{
		"GIT_AUTHOR_NAME=" + r.who.Name, "GIT_AUTHOR_EMAIL=" + r.who.Email, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + r.who.Name, "GIT_COMMITTER_EMAIL=" + r.who.Email, "GIT_COMMITTER_DATE=" + date,
	}
	out, err := g.run(ctx, strings.NewReader(r.message), env, "commit-tree", "--no-gpg-sign", "-p", r.parent, tree)
	if err != nil {
		return "", "", err
	}
	return strings.TrimSpace(out), tree, nil
}

// ProposalRefPrefix is where proposal commits are stored in the user's
// repository.
const ProposalRefPrefix = "refs/stockade/proposals/"

// store points refs/stockade/proposals/<id> at commit, creating it (or
// leaving it when it already names commit), and with branch a new branch
// too. HEAD, the index and the working tree are not touched.
func (g *gitRepo) store(ctx context.Context, id, commit, branch string) (ref string, err error) {
	ref = ProposalRefPrefix + id
	if cur, err := g.run(ctx, nil, nil, "rev-parse", "-q", "--verify", ref); err == nil && strings.TrimSpace(cur) == commit {
		// The same recipe made the same commit: nothing to do.
	} else if _, err := g.run(ctx, nil, nil, "update-ref", "-m", "stockade maintain", ref, commit, ""); err != nil {
		return "", err
	}
	if branch != "" {
		if _, err := g.run(ctx, nil, nil, "update-ref", "-m", "stockade maintain", "refs/heads/"+branch, commit, ""); err != nil {
			return ref, fmt.Errorf("%w: %s: %v", ErrBranchExists, branch, err)
		}
	}
	return ref, nil
}

// checkBranch refuses a -branch name git would not accept, or one that
// exists, before anything runs.
func (g *gitRepo) checkBranch(ctx context.Context, branch string) error {
	if _, err := g.run(ctx, nil, nil, "check-ref-format", "--branch", branch); err != nil || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("%w: -branch %q is not a valid branch name", ErrPolicy, branch)
	}
	if _, err := g.run(ctx, nil, nil, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err == nil {
		return fmt.Errorf("%w: %s", ErrBranchExists, branch)
	}
	return nil
}

// validatedTree returns the ID of the tree a proposal of ms would have
// (the parent's root tree with the module's go.mod and go.sum replaced),
// computed without writing anything: the evidence of what was validated.
func (g *gitRepo) validatedTree(ctx context.Context, parent string, goMod, goSum []byte) (string, error) {
	format, err := g.objectFormat(ctx)
	if err != nil {
		return "", err
	}
	blob := func(data []byte) (string, error) { return objectID(format, "blob", data), nil }
	mk := func(es []treeEntry) (string, error) { return treeID(format, es) }
	return g.withManifests(ctx, parent, g.sub, goMod, goSum, blob, mk)
}

// treeID is git's ID of a tree object holding es: entries sorted as git
// sorts them (a directory as if its name ended in "/"), each
// "<mode> <name>\0<raw ID>", the mode without leading zeros.
func treeID(format string, es []treeEntry) (string, error) {
	key := func(e treeEntry) string {
		if e.typ == "tree" {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(es, func(i, j int) bool { return key(es[i]) < key(es[j]) })
	var buf bytes.Buffer
	for _, e := range es {
		raw, err := hex.DecodeString(e.hash)
		if err != nil {
			return "", fmt.Errorf("maintain: object ID %q: %v", e.hash, err)
		}
		fmt.Fprintf(&buf, "%s %s\x00", strings.TrimLeft(e.mode, "0"), e.name)
		buf.Write(raw)
	}
	return objectID(format, "tree", buf.Bytes()), nil
}
