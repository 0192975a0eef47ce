# PreserveModeShell: defines pm_apply MANIFEST TMP; see shell.go. stat's %f
# is the raw mode in hex: a regular file's starts with 8, so a symlink's
# (a...) or anything else's is dropped and its staged file keeps the mode
# of a new file.
pm_apply() {
	pm_list=$1; pm_tmp=$2
	pm_out=$(grep '^/' "$pm_list" | tr '\n' '\0' | xargs -0 stat -c '%f %a %n' -- 2>/dev/null | sed -n 's/^8[0-9a-f]* //p' | grep -v '^644 ')
	[ -n "$pm_out" ] || return 0
	pm_modes=
	while IFS= read -r pm_l; do
		pm_m=${pm_l%% *}
		case $pm_m in ''|*[!0-7]*|644) continue;; esac
		case " $pm_modes " in *" $pm_m "*) ;; *) pm_modes="$pm_modes $pm_m";; esac
	done <<EOF
$pm_out
EOF
	for pm_want in $pm_modes; do
		while IFS= read -r pm_l; do
			[ "${pm_l%% *}" = "$pm_want" ] || continue
			pm_t=${pm_l#* }
			printf '%s\0' "${pm_t%/*}/$pm_tmp/${pm_t##*/}"
		done <<EOF | xargs -0 chmod -- "$pm_want" || return 1
$pm_out
EOF
	done
	return 0
}
