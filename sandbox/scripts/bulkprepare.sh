# BulkPrepareShell: sh -c "$BulkPrepareShell" stockade TARGET... (after
# lib.sh).
i=0
nl='
'
oks=$nl
for t; do
	d=${t%/*}; d=${d:-/}
	case $oks in
	*"$nl$d$nl"*)
		# The directory passed already: only the target itself can fault.
		c=0
		if [ -d "$t" ]; then c=90 # ExitPathIsDirectory
		elif [ -e "$t" ] || [ -L "$t" ]; then sf_replaceable "$t" || c=92 # ExitPathNotReplaceable
		fi
		if [ "$c" -ne 0 ]; then sf_report "$i" "$t"; exit "$c"; fi;;
	*)
		sf_fault "$t"; c=$?
		if [ "$c" -ne 0 ]; then sf_report "$i" "$t"; exit "$c"; fi
		if [ ! -d "$d" ]; then
			if ! mkdir -p -- "$d" 2>/dev/null; then
				sf_fault "$t"; c=$?
				[ "$c" -ne 0 ] || c=93 # ExitPathNotWritable
				sf_report "$i" "$t"; exit "$c"
			fi
		fi
		oks=$oks$d$nl;;
	esac
	i=$((i+1))
done
exit 0
