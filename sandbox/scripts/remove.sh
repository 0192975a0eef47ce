# RemoveShell: sh -c "$RemoveShell" stockade PATH r|f (after lib.sh).
p=$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then sf_absent "$p"; c=$?; sf_report 0 "$p"; exit "$c"; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
	if [ "$2" != r ]; then sf_report 0 "$p"; exit 90; fi # ExitPathIsDirectory
	rm -rf -- "$p" 2>/dev/null
else
	rm -f -- "$p" 2>/dev/null
fi
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 0; fi
if sf_replaceable "$p"; then c=93 # ExitPathNotWritable
else c=92 # ExitPathNotReplaceable
fi
sf_report 0 "$p"; exit "$c"
