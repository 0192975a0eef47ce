package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/mail"
	"time"

	"github.com/stockade/stockade/internal/maintain"
	"github.com/stockade/stockade/internal/vulndb"
	"github.com/stockade/stockade/sandbox/dockerapi"
)

func init() {
	register(&command{
		name:    "maintain",
		summary: "propose one dependency upgrade, proven against the baseline",
		usage: `usage: stockade maintain [flags] DIR

Maintain proposes one upgrade of a direct dependency of the Go module in
DIR, a git checkout's top or a directory below it (a module of a
monorepo), as a commit, after proving it without trusting the repository.
It refuses a module whose tracked files have uncommitted changes (naming
them; the rest of a monorepo does not count), validates the committed tree as
'stockade inspect' does (the baseline), and tries the eligible candidates
in selection order (patch before minor, the highest version, then module
path) until one passes, at most 5: each one that does not is reported
with its evidence. Pre-releases, pseudo-versions and retracted versions
are never eligible.

It stages the upgrade with go get and go mod tidy in the mutate profile
(module commands only, on a copy of go.mod and go.sum, never the
snapshot). The admission gate refuses the upgrade unless the target moved
to exactly that version, nothing moved down, every other requirement that
moved up is explained by the target's own requirements, no direct
dependency was added or removed, and replace, exclude, retract,
toolchain and the module path are unchanged. The go line may change only
as go get raises it since Go 1.21: to exactly the go line of a
requirement that moved, one the image's Go builds (the report and the
commit message say so); -keep-go refuses any change of it. A second go
mod tidy must change nothing. Before any test runs, the exported API of every
package the module imports from a module the upgrade moved is compared
between the old and the new version (the declarations go doc prints, in
an execute container without network): removed functions, methods and
types and changed signatures are listed in the report and the commit
message. The upgraded tree is then validated with a fresh build
cache; its findings are compared by key with the baseline's. Every test
that fails after the upgrade is run again alone three times in a fresh
container, and so is the same test on the baseline: it is a regression
only when it fails every time after and passes every time before, flaky
(reported, not blocking) otherwise.

A clean result is a commit of the module's two manifests on top of the
validated commit, made with git plumbing from fixed inputs (author, committer and
date from -author and -date; by default Stockade and the validated
commit's date), so the same inputs give the same commit ID whatever the
user's git identity, configuration, hooks or time zone. It is stored under
refs/stockade/proposals/<id> in DIR; HEAD, the index, the working tree and
the branches never move. -branch also points a new branch at it. The
report gives the commit, the git commands to look at and apply it, and the
commit message, ready for a pull request.

-module path[@version] narrows the choice to one direct dependency (and
version); it is checked before anything runs (a direct requirement, an
upgrade of a class -allow allows), and a version the module proxy does not
list is refused before the baseline is validated.

-each tries every eligible candidate independently against the one
baseline and prepares one proposal per candidate that passes.

-group proposes one commit with several upgrades, without hiding which
one breaks: every eligible candidate is first validated alone against the
one baseline (as -each does, without proposals of their own); the group
is the set that passed, validated together once more. When the group
does not pass, what breaks it is found by adding the members one at a time,
in selection order, to the last combination that passed: a member whose
addition fails is left out. The report lists every candidate in or out
with the attempt or combination whose evidence shows why, and each
combination tried; N candidates cost N validations and one more (at most
N-2 more when the group fails). -branch points at the group's proposal.

-vulndb DIR (or $STOCKADE_VULNDB) scans the baseline and each upgraded
tree with the same verified scanner and database (see 'stockade help
scan'); each attempt reports the vulnerabilities the upgrade fixes and
introduces. -prefer-fixes tries first, among the eligible candidates,
those whose version fixes a vulnerability the baseline calls.

-min-age DURATION (default 0: none) is a cooldown: a version the module
proxy published less than DURATION ago (by its .info Time) is never a
candidate, and the newest old enough version of its class is tried
instead; a version the proxy gives no time for is held back too. A week
(168h) is a reasonable start; projects use 7 to 30 days. The report lists
what was held back and when each ages in; the setting is part of the
config hash.

-sarif FILE also writes the baseline's findings (the validated commit's
checks and, with -vulndb, its scan) as a SARIF 2.1.0 log for a
code-scanning view, as inspect does (docs/REPORT.md); an upgrade's
findings stay in the report's attempts.

Modules come from where inspect gets them, with the same flags
(-proxy, -private, -nosumdb, -sumdb, -netrc, -auth-helper, -proxy-ca:
'stockade help inspect'); the credentials reach go get and go mod tidy
too, never the validations.

Both trees are validated in the toolchain image inspect would choose for
DIR (the go directive's or the toolchain line's minor, with the C toolchain
unless -cgo=false), or the one -image names; -pull applies to -image only.

The outcome decides the exit code (table below): proposal_prepared 0;
unsupported 2; baseline_failing, baseline_inconclusive and
validation_inconclusive 3 (nothing is claimed); the explained non-results
4. A failure of Stockade's own inside an attempt ends the run (exit 1).

Examples:

	stockade maintain .
	stockade maintain -fixture-proxy testdata/modules /tmp/app  # a git checkout of testdata/repos/maintain-patch
	stockade maintain -module golang.org/x/text@v0.21.0 -branch deps/x-text .
	stockade maintain -each -json ~/src/example.com/app
	stockade maintain -vulndb ~/vulndb -prefer-fixes .
	stockade maintain -each -sarif baseline.sarif -vulndb ~/vulndb .
	stockade maintain -min-age 168h -branch deps/weekly .
	stockade maintain -group -branch deps/group .`,
		flags: maintainFlags,
	})
}

func maintainFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	rf := addRunFlags(fs, "maintain").withCooldown(fs)
	var (
		allow       = fs.String("allow", "patch,minor", "`classes` of upgrade that may be tried: patch, minor (major changes the import path: not supported yet)")
		modFlag     = fs.String("module", "", "try only this direct dependency: `path[@version]`")
		each        = fs.Bool("each", false, "try every eligible candidate against the one baseline, one proposal per candidate that passes")
		group       = fs.Bool("group", false, "validate every eligible candidate alone, then the ones that passed together: one proposal with them, each candidate left out named with its evidence")
		branch      = fs.String("branch", "", "also point a new branch `NAME` at the proposal (refused if it exists)")
		author      = fs.String("author", "", "author and committer of the proposal, `\"Name <email>\"`; default \"Stockade <stockade@localhost>\"")
		date        = fs.String("date", "", "author and committer date of the proposal, RFC 3339; default the validated commit's")
		timeout     = fs.Duration("timeout", maintain.DefaultTimeout, "bound on each validation (and each arm of reruns), within -deadline")
		deadline    = fs.Duration("deadline", maintain.DefaultDeadline, "bound on the whole command")
		vulnDB      = fs.String("vulndb", "", "scan the baseline and each candidate against the vulnerability database in `DIR` (or a .zip) and report what each upgrade fixes and introduces; default $"+vulndb.EnvDefault+" when set")
		preferFixes = fs.Bool("prefer-fixes", false, "try first the eligible candidates that fix a vulnerability the baseline calls (needs a database)")
		keepGo      = fs.Bool("keep-go", false, "refuse an upgrade that changes the go line, even a raise the upgrade requires")
	)
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		if err := rf.check(); err != nil {
			return err
		}
		if *timeout <= 0 || *deadline <= 0 {
			return rf.usagef("-timeout and -deadline must be positive")
		}
		db := vulnDBOr(*vulnDB)
		if *preferFixes && db == "" {
			return rf.usagef("-prefer-fixes needs a vulnerability database: give -vulndb DIR or set %s", vulndb.EnvDefault)
		}
		policy := maintain.Policy{KeepGo: *keepGo}
		var err error
		if policy.Allow, err = maintain.ParseAllow(*allow); err != nil {
			return rf.usagef("%v", err)
		}
		if *modFlag != "" {
			if policy.Module, policy.Version, err = maintain.ParseModule(*modFlag); err != nil {
				return rf.usagef("%v", err)
			}
		}
		who := maintain.Identity{}
		if *author != "" {
			a, err := mail.ParseAddress(*author)
			if err != nil || a.Name == "" {
				return rf.usagef("-author %q is not \"Name <email>\"", *author)
			}
			who.Name, who.Email = a.Name, a.Address
		}
		if *date != "" {
			if who.Date, err = time.Parse(time.RFC3339, *date); err != nil {
				return rf.usagef("-date: %v", err)
			}
		}
		shared, cleanup, err := rf.options(env, args)
		if err != nil {
			return err
		}
		defer cleanup()
		eng, err := dockerapi.New("")
		if err != nil {
			return err
		}
		defer eng.Close()
		shared.Timeout, shared.Deadline, shared.VulnDB = *timeout, *deadline, db
		rep, err := maintain.Maintain(ctx, eng, maintain.Options{
			Options: shared, Policy: policy, Each: *each, Group: *group, Branch: *branch, Identity: who, PreferFixes: *preferFixes,
		})
		if errors.Is(err, maintain.ErrPolicy) || errors.Is(err, maintain.ErrMajor) || errors.Is(err, maintain.ErrBranchExists) || errors.Is(err, vulndb.ErrInvalid) {
			return rf.usagef("%v", err)
		}
		if err != nil {
			return err
		}
		if *rf.asJSON {
			err = maintain.WriteJSON(env.stdout, rep)
		} else {
			err = maintain.WriteText(env.stdout, rep)
		}
		if err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		if err := rf.writeSARIF(rep.SARIF()); err != nil {
			return err
		}
		if rep.ExitCode != exitOK {
			return &exitError{code: rep.ExitCode}
		}
		return nil
	}
}
