# oom.sh defines sx_oom, which sets sx_n to the memory cgroup's oom_kill
# count (cgroup v2 memory.events, or v1 memory.oom_control; 0 when
# neither is readable). exec.sh and oomcount.sh start with it.
sx_oom() {
	sx_n=0
	for sx_f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
		[ -r "$sx_f" ] || continue
		while read -r sx_k sx_v; do [ "$sx_k" = oom_kill ] && sx_n=$sx_v; done <"$sx_f"
		return 0
	done
	return 1
}
