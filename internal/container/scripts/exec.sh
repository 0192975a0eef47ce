# exec.sh wraps every command Stockade runs in a container through an exec.
# argv: $0 is "stockade-exec", $1 a random marker, then the command's argv.
# The marker in the wrapper's argv is how kill.sh finds it; the wrapper stays
# the command's parent (it never execs) so that it keeps that argv. When the
# command ends with 137 and the memory cgroup's oom_kill counter moved, the
# wrapper prints the OOM line (container.OOMLine) last on stderr.
sx_oom() {
	sx_n=0
	for sx_f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
		[ -r "$sx_f" ] || continue
		while read -r sx_k sx_v; do [ "$sx_k" = oom_kill ] && sx_n=$sx_v; done <"$sx_f"
		break
	done
}
sx_oom
sx_before=$sx_n
shift
"$@"
sx_r=$?
if [ "$sx_r" -eq 137 ]; then
	sx_oom
	[ "$sx_n" != "$sx_before" ] && echo "stockade: killed: out of memory" >&2
fi
exit "$sx_r"
