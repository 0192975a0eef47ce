# kill.sh kills what the exec whose wrapper carries marker $1 started. It
# never forks, so it runs when the pids limit leaves room for one process.
# It finds the wrapper R by "stockade-exec" followed by the marker in its
# argv (read drops the NULs between arguments) among the exec roots (parent
# 0: a process that copied the marker into its own argv is not one). Then,
# up to 100 rounds, it stops and kills every live process whose ancestry
# reaches R, or reaches PID 1 through an orphan that started after R (a
# double-forked or setsid child), or through a parent that died while the
# round scanned.
# $2 is the mode. Empty: as above. "nested": the wrapper is the child of a
# resident agent, not an exec root, so every process carrying the marker is
# taken for a root (R is the earliest; a process that copied the marker
# only gets itself and its tree killed too). "tree": R and its descendants
# only, no orphans (how the host ends an agent it drops).
# Exit codes: 0 a round found nothing left to kill; 3 no wrapper with the
# marker is running (not started yet, or gone); 1 the rounds ran out.
pat="stockade-exec$1"; mode=${2:-}; me=$$; R=; RS=
st() {
	{ read -r s_l <"/proc/$1/stat"; } 2>/dev/null || return 1
	set -- ${s_l##*) }
	s_state=$1; s_pp=$2; s_st=${20}
	[ "$s_state" != Z ] && [ "$s_state" != X ]
}
T0=
for d in /proc/[0-9]*; do
	p=${d#/proc/}
	[ "$p" = "$me" ] && continue
	c=
	while IFS= read -r l || [ -n "$l" ]; do
		case $l in *"$pat"*) c=$p; break;; esac
		l=
	done <"$d/cmdline" 2>/dev/null
	[ -n "$c" ] && st "$c" || continue
	if [ "$mode" = nested ]; then
		RS="$RS $c"
		if [ -z "$T0" ] || [ "$s_st" -lt "$T0" ]; then R=$c; T0=$s_st; fi
		continue
	fi
	if [ "$s_pp" = 0 ]; then R=$c; RS=" $c"; T0=$s_st; break; fi
done
[ -n "$R" ] || exit 3
# after: a process with start time $1 (clock ticks) and PID $2 started after
# R. Start times have a tick's resolution (10 ms); within R's tick, PIDs
# (allocated in increasing order) decide, so the container's main process,
# started just before R, is never taken for an orphan of the command.
after() {
	[ "$mode" != tree ] || return 1
	[ "$1" -gt "$T0" ] || { [ "$1" -eq "$T0" ] && [ "$2" -gt "$R" ]; }
}
k=0
while [ "$k" -lt 100 ]; do
	ps=
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		case $p in 1|"$me") continue;; esac
		st "$p" || continue
		eval "pp_$p=$s_pp st_$p=$s_st"
		ps="$ps $p"
	done
	list=
	for p in $ps; do
		q=$p; c=$p; n=0; hit=
		while [ "$n" -lt 4096 ]; do
			case "$RS " in *" $q "*) hit=1; break;; esac
			eval "qp=\${pp_$q:-}"
			if [ -z "$qp" ]; then
				# q died during the scan: its child c is as good as an
				# orphan.
				eval "qs=\${st_$c}"
				after "$qs" "$c" && hit=1
				break
			fi
			[ "$qp" != 0 ] || break
			if [ "$qp" = 1 ]; then
				eval "qs=\${st_$q}"
				after "$qs" "$q" && hit=1
				break
			fi
			c=$q; q=$qp; n=$((n+1))
		done
		[ -n "$hit" ] && list="$list $p"
	done
	for p in $ps; do unset "pp_$p" "st_$p"; done
	[ -n "$list" ] || exit 0
	kill -STOP $list 2>/dev/null
	kill -KILL $list 2>/dev/null
	k=$((k+1))
done
exit 1
