package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Credential is a secret the gate puts into plain-HTTP requests in place
// of a placeholder the sandbox holds.
type Credential struct {
	// Placeholder is the text the sandbox sends, such as
	// "STOCKADE_CRED_GITHUB"; at least 8 bytes, so it never matches by
	// chance.
	Placeholder string `json:"placeholder"`
	// Value replaces Placeholder in header values.
	Value string `json:"value"`
	// Hosts are the hosts (patterns as in Policy.Allowed) whose requests
	// get Value; any other host gets the placeholder unchanged.
	Hosts []string `json:"hosts"`
}

// CredentialSet is the control plane's answer.
type CredentialSet struct {
	Credentials []Credential `json:"credentials"`
}

// Limits of the credential fetch.
const (
	// FetchTimeout bounds the whole fetch.
	FetchTimeout = 15 * time.Second
	// maxCredentialBytes bounds the control plane's answer.
	maxCredentialBytes = 1 << 20
	// minPlaceholderBytes is the shortest placeholder accepted.
	minPlaceholderBytes = 8
)

// FetchCredentials asks the control plane at url for session's
// credentials, authenticating with token (see the package documentation).
func FetchCredentials(ctx context.Context, client *http.Client, url, session, token string) ([]Credential, error) {
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("gate: control plane: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Stockade-Session", session)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gate: control plane: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("gate: control plane answered %s", resp.Status)
	}
	var set CredentialSet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCredentialBytes)).Decode(&set); err != nil {
		return nil, fmt.Errorf("gate: control plane answer: %w", err)
	}
	for _, c := range set.Credentials {
		if len(c.Placeholder) < minPlaceholderBytes {
			return nil, fmt.Errorf("gate: control plane answer: placeholder %q shorter than %d bytes", c.Placeholder, minPlaceholderBytes)
		}
	}
	return set.Credentials, nil
}

// substitute replaces, in h, the placeholders of the credentials whose
// hosts admit host.
func (s *Server) substitute(host string, h http.Header) {
	for _, c := range s.cfg.Credentials {
		if (Policy{Allowed: c.Hosts}).AllowHost(host) != nil {
			continue
		}
		for k, vs := range h {
			for i, v := range vs {
				vs[i] = strings.ReplaceAll(v, c.Placeholder, c.Value)
			}
			h[k] = vs
		}
	}
}
