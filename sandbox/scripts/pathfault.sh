# PathFaultShell: sh -c "$PathFaultShell" stockade PATH (after lib.sh).
sf_fault "$1"; c=$?
if [ "$c" -ne 0 ]; then sf_report 0 "$1"; fi
exit "$c"
