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
	"sync"
	"syscall"
	"time"
	"unsafe"
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
	n, code, fault, modes := prepare(files)
	if n == 0 {
		fmt.Fprint(stderr, fault)
		return code
	}
	files = files[:n]
	mtime := syscall.NsecToTimespec(time.Unix(req.MTime, 0).UnixNano())
	var dirs []string // target directories, by first appearance
	byDir := map[string][]int{}
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(path.Join(d, req.Temp))
		}
	}()
	for i, f := range files {
		d := path.Dir(f.Path)
		if _, ok := byDir[d]; !ok {
			if err := os.Mkdir(path.Join(d, req.Temp), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				fmt.Fprintf(stderr, "stockade: fault %d %s\nstockade: cannot stage: %v\n", i, f.Path, err)
				return ExitStage
			}
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], i)
		if c, err := stage(staged(f.Path, req.Temp), data[i], modes[i], mtime); err != nil {
			fmt.Fprintf(stderr, "stockade: fault %d %s\nstockade: cannot stage: %v\n", i, f.Path, err)
			return c
		}
	}
	// Every staged file is still there (the sandbox's processes share the
	// user): one directory read per staging directory, as the script's
	// globs count them.
	got := 0
	for _, d := range dirs {
		names := map[string]bool{}
		if es, err := os.ReadDir(path.Join(d, req.Temp)); err == nil {
			for _, e := range es {
				names[e.Name()] = e.Type().IsRegular()
			}
		}
		for _, i := range byDir[d] {
			if names[path.Base(files[i].Path)] {
				got++
			}
		}
	}
	if got != n {
		fmt.Fprintf(stderr, "stockade: %d of %d staged files delivered\n", got, n)
		return exitBulkExtract
	}
	for _, d := range dirs {
		failed := false
		for _, i := range byDir[d] {
			if syscall.Rename(staged(files[i].Path, req.Temp), files[i].Path) != nil {
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

// stage writes one staged file at p with permission bits mode (raw, with
// the setuid, setgid and sticky bits) and mtime, in as few system calls as
// it can: open, write, utimensat, close, and a fchmod only when the umask
// would change mode.
func stage(p string, data []byte, mode uint32, mtime syscall.Timespec) (int, error) {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode&0o777)
	if err != nil {
		return ExitStage, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer func() {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}()
	for rest := data; len(rest) > 0; {
		k, err := syscall.Write(fd, rest)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ExitStage, &os.PathError{Op: "write", Path: p, Err: err}
		}
		rest = rest[k:]
	}
	if mode&0o7777 != mode&0o777&^umask() {
		// The staged file is ours and new: a chmod failing is the mode
		// not kept (BulkRenameShell's pm_apply).
		if err := syscall.Fchmod(fd, mode&0o7777); err != nil {
			return exitBulkMode, &os.PathError{Op: "chmod", Path: p, Err: err}
		}
	}
	ts := [2]syscall.Timespec{{Nsec: utimeNow}, mtime}
	if _, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return ExitStage, &os.PathError{Op: "utimensat", Path: p, Err: e}
	}
	err = syscall.Close(fd)
	fd = -1
	if err != nil {
		return ExitStage, &os.PathError{Op: "close", Path: p, Err: err}
	}
	return 0, nil
}

// utimeNow is UTIME_NOW: utimensat sets that time to the current time.
const utimeNow = (1 << 30) - 1

var umaskOnce struct {
	sync.Once
	mask uint32
}

// umask returns the process's umask, read once from /proc/self/status
// (umask(2) cannot read it without setting it, which would race the
// commands the agent forks); 0o777 when unknown, so every staged file
// gets its chmod.
func umask() uint32 {
	umaskOnce.Do(func() {
		umaskOnce.mask = 0o777
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					umaskOnce.mask = uint32(m)
				}
			}
		}
	})
	return umaskOnce.mask
}

// prepare is BulkPrepareShell: it returns how many targets are ready, the
// fault code and line of the first that is not (0 and "" when all are),
// and each ready target's staged mode: its permission bits when it is a
// regular file, else 0644. A target in a directory already checked costs
// one lstat.
func prepare(files []WriteFile) (n, code int, fault string, modes []uint32) {
	dirs := map[string]*syscall.Stat_t{} // checked directories: their stat
	modes = make([]uint32, 0, len(files))
	for i, f := range files {
		t := f.Path
		d := path.Dir(t)
		c := 0
		var st syscall.Stat_t
		there := syscall.Lstat(t, &st) == nil
		if ds := dirs[d]; ds != nil {
			// The directory passed already: only the target can fault.
			switch {
			case !there:
			case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
				c = exitPathIsDirectory
			case st.Mode&syscall.S_IFMT == syscall.S_IFLNK && isDir(t):
				c = exitPathIsDirectory
			case !replaceableIn(ds, t, &st):
				c = exitPathNotReplaceable
			}
		} else if c = pathFault(t); c == 0 {
			if !isDir(d) && os.MkdirAll(d, 0o777) != nil {
				if c = pathFault(t); c == 0 {
					c = exitPathNotWritable
				}
			}
			if c == 0 {
				ds := new(syscall.Stat_t)
				if err := syscall.Stat(d, ds); err != nil {
					c = exitPathNotWritable
				}
				dirs[d] = ds
			}
		}
		if c != 0 {
			return i, c, "stockade: fault " + strconv.Itoa(i) + " " + t + "\n", modes
		}
		mode := uint32(0o644)
		if there && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			mode = st.Mode & 0o7777
		}
		modes = append(modes, mode)
	}
	return len(files), 0, "", modes
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
	var ds, ls syscall.Stat_t
	if syscall.Stat(path.Dir(p), &ds) != nil {
		return true
	}
	if syscall.Lstat(p, &ls) != nil {
		return true
	}
	return replaceableIn(&ds, p, &ls)
}

// replaceableIn is replaceable with the stat of p's directory and the
// lstat of p known.
func replaceableIn(ds *syscall.Stat_t, p string, ls *syscall.Stat_t) bool {
	if ds.Mode&syscall.S_ISVTX == 0 {
		return true
	}
	uid := uint32(os.Geteuid())
	if ds.Uid == uid {
		return true
	}
	ps := ls
	if ls.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		ps = new(syscall.Stat_t)
		if syscall.Stat(p, ps) != nil {
			return false // a dangling link of another user's
		}
	}
	return ps.Uid == uid
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
