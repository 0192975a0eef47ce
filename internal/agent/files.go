package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agent's file operations (protocol version 2). They do in Go, as the
// sandbox user, what the sandbox package's scripts do (BulkPrepareShell,
// the upload, BulkRenameShell; ReadFileShell), with the same exit codes
// and fault lines, so the host reads their results as it reads the
// scripts'. The codes are those of the sandbox package's Exit constants
// (a test holds them equal); this package cannot import it and stay small.
const (
	// ExitStage: a staged file could not be written (a full file system,
	// say); nothing landed. The only code the scripts do not have: there,
	// the upload fails instead.
	ExitStage = 89

	exitPathIsDirectory    = 90
	exitPathNotDirectory   = 91
	exitPathNotReplaceable = 92
	exitPathNotWritable    = 93
	exitBulkExtract        = 94
	exitBulkMode           = 96
	exitFileNotExist       = 97
	exitNotRegularFile     = 98
	exitFileTooLarge       = 99
	// exitReadRefused: the agent could not tell (a permission, a loop of
	// links): the host reads the file another way.
	exitReadRefused = 1
)

// ExitReadRefused is the read's code for a file the agent cannot read as
// the sandbox user (a permission, say), which the host reads another way.
const ExitReadRefused = exitReadRefused

// WriteRequest is the head of a write frame's payload: the payload is a
// 4-byte big-endian length, this JSON of that length, then every file's
// bytes in order, Size each.
type WriteRequest struct {
	// Temp is the name of the staging directory made in each target's
	// directory (a sandbox.TempName): one path component.
	Temp string `json:"temp"`
	// MTime is every file's modification time, in Unix seconds.
	MTime int64 `json:"mtime"`
	// Files are the targets, in order: absolute, clean, distinct.
	Files []WriteFile `json:"files"`
}

// WriteFile is one target of a WriteRequest.
type WriteFile struct {
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
}

// ReadRequest is the payload of a read frame.
type ReadRequest struct {
	// Path is the file, absolute; symlinks are followed.
	Path string `json:"path"`
	// Max bounds the file's size in bytes: a larger one exits 99 after
	// its size line.
	Max int64 `json:"max"`
}

// EncodeWrite returns a write frame's payload for req with the files'
// bytes data (one per req.Files, of its Size).
func EncodeWrite(req WriteRequest, data [][]byte) ([]byte, error) {
	if len(data) != len(req.Files) {
		return nil, errors.New("agent: write: one data per file")
	}
	head, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("agent: encode write: %w", err)
	}
	n := 4 + len(head)
	for i, d := range data {
		if int64(len(d)) != req.Files[i].Size {
			return nil, fmt.Errorf("agent: write: %s: %d bytes, size %d", req.Files[i].Path, len(d), req.Files[i].Size)
		}
		n += len(d)
	}
	b := make([]byte, 4, n)
	binary.BigEndian.PutUint32(b, uint32(len(head)))
	b = append(b, head...)
	for _, d := range data {
		b = append(b, d...)
	}
	return b, nil
}

// decodeWrite splits a write payload into its request and each file's
// bytes (slices of payload), checking what the agent relies on.
func decodeWrite(payload []byte) (WriteRequest, [][]byte, error) {
	var req WriteRequest
	if len(payload) < 4 {
		return req, nil, errors.New("short write payload")
	}
	n := binary.BigEndian.Uint32(payload)
	if int64(n) > int64(len(payload)-4) {
		return req, nil, errors.New("write head past the payload")
	}
	if err := json.Unmarshal(payload[4:4+n], &req); err != nil {
		return req, nil, err
	}
	if req.Temp == "" || strings.ContainsAny(req.Temp, "/\x00") || req.Temp == "." || req.Temp == ".." {
		return req, nil, fmt.Errorf("bad staging name %q", req.Temp)
	}
	rest := payload[4+n:]
	data := make([][]byte, len(req.Files))
	for i, f := range req.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" || strings.IndexByte(f.Path, 0) >= 0 {
			return req, nil, fmt.Errorf("bad path %q", f.Path)
		}
		if f.Size < 0 || f.Size > int64(len(rest)) {
			return req, nil, fmt.Errorf("%s: size %d past the payload", f.Path, f.Size)
		}
		data[i], rest = rest[:f.Size:f.Size], rest[f.Size:]
	}
	if len(rest) != 0 {
		return req, nil, fmt.Errorf("%d bytes after the last file", len(rest))
	}
	return req, data, nil
}

// WriteFiles lands req's files (data[i] for req.Files[i]) as BulkPrepareShell,
// the upload and BulkRenameShell do together, and returns their exit code,
// with fault lines written to stderr:
//
//  1. for each target in order, the fault checks of sf_fault (once per
//     directory) and the missing parents made (mkdir -p); at the first
//     fault only the targets before it go on;
//  2. each file written under its base name in the staging directory Temp
//     of its directory (made 0700), with mode 0644 or, when the target is
//     a regular file, the target's permission bits, and mtime MTime; a
//     failure (ENOSPC) exits ExitStage with nothing landed;
//  3. every staged file checked to be there (the sandbox's processes share
//     the user), else exit 94 with nothing landed;
//  4. each renamed over its target, directory by directory in the order
//     they first appear; a rename that fails reports the first target, in
//     order, that did not land, with its fault (92 when none is found);
//  5. the staging directories removed, on every path.
func WriteFiles(req WriteRequest, data [][]byte, stderr io.Writer) int {
	files := req.Files
	n, code, fault := prepare(files)
	if n == 0 {
		fmt.Fprint(stderr, fault)
		return code
	}
	files = files[:n]
	mtime := time.Unix(req.MTime, 0)
	var dirs []string // staging directories, by first appearance
	byDir := map[string][]int{}
	defer func() {
		for _, sd := range dirs {
			os.RemoveAll(sd)
		}
	}()
	for i, f := range files {
		d := path.Dir(f.Path)
		if _, ok := byDir[d]; !ok {
			sd := path.Join(d, req.Temp)
			if err := os.Mkdir(sd, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				fmt.Fprintf(stderr, "stockade: fault %d %s\nstockade: cannot stage: %v\n", i, f.Path, err)
				return ExitStage
			}
			dirs = append(dirs, sd)
		}
		byDir[d] = append(byDir[d], i)
		if c, err := stage(staged(f.Path, req.Temp), f.Path, data[i], mtime); err != nil {
			fmt.Fprintf(stderr, "stockade: fault %d %s\nstockade: cannot stage: %v\n", i, f.Path, err)
			return c
		}
	}
	got := 0
	for _, f := range files {
		if fi, err := os.Lstat(staged(f.Path, req.Temp)); err == nil && fi.Mode().IsRegular() {
			got++
		}
	}
	if got != n {
		fmt.Fprintf(stderr, "stockade: %d of %d staged files delivered\n", got, n)
		return exitBulkExtract
	}
	for _, sd := range dirs {
		failed := false
		for _, i := range byDir[path.Dir(sd)] {
			if os.Rename(staged(files[i].Path, req.Temp), files[i].Path) != nil {
				failed = true // as mv does: the others of the directory still go
			}
		}
		if !failed {
			continue
		}
		for i, f := range files {
			if _, err := os.Stat(staged(f.Path, req.Temp)); err == nil {
				c := pathFault(f.Path)
				if c == 0 {
					c = exitPathNotReplaceable
				}
				fmt.Fprintf(stderr, "stockade: fault %d %s\n", i, f.Path)
				return c
			}
		}
	}
	fmt.Fprint(stderr, fault)
	return code
}

// staged is target's staging path.
func staged(target, temp string) string { return path.Join(path.Dir(target), temp, path.Base(target)) }

// stage writes one staged file at p for target.
func stage(p, target string, data []byte, mtime time.Time) (int, error) {
	mode := uint32(0o644)
	var st syscall.Stat_t
	if syscall.Lstat(target, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		mode = st.Mode & 0o7777
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return ExitStage, err
	}
	_, err = f.Write(data)
	if err == nil {
		// The staged file is ours and new: a chmod failing is the mode not
		// kept (BulkRenameShell's pm_apply).
		if cerr := f.Chmod(os.FileMode(mode&0o777) | modeBits(mode)); cerr != nil {
			f.Close()
			return exitBulkMode, cerr
		}
		tv := []syscall.Timeval{syscall.NsecToTimeval(time.Now().UnixNano()), syscall.NsecToTimeval(mtime.UnixNano())}
		err = syscall.Futimes(int(f.Fd()), tv)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ExitStage, err
	}
	return 0, nil
}

// modeBits turns the setuid, setgid and sticky bits of a raw mode into
// os.FileMode's.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// prepare is BulkPrepareShell: it returns how many targets are ready, and
// the fault code and line of the first that is not (0 and "" when all
// are).
func prepare(files []WriteFile) (n, code int, fault string) {
	ok := map[string]bool{}
	for i, f := range files {
		t := f.Path
		d := path.Dir(t)
		c := 0
		if ok[d] {
			// The directory passed already: only the target can fault.
			if isDir(t) {
				c = exitPathIsDirectory
			} else if lexists(t) && !replaceable(t) {
				c = exitPathNotReplaceable
			}
		} else if c = pathFault(t); c == 0 && !isDir(d) {
			if os.MkdirAll(d, 0o777) != nil {
				if c = pathFault(t); c == 0 {
					c = exitPathNotWritable
				}
			}
		}
		if c != 0 {
			return i, c, "stockade: fault " + strconv.Itoa(i) + " " + t + "\n"
		}
		ok[d] = true
	}
	return len(files), 0, ""
}

// pathFault is sf_fault: why a new file cannot replace p, or 0. A missing
// parent is no fault unless the nearest existing ancestor is not a
// directory.
func pathFault(p string) int {
	if isDir(p) {
		return exitPathIsDirectory
	}
	d := path.Dir(p)
	for !exists(d) {
		if lexists(d) {
			return exitPathNotDirectory // a dangling link
		}
		d = path.Dir(d)
	}
	if !isDir(d) {
		return exitPathNotDirectory
	}
	const wOK, xOK = 2, 1
	if syscall.Access(d, wOK|xOK) != nil {
		return exitPathNotWritable
	}
	if lexists(p) && !replaceable(p) {
		return exitPathNotReplaceable
	}
	return 0
}

// replaceable is sf_replaceable: false for p in a sticky directory that
// neither p (its link followed) nor the directory belongs to the user of.
func replaceable(p string) bool {
	var ds, ps syscall.Stat_t
	if syscall.Stat(path.Dir(p), &ds) != nil || ds.Mode&syscall.S_ISVTX == 0 {
		return true
	}
	uid := uint32(os.Geteuid())
	owned := syscall.Stat(p, &ps) == nil && ps.Uid == uid
	return owned || ds.Uid == uid
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// ReadFile is ReadFileShell: it writes the size of the regular file at
// req.Path (links followed) on a line of its own to stdout, then exactly
// that many of its bytes, and returns the exit code: 90, 97 or 98 before
// writing anything, 99 after the size line when the size is over req.Max,
// ExitReadRefused when the agent cannot open or stat it as the sandbox
// user for another reason than its absence.
func ReadFile(req ReadRequest, stdout io.Writer) int {
	fi, err := os.Stat(req.Path)
	switch {
	case err == nil && fi.IsDir():
		return exitPathIsDirectory
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return exitFileNotExist
	case err != nil:
		return exitReadRefused
	case !fi.Mode().IsRegular():
		return exitNotRegularFile // never opened: a FIFO would block
	}
	f, err := os.OpenFile(req.Path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return exitReadRefused
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return exitReadRefused // swapped since the first look
	}
	if _, err := io.WriteString(stdout, strconv.FormatInt(fi.Size(), 10)+"\n"); err != nil {
		return exitReadRefused
	}
	if fi.Size() > req.Max {
		return exitFileTooLarge
	}
	// A file that shrank gives fewer bytes than announced, which the host
	// reports; one that grew is cut at its size.
	if _, err := io.Copy(stdout, io.LimitReader(f, fi.Size())); err != nil {
		return exitReadRefused
	}
	return 0
}
