// Package label names the labels Stockade puts on everything it creates in
// the engine (containers, volumes, networks, images), so that a sweep can find
// and remove what a crashed process left behind, and remove nothing else.
//
// Rule: remove only what carries Managed=ManagedValue and the Owner (and,
// for toolchain runs, the DataDir) of the caller.
package label

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

const (
	// Managed marks an object as created by Stockade; its value is ManagedValue.
	Managed = "io.stockade.managed"
	// ManagedValue is the value of Managed.
	ManagedValue = "true"
	// Owner scopes sweeps: each process sharing an engine reaps only its owner's share.
	Owner = "io.stockade.owner"
	// Kind says what an object is for: KindSession, KindToolchain, KindProbe, KindImage.
	Kind = "io.stockade.kind"
	// Session is the session ID of a session sandbox and its volumes.
	Session = "io.stockade.session"
	// Run is the run ID of a toolchain run (inspect, maintain, scan).
	Run = "io.stockade.run"
	// Profile is the toolchain profile: acquire, mutate, execute or tool.
	Profile = "io.stockade.profile"
	// DataDir is a short hash of the data directory a toolchain run used; the
	// lock on that directory makes reaping by it safe.
	DataDir = "io.stockade.datadir"
	// Spec is a digest of the parts of a session spec that must match for
	// Provision to adopt an existing sandbox.
	Spec = "io.stockade.spec"
	// CreatedBy marks a session volume with a token of the Provision call
	// that created it: the engine answers a create of an existing volume
	// with that volume, so the token is how a call knows what it made, and
	// so may remove after a failed create.
	CreatedBy = "io.stockade.created-by"
	// Role says what part of a session an object plays besides its
	// sandbox, keeper and volumes: RoleGate for the egress gate's container
	// and network.
	Role = "io.stockade.role"
	// Pool is the token of one warm-pool member (sandbox/docker's
	// Config.Pool): its sandbox container, keeper and volumes carry it, so
	// a claimed sandbox leads to the rest of its member, and an orphan (a
	// keeper or volume whose sandbox is gone) is found by it.
	Pool = "io.stockade.pool"
	// GateUID is the annotation of a gated (NetLimited) session pod of
	// sandbox/kubernetes: the uid its egress gate container runs as, in
	// decimal. The node's CNI plugin (cmd/stockade-kubenode,
	// stockade-isolate) keeps that pod's interface and lets only that
	// uid's packets leave the pod; a pod without it gets loopback only.
	GateUID = "net.stockade.dev/gate-uid"
)

// Kinds.
const (
	KindSession   = "session"
	KindToolchain = "toolchain"
	KindProbe     = "probe"
	KindImage     = "image"
)

// Values of Role.
const (
	RoleGate = "gate" // a NetLimited session's egress gate and its network
	// RoleAgent marks the owner's volume holding the resident exec agent
	// (no session's: it goes with the owner's last session) and the
	// short-lived container that fills it.
	RoleAgent = "agent"
	// RolePool marks a warm-pool member's sandbox container and volumes:
	// created for no session (no Session label), claimed by a rename to a
	// session's name, which is then the record of whose it is.
	RolePool = "pool"
	// RolePoolKeeper marks a warm-pool member's keeper.
	RolePoolKeeper = "pool-keeper"
)

// Base returns the labels every object Stockade creates carries.
func Base(owner, kind string) map[string]string {
	return map[string]string{Managed: ManagedValue, Owner: owner, Kind: kind}
}

// DataDirID returns the short hash that labels the containers of runs using
// the data directory dir (DataDir): hex of the SHA-256 of the cleaned path,
// 16 digits. dir should be absolute with symlinks resolved, so that two
// spellings of one directory get one ID.
func DataDirID(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:8])
}

// Has reports whether have holds every label of want with the same value.
// Every list the engine filters by labels is checked again with it before
// anything listed is removed: an engine may apply a filter more loosely
// than asked (Podman 4's volume list matches any one of several labels, not
// all), and a loose filter must never widen what a sweep removes.
func Has(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}
