package sandbox

//go:generate go run gen_scripts.go

// Exit codes of the …Shell scripts. They sit above the codes commands
// commonly use and below 126, where the shell's own codes start, so a
// script's fault can never be mistaken for a signal death.
const (
	// ExitPathIsDirectory: the target is a directory.
	ExitPathIsDirectory = 90
	// ExitPathNotDirectory: a parent of the target is not a directory.
	ExitPathNotDirectory = 91
	// ExitPathNotReplaceable: the target exists and a rename cannot replace
	// it (another user's file in a sticky directory, or a mount point).
	ExitPathNotReplaceable = 92
	// ExitPathNotWritable: the target's directory cannot be written (the
	// read-only root, a read-only mount, missing permission).
	ExitPathNotWritable = 93
	// ExitBulkExtract: a file the archive should have delivered is missing
	// or is not a regular file; nothing was landed.
	ExitBulkExtract = 94
	// ExitBulkIncomplete: the manifest is missing or cut short, so the
	// delivery cannot be trusted; nothing was landed.
	ExitBulkIncomplete = 95
	// ExitBulkMode: a staged file could not be given its target's mode;
	// nothing was landed.
	ExitBulkMode = 96
	// ExitFileNotExist: the file (or export root) does not exist.
	ExitFileNotExist = 97
	// ExitNotRegularFile: the file is a device, socket or FIFO.
	ExitNotRegularFile = 98
	// ExitFileTooLarge: the file is larger than the bound asked.
	ExitFileTooLarge = 99
	// ExitPathNotReadable: the sandbox user cannot read the directory, or
	// cannot search one on the way to the path.
	ExitPathNotReadable = 88
	// ExitTooManyEntries: the directory holds more entries than the bound
	// asked; nothing was listed.
	ExitTooManyEntries = 87
	// ExitCrossDevice: a rename's source and target directory are on
	// different file systems, where one rename(2) cannot move it; nothing
	// moved.
	ExitCrossDevice = 86
	// ExitListChanged: an entry went away while the directory was listed.
	ExitListChanged = 85
)

// ShellStateRoot is the directory inside a sandbox reserved for the state of
// backends' in-container scripts. It lies in /tmp, one of WritablePaths, and
// belongs to the sandbox user: it is bookkeeping, not a security boundary,
// since everything in it only ever acts on the sandbox itself. (The Docker
// backend keeps nothing there: its scripts take their state as arguments,
// and bulk writes keep theirs in TempName files beside the targets.)
const ShellStateRoot = "/tmp/.stockade"

// TempPrefix starts the name of every temporary file and directory the
// backends create beside a user's files; see TempName.
const TempPrefix = ".stockade-tmp-"

// The scripts the backends run inside a sandbox live in scripts/*.sh, where
// they can be read, linted and run on the host as shell (the tests run each
// under BusyBox sh and dash); go generate copies each into zscripts.go as a
// constant (gen_scripts.go), so the …Shell scripts are constants, as in
// the first API. TestScriptsGenerated fails when zscripts.go is stale.
//
// Every script reports a fault on stderr as one line
//
//	stockade: fault INDEX PATH
//
// where INDEX counts the script's targets from zero; BulkWrite.Fault reads
// it. Scripts that diagnose paths start with scripts/lib.sh, which defines:
//
//   - sf_fault PATH returns why PATH cannot be replaced by a new file (one of
//     the Exit… codes) or 0. A missing parent is no fault (it will be
//     created) unless the nearest existing ancestor is not a directory.
//   - sf_replaceable PATH fails for an existing PATH in a sticky directory
//     that neither it nor the directory belongs to the user: rename(2)
//     cannot replace it.
//   - sf_absent PATH returns, for a PATH the user does not find, why:
//     ExitPathNotDirectory when an ancestor is not a directory (or is a
//     dangling symlink), ExitPathNotReadable when the nearest ancestor
//     that exists cannot be searched, else ExitFileNotExist.
//   - sf_report INDEX PATH writes the fault line.
//
// Every exit code a script uses other than 0 and 1 names its Exit… constant
// in a comment on its line; TestScriptExitCodes holds them to the values
// here.

// PathFaultShell diagnoses one target: run as
//
//	sh -c "$PathFaultShell" stockade PATH
//
// it exits 0 when a new file could replace PATH, else with
// ExitPathIsDirectory, ExitPathNotDirectory, ExitPathNotWritable or
// ExitPathNotReplaceable and a fault line on stderr.
const PathFaultShell = libScript + pathfaultScript

// UnreplaceableShell checks, for each PATH argument, that a rename could
// replace it: not another user's file in a sticky directory and not a mount
// point (its device differs from its directory's). It exits
// ExitPathNotReplaceable with a fault line at the first that fails, else 0.
// Backends run it to explain a rename that failed although PathFaultShell
// found nothing wrong.
const UnreplaceableShell = libScript + unreplaceableScript

// PreserveModeShell defines pm_apply MANIFEST TMP, which gives each staged
// file whose target is an existing regular file the target's permission
// bits, so a rename keeps the mode; staged files arrive with 0644, the mode
// of a new file, so only targets with another mode cost a chmod. A target
// that is a symlink is replaced by a new file, not followed, so its staged
// file keeps 0644. pm_apply fails when a chmod fails. It runs one stat
// (through xargs -0, so any number of targets and any bytes but newline in
// their names) for all targets and one chmod per distinct mode, whatever the
// number of files. BulkRenameShell includes it.
const PreserveModeShell = preservemodeScript

// BulkPrepareShell runs before an upload, with the targets as arguments in
// order. For each it checks sf_fault and creates missing parents as the
// sandbox user (so the upload never has to). At the
// first fault it stops with that fault's code and line; the targets before
// it are ready. Each directory is checked once, however many targets share
// it.
const BulkPrepareShell = libScript + bulkprepareScript

// BulkRenameShell lands a delivered bulk write: run as
//
//	sh -c "$BulkRenameShell" stockade MANIFEST DIRLIST
//
// it checks that the manifest is complete (else prints "stockade: lost-list"
// and exits ExitBulkIncomplete) and that every staged file arrived (else
// ExitBulkExtract), in both cases landing nothing. If a staged file cannot
// be given its target's mode it exits ExitBulkMode, landing nothing. Its cost in processes
// does not grow with the number of files. It then preserves modes
// (PreserveModeShell) and renames the staged files over their targets, one
// mv per staging directory (so per target directory, in the order they first
// appear, whatever the order of the files), and finally removes the staging
// directories and the bookkeeping. A rename that fails (only a race with the
// sandbox's own processes can make one fail after BulkPrepareShell's checks)
// stops the rest with the fault of the first target, in manifest order, that
// did not land; targets later in the manifest but in a directory already
// done may have landed.
const BulkRenameShell = libScript + PreserveModeShell + bulkrenameScript

// BulkDiscardShell removes what a bulk write delivered and did not land: run
// with the paths of BulkWrite.Delivered as arguments, it removes each (with
// whatever is inside) and prints "left PATH" for each that is still there,
// which BulkWrite.LeftBehind reads. It always exits 0.
const BulkDiscardShell = bulkdiscardScript

// ReadFileShell reads one file for a backend whose engine has no file API
// (sandbox/kubernetes): run as
//
//	sh -c "$ReadFileShell" stockade PATH MAXBYTES
//
// it exits ExitPathIsDirectory, ExitFileNotExist or ExitNotRegularFile, or
// prints the file's size in bytes on a line and then, unless the size is
// above MAXBYTES (exit ExitFileTooLarge), the file's bytes. Symlinks are
// followed inside the sandbox. The caller checks that exactly that many
// bytes came: a file that changed size while read is an error.
const ReadFileShell = readfileScript

// ExportShell writes the tar Provider.Export promises for a backend whose
// engine has no archive API: run as
//
//	sh -c "$ExportShell" stockade ROOT
//
// it writes an uncompressed tar of ROOT to stdout with every member under
// ROOT's base name and symlinks (ROOT included) archived as links, or
// exits ExitFileNotExist, having written nothing, when ROOT is missing.
const ExportShell = exportScript

// StatShell describes one path for Sandbox.Stat: run as
//
//	sh -c "$StatShell" stockade PATH
//
// it prints one line, "MODE SIZE MTIME": lstat(2)'s raw mode in hex, its
// size in bytes and its modification time in seconds since the epoch (a
// symlink is described, not followed), or exits with sf_absent's code and a
// fault line.
const StatShell = libScript + statScript

// ListShell lists a directory for Sandbox.ListDir: run as
//
//	sh -c "$ListShell" stockade DIR MAX
//
// it exits ExitPathNotDirectory, ExitPathNotReadable or sf_absent's code
// for a DIR it cannot list (DIR itself is followed when a symlink), and
// ExitTooManyEntries, with nothing on stdout, when DIR holds more than MAX
// entries. Otherwise it writes, for each of its three globs (names, names
// starting with a dot, names starting with two), a block: the names, each
// followed by a NUL, an empty name (one more NUL), then one StatShell line
// per name, in the same order. Names may hold any byte but NUL and slash,
// newlines included. An entry that goes away between the glob and its stat
// is ExitListChanged: the caller lists again. ParseListing reads the
// output.
const ListShell = libScript + listScript

// MakeDirShell makes a directory and its missing parents for
// Sandbox.MakeDir: run as
//
//	sh -c "$MakeDirShell" stockade PATH
//
// it exits 0 when PATH is (or now is) a directory, symlinks followed, else
// ExitPathNotDirectory (PATH or an ancestor is something else) or
// ExitPathNotWritable, with a fault line.
const MakeDirShell = libScript + makedirScript

// RemoveShell removes one path for Sandbox.Remove: run as
//
//	sh -c "$RemoveShell" stockade PATH r|f
//
// it removes PATH (a symlink itself, never what it points to), a directory
// with everything in it only with r (else ExitPathIsDirectory), and exits 0
// once PATH is gone; sf_absent's code for a PATH not there;
// ExitPathNotReplaceable (another user's file in a sticky directory) or
// ExitPathNotWritable when PATH, or something in it, stayed.
const RemoveShell = libScript + removeScript

// RenameShell moves one path for Sandbox.Rename: run as
//
//	sh -c "$RenameShell" stockade FROM TO
//
// it checks FROM (there; movable: sf_replaceable; its directory
// writable) and TO as a write's target (sf_fault: an existing directory is
// ExitPathIsDirectory; a directory FROM cannot replace anything but a
// missing TO: ExitPathNotDirectory), creates TO's missing parents, checks
// that FROM and TO's directory are on one file system (else
// ExitCrossDevice: mv would copy) and renames with one mv -T, that is one
// rename(2). Fault lines name FROM as index 0 and TO as index 1.
const RenameShell = libScript + renameScript
