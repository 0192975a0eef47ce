package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// isolateConf is the plugin's entry in the CNI conflist.
type isolateConf struct {
	CNIVersion        string          `json:"cniVersion"`
	NamespacePrefixes []string        `json:"namespacePrefixes"`
	PrevResult        json.RawMessage `json:"prevResult"`
}

// isolate implements the CNI plugin (spec 0.4.0 and 1.0.0 chaining): ADD
// deletes CNI_IFNAME in CNI_NETNS for pods of the configured namespaces and
// prints the previous result; DEL and CHECK have nothing to do.
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
		out, err := exec.Command("nsenter", "--net="+netns, "ip", "link", "delete", ifname).CombinedOutput()
		if err != nil {
			return cniError(fmt.Errorf("delete %s in %s: %v: %s", ifname, netns, err, out))
		}
	}
	_, err = os.Stdout.Write(conf.PrevResult)
	return err
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
