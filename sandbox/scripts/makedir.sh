# MakeDirShell: sh -c "$MakeDirShell" stockade PATH (after lib.sh).
if [ -d "$1" ]; then exit 0; fi
if [ -e "$1" ] || [ -L "$1" ]; then sf_report 0 "$1"; exit 91; fi # ExitPathNotDirectory
sf_fault "$1"; c=$?
if [ "$c" -ne 0 ]; then sf_report 0 "$1"; exit "$c"; fi
if mkdir -p -- "$1" 2>/dev/null || [ -d "$1" ]; then exit 0; fi
sf_fault "$1"; c=$?
[ "$c" -ne 0 ] || c=93 # ExitPathNotWritable
sf_report 0 "$1"; exit "$c"
