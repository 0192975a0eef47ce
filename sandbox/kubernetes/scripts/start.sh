# start.sh is the main process of a session pod's sandbox container, run as
# the sandbox user: it checks what the node gave the pod and refuses to run
# (exit 3, the reason on stderr, which becomes the container's termination
# message) unless its pids cgroup limit is $1 and its network is what $2
# says: "0" (NetNone), no network interface but loopback; "1" (NetLimited),
# an interface whose default gateway this user cannot reach (the node's
# gate rules reject the connect at once with "No route to host", where the
# gateway itself would answer the closed port with a reset). The writable
# places follow ($3...): a directory mounted elsewhere that this user can
# write (an image VOLUME the runtime made on the node's disk, outside every
# bound) makes it exit 4. Then it sleeps; the pod's PID 1 (pause, shared
# PID namespace) reaps orphans.
pids=$1
gated=$2
shift 2
refuse() {
	echo "stockade: $*" >&2
	exit 3
}
# st_volumes MOUNTINFO PLACE... prints the first mount point of MOUNTINFO
# (/proc/self/mountinfo's format) that is a directory this user can write,
# mounted read-write, outside /proc, /sys and /dev, and none of the PLACEs;
# it fails when there is none.
st_volumes() {
	sv_f=$1
	shift
	while read -r _ _ _ _ sv_mp sv_opts _; do
		case $sv_mp in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
		case ,$sv_opts, in *,ro,*) continue ;; esac
		sv_place=
		for sv_p; do [ "$sv_mp" = "$sv_p" ] && sv_place=1; done
		[ -z "$sv_place" ] && [ -d "$sv_mp" ] && [ -w "$sv_mp" ] && { echo "$sv_mp"; return 0; }
	done <"$sv_f"
	return 1
}
if sv=$(st_volumes /proc/self/mountinfo "$@"); then
	echo "stockade: $sv is a writable mount outside the writable places ($*): an image VOLUME, which this sandbox cannot bound" >&2
	exit 4
fi
if [ "$gated" = 1 ]; then
	gw=
	while read -r st_if st_dst st_gw _; do
		if [ "$st_dst" = 00000000 ] && [ "$st_gw" != 00000000 ]; then
			gw=$st_gw
			break
		fi
	done </proc/net/route
	[ -n "$gw" ] || refuse "the gated pod has no default route (the node's CNI must give the gate a way out)"
	# /proc/net/route holds it as 8 hex digits, least significant byte first.
	gw=$(printf '%d.%d.%d.%d' "0x${gw:6:2}" "0x${gw:4:2}" "0x${gw:2:2}" "0x${gw:0:2}")
	if command -v nc >/dev/null 2>&1; then
		st_nc=nc
	elif command -v busybox >/dev/null 2>&1; then
		st_nc="busybox nc"
	else
		refuse "NetLimited needs nc (BusyBox's) in the image, to check that the node keeps this user off the network"
	fi
	st_out=$($st_nc -w 3 "$gw" 9 </dev/null 2>&1)
	case $st_out in
	*"No route to host"*) ;;
	*) refuse "a direct connect of the sandbox user to the pod's gateway $gw:9 was not refused by the node's gate rules ($st_out): the node's CNI does not isolate gated pods" ;;
	esac
else
	n=0
	while IFS=: read -r st_if _; do
		n=$((n + 1))
		[ "$n" -le 2 ] && continue
		st_if=${st_if##* }
		if [ -n "$st_if" ] && [ "$st_if" != lo ]; then
			refuse "the pod has network interface $st_if; want loopback only (the node's CNI does not isolate this namespace)"
		fi
	done </proc/net/dev
fi
got=
for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do
	[ -r "$f" ] && { read -r got <"$f"; break; }
done
if [ "$got" != "$pids" ]; then
	refuse "the pids limit is ${got:-unknown}, want $pids (the node's runtime does not apply pids.stockade.dev annotations: set Config.RuntimeClassName)"
fi
exec sleep 2147483647
