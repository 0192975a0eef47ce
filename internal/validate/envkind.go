package validate

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/stockade/stockade/internal/container"
	"github.com/stockade/stockade/internal/toolchain"

	"github.com/stockade/stockade/internal/testjson"
)

// Finding kinds for failures the sandbox's environment causes where a
// developer's machine would not: the module is not wrong, its build or
// tests need something the sandbox does not give. Naming them keeps a
// report from presenting them as plain build or test failures.
const (
	// KindMissingCHeader: the C compiler did not find a header (the
	// image has gcc and libc; a library's -dev package is not there).
	KindMissingCHeader = "missing_c_header"
	// KindMissingCLibrary: the linker did not find a library (-lname).
	KindMissingCLibrary = "missing_c_library"
	// KindWritesReadOnly: a test wrote where the sandbox is read-only.
	// Its working tree is a writable copy and /tmp is its $HOME, so this
	// is a write elsewhere: into the module cache (read-only at home too,
	// by permission) or a system directory a developer's machine may let
	// it write, such as /var/tmp.
	KindWritesReadOnly = "writes_read_only"
	// KindNeedsNetwork: a test reached for the network; the execute
	// profile has none.
	KindNeedsNetwork = "needs_network"
	// KindMissingProgram: a test ran a program the image does not have
	// (it holds Go, busybox's applets and, with cgo, the C toolchain).
	KindMissingProgram = "missing_program"
	// KindNeedsHostService: a test reached for a service at a fixed local
	// address (a syslog, a database, the Docker daemon), which the
	// sandbox never runs: on loopback at a port below 1024 (which the
	// sandbox's user cannot listen on, so no test serves it to itself) or
	// a well-known service port, or a Unix socket outside the working
	// tree and the test's temporary directories. Whether the developer's
	// machine runs that service, and so whether the test passes there,
	// cannot be told from here; the finding names what it reached for.
	KindNeedsHostService = "needs_host_service"
)

// wellKnownPorts are service ports at or above 1024 a test dials on
// loopback only to use a service it did not start: databases, caches,
// brokers, daemons.
var wellKnownPorts = map[int]bool{
	1433: true, 1521: true, 2181: true, 2375: true, 2376: true, 2379: true,
	3306: true, 4222: true, 5432: true, 5672: true, 6379: true, 8086: true,
	8125: true, 8200: true, 8500: true, 9042: true, 9092: true, 9200: true,
	11211: true, 26257: true, 27017: true,
}

var (
	// gcc: "fatal error: sqlite3.h: No such file or directory".
	missingHeaderRE = regexp.MustCompile(`fatal error: ([^:\s]+\.h[a-z]*): No such file or directory`)
	// ld: "cannot find -lsqlite3" (binutils 2.40: ": No such file or
	// directory" follows).
	missingLibraryRE = regexp.MustCompile(`cannot find -l([A-Za-z0-9_.+-]+)`)
	// The kernel's EROFS, as Go prints it.
	readOnlyRE = regexp.MustCompile(`read-only file system`)
	// A refused or missing local endpoint, as net prints it: a dial, or
	// a write or read on a connected UDP socket the kernel refused.
	loopbackRefusedRE = regexp.MustCompile(`(?:dial|write|read) (?:tcp|udp)[46]? (?:[^ ]+->)?(127\.[0-9.]+|\[::1\]|localhost):([0-9]+): (?:connect|write|read): connection refused`)
	unixMissingRE     = regexp.MustCompile(`dial unix(?:gram|packet)? (/[^ :]+): connect: (?:no such file or directory|connection refused)`)
	// os/exec's ErrNotFound, as it prints it.
	missingProgramRE = regexp.MustCompile(`exec: "[^"]+": executable file not found in \$PATH`)
	// What a dial or lookup says in a network namespace with only
	// loopback: no route, or no resolver (the engine's copy of the host's
	// nameservers is unreachable; with none, Go asks loopback's port 53,
	// where nothing listens).
	noNetworkRE = regexp.MustCompile(`(dial (tcp|udp)[46]? [^:]+:[0-9]+: connect: network is unreachable|lookup [^ ]+( on [^ ]+)?: (no such host|server misbehaving|dial udp[^:]*:[0-9]+: connect: network is unreachable|read udp [^ ]+->(127\.0\.0\.1|\[::1\]):53: read: connection refused))`)
)

// envKind returns f with its kind set to one of the environment kinds
// above when its message or output is the C compiler's, the linker's or
// the kernel's complaint they name, and its key recomputed; any other
// finding is returned as it is.
func envKind(f testjson.Finding) testjson.Finding {
	text := f.Message + "\n" + f.Detail
	switch {
	case missingHeaderRE.MatchString(f.Message):
		f.Kind = KindMissingCHeader
	case missingLibraryRE.MatchString(f.Message):
		f.Kind = KindMissingCLibrary
	case (f.Kind == testjson.KindTest || f.Kind == testjson.KindPackage) && readOnlyRE.MatchString(text):
		f.Kind = KindWritesReadOnly
	case (f.Kind == testjson.KindTest || f.Kind == testjson.KindPackage) && noNetworkRE.MatchString(text):
		f.Kind = KindNeedsNetwork
	case (f.Kind == testjson.KindTest || f.Kind == testjson.KindPackage) && missingProgramRE.MatchString(text):
		f.Kind = KindMissingProgram
	case (f.Kind == testjson.KindTest || f.Kind == testjson.KindPackage) && needsHostService(text):
		f.Kind = KindNeedsHostService
	default:
		return f
	}
	f.Key = testjson.Key(f)
	return f
}

// needsHostService reports whether text shows a dial to a local service
// the sandbox does not run (KindNeedsHostService).
func needsHostService(text string) bool {
	for _, m := range loopbackRefusedRE.FindAllStringSubmatch(text, -1) {
		if port, err := strconv.Atoi(m[2]); err == nil && (port > 0 && port < 1024 || wellKnownPorts[port]) {
			return true
		}
	}
	for _, m := range unixMissingRE.FindAllStringSubmatch(text, -1) {
		p := path.Clean(m[1])
		// The working tree and the test's own temporary files are the
		// test's; /tmp/.s.PGSQL.<port> is PostgreSQL's socket.
		if container.Within(toolchain.SourceDir, p) || container.Within(toolchain.TmpDir, p) && !strings.HasPrefix(p, "/tmp/.s.PGSQL.") {
			continue
		}
		return true
	}
	return false
}
