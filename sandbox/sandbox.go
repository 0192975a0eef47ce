// Package sandbox is the API platforms use to give each session its own
// hardened container: a Provider provisions, finds, exports and reaps
// sandboxes, and a Sandbox runs commands and reads and writes files in one.
// Backends (sandbox/docker today) implement it; sandbox/sandboxtest is the
// contract every backend must pass.
//
// # Threat model
//
// Everything that runs inside a sandbox is hostile: it may fork without end,
// allocate without end, write gigabytes to its output, detach children with
// setsid, plant symlinks and odd files where the platform will later read or
// write, and race the platform's own operations. The platform and the engine
// are trusted. A sandbox must not be able to reach the host, another sandbox,
// or the network beyond what Spec.Networking grants, and whatever it does
// must stay within its limits and come back to the caller as data (an exit
// code, a timeout, a truncation), never as a failure of the caller's process.
//
// # Zero values and defaults
//
// The zero value of every option is the most locked-down setting. A zero
// Spec.Networking is NetNone (loopback only); an empty Spec.Workdir is
// DefaultWorkdir; a zero Spec.Hardening means the defaults HardeningFromEnv
// returns for an empty environment: every capability dropped, no new
// privileges, the unprivileged user 65534, a read-only root whose only
// writable places are WritablePaths, DefaultCPUMillis, DefaultPidsLimit, a
// 1 GiB memory limit and DefaultEphemeralStorageBytes of writable storage
// (at most half the memory limit where the backend keeps files in memory). In a non-zero Hardening a zero limit still means its
// default, but ReadOnlyRootfs is taken as written (see Hardening).
//
// # Units
//
// Sizes are bytes, CPU is thousandths of a CPU (millis), durations are
// time.Duration. Paths are absolute, clean, slash-separated paths inside the
// sandbox; anything else is refused before the backend is called.
//
// # Exec
//
// Exec runs a command with /bin/sh -c as the sandbox user. What the command
// did (exit code, output up to MaxOutputBytes per stream with Truncated, a
// timeout that kills its whole process tree, the out-of-memory verdict) is
// data in the ExecResult; an error means the backend failed. The method's
// documentation gives the detail.
//
// # Files
//
// ReadFile and ReadFileStream read regular files (following symlinks inside
// the sandbox) of at most MaxFileBytes or the caller's bound, as the
// sandbox user on every path: a file the user cannot read is an error,
// never read by the engine as root. WriteFile,
// WriteFileStream and WriteFiles land each file atomically: the bytes go to
// a temporary file named by TempName in a staging directory beside the
// target, then one rename replaces the target. Every byte is written by
// the sandbox user, whatever path the backend takes (so a symlink the
// session swaps in cannot carry a write out of the writable places).
// Parents are created; an
// existing regular file keeps its mode; a new one, or one that replaces a
// symlink (the link is replaced, not followed), gets 0644. The scripts the
// backend runs in the container for this are the …Shell constants; they
// need a POSIX sh, mkdir, mv (with -T), rm, chmod, stat, grep, sed, head,
// tail, tr, tar and xargs with -0 (BusyBox is enough).
//
// ListDir, Stat, MakeDir, Remove and Rename run as the sandbox user too,
// one script each (FileScripts, shared by the backends), so the kernel
// holds them to what that user may do: a path through a symlink that leads
// out of the writable places reaches only what the user could reach there
// itself, and is refused as a write is. What changes the file system
// follows the writes' rules (the path in a writable place, not the place
// itself, not a temporary's name) and errors. Listings are bounded
// (MaxDirEntries), entries are described and never followed, and
// directories are removed only when asked to be (RemoveOptions).
//
// # What a session can influence
//
// Every byte that comes out of a sandbox through a stream the session's
// processes can reach (a command's output, a file's content, the names and
// descriptions ListDir and Stat return, an export's members) is the
// session's to choose; the exit code, TimedOut, Truncated, the
// out-of-memory verdict, a read's size and the shape of an export are the
// backend's. docs/design/session-output.md gives the reasoning.
package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/stockade/stockade/domain"
	"github.com/stockade/stockade/internal/defaults"
)

// Provider creates and manages sandboxes, one per session.
type Provider interface {
	// Provision returns the session's sandbox, creating and starting it if
	// needed. It is idempotent: the same SessionID yields the same sandbox,
	// started if stopped and adopted if running. An existing sandbox whose
	// image, workdir, networking or storage bound differ from spec is
	// ErrSpecMismatch, and nothing is changed or removed. Concurrent calls
	// for one session converge on one sandbox.
	Provision(ctx context.Context, spec Spec) (Sandbox, error)
	// Attach returns a running sandbox's handle without creating, starting
	// or changing anything; anything else is ErrNotFound.
	Attach(ctx context.Context, sessionID domain.ID) (Sandbox, error)
	// Export streams an uncompressed tar of root in the session's sandbox,
	// running or stopped. Members sit under one top-level directory named
	// after root's base name; symlinks are archived as links, never
	// followed. A missing root is ErrFileNotExist, a missing sandbox
	// ErrNotFound. Every member is checked before it is passed on
	// (CheckArchive): reading fails with ErrBadArchive at the first that
	// breaks this shape, which the caller must take for a failed export.
	// The caller closes the reader.
	Export(ctx context.Context, sessionID domain.ID, root string) (io.ReadCloser, error)
	// Owned lists the sessions that have a sandbox (running or stopped)
	// belonging to this provider's owner, sorted.
	Owned(ctx context.Context) ([]domain.ID, error)
	// Reap revokes the session's gate token (when a revoker is known), then
	// removes its sandbox, its gate and the gate's network (when gated) and
	// its volumes, and waits until they are gone. Reaping a session without
	// a sandbox succeeds.
	Reap(ctx context.Context, sessionID domain.ID) error
}

// Sandbox is one session's running container. Its methods are safe for
// concurrent use.
type Sandbox interface {
	// ID returns the backend's identifier of the sandbox (the container ID).
	ID() string
	// Exec runs ExecRequest.Command with /bin/sh -c in the workdir, as the
	// sandbox user. What the command did is the ExecResult; an error means
	// the backend failed or ctx ended (the command is killed either way). A command longer than MaxCommandBytes is
	// ErrCommandTooLarge; one the sandbox could not start (its pids limit
	// reached by its own processes) is ErrCommandNotStarted; one whose sandbox
	// was reaped or stopped under it is ErrNotFound: none of them an exit
	// code. Each of stdout and stderr keeps at most MaxOutputBytes; the
	// rest is read and discarded (so the command never blocks on a full pipe)
	// and Truncated says so. At Timeout, or when ctx ends, the backend kills the
	// whole process tree the command started, including children that
	// double-fork or setsid away, and the sandbox stays usable. A command killed
	// by the kernel for exceeding the memory limit has ExitCode 137 and Stderr
	// ending with the line "stockade: killed: out of memory"; the result has no
	// separate field for it, so callers match that line. The verdict is the
	// backend's, from the sandbox's memory cgroup after the command ended,
	// never from what the command printed: a command's own copy of the line at
	// the end of its stderr is removed. Whether background processes a
	// command leaves behind outlive its normal end is up to the engine;
	// callers must not rely on either. While they live they count against the pids and
	// memory limits.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// ReadFile returns the content of the regular file at path, at most
	// MaxFileBytes (else ErrFileTooLarge). A directory is ErrIsDirectory, a
	// missing file ErrFileNotExist, a device, socket or FIFO
	// ErrNotRegularFile.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// ReadFileStream is ReadFile as a stream: it returns the file's exact
	// size and a reader of exactly that many bytes. A file larger than
	// maxBytes (MaxFileBytes when maxBytes <= 0) is ErrFileTooLarge.
	ReadFileStream(ctx context.Context, path string, maxBytes int64) (io.ReadCloser, int64, error)
	// WriteFile atomically replaces or creates the file at path with data.
	// It reports ErrIsDirectory, ErrNotDirectory (a parent is not a
	// directory), ErrNotReplaceable, or a *PathNotWritableError matching
	// ErrNotWritable.
	WriteFile(ctx context.Context, path string, data []byte) error
	// WriteFileStream is WriteFile with size bytes read from src. It calls
	// CheckWriteSize before reading anything, and lands nothing when src is
	// shorter or longer than size.
	WriteFileStream(ctx context.Context, path string, src io.Reader, size int64) error
	// WriteFiles writes files in order with a constant number of engine
	// round trips per run of consecutive files in one writable place. Each
	// file lands atomically; the first failure stops every file after it
	// in the list, and files already landed stay.
	WriteFiles(ctx context.Context, files []FileWrite) error
	// ListDir returns the entries of the directory at path (a symlink to
	// one is followed), sorted by name, without "." and "..", each
	// described and not followed (FileInfo). A directory of more than
	// MaxDirEntries entries is ErrTooManyEntries; a missing one
	// ErrFileNotExist, anything else ErrNotDirectory, one the sandbox user
	// cannot read ErrNotReadable.
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	// Stat describes the file at path, not following it when it is a
	// symlink: what ListDir reports for it in its directory. A missing
	// path is ErrFileNotExist, one below a file ErrNotDirectory, one
	// below a directory the user cannot search ErrNotReadable.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// MakeDir makes the directory at path and its missing parents (mode
	// 0755, the sandbox user's), like mkdir -p: an existing directory is
	// success. It has the writes' rules and errors: a path outside the
	// writable places, or one the user cannot write, is a
	// *PathNotWritableError; a path that is (or is below) something other
	// than a directory is ErrNotDirectory.
	MakeDir(ctx context.Context, path string) error
	// Remove removes the file at path: a symlink itself, never what it
	// points to, and a directory with everything in it only with
	// opts.Recursive (else ErrIsDirectory). A missing path is
	// ErrFileNotExist; a writable place itself, or another user's file in a
	// sticky directory, is ErrNotReplaceable; the rest of the writes'
	// rules hold. A recursive removal that fails partway (something inside
	// the user cannot remove: a *PathNotWritableError) leaves what it did
	// not remove.
	Remove(ctx context.Context, path string, opts RemoveOptions) error
	// Rename moves the file at from to to with one rename(2): atomic,
	// never a copy. Both must be in the same writable place, on one file
	// system (else ErrCrossDevice, nothing moved); to's missing parents are
	// created; an existing file or symlink at to is replaced, never
	// followed; an existing directory (or symlink to one) at to is
	// ErrIsDirectory, and a directory replaces nothing (ErrNotDirectory).
	// A missing from is ErrFileNotExist; the rest of the writes' rules
	// hold for both paths.
	Rename(ctx context.Context, from, to string) error
	// Destroy removes the sandbox and its volumes. It is idempotent.
	Destroy(ctx context.Context) error
}

// Spec describes a session's sandbox.
type Spec struct {
	// SessionID names the session; see domain.ID.Validate. Required.
	SessionID domain.ID
	// Image is the image reference or ID; it must already be present (the
	// backend never pulls). Required.
	Image string
	// Networking is the network the sandbox gets; the zero value is
	// NetNone. NetLimited needs Gate.
	Networking domain.Networking
	// Workdir is the absolute, clean directory commands start in and the
	// main writable place; "" means DefaultWorkdir. It may not be "/".
	Workdir string
	// Env is the environment of every command, in addition to what the
	// image sets and what the backend must set (PATH, HOME and HOSTNAME
	// when nothing else sets them; container=stockade and TERM=dumb unless
	// Env names them, so that no engine chooses them). The host's
	// environment never leaks in.
	// Names must pass ValidEnvName and not be ReservedEnvName; values may
	// not hold NUL. See ValidateEnv.
	Env map[string]string
	// Hardening is the sandbox's confinement; see the package
	// documentation for its zero value.
	Hardening Hardening
	// Runtime names the engine's OCI runtime the sandbox runs under: the
	// platform's choice, per session, of how much it trusts the code.
	// RuntimeRunsc (gVisor) puts a kernel of gVisor's own between the
	// session's processes and the host's, which they never call directly.
	// "" means the backend's default (for Docker, its Config.Runtime, else
	// the engine's default, runc). A runtime the backend or engine does not
	// offer is ErrRuntimeUnavailable: a backend never runs the sandbox
	// under another one instead. It is part of what must match for
	// Provision to adopt an existing sandbox (ErrSpecMismatch).
	Runtime string
	// Gate, when set, routes NetLimited egress through the egress gate.
	Gate *GateSpec
	// GateTokenRevoker is called by Reap before removal to revoke the
	// session's gate token; nil means there is nothing to revoke.
	GateTokenRevoker GateTokenRevoker
}

// ExecRequest is a command to run in a sandbox.
type ExecRequest struct {
	// Command is a /bin/sh -c script.
	Command string
	// Timeout bounds the command's wall-clock time; zero or negative means
	// no bound other than ctx.
	Timeout time.Duration
}

// ExecResult is what a command did. All of it is data about the untrusted
// code, never an error of the caller's.
type ExecResult struct {
	// ExitCode is the command's exit status: 128+n when killed by signal
	// n, so 137 after a timeout kill or an out-of-memory kill.
	ExitCode int
	// Stdout and Stderr hold at most MaxOutputBytes each.
	Stdout string
	Stderr string
	// TimedOut reports that the command was killed at its Timeout.
	TimedOut bool
	// Truncated reports that stdout or stderr passed MaxOutputBytes.
	Truncated bool
}

// FileWrite is one file of WriteFiles.
type FileWrite struct {
	Path string // absolute and clean
	Data []byte // at most MaxFileBytes
}

// Budgets and defaults.
const (
	// DefaultWorkdir is the workdir of a Spec that names none.
	DefaultWorkdir = "/workspace"
	// MaxFileBytes bounds one file read or written through the file API, in
	// bytes: 16 MiB. Larger transfers belong in Export or in an Exec.
	MaxFileBytes = 16 << 20
	// MaxOutputBytes bounds what Exec keeps of each of stdout and stderr,
	// in bytes: 1 MiB.
	MaxOutputBytes = 1 << 20
	// MaxCommandBytes bounds ExecRequest.Command, in bytes: the kernel's
	// bound on one argument of a program (MAX_ARG_STRLEN, 128 KiB with
	// its terminating NUL), since the command is /bin/sh's argument. A
	// longer one is ErrCommandTooLarge, and nothing runs; a larger script
	// belongs in a file (WriteFile) that the command runs.
	MaxCommandBytes = 128<<10 - 1
	// DefaultCPUMillis is the CPU limit of a Hardening that sets none, in
	// thousandths of a CPU: one CPU (defaults.SessionNanoCPUs, the one
	// home of Stockade's limits).
	DefaultCPUMillis = defaults.SessionNanoCPUs / 1_000_000
	// DefaultPidsLimit is the process (and thread) limit of a Hardening
	// that sets none (defaults.SessionPidsLimit). It is what stops a fork
	// bomb.
	DefaultPidsLimit = defaults.SessionPidsLimit
	// RuntimeRunsc is gVisor's runtime, the name scripts/runsc-up
	// registers it under with Docker.
	RuntimeRunsc = domain.RuntimeRunsc
)

// defaultMemoryBytes is the memory limit of a Hardening that sets none, in
// bytes, without swap.
const defaultMemoryBytes = defaults.SessionMemoryBytes

// defaultRunAsUser is the uid (and gid) commands run as when
// Hardening.RunAsUser is nil: "nobody", which owns nothing in any image.
const defaultRunAsUser = defaults.UID

// Errors callers branch on. Backends wrap them with the path or session.
var (
	ErrFileNotExist   = errors.New("sandbox: no such file")
	ErrFileTooLarge   = errors.New("sandbox: file too large")
	ErrIsDirectory    = errors.New("sandbox: path is a directory")
	ErrNotFound       = errors.New("sandbox: no such sandbox")
	ErrNotRegularFile = errors.New("sandbox: not a regular file")
	ErrNotDirectory   = errors.New("sandbox: path is not a directory")
	ErrNotReplaceable = errors.New("sandbox: target cannot be replaced")
	ErrNotWritable    = errors.New("sandbox: target cannot be written")
	ErrSpecMismatch   = errors.New("sandbox: existing sandbox does not match the requested spec")
	ErrSizeNotALength = errors.New("sandbox: size is not a length")
	ErrInvalidEnv     = errors.New("sandbox: invalid environment")
	// ErrRuntimeUnavailable: Spec.Runtime (or the backend's default) is
	// not a runtime the engine offers, or not one the backend can use;
	// nothing was made. Register it (scripts/runsc-up) or ask another.
	ErrRuntimeUnavailable = domain.ErrRuntimeUnavailable
	// ErrCommandTooLarge: ExecRequest.Command is longer than
	// MaxCommandBytes; nothing ran.
	ErrCommandTooLarge = errors.New("sandbox: command too large")
	// ErrCommandNotStarted: the sandbox could not start the command (its
	// pids limit was reached: no process could be forked for it); nothing
	// of it ran. The sandbox's own processes hold the pids: a later Exec
	// may succeed once they end.
	ErrCommandNotStarted = errors.New("sandbox: the command could not be started")
	// ErrUnsupportedImage: the image asks for what a sandbox cannot give
	// safely: a VOLUME outside the writable places, which the engine
	// would make a writable place of its own, on its disk, outside every
	// bound. Provision made nothing that stays.
	ErrUnsupportedImage = errors.New("sandbox: image not supported")
	// ErrNetworkingUnsupported: the backend cannot give Spec.Networking as
	// asked on this engine (NetLimited where the gate's network cannot be
	// isolated, NetUnrestricted where sandboxes could reach each other)
	// and refuses rather than widen or narrow it.
	ErrNetworkingUnsupported = errors.New("sandbox: networking mode not supported by this backend")
	// ErrNoCapacity: the backend has no room for another sandbox (on
	// Kubernetes, the scheduler found no node for the session's pod within
	// the provider's schedule timeout). Provision made nothing that stays;
	// a later call may succeed once sessions are reaped or nodes added.
	ErrNoCapacity = errors.New("sandbox: no capacity for another sandbox")
)

// PathNotWritableError reports a write to a place the sandbox cannot write:
// the read-only root, a read-only mount, or a directory without write
// permission for the sandbox user. It matches ErrNotWritable.
type PathNotWritableError struct {
	Path   string // the path the caller asked to write
	Reason string // why, for people: "read-only root filesystem", ...
}

func (e *PathNotWritableError) Error() string {
	return fmt.Sprintf("sandbox: cannot write %s: %s", e.Path, e.Reason)
}

// Is reports whether target is ErrNotWritable.
func (e *PathNotWritableError) Is(target error) bool { return target == ErrNotWritable }

// CheckWriteSize reports whether size can be written: a negative size is
// ErrSizeNotALength and one above MaxFileBytes is ErrFileTooLarge.
func CheckWriteSize(size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: %d", ErrSizeNotALength, size)
	}
	if size > MaxFileBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrFileTooLarge, size, MaxFileBytes)
	}
	return nil
}

// CheckCommand reports whether cmd can be an ExecRequest.Command: one
// longer than MaxCommandBytes is ErrCommandTooLarge (the kernel would
// refuse it as /bin/sh's argument, and the shell's exit code would pass
// for the command's); one holding a NUL byte cannot be an argument at all.
func CheckCommand(cmd string) error {
	if strings.IndexByte(cmd, 0) >= 0 {
		return fmt.Errorf("sandbox: the command holds a NUL byte")
	}
	if len(cmd) > MaxCommandBytes {
		return fmt.Errorf("%w: %d bytes, at most %d (run a longer script from a file)", ErrCommandTooLarge, len(cmd), MaxCommandBytes)
	}
	return nil
}

// Environment limits.
const (
	maxEnvVars      = 256      // variables in Spec.Env
	maxEnvNameBytes = 256      // bytes in one name
	maxEnvBytes     = 64 << 10 // bytes in all names and values together
)

// ValidEnvName reports whether k is a portable environment variable name:
// a letter or underscore followed by letters, digits and underscores, at
// most 256 bytes. Such a name cannot hold '=' or NUL.
func ValidEnvName(k string) bool {
	if k == "" || len(k) > maxEnvNameBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ReservedEnvName reports whether k belongs to the backend, so a Spec may not
// set it: every name starting with STOCKADE_, which the backend's scripts
// use, and the proxy variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
// NO_PROXY, in any case), which the egress gate owns. Case is ignored.
func ReservedEnvName(k string) bool {
	u := strings.ToUpper(k)
	if strings.HasPrefix(u, "STOCKADE_") {
		return true
	}
	switch u {
	case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
		return true
	}
	return false
}

// ValidateEnv checks every name and value of env: names must be ValidEnvName
// and not ReservedEnvName, values may not hold NUL, and env may hold at most
// 256 variables and 64 KiB in all; a violation matches ErrInvalidEnv. Names
// are checked in sorted order so the error is stable.
func ValidateEnv(env map[string]string) error {
	if len(env) > maxEnvVars {
		return fmt.Errorf("%w: %d environment variables, at most %d", ErrInvalidEnv, len(env), maxEnvVars)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	total := 0
	for _, k := range keys {
		v := env[k]
		switch {
		case !ValidEnvName(k):
			return fmt.Errorf("%w: name %q: want a letter or '_' then letters, digits or '_'", ErrInvalidEnv, k)
		case ReservedEnvName(k):
			return fmt.Errorf("%w: name %q is reserved for the backend", ErrInvalidEnv, k)
		case strings.IndexByte(v, 0) >= 0:
			return fmt.Errorf("%w: the value of %q holds a NUL byte", ErrInvalidEnv, k)
		}
		total += len(k) + 1 + len(v)
	}
	if total > maxEnvBytes {
		return fmt.Errorf("%w: %d bytes in all, at most %d", ErrInvalidEnv, total, maxEnvBytes)
	}
	return nil
}

// TempName returns a fresh name for a temporary file or directory: TempPrefix
// and 16 random hex digits. Scripts and LeftBehind recognise temporaries by
// the prefix.
func TempName() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return TempPrefix + hex.EncodeToString(b[:])
}

// WritablePaths returns the places a sandbox with the given workdir may
// write, sorted: the workdir ("" means DefaultWorkdir) and /tmp, once each.
// Backends mount each as a writable volume of its own under the read-only
// root, owned by the sandbox user, so the file API reaches them too. A
// workdir inside /tmp is a place of its own, mounted over /tmp's: a
// directory the engine made there for it would be root's, which the
// sandbox user could not write.
func WritablePaths(workdir string) []string {
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	workdir = path.Clean("/" + workdir)
	out := []string{workdir}
	if workdir != "/tmp" {
		out = append(out, "/tmp")
	}
	sort.Strings(out)
	return out
}

// CheckPath is the rule every path inside a sandbox must pass before it
// reaches a backend, the engine or a script: absolute, clean (path.Clean
// leaves it unchanged), not "/" itself, and free of NUL and every other
// control character (the scripts read paths one a line). It returns nil or
// an error saying which part of the rule p breaks.
func CheckPath(p string) error {
	if p == "" || p[0] != '/' || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("sandbox: path %q is not an absolute clean path below /", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return fmt.Errorf("sandbox: path %q holds a control character", p)
		}
	}
	return nil
}
