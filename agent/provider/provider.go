// Package provider holds the model providers of the agent loop: Anthropic's
// Messages API and OpenAI's Chat Completions API (through this package's own
// small clients on net/http and encoding/json), and a replay provider that
// plays a JSON Lines script of model turns with no network.
//
// A provider only carries turns between a model and the loop: it never
// executes a tool. API keys are given in Options by the caller (the CLI reads
// them from ANTHROPIC_API_KEY or OPENAI_API_KEY); they are sent only in the
// provider's authentication header and never appear in an error message.
package provider

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/replay"
	"github.com/b10x/harness/internal/setting"
)

// Options configures a network provider. The zero value is not enough for
// Anthropic or OpenAI (Model is required); every other field has a safe
// default.
type Options struct {
	// Model names the model; required for anthropic and openai.
	Model string
	// BaseURL replaces the provider's public endpoint (an
	// OpenAI-compatible server, a proxy, a test server). Empty: the
	// provider's own https endpoint. The environment (ANTHROPIC_BASE_URL,
	// OPENAI_BASE_URL) is never consulted. The endpoint must be trusted: it
	// receives the key, the task and every tool result. Plain http is
	// refused for a host that is not loopback when a key is set.
	BaseURL string
	// APIKey authenticates. Empty: no key is sent (fine for a local
	// OpenAI-compatible server; the Anthropic API answers 401).
	APIKey string
	// MaxTokens caps each model response. Zero: 8192 for Anthropic (which
	// requires a value); for OpenAI no cap is sent.
	MaxTokens int
	// MaxRetries is how many times a request that failed with 408, 409,
	// 429, 5xx or a connection error (a timed-out attempt included) is
	// retried; an answer's x-should-retry: true or false overrides its
	// status. The wait before a retry is the answer's Retry-After-Ms or
	// Retry-After (seconds or an HTTP date) when it asks for at most a
	// minute (longer: not retried, the answer is returned), else 0.5 s
	// doubled for each retry up to 8 s, less up to a quarter at random.
	// Zero: 2. Negative: no retry.
	MaxRetries int
	// RequestTimeout bounds each attempt, the reading of its answer
	// included. Zero: 10 minutes. Cancelling the context given to
	// Conversation.Next stops an attempt or a wait at once.
	RequestTimeout time.Duration
	// HTTPClient sends the requests. Nil: a client of this package's own,
	// over a clone of net/http's default transport, which honours the
	// proxy settings of the environment (HTTPS_PROXY, HTTP_PROXY,
	// NO_PROXY; never for a loopback host); nothing else is taken from the
	// environment. Either way a redirect is followed only to the same
	// scheme and host, since the key's header goes with it.
	HTTPClient *http.Client
}

// DefaultAnthropicMaxTokens is Options.MaxTokens for Anthropic when zero.
const DefaultAnthropicMaxTokens = 8192

// DefaultRequestTimeout is Options.RequestTimeout when zero.
const DefaultRequestTimeout = 10 * time.Minute

func (o Options) retries() int {
	switch {
	case o.MaxRetries < 0:
		return 0
	case o.MaxRetries == 0:
		return 2
	}
	return o.MaxRetries
}

func (o Options) timeout() time.Duration {
	if o.RequestTimeout <= 0 {
		return DefaultRequestTimeout
	}
	return o.RequestTimeout
}

// Spec is a parsed provider setting.
type Spec struct {
	Kind string // "anthropic", "openai" or "replay"
	File string // the script, for replay
}

// ParseSpec parses "anthropic", "openai" or "replay:FILE".
func ParseSpec(s string) (Spec, error) {
	switch {
	case s == "anthropic" || s == "openai":
		return Spec{Kind: s}, nil
	case strings.HasPrefix(s, "replay:"):
		f := strings.TrimPrefix(s, "replay:")
		if f == "" {
			return Spec{}, setting.Errorf(setting.Provider, s, "replay:FILE names no file")
		}
		return Spec{Kind: "replay", File: f}, nil
	}
	return Spec{}, setting.Errorf(setting.Provider, s, "want anthropic, openai or replay:FILE")
}

// Check refuses what a run could not use, before anything is opened: a
// negative MaxTokens or RequestTimeout; for anthropic and openai, no model,
// or no key where the endpoint needs one (Anthropic's always, OpenAI's
// public one; a server of one's own at BaseURL may take none); for
// replay, a model or an endpoint, which a script does not use. Every error
// is a usage *setting.Error naming the setting by key. It does not check
// the base URL (Open does) or read the script.
func (s Spec) Check(opt Options) error {
	bad := func(key, value, format string, args ...any) error {
		return &setting.Error{Key: key, Value: value, Err: fmt.Errorf(format, args...), Usage: true}
	}
	switch {
	case opt.RequestTimeout < 0:
		return bad(setting.RequestTimeout, opt.RequestTimeout.String(), "must not be negative")
	case opt.MaxTokens < 0:
		return bad(setting.MaxTokens, strconv.Itoa(opt.MaxTokens), "must not be negative")
	}
	switch s.Kind {
	case "anthropic", "openai":
		if strings.TrimSpace(opt.Model) == "" {
			return bad(setting.Model, "", "none given; %s needs one", s.Kind)
		}
		if opt.APIKey == "" && (s.Kind == "anthropic" || opt.BaseURL == "") {
			return bad(setting.Provider, s.Kind, "needs an API key in %s (keys are only ever read from the environment)", KeyEnv(s.Kind))
		}
	case "replay":
		if opt.Model != "" {
			return bad(setting.Model, setting.Quote(opt.Model), "a replay script has no model")
		}
		if opt.BaseURL != "" {
			return bad(setting.BaseURL, setting.Quote(redactURL(opt.BaseURL)), "a replay script has no endpoint")
		}
	}
	return nil
}

// KeyEnv is the environment variable holding the API key of a provider
// kind, or "" for replay.
func KeyEnv(kind string) string {
	switch kind {
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	case "openai":
		return "OPENAI_API_KEY"
	}
	return ""
}

// checkBaseURL accepts an http or https URL with a host. Plain http is
// accepted only for a loopback host, or when no key would be sent: an API
// key must not cross a network in clear. An error says the provider (in)
// refused it.
func checkBaseURL(in, s, key string) error {
	if e := baseURLError(s, key); e != nil {
		e.In = in
		return e
	}
	return nil
}

func baseURLError(s, key string) *setting.Error {
	u, err := url.Parse(s)
	if err != nil {
		return &setting.Error{Key: setting.BaseURL, Value: setting.Quote(s), Err: err}
	}
	if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return setting.Errorf(setting.BaseURL, s, "want an http:// or https:// URL with a host")
	}
	if u.User != nil {
		return setting.Errorf(setting.BaseURL, redactURL(s), "credentials in the URL are not accepted; keys come from the environment")
	}
	if u.Scheme == "http" && key != "" && !loopback(u.Hostname()) {
		return setting.Errorf(setting.BaseURL, s, "plain http to a host that is not loopback would send the API key in clear; use https")
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Open returns the provider a spec names. For replay the script is read and
// parsed now, so a malformed line is reported before anything runs.
func Open(spec Spec, opt Options) (agent.Provider, error) {
	switch spec.Kind {
	case "anthropic":
		return NewAnthropic(opt)
	case "openai":
		return NewOpenAI(opt)
	case "replay":
		return replay.Load(spec.File)
	}
	return nil, fmt.Errorf("provider %q: want anthropic, openai or replay", spec.Kind)
}
