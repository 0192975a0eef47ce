package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// runcPath is the runc the wrapper runs: Debian's.
const runcPath = "/usr/sbin/runc"

// PidsAnnotationPrefix starts the pod annotation that carries a
// container's pids limit: PidsAnnotationPrefix + container name.
const PidsAnnotationPrefix = "pids.stockade.dev/"

// criContainerName is the OCI annotation containerd's CRI sets to the
// container's name in its pod.
const criContainerName = "io.kubernetes.cri.container-name"

// runcWrap applies the pids annotation to a bundle being created, then
// execs runc with args unchanged. A malformed annotation fails the create:
// a sandbox never starts without the limit it asked for.
func runcWrap(args []string) error {
	if bundle, ok := createBundle(args); ok {
		if err := applyPids(filepath.Join(bundle, "config.json")); err != nil {
			return err
		}
	}
	return syscall.Exec(runcPath, append([]string{"runc"}, args...), os.Environ())
}

// createBundle returns the --bundle of a "create" (or "run") command.
func createBundle(args []string) (string, bool) {
	create, bundle := false, ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "create" || a == "run":
			create = true
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
			i++
		case len(a) > 9 && a[:9] == "--bundle=":
			bundle = a[9:]
		}
	}
	if create && bundle == "" {
		bundle = "."
	}
	return bundle, create
}

// applyPids rewrites the OCI config at name with the container's pids
// limit when the annotation names one.
func applyPids(name string) error {
	raw, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ann, _ := spec["annotations"].(map[string]any)
	cname, _ := ann[criContainerName].(string)
	v, ok := ann[PidsAnnotationPrefix+cname].(string)
	if cname == "" || !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("annotation %s%s=%q: want a positive integer", PidsAnnotationPrefix, cname, v)
	}
	linux, _ := spec["linux"].(map[string]any)
	if linux == nil {
		return fmt.Errorf("%s: no linux section", name)
	}
	res, _ := linux["resources"].(map[string]any)
	if res == nil {
		res = map[string]any{}
		linux["resources"] = res
	}
	res["pids"] = map[string]any{"limit": n}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := name + ".stockade"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
