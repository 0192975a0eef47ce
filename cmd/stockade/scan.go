package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stockade/stockade/internal/inspect"
	"github.com/stockade/stockade/internal/report"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/internal/workflow"
)

func init() {
	register(&command{
		name:    "scan",
		summary: "scan a Go module for known vulnerabilities without trusting it",
		usage: `usage: stockade scan [flags] DIR

Scan checks the Go module in DIR against a vulnerability database with
govulncheck, without trusting the module and without network during the
scan. It takes the same steps as inspect up to the validation (layout
check, image, data directory lock, snapshot, mount probe, acquisition),
then runs the pinned scanner in one execute container: no network, source
and module cache read-only, the scanner at /tools and the database at
/vulndb read-only, a fresh build cache.

The scanner is govulncheck from golang.org/x/vuln at the version pinned for
the image's Go minor, built once per image in the tool profile from a
module whose go.sum is committed in Stockade, copied by the host into the
data directory, and verified before every scan (sha256 and build info); a
mismatch refuses the scan.

The database is -vulndb DIR (a directory in the layout of vuln.go.dev, or a
.zip of one), or $STOCKADE_VULNDB. Every report names it by its modified
time and content hash. 'stockade vulndb fetch DIR' downloads the public one.

The report lists first the vulnerabilities your code calls that have a
fix, with the upgrade that fixes each and one call trace, then the rest:
called without a fix, imported, required. A scan whose output was cut
short or cannot be read is inconclusive, never "no vulnerabilities".

-openvex FILE also writes the scan as an OpenVEX v0.2.0 document
(https://openvex.dev), made from the same scan as the report: a called
vulnerability is "affected", with the upgrade that fixes it as the action;
one only imported or required is "not_affected", justified as
"vulnerable_code_not_in_execute_path", as govulncheck's own openvex output
says. The document is the same for the same module, source, scanner and
database: its timestamp is the database's modified time and its @id the
sha256 of its content. An inconclusive scan exits 3, as a vulnerable one
does, and writes no document: stderr says why, and a document an earlier
run of Stockade left at FILE is removed, so FILE exists after a run only
when this run wrote it.

-sarif FILE also writes the vulnerabilities as a SARIF 2.1.0 log for a
code-scanning view (docs/REPORT.md): one result per vulnerability (error
when called, located at your code's call with the trace as a stack;
warning when imported; note when required), a fingerprint of the ID and
module so the same vulnerability is the same alert across runs. An
inconclusive scan's log is marked unsuccessful.

A called vulnerability exits 3, as an inconclusive scan does; imported or
required ones alone exit 0. A scanner that fails verification is
Stockade's failure (exit 1); no database, or a malformed one, exit 2.

Examples:

	stockade scan -vulndb ~/vulndb .
	STOCKADE_VULNDB=~/vulndb.zip stockade scan -json ./mymodule
	stockade scan -vulndb ~/vulndb -openvex mymodule.openvex.json ./mymodule
	stockade scan -vulndb ~/vulndb -sarif scan.sarif .
	stockade scan -vulndb testdata/vulndb -fixture-proxy testdata/modules testdata/repos/vuln`,
		flags: scanFlags,
	})
}

func scanFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	rf := addRunFlags(fs, "scan").withOpenVEX(fs)
	var (
		worktree = fs.Bool("worktree", false, "scan the working tree, uncommitted changes included, instead of the committed tree")
		timeout  = fs.Duration("timeout", inspect.DefaultScanTimeout, "bound on the scanner's run, within -deadline")
		deadline = fs.Duration("deadline", inspect.DefaultDeadline, "bound on the whole command: every phase gets min(its budget, what is left)")
		vulnDB   = fs.String("vulndb", "", "the vulnerability database: `DIR` in the Go vulnerability database layout, or a .zip; default $"+vulndb.EnvDefault)
	)
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		db := vulnDBOr(*vulnDB)
		if db == "" {
			return rf.usagef("no vulnerability database: give -vulndb DIR or set %s", vulndb.EnvDefault)
		}
		return rf.runInspect(ctx, env, args, inspect.Scan, inspect.Options{Worktree: *worktree, Options: workflow.Options{
			Timeout: *timeout, Deadline: *deadline, VulnDB: db,
		}})
	}
}

// writeOpenVEX writes rep's scan to -openvex's file, atomically, when the
// flag is set. When no document can be made (report.ErrNoVEX: no scan, or
// an inconclusive one) it writes nothing, says why on stderr, removes a
// document an earlier run of Stockade left at that path (it would
// otherwise pass for this run's), and returns the error.
func (f *runFlags) writeOpenVEX(env *cmdEnv, rep *report.Report) error {
	if f.openVEX == nil || *f.openVEX == "" {
		return nil
	}
	name := *f.openVEX
	d, err := report.OpenVEX(rep)
	if errors.Is(err, report.ErrNoVEX) {
		fmt.Fprintf(env.stderr, "stockade %s: -openvex %s not written: %v\n", f.cmd, name, err)
		if staleVEX(name) {
			if rerr := os.Remove(name); rerr != nil {
				return fmt.Errorf("removing the OpenVEX document an earlier run left at %s: %w", name, rerr)
			}
			fmt.Fprintf(env.stderr, "stockade %s: removed the OpenVEX document an earlier run left at %s\n", f.cmd, name)
		}
		return err
	}
	if err != nil {
		return err
	}
	if err := writeAtomic(name, func(w io.Writer) error { return report.WriteOpenVEX(w, d) }); err != nil {
		return fmt.Errorf("writing the OpenVEX document: %w", err)
	}
	return nil
}

// staleVEX reports whether the file name is an OpenVEX document Stockade
// wrote (its @id has report.VEXIDPrefix).
func staleVEX(name string) bool {
	b, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	var d report.VEX
	return json.Unmarshal(b, &d) == nil && d.Context == report.VEXContext && strings.HasPrefix(d.ID, report.VEXIDPrefix)
}
