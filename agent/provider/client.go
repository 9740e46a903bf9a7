package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// maxResponseBody bounds the bytes read of a successful answer: a larger one
// is refused, not held in memory, so an endpoint cannot exhaust the
// harness's memory with one response.
const maxResponseBody = 32 << 20

// maxErrorBody bounds the bytes read of an error answer; only its message is
// wanted, and the rest is dropped.
const maxErrorBody = 64 << 10

// maxRetryAfter is the longest wait a Retry-After-Ms or Retry-After header is
// obeyed for. A server asking for longer is not retried: its answer is
// returned at once.
const maxRetryAfter = 60 * time.Second

// The backoff when the server names no wait: firstBackoff, doubled for each
// retry up to maxBackoff, less up to a quarter at random.
const (
	firstBackoff = 500 * time.Millisecond
	maxBackoff   = 8 * time.Second
)

// userAgent is sent with every request.
const userAgent = "b10x-harness"

// endpoint posts JSON requests to one URL of a provider with the retries
// Options documents, and turns every failure into an *Error. It is safe for
// concurrent use.
type endpoint struct {
	provider string      // "anthropic", "openai"
	keyEnv   string      // the key's variable, named by a 401
	url      string      // the full URL requests are posted to
	header   http.Header // sent with every request, the key's header included
	opt      Options
	hc       *http.Client
	maxBody  int64 // maxResponseBody; smaller in tests

	// apiMessage extracts the provider's message from an error answer's
	// body (at most maxErrorBody bytes; possibly not JSON at all).
	apiMessage func(body []byte) string
	// wait sleeps d, or until ctx is done, when it returns ctx's error.
	// Tests replace it to see the waits asked for.
	wait func(ctx context.Context, d time.Duration) error
}

func newEndpoint(provider, keyEnv, rawURL string, header http.Header, opt Options, apiMessage func([]byte) string) *endpoint {
	header.Set("content-type", "application/json")
	header.Set("accept", "application/json")
	header.Set("user-agent", userAgent)
	return &endpoint{
		provider:   provider,
		keyEnv:     keyEnv,
		url:        rawURL,
		header:     header,
		opt:        opt,
		hc:         httpClient(opt.HTTPClient),
		maxBody:    maxResponseBody,
		apiMessage: apiMessage,
		wait:       sleep,
	}
}

// httpClient returns the client requests go through: a copy of hc, or with
// hc nil one over a clone of net/http's default transport (which honours
// HTTPS_PROXY, HTTP_PROXY and NO_PROXY, as the SDKs' default clients did).
// Either way a redirect is followed only to the same scheme and host: the
// key's header would go with it.
func httpClient(hc *http.Client) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	} else if t, ok := http.DefaultTransport.(*http.Transport); ok {
		c.Transport = t.Clone()
	} else {
		c.Transport = http.DefaultTransport
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return &redirectError{to: redactURL(req.URL.String())}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// redirectError is a redirect to another origin, not followed.
type redirectError struct{ to string }

func (e *redirectError) Error() string {
	return "redirected to " + e.to + ", another host: not followed, it would receive the API key"
}

// tooLargeError is a successful answer over the size bound, refused.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the response is larger than %d MiB: refused", e.limit>>20)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// post sends payload as JSON and returns the body of a 2xx answer. A failed
// attempt is retried as Options.MaxRetries documents; each attempt, the
// reading of its answer included, is bounded by Options.RequestTimeout, and
// ctx ending stops an attempt or a wait at once. Every error is an *Error.
func (e *endpoint) post(ctx context.Context, payload any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Raw blocks kept from a response go back byte for byte (less
	// whitespace): no escaping of <, > and & in them.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		return nil, &Error{Provider: e.provider, Msg: "encoding the request: " + oneLine(err.Error())}
	}
	body := buf.Bytes()
	for retried := 0; ; retried++ {
		res, data, err := e.attempt(ctx, body)
		if cerr := ctx.Err(); cerr != nil {
			return nil, e.fail(cerr, nil, nil, retried)
		}
		if err == nil && res.StatusCode >= 200 && res.StatusCode < 300 {
			return data, nil
		}
		again, delay := retryable(res, err, retried)
		if !again || retried >= e.opt.retries() {
			return nil, e.fail(err, res, data, retried)
		}
		if werr := e.wait(ctx, delay); werr != nil {
			return nil, e.fail(werr, nil, nil, retried)
		}
	}
}

// attempt sends one request. It returns the answer with its body read and
// closed (a successful one whole, an error one up to maxErrorBody), or an
// error when there is no usable answer; res is also set when the body of an
// answer could not be read.
func (e *endpoint) attempt(ctx context.Context, body []byte) (*http.Response, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, e.opt.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header = e.header.Clone()
	res, err := e.hc.Do(req)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			// The attempt's own deadline: retried like a lost connection.
			return nil, nil, actx.Err()
		}
		return nil, nil, err
	}
	defer res.Body.Close()
	limit := int64(maxErrorBody)
	ok := res.StatusCode >= 200 && res.StatusCode < 300
	if ok {
		limit = e.maxBody
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			err = actx.Err()
		}
		return res, nil, fmt.Errorf("reading the response: %w", err)
	}
	if int64(len(data)) > limit {
		if ok {
			return res, nil, &tooLargeError{limit: limit}
		}
		data = data[:limit]
	}
	return res, data, nil
}

// retryable reports whether a failed attempt is retried, and after how long:
// a connection error, a lost body, or a 408, 409, 429 or 5xx answer, unless
// the server's x-should-retry says otherwise; after the server's
// Retry-After-Ms or Retry-After when it names a wait (not retried when the
// wait is over maxRetryAfter), the backoff otherwise.
func retryable(res *http.Response, err error, retried int) (bool, time.Duration) {
	var tl *tooLargeError
	var re *redirectError
	if errors.As(err, &tl) || errors.As(err, &re) {
		return false, 0
	}
	var again bool
	switch {
	case res == nil:
		again = true
	case res.Header.Get("x-should-retry") == "true":
		again = true
	case res.Header.Get("x-should-retry") == "false":
		again = false
	case err != nil:
		// The answer came but its body was lost: a connection error.
		again = true
	default:
		s := res.StatusCode
		again = s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
	}
	if !again {
		return false, 0
	}
	if res != nil {
		if d, ok := retryAfter(res.Header, time.Now()); ok {
			return d <= maxRetryAfter, d
		}
	}
	return true, backoff(retried, rand.Int64N)
}

// retryAfter is the wait an answer's headers ask for: Retry-After-Ms in
// milliseconds, else Retry-After in seconds or as an HTTP date (one in the
// past is no wait). A negative or unreadable value names no wait.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, f := range []struct {
		name string
		unit time.Duration
	}{{"retry-after-ms", time.Millisecond}, {"retry-after", time.Second}} {
		v := strings.TrimSpace(h.Get(f.name))
		if v == "" {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			if math.IsNaN(n) || n < 0 {
				continue
			}
			if n*float64(f.unit) > float64(math.MaxInt64) {
				return time.Duration(math.MaxInt64), true
			}
			return time.Duration(n * float64(f.unit)), true
		}
		if f.unit == time.Second {
			if t, err := http.ParseTime(v); err == nil {
				return max(0, t.Sub(now)), true
			}
		}
	}
	return 0, false
}

// backoff is the wait before retry number retried+1 when the server names
// none: firstBackoff doubled per retry, capped at maxBackoff, less a random
// part of up to a quarter. rnd(n) returns a number in [0, n).
func backoff(retried int, rnd func(int64) int64) time.Duration {
	d := maxBackoff
	if retried < 8 {
		d = min(maxBackoff, firstBackoff<<retried)
	}
	return d - time.Duration(rnd(int64(d/4)))
}

// fail turns the failure of the last attempt into an *Error: err when there
// was no usable answer, else res's status and the provider's message from
// its body. retried is how many retries were made.
func (e *endpoint) fail(err error, res *http.Response, body []byte, retried int) error {
	opt := e.opt
	opt.MaxRetries = retried
	if retried == 0 {
		opt.MaxRetries = -1
	}
	var tl *tooLargeError
	if errors.As(err, &tl) {
		return &Error{Provider: e.provider, Msg: tl.Error()}
	}
	if err != nil || res == nil {
		if err == nil {
			err = errors.New("no answer")
		}
		return describe(e.provider, err, 0, "", opt, e.keyEnv)
	}
	return describe(e.provider, fmt.Errorf("HTTP status %d", res.StatusCode), res.StatusCode, e.apiMessage(body), opt, e.keyEnv)
}

// cleanText makes s valid UTF-8 with every control character a space, so a
// server's message cannot drive a terminal.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}

// joinURL appends path to a base URL, with one slash between them; a query
// or fragment of base is dropped.
func joinURL(base, path string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimRight(u.String(), "/") + "/" + strings.TrimLeft(path, "/"), nil
}

// decodeObject decodes a JSON object into v; any other JSON value (null
// included) is an error.
func decodeObject(data []byte, v any) error {
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(data, v)
}
