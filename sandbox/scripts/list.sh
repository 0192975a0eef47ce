# ListShell: sh -c "$ListShell" stockade DIR MAX (after lib.sh).
# For each glob of the entries (plain, dot, dot-dot), one block: the names,
# each ended by a NUL, an empty name, then one line per name as StatShell
# prints it (xargs -0: any bytes but NUL in a name, any number of names).
d=$1; max=$2
if [ ! -d "$d" ]; then
	if [ -e "$d" ]; then c=91 # ExitPathNotDirectory
	else sf_absent "$d"; c=$?
	fi
	sf_report 0 "$d"; exit "$c"
fi
if [ ! -r "$d" ] || [ ! -x "$d" ]; then sf_report 0 "$d"; exit 88; fi # ExitPathNotReadable
cd "$d" 2>/dev/null || { sf_report 0 "$d"; exit 88; } # ExitPathNotReadable
n=0
for pat in '*' '.[!.]*' '..?*'; do
	set -- $pat
	[ -e "$1" ] || [ -L "$1" ] || continue
	n=$((n+$#))
done
if [ "$n" -gt "$max" ]; then echo "stockade: $n entries" >&2; exit 87; fi # ExitTooManyEntries
for pat in '*' '.[!.]*' '..?*'; do
	set -- $pat
	[ -e "$1" ] || [ -L "$1" ] || continue
	printf '%s\0' "$@"
	printf '\0'
	printf '%s\0' "$@" | xargs -0 stat -c '%f %s %Y' -- 2>/dev/null
	c=$?
	if [ "$c" -eq 123 ]; then exit 85; fi # ExitListChanged
	if [ "$c" -ne 0 ]; then echo "stockade: stat exited $c" >&2; exit 1; fi
done
exit 0
