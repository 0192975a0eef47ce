# ReadFileShell: sh -c "$ReadFileShell" stockade PATH MAXBYTES
# For backends without an engine file API: prints the size of the regular
# file at PATH (symlinks followed) on a line of its own, then its bytes.
if [ -d "$1" ]; then exit 90; fi # ExitPathIsDirectory
if [ ! -e "$1" ]; then exit 97; fi # ExitFileNotExist
if [ ! -f "$1" ]; then exit 98; fi # ExitNotRegularFile
rf_s=$(stat -L -c %s "$1") || exit 97 # ExitFileNotExist
echo "$rf_s"
if [ "$rf_s" -gt "$2" ]; then exit 99; fi # ExitFileTooLarge
exec cat "$1"
