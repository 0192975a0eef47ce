package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/stockade/stockade/internal/vulndb"
)

// vulndbFetchTimeout bounds `vulndb fetch`: a few MiB from vuln.go.dev.
const vulndbFetchTimeout = 5 * time.Minute

func init() {
	register(&command{
		name:    "vulndb",
		summary: "download the Go vulnerability database for offline scans",
		usage: `usage: stockade vulndb fetch [-url URL] DIR

Fetch downloads the public Go vulnerability database (the bulk .zip at
` + vulndb.DefaultURL + `), extracts it on the host with limits on
names, entries and sizes, checks its layout, and renames it into DIR, which
must be new or empty. It prints the database's modified time and content
hash, the two facts every scan report names it by.

Scans never reach the network: give the directory to 'stockade scan
-vulndb DIR' or set STOCKADE_VULNDB.

A download that fails (no network, a status other than 200, more than
` + fmt.Sprint(vulndb.MaxDownload>>20) + ` MiB) or a file that is not a database exits 4; a DIR that is
not empty, or a -url that is not http(s), 2.

Examples:

	stockade vulndb fetch ~/vulndb
	STOCKADE_VULNDB=~/vulndb stockade scan .`,
		flags: vulndbFlags,
	})
}

func vulndbFlags(fs *flag.FlagSet) func(ctx context.Context, env *cmdEnv, args []string) error {
	u := fs.String("url", vulndb.DefaultURL, "`URL` of the database's .zip")
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		if len(args) == 0 || args[0] != "fetch" {
			return usagef("vulndb", "stockade vulndb: want a subcommand: fetch")
		}
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return &exitError{code: exitUnsupported}
		}
		if fs.NArg() != 1 {
			return usagef("vulndb", "usage: stockade vulndb fetch [-url URL] DIR")
		}
		if pu, err := url.Parse(*u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			return usagef("vulndb", "stockade vulndb fetch: -url %q is not an http(s) URL", *u)
		}
		ctx, cancel := context.WithTimeout(ctx, vulndbFetchTimeout)
		defer cancel()
		db, err := vulndb.Fetch(ctx, nil, *u, fs.Arg(0))
		if errors.Is(err, vulndb.ErrInvalid) {
			// What was downloaded is not a database: it could not be had.
			return &exitError{code: exitAcquisition, err: err}
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.stdout, "%s: %d advisories, modified %s, sha256 %s\n", db.Dir, db.Entries, db.Modified.Format(time.RFC3339), db.SHA256)
		return err
	}
}
