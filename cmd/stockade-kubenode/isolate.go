package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/stockade/stockade/internal/label"
)

// isolateConf is the plugin's entry in the CNI conflist. RuntimeConfig
// carries the pod's annotations when the entry declares the capability
// podAnnotationsCap (containerd's CRI passes them to plugins that do).
type isolateConf struct {
	CNIVersion        string          `json:"cniVersion"`
	NamespacePrefixes []string        `json:"namespacePrefixes"`
	PrevResult        json.RawMessage `json:"prevResult"`
	Capabilities      map[string]bool `json:"capabilities"`
	RuntimeConfig     struct {
		PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations"`
	} `json:"runtimeConfig"`
}

// podAnnotationsCap is the CNI capability under which containerd passes a
// pod's annotations.
const podAnnotationsCap = "io.kubernetes.cri.pod-annotations"

// maxGateUID is the highest uid a gate may run as (as sandbox.Hardening's
// RunAsUser bound); 0 is never a gate's.
const maxGateUID = 1<<31 - 2

// isolate implements the CNI plugin (spec 0.4.0 and 1.0.0 chaining). ADD,
// for pods of the configured namespaces: a pod without the label.GateUID
// annotation loses CNI_IFNAME (loopback only); a gated pod keeps it and
// gets gateRules in its network namespace (only the gate's uid leaves);
// a malformed annotation, or a config without the annotations capability
// when the pod could be gated, is an error (the pod does not start,
// never with an open network). It prints the previous result. DEL and
// CHECK have nothing to do (the rules go with the namespace).
func isolate() error {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		fmt.Print(`{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}`)
		return nil
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return cniError(err)
	}
	var conf isolateConf
	if err := json.Unmarshal(raw, &conf); err != nil {
		return cniError(err)
	}
	if cmd != "ADD" {
		return nil
	}
	if len(conf.PrevResult) == 0 {
		return cniError(fmt.Errorf("stockade-isolate must follow another plugin (no prevResult)"))
	}
	if ns := podNamespace(os.Getenv("CNI_ARGS")); isolated(ns, conf.NamespacePrefixes) {
		ifname, netns := os.Getenv("CNI_IFNAME"), os.Getenv("CNI_NETNS")
		if ifname == "" || ifname == "lo" || netns == "" {
			return cniError(fmt.Errorf("CNI_IFNAME %q, CNI_NETNS %q", ifname, netns))
		}
		uid, gated, err := gateUID(conf)
		if err != nil {
			return cniError(err)
		}
		if gated {
			err = loadRules(netns, uid)
		} else {
			err = deleteLink(netns, ifname)
		}
		if err != nil {
			return cniError(err)
		}
	}
	_, err = os.Stdout.Write(conf.PrevResult)
	return err
}

// gateUID reads the pod's label.GateUID annotation: gated reports it is
// there, and uid is its value. Without the annotations capability in the
// config no pod can be gated, and one that asks cannot be told apart: an
// error, since a conflist that lost the capability must not silently
// isolate (or open) pods.
func gateUID(conf isolateConf) (uid uint32, gated bool, err error) {
	if !conf.Capabilities[podAnnotationsCap] {
		return 0, false, fmt.Errorf("stockade-isolate's conflist entry must declare the capability %q (gated pods are told by an annotation)", podAnnotationsCap)
	}
	v, ok := conf.RuntimeConfig.PodAnnotations[label.GateUID]
	if !ok {
		return 0, false, nil
	}
	uid, err = parseGateUID(v)
	return uid, true, err
}

// errBadGateUID is what a malformed label.GateUID annotation matches.
var errBadGateUID = errors.New("bad gate uid annotation")

// parseGateUID parses a label.GateUID value: a decimal uid from 1 to
// maxGateUID, digits only, no sign, spaces or leading zeros.
func parseGateUID(v string) (uint32, error) {
	if v == "" || len(v) > 10 || v[0] == '0' || strings.Trim(v, "0123456789") != "" {
		return 0, fmt.Errorf("%w %s=%q: want a decimal uid from 1 to %d", errBadGateUID, label.GateUID, v, maxGateUID)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > maxGateUID {
		return 0, fmt.Errorf("%w %s=%q: want a decimal uid from 1 to %d", errBadGateUID, label.GateUID, v, maxGateUID)
	}
	return uint32(n), nil
}

// gateRules is the iptables-restore (v6: ip6tables-restore) input of a
// gated pod's network namespace. Every chain of the filter table drops by
// default. OUTPUT accepts loopback and what sockets of the gate's uid send
// (the owner match), and rejects the rest with "administratively
// prohibited", which the sender sees at once (connect: EHOSTUNREACH, "No
// route to host"; a datagram: EPERM), so a refused attempt never looks
// like a slow network, and start.sh can tell the rules are there (the
// pod's gateway would answer a closed port with a reset instead). INPUT
// accepts loopback and the answers to connections made from the pod;
// nothing is forwarded. There is no ESTABLISHED rule in OUTPUT: a sandbox
// socket that shared a port with a gate socket must not ride the gate's
// connection state.
func gateRules(uid uint32, v6 bool) string {
	reject := "icmp-admin-prohibited"
	if v6 {
		reject = "icmp6-adm-prohibited"
	}
	return fmt.Sprintf(`*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT DROP [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A OUTPUT -o lo -j ACCEPT
-A OUTPUT -m owner --uid-owner %d -j ACCEPT
-A OUTPUT -j REJECT --reject-with %s
COMMIT
`, uid, reject)
}

// loadRules loads gateRules into the filter tables (IPv4 and IPv6) of the
// network namespace netns, replacing what they held. Either failing is an
// error: a pod with a family left open must not start.
func loadRules(netns string, uid uint32) error {
	for _, f := range []struct {
		tool string
		v6   bool
	}{{"iptables-restore", false}, {"ip6tables-restore", true}} {
		c := exec.Command("nsenter", "--net="+netns, f.tool, "--wait")
		c.Stdin = strings.NewReader(gateRules(uid, f.v6))
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s in %s: %v: %s", f.tool, netns, err, out)
		}
	}
	return nil
}

// deleteLink deletes ifname in the network namespace netns.
func deleteLink(netns, ifname string) error {
	out, err := exec.Command("nsenter", "--net="+netns, "ip", "link", "delete", ifname).CombinedOutput()
	if err != nil {
		return fmt.Errorf("delete %s in %s: %v: %s", ifname, netns, err, out)
	}
	return nil
}

// podNamespace returns K8S_POD_NAMESPACE from CNI_ARGS ("K=V;K=V").
func podNamespace(args string) string {
	for _, kv := range strings.Split(args, ";") {
		if v, ok := strings.CutPrefix(kv, "K8S_POD_NAMESPACE="); ok {
			return v
		}
	}
	return ""
}

func isolated(ns string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(ns, p) {
			return true
		}
	}
	return false
}

// cniError prints err as a CNI error result; the runtime reads stdout.
func cniError(err error) error {
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": err.Error()})
	os.Stdout.Write(b)
	return err
}
