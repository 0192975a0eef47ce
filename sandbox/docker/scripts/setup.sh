# setup.sh opens the writable roots to the sandbox user once. Fresh volumes
# belong to root with mode 0755, so the sandbox user could not write its own
# workdir. It runs as uid 0 with every capability dropped (the container's
# bounding set is empty): enough to chmod what root owns, nothing more.
# Arguments are the writable roots; /tmp gets 1777, the others 0777.
for d; do
	if [ "$d" = /tmp ]; then chmod 1777 /tmp; else chmod 0777 -- "$d"; fi || exit 1
done
