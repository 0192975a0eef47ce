# oomcount.sh (after oom.sh) tells the host whether the memory cgroup's
# oom_kill count moved since the count $1 the host last attributed, in its
# exit code alone, which no write of the session's into its output can
# change: 10+d when the count is $1+d (d at most 49), 60+c when it is c,
# below $1 (a new cgroup: the container restarted; c at most 49), 3 when
# no count can be read.
sx_oom || exit 3
if [ "$sx_n" -lt "$1" ]; then
	[ "$sx_n" -gt 49 ] && sx_n=49
	exit $((60 + sx_n))
fi
sx_d=$((sx_n - $1))
[ "$sx_d" -gt 49 ] && sx_d=49
exit $((10 + sx_d))
