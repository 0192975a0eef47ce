# Functions every script but bulkdiscard.sh and preservemode.sh starts with
# (see shell.go): sf_report INDEX PATH writes a fault line; sf_replaceable
# PATH fails for a file a rename cannot replace; sf_fault PATH returns why a
# new file cannot replace PATH, or 0; sf_absent PATH returns why PATH is not
# there. Every exit code names its Go constant in a comment;
# TestScriptExitCodes checks them.
sf_report() { printf 'stockade: fault %s %s\n' "$1" "$2" >&2; }
sf_replaceable() {
	sr_d=${1%/*}; sr_d=${sr_d:-/}
	if [ -k "$sr_d" ] && [ ! -O "$1" ] && [ ! -O "$sr_d" ]; then return 1; fi
	return 0
}
sf_fault() {
	sf_p=$1
	if [ -d "$sf_p" ]; then return 90; fi # ExitPathIsDirectory
	sf_d=${sf_p%/*}; sf_d=${sf_d:-/}
	while [ ! -e "$sf_d" ]; do
		if [ -L "$sf_d" ]; then return 91; fi # ExitPathNotDirectory
		sf_d=${sf_d%/*}; sf_d=${sf_d:-/}
	done
	if [ ! -d "$sf_d" ]; then return 91; fi # ExitPathNotDirectory
	if [ ! -w "$sf_d" ] || [ ! -x "$sf_d" ]; then return 93; fi # ExitPathNotWritable
	if [ -e "$sf_p" ] || [ -L "$sf_p" ]; then
		sf_replaceable "$sf_p" || return 92 # ExitPathNotReplaceable
	fi
	return 0
}
sf_absent() {
	sa_d=${1%/*}; sa_d=${sa_d:-/}
	while [ ! -e "$sa_d" ]; do
		if [ -L "$sa_d" ]; then return 91; fi # ExitPathNotDirectory
		sa_d=${sa_d%/*}; sa_d=${sa_d:-/}
	done
	if [ ! -d "$sa_d" ]; then return 91; fi # ExitPathNotDirectory
	if [ ! -x "$sa_d" ]; then return 88; fi # ExitPathNotReadable
	return 97 # ExitFileNotExist
}
