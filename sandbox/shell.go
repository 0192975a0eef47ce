package sandbox

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

// Every script reports a fault on stderr as one line
//
//	stockade: fault INDEX PATH
//
// where INDEX counts the script's targets from zero; BulkWrite.Fault reads
// it. The functions below are shared by the scripts:
//
//   - sf_fault PATH returns why PATH cannot be replaced by a new file (one of
//     the Exit… codes) or 0. A missing parent is no fault (it will be
//     created) unless the nearest existing ancestor is not a directory.
//   - sf_replaceable PATH fails for an existing PATH in a sticky directory
//     that neither it nor the directory belongs to the user: rename(2)
//     cannot replace it.
//   - sf_report INDEX PATH writes the fault line.
const shellLib = `sf_report() { printf 'stockade: fault %s %s\n' "$1" "$2" >&2; }
sf_replaceable() {
	sr_d=${1%/*}; sr_d=${sr_d:-/}
	if [ -k "$sr_d" ] && [ ! -O "$1" ] && [ ! -O "$sr_d" ]; then return 1; fi
	return 0
}
sf_fault() {
	sf_p=$1
	if [ -d "$sf_p" ]; then return 90; fi
	sf_d=${sf_p%/*}; sf_d=${sf_d:-/}
	while [ ! -e "$sf_d" ]; do
		if [ -L "$sf_d" ]; then return 91; fi
		sf_d=${sf_d%/*}; sf_d=${sf_d:-/}
	done
	if [ ! -d "$sf_d" ]; then return 91; fi
	if [ ! -w "$sf_d" ] || [ ! -x "$sf_d" ]; then return 93; fi
	if [ -e "$sf_p" ] || [ -L "$sf_p" ]; then
		sf_replaceable "$sf_p" || return 92
	fi
	return 0
}
`

// PathFaultShell diagnoses one target: run as
//
//	sh -c "$PathFaultShell" stockade PATH
//
// it exits 0 when a new file could replace PATH, else with
// ExitPathIsDirectory, ExitPathNotDirectory, ExitPathNotWritable or
// ExitPathNotReplaceable and a fault line on stderr.
const PathFaultShell = shellLib + `sf_fault "$1"; c=$?
if [ "$c" -ne 0 ]; then sf_report 0 "$1"; fi
exit "$c"
`

// UnreplaceableShell checks, for each PATH argument, that a rename could
// replace it: not another user's file in a sticky directory and not a mount
// point (its device differs from its directory's). It exits
// ExitPathNotReplaceable with a fault line at the first that fails, else 0.
// Backends run it to explain a rename that failed although PathFaultShell
// found nothing wrong.
const UnreplaceableShell = shellLib + `i=0
for p; do
	if [ -e "$p" ] || [ -L "$p" ]; then
		d=${p%/*}; d=${d:-/}
		if ! sf_replaceable "$p" || [ "$(stat -c %d -- "$p" 2>/dev/null)" != "$(stat -c %d -- "$d" 2>/dev/null)" ]; then
			sf_report "$i" "$p"; exit 92
		fi
	fi
	i=$((i+1))
done
exit 0
`

// PreserveModeShell defines pm_apply MANIFEST TMP, which gives each staged
// file whose target is an existing regular file the target's permission
// bits, so a rename keeps the mode; staged files arrive with 0644, the mode
// of a new file, so only targets with another mode cost a chmod. A target
// that is a symlink is replaced by a new file, not followed, so its staged
// file keeps 0644. pm_apply fails when a chmod fails. It runs one stat
// (through xargs -0, so any number of targets and any bytes but newline in
// their names) for all targets and one chmod per distinct mode, whatever the
// number of files. BulkRenameShell includes it.
const PreserveModeShell = `pm_apply() {
	pm_list=$1; pm_tmp=$2
	pm_out=$(grep '^/' "$pm_list" | tr '\n' '\0' | xargs -0 stat -c '%f %a %n' -- 2>/dev/null | sed -n 's/^8[0-9a-f]* //p' | grep -v '^644 ')
	[ -n "$pm_out" ] || return 0
	pm_modes=
	while IFS= read -r pm_l; do
		pm_m=${pm_l%% *}
		case $pm_m in ''|*[!0-7]*|644) continue;; esac
		case " $pm_modes " in *" $pm_m "*) ;; *) pm_modes="$pm_modes $pm_m";; esac
	done <<EOF
$pm_out
EOF
	for pm_want in $pm_modes; do
		while IFS= read -r pm_l; do
			[ "${pm_l%% *}" = "$pm_want" ] || continue
			pm_t=${pm_l#* }
			printf '%s\0' "${pm_t%/*}/$pm_tmp/${pm_t##*/}"
		done <<EOF | xargs -0 chmod -- "$pm_want" || return 1
$pm_out
EOF
	done
	return 0
}
`

// BulkPrepareShell runs before an upload, with the targets as arguments in
// order. For each it checks sf_fault and creates missing parents as the
// sandbox user (so the engine, which extracts as root, never has to). At the
// first fault it stops with that fault's code and line; the targets before
// it are ready. Each directory is checked once, however many targets share
// it.
const BulkPrepareShell = shellLib + `i=0
nl='
'
oks=$nl
for t; do
	d=${t%/*}; d=${d:-/}
	case $oks in
	*"$nl$d$nl"*)
		# The directory passed already: only the target itself can fault.
		c=0
		if [ -d "$t" ]; then c=90
		elif [ -e "$t" ] || [ -L "$t" ]; then sf_replaceable "$t" || c=92
		fi
		if [ "$c" -ne 0 ]; then sf_report "$i" "$t"; exit "$c"; fi;;
	*)
		sf_fault "$t"; c=$?
		if [ "$c" -ne 0 ]; then sf_report "$i" "$t"; exit "$c"; fi
		if [ ! -d "$d" ]; then
			if ! mkdir -p -- "$d" 2>/dev/null; then
				sf_fault "$t"; c=$?
				[ "$c" -ne 0 ] || c=93
				sf_report "$i" "$t"; exit "$c"
			fi
		fi
		oks=$oks$d$nl;;
	esac
	i=$((i+1))
done
exit 0
`

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
const BulkRenameShell = shellLib + PreserveModeShell + `m=$1; l=$2
if [ ! -f "$m" ] || [ ! -f "$l" ]; then echo "stockade: lost-list"; exit 95; fi
hdr=; tmp=
{ IFS= read -r hdr; IFS= read -r tmp; } <"$m"
n=$(grep -c '^/' "$m")
end=$(tail -n 1 "$m")
if [ "$hdr" != "stockade-bulk 1" ] || [ "$end" != "end $n" ] || [ -z "$tmp" ]; then echo "stockade: lost-list"; exit 95; fi
# The manifest comes last in the archive, so if it is whole every member
# arrived; counting the staged files (globs, no process per file) checks it.
got=0
while IFS= read -r sd; do
	case $sd in /*) ;; *) continue;; esac
	for pat in '*' '.[!.]*' '..?*'; do
		set -- "$sd"/$pat
		[ -e "$1" ] || [ -L "$1" ] || continue
		got=$((got+$#))
	done
done <"$l"
if [ "$got" -ne "$n" ]; then echo "stockade: $got of $n staged files delivered" >&2; exit 94; fi
pm_apply "$m" "$tmp" || { echo "stockade: cannot preserve modes" >&2; exit 96; }
landed() {
	i=0
	while IFS= read -r t; do
		case $t in /*) ;; *) continue;; esac
		if [ -e "${t%/*}/$tmp/${t##*/}" ]; then
			sf_fault "$t"; c=$?
			[ "$c" -ne 0 ] || c=92
			sf_report "$i" "$t"; exit "$c"
		fi
		i=$((i+1))
	done <"$m"
}
while IFS= read -r sd || [ -n "$sd" ]; do
	case $sd in /*) ;; *) continue;; esac
	for pat in '*' '.[!.]*' '..?*'; do
		set -- "$sd"/$pat
		[ -e "$1" ] || [ -L "$1" ] || continue
		mv -f -- "$@" "${sd%/*}/" 2>/dev/null || landed
	done
done <"$l"
set --
while IFS= read -r d; do
	case $d in /*) set -- "$@" "$d";; esac
done <"$l"
rm -rf -- "$@" "$m" "$l"
exit 0
`

// BulkDiscardShell removes what a bulk write delivered and did not land: run
// with the paths of BulkWrite.Delivered as arguments, it removes each (with
// whatever is inside) and prints "left PATH" for each that is still there,
// which BulkWrite.LeftBehind reads. It always exits 0.
const BulkDiscardShell = `rm -rf -- "$@" 2>/dev/null
for p; do
	if [ -e "$p" ] || [ -L "$p" ]; then printf 'left %s\n' "$p"; fi
done
exit 0
`
