package dockerapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Event is one message of the events stream.
type Event struct {
	Type   string `json:"Type"`   // container, image, volume, network, ...
	Action string `json:"Action"` // create, start, die, destroy, ...
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	TimeNano int64 `json:"timeNano"`
}

// EventOptions are the options of Events.
type EventOptions struct {
	Since, Until time.Time // zero means unbounded (Until zero: follow)
	Filters      Filters
}

// EventStream reads events until its context ends or Close is called.
type EventStream struct {
	body io.ReadCloser
	dec  *json.Decoder
	ctx  context.Context
}

// Events opens the engine's event stream.
func (c *Client) Events(ctx context.Context, opts EventOptions) (*EventStream, error) {
	q := url.Values{}
	if !opts.Since.IsZero() {
		q.Set("since", strconv.FormatInt(opts.Since.Unix(), 10))
	}
	if !opts.Until.IsZero() {
		q.Set("until", strconv.FormatInt(opts.Until.Unix(), 10))
	}
	if err := opts.Filters.encode(q); err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/events", query: q})
	if err != nil {
		return nil, err
	}
	return &EventStream{body: resp.Body, dec: json.NewDecoder(resp.Body), ctx: ctx}, nil
}

// Next returns the next event; io.EOF when the stream ended (Until reached).
func (s *EventStream) Next() (Event, error) {
	// The engine is trusted (see the package doc), so one event is decoded
	// whole; events are small objects the engine itself writes.
	var e Event
	if err := s.dec.Decode(&e); err != nil {
		if s.ctx.Err() != nil {
			return e, s.ctx.Err()
		}
		if err == io.EOF {
			return e, io.EOF
		}
		return e, fmt.Errorf("dockerapi: decode event: %w", err)
	}
	return e, nil
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }
