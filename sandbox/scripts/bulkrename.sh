# BulkRenameShell: sh -c "$BulkRenameShell" stockade MANIFEST DIRLIST (after
# lib.sh and preservemode.sh).
m=$1; l=$2
if [ ! -f "$m" ] || [ ! -f "$l" ]; then echo "stockade: lost-list"; exit 95; fi # ExitBulkIncomplete
hdr=; tmp=
{ IFS= read -r hdr; IFS= read -r tmp; } <"$m"
n=$(grep -c '^/' "$m")
end=$(tail -n 1 "$m")
if [ "$hdr" != "stockade-bulk 1" ] || [ "$end" != "end $n" ] || [ -z "$tmp" ]; then echo "stockade: lost-list"; exit 95; fi # ExitBulkIncomplete
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
if [ "$got" -ne "$n" ]; then echo "stockade: $got of $n staged files delivered" >&2; exit 94; fi # ExitBulkExtract
pm_apply "$m" "$tmp" || { echo "stockade: cannot preserve modes" >&2; exit 96; } # ExitBulkMode
landed() {
	i=0
	while IFS= read -r t; do
		case $t in /*) ;; *) continue;; esac
		if [ -e "${t%/*}/$tmp/${t##*/}" ]; then
			sf_fault "$t"; c=$?
			[ "$c" -ne 0 ] || c=92 # ExitPathNotReplaceable
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
