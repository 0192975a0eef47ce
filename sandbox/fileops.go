package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FileType names what a file is, as ListDir and Stat report it.
type FileType string

// The file types. Every file is exactly one of them.
const (
	TypeFile    FileType = "file"    // a regular file
	TypeDir     FileType = "dir"     // a directory
	TypeSymlink FileType = "symlink" // a symbolic link, described and never followed
	TypeOther   FileType = "other"   // a FIFO, socket or device
)

// FileInfo describes one file as lstat(2), run by the sandbox user, sees
// it: a symlink is described, not followed.
type FileInfo struct {
	// Name is the file's base name. It may hold any byte but NUL and
	// slash, control characters included: such a name is listed, but
	// CheckPath refuses a path holding it, so the file API cannot address
	// it (Exec can).
	Name string
	// Type is what the file is.
	Type FileType
	// Size is lstat's size in bytes: a regular file's length, a symlink's
	// target's length, what the file system reports for a directory.
	Size int64
	// Mode is the permission bits, setuid, setgid and sticky, and the type
	// bits of Type (fs.ModeDir, fs.ModeSymlink, fs.ModeNamedPipe,
	// fs.ModeSocket, fs.ModeDevice and fs.ModeCharDevice): what os.Lstat
	// would report.
	Mode fs.FileMode
	// ModTime is the modification time, in UTC, to the second.
	ModTime time.Time
}

// RemoveOptions are Sandbox.Remove's options. The zero value removes one
// file, symlink or the like, and refuses a directory.
type RemoveOptions struct {
	// Recursive lets Remove remove a directory and everything in it;
	// without it a directory, even an empty one, is ErrIsDirectory.
	Recursive bool
}

// MaxDirEntries bounds the entries ListDir returns: 10,000. A directory
// holding more is ErrTooManyEntries and nothing is listed; larger listings
// belong in an Exec (find, ls) or an Export.
const MaxDirEntries = 10000

// maxEntryLine bounds, in bytes, one entry of ListShell's output: a name
// (at most 255 bytes, NAME_MAX) and its NUL, and its stat line (a mode, a
// size and a time: at most 8+1+20+1+20+1).
const maxEntryLine = 256 + 52

// listAttempts is how many times ListDir lists a directory whose entries
// keep going away while it is listed (ExitListChanged) before it gives up.
const listAttempts = 3

// More errors of the file operations.
var (
	// ErrNotReadable: the sandbox user cannot read the directory to
	// list, or cannot search a directory on the way to the path.
	ErrNotReadable = errors.New("sandbox: path cannot be read")
	// ErrTooManyEntries: the directory holds more than MaxDirEntries
	// entries; nothing was listed.
	ErrTooManyEntries = errors.New("sandbox: directory has too many entries")
	// ErrCrossDevice: a rename's source and target are in different
	// writable places (or file systems): one rename(2) cannot move it, and
	// Rename never copies. Nothing moved.
	ErrCrossDevice = errors.New("sandbox: source and target are on different file systems")
)

// FileScripts carries out Sandbox's ListDir, Stat, MakeDir, Remove and
// Rename for a backend, each with one run of its …Shell script as the
// sandbox user (so the kernel holds every operation to what that user may
// do), after the checks every backend makes on the host: CheckPath on
// every path and, for what changes the file system, the writes' rule that
// the path lies in one of Roots. Backends' methods call it, so that both
// give the same answers.
type FileScripts struct {
	// Backend prefixes the errors ("docker", "kubernetes").
	Backend string
	// Roots are the sandbox's WritablePaths.
	Roots []string
	// Run runs script with args as the sandbox user and returns its exit
	// code and output, keeping at most outputCap bytes of stdout (a script
	// that writes more is an error); an error is the backend's (the
	// sandbox gone: ErrNotFound).
	Run func(ctx context.Context, outputCap int64, script string, args ...string) (code int, stdout, stderr string, err error)
}

// statOutputCap bounds StatShell's output, in bytes: one line.
const statOutputCap = 128

// ListDir implements Sandbox.ListDir.
func (f FileScripts) ListDir(ctx context.Context, p string) ([]FileInfo, error) {
	if err := CheckPath(p); err != nil {
		return nil, fmt.Errorf("%s: list: %w", f.Backend, err)
	}
	for i := 1; ; i++ {
		code, stdout, stderr, err := f.Run(ctx, MaxDirEntries*maxEntryLine, ListShell, p, strconv.Itoa(MaxDirEntries))
		if err != nil {
			return nil, err
		}
		switch code {
		case 0:
			out, err := ParseListing([]byte(stdout))
			if err != nil {
				return nil, fmt.Errorf("%s: list %s: %w", f.Backend, p, err)
			}
			return out, nil
		case ExitTooManyEntries:
			return nil, fmt.Errorf("%s: list %s: %w: %s, at most %d", f.Backend, p, ErrTooManyEntries, strings.TrimPrefix(firstLine(stderr), "stockade: "), MaxDirEntries)
		case ExitListChanged:
			if i < listAttempts {
				continue
			}
			return nil, fmt.Errorf("%s: list %s: entries kept going away while listed (%d attempts)", f.Backend, p, i)
		}
		return nil, f.fault("list", []string{p}, code, stderr)
	}
}

// Stat implements Sandbox.Stat.
func (f FileScripts) Stat(ctx context.Context, p string) (FileInfo, error) {
	if err := CheckPath(p); err != nil {
		return FileInfo{}, fmt.Errorf("%s: stat: %w", f.Backend, err)
	}
	code, stdout, stderr, err := f.Run(ctx, statOutputCap, StatShell, p)
	if err != nil {
		return FileInfo{}, err
	}
	if code != 0 {
		return FileInfo{}, f.fault("stat", []string{p}, code, stderr)
	}
	line, ok := strings.CutSuffix(stdout, "\n")
	fi, err := parseStat(line)
	if !ok || err != nil {
		return FileInfo{}, fmt.Errorf("%s: stat %s: malformed answer %q", f.Backend, p, firstLine(stdout))
	}
	fi.Name = path.Base(p)
	return fi, nil
}

// MakeDir implements Sandbox.MakeDir.
func (f FileScripts) MakeDir(ctx context.Context, p string) error {
	if _, err := writablePlace(f.Backend, "make directory", f.Roots, p); err != nil {
		return err
	}
	return f.change(ctx, "make directory", MakeDirShell, p)
}

// Remove implements Sandbox.Remove.
func (f FileScripts) Remove(ctx context.Context, p string, opts RemoveOptions) error {
	root, err := writablePlace(f.Backend, "remove", f.Roots, p)
	if err != nil {
		return err
	}
	if p == root {
		return fmt.Errorf("%s: remove %s: %w (a writable place itself stays)", f.Backend, p, ErrNotReplaceable)
	}
	mode := "f"
	if opts.Recursive {
		mode = "r"
	}
	return f.change(ctx, "remove", RemoveShell, p, mode)
}

// Rename implements Sandbox.Rename.
func (f FileScripts) Rename(ctx context.Context, from, to string) error {
	fromRoot, err := writablePlace(f.Backend, "rename", f.Roots, from)
	if err != nil {
		return err
	}
	toRoot, err := writablePlace(f.Backend, "rename", f.Roots, to)
	if err != nil {
		return err
	}
	switch {
	case from == fromRoot:
		return fmt.Errorf("%s: rename %s: %w (a writable place itself stays)", f.Backend, from, ErrNotReplaceable)
	case to == toRoot:
		return fmt.Errorf("%s: rename to %s: %w", f.Backend, to, ErrIsDirectory)
	case fromRoot != toRoot:
		return fmt.Errorf("%s: rename %s to %s: %w", f.Backend, from, to, ErrCrossDevice)
	case strings.HasPrefix(to, from+"/"):
		return fmt.Errorf("%s: rename %s to %s: a directory cannot move into itself", f.Backend, from, to)
	}
	return f.change(ctx, "rename", RenameShell, from, to)
}

// change runs one of the scripts that change the file system, with paths
// (and their options) as arguments.
func (f FileScripts) change(ctx context.Context, op, script string, args ...string) error {
	code, _, stderr, err := f.Run(ctx, statOutputCap, script, args...)
	if err != nil {
		return err
	}
	return f.fault(op, args, code, stderr)
}

// fault turns a file script's exit code and fault line into the error the
// Sandbox methods document (nil for 0). The fault line picks which of
// paths (by index) the error names.
func (f FileScripts) fault(op string, paths []string, code int, stderr string) error {
	if code == 0 {
		return nil
	}
	p := paths[0]
	if _, fp := faultLine(stderr, func(i int, fp string) bool { return i < len(paths) && paths[i] == fp }); fp != "" {
		p = fp
	}
	err := pathFault(code)
	switch {
	case code == ExitPathNotWritable:
		return fmt.Errorf("%s: %s: %w", f.Backend, op, &PathNotWritableError{Path: p, Reason: "the sandbox user cannot change it or its directory"})
	case err == nil:
		return fmt.Errorf("%s: %s %s: script exited %d: %s", f.Backend, op, p, code, firstLine(stderr))
	}
	return fmt.Errorf("%s: %s %s: %w", f.Backend, op, p, err)
}

// ParseListing reads ListShell's output into its entries, sorted by name.
// The output comes from inside the sandbox (the session can write into
// it), so its shape is checked: every name a base name (not empty, ".",
// ".." or holding a slash), a stat line for each, names distinct, at most
// MaxDirEntries of them; anything else is an error.
func ParseListing(out []byte) ([]FileInfo, error) {
	var entries []FileInfo
	seen := map[string]bool{}
	for len(out) > 0 {
		var names []string
		for {
			i := bytes.IndexByte(out, 0)
			if i < 0 {
				return nil, fmt.Errorf("malformed listing: a name without its end")
			}
			name := string(out[:i])
			out = out[i+1:]
			if name == "" {
				break
			}
			if name == "." || name == ".." || strings.Contains(name, "/") || seen[name] {
				return nil, fmt.Errorf("malformed listing: name %q", name)
			}
			seen[name] = true
			names = append(names, name)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("malformed listing: an empty block")
		}
		for _, name := range names {
			line, rest, ok := bytes.Cut(out, []byte("\n"))
			if !ok {
				return nil, fmt.Errorf("malformed listing: no description of %q", name)
			}
			fi, err := parseStat(string(line))
			if err != nil {
				return nil, fmt.Errorf("malformed listing: %q: %w", name, err)
			}
			fi.Name = name
			entries = append(entries, fi)
			out = rest
		}
		if len(entries) > MaxDirEntries {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyEntries, MaxDirEntries)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

// parseStat reads one StatShell line, "MODE SIZE MTIME", into a FileInfo
// without its name.
func parseStat(line string) (FileInfo, error) {
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return FileInfo{}, fmt.Errorf("stat line %q: want 3 fields", line)
	}
	raw, err1 := strconv.ParseUint(f[0], 16, 32)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	mtime, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || size < 0 {
		return FileInfo{}, fmt.Errorf("stat line %q: %v", line, err)
	}
	typ, mode := fileMode(uint32(raw))
	return FileInfo{Type: typ, Size: size, Mode: mode, ModTime: time.Unix(mtime, 0).UTC()}, nil
}

// fileMode turns a raw st_mode into its FileType and fs.FileMode.
func fileMode(raw uint32) (FileType, fs.FileMode) {
	m := fs.FileMode(raw & 0o777)
	if raw&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if raw&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if raw&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch raw & 0o170000 {
	case 0o100000:
		return TypeFile, m
	case 0o040000:
		return TypeDir, m | fs.ModeDir
	case 0o120000:
		return TypeSymlink, m | fs.ModeSymlink
	case 0o010000:
		return TypeOther, m | fs.ModeNamedPipe
	case 0o140000:
		return TypeOther, m | fs.ModeSocket
	case 0o020000:
		return TypeOther, m | fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		return TypeOther, m | fs.ModeDevice
	default:
		return TypeOther, m | fs.ModeIrregular
	}
}
