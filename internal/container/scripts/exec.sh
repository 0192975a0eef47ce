# exec.sh wraps every command Stockade runs in a container through an exec
# (after oom.sh). argv: $0 is "stockade-exec", $1 a random marker, then the
# command's argv. The marker in the wrapper's argv is how kill.sh finds it;
# the wrapper stays the command's parent (it never execs) so that it keeps
# that argv. When the command ends with 137 and the memory cgroup's
# oom_kill counter moved, the wrapper prints the OOM line
# (container.OOMLine) last on stderr. When it cannot fork the command (the
# pids limit is reached), the shell exits 2 at once and the EXIT trap
# prints the not-started line (container.NotStartedLine) last on stderr.
sx_oom
sx_before=$sx_n
shift
sx_ran=
trap '[ -n "$sx_ran" ] || echo "stockade: exec: the command could not be started" >&2' EXIT
"$@"
sx_r=$?
sx_ran=1
if [ "$sx_r" -eq 137 ]; then
	sx_oom
	[ "$sx_n" != "$sx_before" ] && echo "stockade: killed: out of memory" >&2
fi
exit "$sx_r"
