// Command stockade-kubenode holds the three node-side pieces of the
// single-node Kubernetes cluster scripts/kube-up starts. It is one static
// binary that acts by the name it is run as (a symlink each), since the
// programs that run it (containerd, the CNI runtime, the pod sandbox)
// choose the arguments:
//
//   - pause: the pod sandbox's process (the pause image's entrypoint). It
//     sleeps, reaps every orphan reparented to it (pods share its PID
//     namespace), and exits 0 on SIGTERM or SIGINT.
//   - stockade-runc: containerd's runc for the "stockade" runtime handler.
//     On "create" it sets the container's pids cgroup limit from the pod
//     annotation pids.stockade.dev/<container name> (containerd copies it
//     into the OCI spec: pod_annotations), then runs /usr/sbin/runc with the
//     same arguments. Kubernetes has no per-pod pids limit in its API; this
//     is how the node enforces Hardening.PidsLimit.
//   - stockade-isolate: a chained CNI plugin placed after bridge. For pods
//     in namespaces starting with one of its config's namespacePrefixes, it
//     deletes the interface bridge made in the pod's network namespace, so
//     the pod has loopback only; it passes bridge's result on (containerd
//     wants a pod IP; it is a bookkeeping address nothing can reach). A
//     pod carrying the annotation net.stockade.dev/gate-uid (label.GateUID;
//     a gated NetLimited session of sandbox/kubernetes) keeps its
//     interface instead, and gets iptables and ip6tables rules in its
//     network namespace under which only that uid's packets leave it (see
//     gateRules). The plugin's conflist entry must declare the capability
//     io.kubernetes.cri.pod-annotations, through which containerd's CRI
//     passes the annotations; without it, or with a malformed uid, ADD
//     fails and the pod does not start.
//
// Run as stockade-kubenode, it takes a subcommand: "pause-image FILE TAG"
// writes a docker-archive of an image holding only this binary as /pause,
// for `ctr images import`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	name := filepath.Base(os.Args[0])
	var err error
	switch name {
	case "pause":
		err = pause()
	case "stockade-runc":
		err = runcWrap(os.Args[1:])
	case "stockade-isolate":
		err = isolate()
	default:
		if len(os.Args) == 4 && os.Args[1] == "pause-image" {
			err = pauseImage(os.Args[2], os.Args[3])
			break
		}
		err = fmt.Errorf("usage: stockade-kubenode pause-image FILE TAG (or run as pause, stockade-runc, stockade-isolate)")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
