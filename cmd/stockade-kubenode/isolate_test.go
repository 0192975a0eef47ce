package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockade/stockade/internal/enginetest"
	"github.com/stockade/stockade/internal/label"
)

func TestParseGateUID(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want uint32
		ok   bool
	}{
		{"65532", 65532, true},
		{"1", 1, true},
		{"2147483646", 2147483646, true},
		{"0", 0, false},
		{"", 0, false},
		{"2147483647", 0, false},
		{"4294967296", 0, false},
		{"99999999999", 0, false},
		{"065532", 0, false},
		{"+65532", 0, false},
		{"-1", 0, false},
		{" 65532", 0, false},
		{"65532\n", 0, false},
		{"0x10", 0, false},
		{"６５５３２", 0, false}, // fullwidth digits
	} {
		got, err := parseGateUID(tc.v)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("parseGateUID(%q) = %d, %v; want %d, ok %v", tc.v, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, errBadGateUID) {
			t.Errorf("parseGateUID(%q) error %v does not match errBadGateUID", tc.v, err)
		}
	}
}

func TestGateUID(t *testing.T) {
	conf := func(caps bool, ann map[string]string) isolateConf {
		var c isolateConf
		if caps {
			c.Capabilities = map[string]bool{podAnnotationsCap: true}
		}
		c.RuntimeConfig.PodAnnotations = ann
		return c
	}
	for _, tc := range []struct {
		name  string
		conf  isolateConf
		uid   uint32
		gated bool
		err   bool
	}{
		{"no annotations", conf(true, nil), 0, false, false},
		{"other annotations", conf(true, map[string]string{"pids.stockade.dev/sandbox": "64"}), 0, false, false},
		{"gated", conf(true, map[string]string{label.GateUID: "65532"}), 65532, true, false},
		{"bad uid", conf(true, map[string]string{label.GateUID: "root"}), 0, true, true},
		{"root uid", conf(true, map[string]string{label.GateUID: "0"}), 0, true, true},
		{"empty uid", conf(true, map[string]string{label.GateUID: ""}), 0, true, true},
		// Without the capability the runtime passes no annotations: a
		// gated pod would be taken for an ungated one.
		{"no capability", conf(false, map[string]string{label.GateUID: "65532"}), 0, false, true},
	} {
		uid, gated, err := gateUID(tc.conf)
		if uid != tc.uid || gated != tc.gated || (err != nil) != tc.err {
			t.Errorf("%s: gateUID = %d, %v, %v; want %d, %v, error %v", tc.name, uid, gated, err, tc.uid, tc.gated, tc.err)
		}
	}
}

func TestGateRules(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		r := gateRules(65532, v6)
		for _, want := range []string{
			"*filter\n", ":INPUT DROP", ":FORWARD DROP", ":OUTPUT DROP",
			"-A INPUT -i lo -j ACCEPT\n",
			"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n",
			"-A OUTPUT -o lo -j ACCEPT\n",
			"-A OUTPUT -m owner --uid-owner 65532 -j ACCEPT\n",
			"COMMIT\n",
		} {
			if !strings.Contains(r, want) {
				t.Errorf("v6 %v: rules lack %q:\n%s", v6, want, r)
			}
		}
		reject := "-A OUTPUT -j REJECT --reject-with icmp-admin-prohibited\n"
		if v6 {
			reject = "-A OUTPUT -j REJECT --reject-with icmp6-adm-prohibited\n"
		}
		if !strings.HasSuffix(r, reject+"COMMIT\n") {
			t.Errorf("v6 %v: the last rule is not %q:\n%s", v6, reject, r)
		}
		if strings.Contains(r, "OUTPUT -m conntrack") || strings.Count(r, "ACCEPT") != 4 {
			t.Errorf("v6 %v: rules accept more than loopback, the gate's uid and answers:\n%s", v6, r)
		}
	}
}

// TestLoadRules loads the rules into a network namespace of its own, with
// a veth pair to a second one, and checks what leaves: the gate's uid
// reaches the peer (which answers a closed port with a reset), root and
// the sandbox's uid are refused at once. It needs root, nsenter, unshare,
// setpriv, busybox and iptables-restore (the node's tools).
func TestLoadRules(t *testing.T) {
	if os.Getuid() != 0 {
		if enginetest.Required() {
			t.Fatal("needs root (network namespaces)")
		}
		t.Skip("needs root (network namespaces)")
	}
	ns := func() string {
		c := exec.Command("unshare", "-n", "sleep", "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		p := "/proc/" + strconv.Itoa(c.Process.Pid) + "/ns/net"
		self, _ := os.Readlink("/proc/self/ns/net")
		for i := 0; ; i++ { // until unshare has entered its namespace
			if l, err := os.Readlink(p); err == nil && l != self {
				return p
			}
			if i > 500 {
				t.Fatalf("%s never left the host's network namespace", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	pod, peer := ns(), ns()
	in := func(netns string, args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"--net=" + netns}, args...)...).CombinedOutput()
		return string(out), err
	}
	peerPID := strings.TrimSuffix(strings.TrimPrefix(peer, "/proc/"), "/ns/net")
	for _, cmd := range [][]string{
		{"ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", peerPID},
		{"ip", "addr", "add", "10.250.0.2/24", "dev", "v0"},
		{"ip", "link", "set", "v0", "up"},
		{"ip", "link", "set", "lo", "up"},
	} {
		if out, err := in(pod, cmd...); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	for _, cmd := range [][]string{{"ip", "addr", "add", "10.250.0.1/24", "dev", "v1"}, {"ip", "link", "set", "v1", "up"}} {
		if out, err := in(peer, cmd...); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	connect := func(uid string) string {
		args := []string{"busybox", "nc", "-w", "3", "10.250.0.1", "9"}
		if uid != "0" {
			args = append([]string{"setpriv", "--reuid", uid, "--regid", uid, "--clear-groups"}, args...)
		}
		out, _ := in(pod, args...)
		return out
	}
	// Without rules the peer's reset answers everyone.
	if out := connect("65534"); !strings.Contains(out, "refused") {
		t.Fatalf("before the rules, a connect to the peer's closed port: %q; want refused", out)
	}
	if err := loadRules(pod, 65532); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string]string{"65532": "refused", "65534": "No route to host", "0": "No route to host", "65533": "No route to host"} {
		if out := connect(uid); !strings.Contains(out, want) {
			t.Errorf("uid %s connects to the peer: %q; want %q", uid, out, want)
		}
	}
	if out, _ := in(pod, "setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "busybox", "nslookup", "-timeout=2", "example.com", "10.250.0.1"); !strings.Contains(out, "not permitted") {
		t.Errorf("a DNS query of the sandbox's uid: %q; want EPERM", out)
	}
	if out, err := in(pod, "ip6tables", "-S", "OUTPUT"); err != nil || !strings.Contains(out, "--uid-owner 65532") {
		t.Errorf("ip6tables OUTPUT: %v %q", err, out)
	}
}
