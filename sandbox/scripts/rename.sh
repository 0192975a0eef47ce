# RenameShell: sh -c "$RenameShell" stockade FROM TO (after lib.sh).
f=$1; t=$2
if [ ! -e "$f" ] && [ ! -L "$f" ]; then sf_absent "$f"; c=$?; sf_report 0 "$f"; exit "$c"; fi
if [ "$f" = "$t" ]; then exit 0; fi
if ! sf_replaceable "$f"; then sf_report 0 "$f"; exit 92; fi # ExitPathNotReplaceable
fd=${f%/*}; fd=${fd:-/}
if [ ! -w "$fd" ]; then sf_report 0 "$f"; exit 93; fi # ExitPathNotWritable
sf_fault "$t"; c=$?
if [ "$c" -ne 0 ]; then sf_report 1 "$t"; exit "$c"; fi
if [ -d "$f" ] && [ ! -L "$f" ] && { [ -e "$t" ] || [ -L "$t" ]; }; then sf_report 1 "$t"; exit 91; fi # ExitPathNotDirectory
td=${t%/*}; td=${td:-/}
if [ ! -d "$td" ] && ! mkdir -p -- "$td" 2>/dev/null; then
	sf_fault "$t"; c=$?
	[ "$c" -ne 0 ] || c=93 # ExitPathNotWritable
	sf_report 1 "$t"; exit "$c"
fi
# One rename(2), never mv's copy: the source's file system must be the
# target directory's.
if [ "$(stat -c %d -- "$f" 2>/dev/null)" != "$(stat -L -c %d -- "$td" 2>/dev/null)" ]; then sf_report 1 "$t"; exit 86; fi # ExitCrossDevice
mv -f -T -- "$f" "$t" 2>/dev/null && exit 0
if [ ! -e "$f" ] && [ ! -L "$f" ]; then sf_absent "$f"; c=$?; sf_report 0 "$f"; exit "$c"; fi
sf_fault "$t"; c=$?
[ "$c" -ne 0 ] || c=93 # ExitPathNotWritable
sf_report 1 "$t"; exit "$c"
