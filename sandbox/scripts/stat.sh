# StatShell: sh -c "$StatShell" stockade PATH (after lib.sh).
# One line: PATH's raw mode in hex, size in bytes and modification time in
# seconds since the epoch, as lstat(2) sees them (a symlink is not
# followed).
if [ -e "$1" ] || [ -L "$1" ]; then
	stat -c '%f %s %Y' -- "$1" 2>/dev/null && exit 0
fi
sf_absent "$1"; c=$?
sf_report 0 "$1"; exit "$c"
