package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Error is a provider failure in one line: what failed, the HTTP status when
// there was one, and the provider's own message. It never holds the API key:
// no request (whose headers carry it) is kept, and the key is cut out of
// Msg should a server's message echo it.
type Error struct {
	Provider string // "anthropic", "openai"
	Status   int    // the HTTP status of an error answer; 0 for a failure without one (no answer, or an answer that could not be used)
	Msg      string // one line
	Cause    error  // for a failure without an answer: the transport or context error; nil otherwise
}

func (e *Error) Error() string { return e.Provider + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Cause }

// describe turns a failed request into an *Error. status and apiMsg come
// from the error answer when the server gave one (status 0 otherwise, err
// then saying what happened); opt's retries are the retries made; keyEnv
// names the key's variable for a 401.
func describe(provider string, err error, status int, apiMsg string, opt Options, keyEnv string) error {
	if err == nil {
		return nil
	}
	retried := ""
	if n := opt.retries(); n > 0 {
		retried = fmt.Sprintf(" (after %d retries)", n)
	}
	// A server's message (or a transport error) that echoes the key has
	// it cut out, before the line is capped.
	line := func(s string) string {
		if opt.APIKey != "" {
			s = strings.ReplaceAll(s, opt.APIKey, "[API key]")
		}
		return oneLine(s)
	}
	detail := line(apiMsg)
	if detail != "" {
		detail = ": " + detail
	}
	e := &Error{Provider: provider, Status: status}
	if status == 0 {
		e.Cause = err
	}
	switch {
	case status == 401:
		e.Msg = fmt.Sprintf("authentication failed (401): the API key was not accepted; check %s%s", keyEnv, detail)
	case status == 403:
		e.Msg = "permission denied (403)" + detail
	case status == 404:
		e.Msg = "not found (404): check the model and base_url settings" + detail
	case status == 429:
		e.Msg = "rate limited (429)" + retried + detail
	case status >= 500:
		e.Msg = fmt.Sprintf("server error (%d)%s%s", status, retried, detail)
	case status >= 400:
		e.Msg = fmt.Sprintf("request rejected (%d)%s", status, detail)
	case status != 0:
		e.Msg = fmt.Sprintf("unexpected HTTP status %d%s", status, detail)
	case errors.Is(err, context.DeadlineExceeded):
		e.Msg = fmt.Sprintf("no response within %s%s", opt.timeout(), retried)
	case errors.Is(err, context.Canceled):
		e.Msg = "request cancelled"
	default:
		var ue *url.Error
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			e.Msg = fmt.Sprintf("no response within %s%s", opt.timeout(), retried)
		case errors.As(err, &ue):
			e.Msg = fmt.Sprintf("cannot reach %s%s: %s", line(redactURL(ue.URL)), retried, line(ue.Err.Error()))
		default:
			e.Msg = line(err.Error())
		}
	}
	return e
}

// redactURL keeps a URL's scheme, host and path: no user info, no query.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "the endpoint"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// oneLine collapses whitespace runs and caps the length, so an error is one
// readable line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
