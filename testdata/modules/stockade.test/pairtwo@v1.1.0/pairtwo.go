// Package pairtwo is a fixture dependency of the maintain -group fixture: its
// Level is 1 at v1.0.0 and 2 at v1.1.0. Either upgrade alone passes the
// fixture's test; both together fail it (a conflict only the group has).
package pairtwo

// Level is the release's level.
func Level() int { return 2 }
