package container

import (
	"strconv"
	"strings"
	"sync"
)

// The out-of-memory verdict of a session's commands. The wrapper's OOM
// line (OOMLine) shares stderr with the command, which can print it too;
// so a backend that must not let a command pass its own end off as an
// out-of-memory kill asks the memory cgroup itself, after a command ended
// with status 137, with one more exec (OOMRecord.Argv): a script whose
// only answer is its exit code, which a session cannot forge by writing
// into the script's output. The Docker backend runs it as root (no
// capability; the session cannot touch a process of another uid), the
// Kubernetes backend as the sandbox user (pods/exec has no other), where a
// session that traces or signals it can still spoil the answer for its own
// command. The count the host has attributed is kept per container: a
// count that moved since is an out-of-memory kill of the command that just
// ended with 137 (or of another command of the sandbox in the meantime, as
// with the wrapper's own reading).

// Exit codes of oomcount.sh.
const (
	oomUnreadable = 3  // no oom_kill count could be read
	oomMoved      = 10 // 10+d: the count is the host's plus d
	oomReset      = 60 // 60+c: the count is c, below the host's (a new cgroup)
	oomMaxStep    = 49 // the largest d or c an exit code carries
)

// OOMRecord is what a provider remembers of its containers' oom_kill
// counts: the zero value is ready, and it is safe for concurrent use.
type OOMRecord struct {
	mu   sync.Mutex
	seen map[string]int64 // by container (or pod) ID
}

// Argv returns the command that asks container id's memory cgroup (run
// through Exec, its status in Result.ExitCode, for Verdict).
func (r *OOMRecord) Argv(id string) []string {
	r.mu.Lock()
	n := r.seen[id]
	r.mu.Unlock()
	return []string{"/bin/sh", "-c", oomCountScript, "stockade-oom", strconv.FormatInt(n, 10)}
}

// Verdict reads the exit code of Argv's command for container id: oom
// says whether an out-of-memory kill happened since the count last
// attributed, which it records. Any other code (no count readable, the
// check killed) is no answer: ok false, and nothing recorded.
func (r *OOMRecord) Verdict(id string, code int) (oom, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]int64{}
	}
	switch {
	case code >= oomMoved && code <= oomMoved+oomMaxStep:
		r.seen[id] += int64(code - oomMoved)
		return code > oomMoved, true
	case code >= oomReset && code <= oomReset+oomMaxStep:
		r.seen[id] = int64(code - oomReset)
		return code > oomReset, true
	}
	return false, false
}

// Forget drops container id's record (it is removed).
func (r *OOMRecord) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, id)
}

// OOMStderr returns a command's stderr as a session's ExecResult carries
// it: ending with OOMLine when oom (the verdict), and otherwise without a
// last line equal to it, which only the command (or the wrapper's own,
// unchecked reading) can have written.
func OOMStderr(stderr []byte, oom bool) string {
	s := string(stderr)
	line := OOMLine + "\n"
	if oom {
		if !strings.HasSuffix(s, line) {
			s += line
		}
		return s
	}
	for strings.HasSuffix(s, line) {
		s = strings.TrimSuffix(s, line)
	}
	return s
}
