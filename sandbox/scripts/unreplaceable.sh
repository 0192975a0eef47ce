# UnreplaceableShell: sh -c "$UnreplaceableShell" stockade PATH... (after
# lib.sh).
i=0
for p; do
	if [ -e "$p" ] || [ -L "$p" ]; then
		d=${p%/*}; d=${d:-/}
		if ! sf_replaceable "$p" || [ "$(stat -c %d -- "$p" 2>/dev/null)" != "$(stat -c %d -- "$d" 2>/dev/null)" ]; then
			sf_report "$i" "$p"; exit 92 # ExitPathNotReplaceable
		fi
	fi
	i=$((i+1))
done
exit 0
