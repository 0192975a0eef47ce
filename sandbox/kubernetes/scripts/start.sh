# start.sh is the main process of a session pod's sandbox container, run as
# the sandbox user: it checks what the node gave the pod and refuses to run
# (exit 3, the reason on stderr, which becomes the container's termination
# message) unless the pod has no network interface but loopback (NetNone)
# and its pids cgroup limit is $1. Then it sleeps; the pod's PID 1 (pause,
# shared PID namespace) reaps orphans.
pids=$1
n=0
while IFS=: read -r st_if _; do
	n=$((n + 1))
	[ "$n" -le 2 ] && continue
	st_if=${st_if##* }
	if [ -n "$st_if" ] && [ "$st_if" != lo ]; then
		echo "stockade: the pod has network interface $st_if; want loopback only (the node's CNI does not isolate this namespace)" >&2
		exit 3
	fi
done </proc/net/dev
got=
for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do
	[ -r "$f" ] && { read -r got <"$f"; break; }
done
if [ "$got" != "$pids" ]; then
	echo "stockade: the pids limit is ${got:-unknown}, want $pids (the node's runtime does not apply pids.stockade.dev annotations: set Config.RuntimeClassName)" >&2
	exit 3
fi
exec sleep 2147483647
