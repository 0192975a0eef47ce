# ExportShell: sh -c "$ExportShell" stockade ROOT
# For backends without an engine archive API: writes an uncompressed tar of
# ROOT to stdout, its members under ROOT's base name, symlinks archived as
# links (ROOT too). A missing ROOT exits before writing anything.
if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 97; fi # ExitFileNotExist
cd "${1%/*}/" || exit 1
exec tar -c -f - "${1##*/}"
