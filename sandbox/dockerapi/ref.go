package dockerapi

import "strings"

// ShortRef returns an image reference as Docker names a local image, the
// one spelling Stockade compares and reports. Engines name one image
// differently: Podman qualifies a name without a registry with
// "localhost/" ("localhost/stockade/go:1.26.8-local" for what Docker lists
// as "stockade/go:1.26.8-local"), and a Docker Hub name may come fully
// qualified ("docker.io/library/golang:1.26"). So the "localhost/",
// "docker.io/library/" and "docker.io/" prefixes go, and a name without a
// tag or digest gets ":latest". An image ID (sha256:…) is returned as it
// is.
func ShortRef(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	for _, p := range []string{"localhost/", "docker.io/library/", "docker.io/"} {
		if r, ok := strings.CutPrefix(ref, p); ok {
			ref = r
			break
		}
	}
	if !strings.Contains(ref, "@") && !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		ref += ":latest"
	}
	return ref
}

// SameRef reports whether two references name the same image on either
// engine (see ShortRef). It is the one place image references are
// compared.
func SameRef(a, b string) bool { return ShortRef(a) == ShortRef(b) }
