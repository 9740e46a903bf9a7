package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/providertest"
)

// recordWaits replaces ep's wait with one that returns at once and keeps the
// durations asked for.
func recordWaits(ep *endpoint) *[]time.Duration {
	var mu sync.Mutex
	waits := &[]time.Duration{}
	ep.wait = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return nil
	}
	return waits
}

// firstTurn begins a conversation with p and asks for its first turn.
func firstTurn(t *testing.T, p agent.Provider) (agent.Turn, error) {
	t.Helper()
	conv, err := p.Begin(agent.Request{Task: "task", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conv.Next(ctx, nil)
}

// The waits before retries are those the answers' headers ask for, and the
// backoff when they ask for none.
func TestRetryWaits(t *testing.T) {
	ok := providertest.AnthropicMessage("fine", "end_turn")
	rate := func(h map[string]string) providertest.Reply {
		return providertest.AnthropicError(429, "rate_limit_error", "slow down", h)
	}
	date := time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name     string
		replies  []providertest.Reply
		opt      Options
		min, max []time.Duration // the bounds of each wait, in order
		requests int
		wantErr  string
	}{
		{
			name:    "retry-after-ms",
			replies: []providertest.Reply{rate(map[string]string{"retry-after-ms": "1500"}), ok},
			min:     []time.Duration{1500 * time.Millisecond}, max: []time.Duration{1500 * time.Millisecond}, requests: 2,
		},
		{
			name:    "retry-after seconds",
			replies: []providertest.Reply{rate(map[string]string{"retry-after": "3"}), ok},
			min:     []time.Duration{3 * time.Second}, max: []time.Duration{3 * time.Second}, requests: 2,
		},
		{
			name:    "retry-after fractional seconds",
			replies: []providertest.Reply{rate(map[string]string{"retry-after": "0.25"}), ok},
			min:     []time.Duration{250 * time.Millisecond}, max: []time.Duration{250 * time.Millisecond}, requests: 2,
		},
		{
			name:    "retry-after HTTP date",
			replies: []providertest.Reply{rate(map[string]string{"retry-after": date}), ok},
			min:     []time.Duration{10 * time.Second}, max: []time.Duration{20 * time.Second}, requests: 2,
		},
		{
			name:    "retry-after-ms wins over retry-after",
			replies: []providertest.Reply{rate(map[string]string{"retry-after-ms": "250", "retry-after": "9"}), ok},
			min:     []time.Duration{250 * time.Millisecond}, max: []time.Duration{250 * time.Millisecond}, requests: 2,
		},
		{
			name:    "unreadable retry-after: backoff",
			replies: []providertest.Reply{rate(map[string]string{"retry-after": "soon"}), ok},
			min:     []time.Duration{375 * time.Millisecond}, max: []time.Duration{500 * time.Millisecond}, requests: 2,
		},
		{
			name: "no header: backoff doubling",
			replies: []providertest.Reply{
				providertest.AnthropicError(500, "api_error", "boom", nil),
				providertest.AnthropicError(503, "api_error", "boom", nil),
				providertest.AnthropicError(529, "overloaded_error", "overloaded", nil),
				ok,
			},
			opt:      Options{MaxRetries: 3},
			min:      []time.Duration{375 * time.Millisecond, 750 * time.Millisecond, 1500 * time.Millisecond},
			max:      []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
			requests: 4,
		},
		{
			name:     "a wait over a minute is not retried",
			replies:  []providertest.Reply{rate(map[string]string{"retry-after": "120"}), ok},
			requests: 1, wantErr: "anthropic: rate limited (429): slow down",
		},
		{
			name:    "x-should-retry true retries a 400",
			replies: []providertest.Reply{providertest.AnthropicError(400, "invalid_request_error", "later", map[string]string{"x-should-retry": "true", "retry-after": "0"}), ok},
			min:     []time.Duration{0}, max: []time.Duration{0},
			requests: 2,
		},
		{
			name:     "x-should-retry false stops a 500",
			replies:  []providertest.Reply{providertest.AnthropicError(500, "api_error", "final", map[string]string{"x-should-retry": "false"}), ok},
			requests: 1, wantErr: "anthropic: server error (500): final",
		},
		{
			name:    "409 retried",
			replies: []providertest.Reply{providertest.AnthropicError(409, "conflict", "again", map[string]string{"retry-after": "1"}), ok},
			min:     []time.Duration{time.Second}, max: []time.Duration{time.Second},
			requests: 2,
		},
		{
			name:    "a timed-out attempt is retried",
			replies: []providertest.Reply{{Delay: 10 * time.Second, Body: ok.Body}, ok},
			opt:     Options{RequestTimeout: 200 * time.Millisecond},
			min:     []time.Duration{375 * time.Millisecond}, max: []time.Duration{500 * time.Millisecond},
			requests: 2,
		},
		{
			name:    "the retries made are named",
			replies: []providertest.Reply{rate(map[string]string{"retry-after": "0"}), rate(map[string]string{"retry-after": "120"})},
			min:     []time.Duration{0}, max: []time.Duration{0},
			requests: 2, wantErr: "anthropic: rate limited (429) (after 1 retries): slow down",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := providertest.NewAnthropic(t, tc.replies...)
			p := anthropicFor(t, fake, tc.opt)
			waits := recordWaits(p.ep)
			_, err := firstTurn(t, p)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if n := len(fake.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if len(*waits) != len(tc.min) {
				t.Fatalf("waits %v, want %d", *waits, len(tc.min))
			}
			for i, w := range *waits {
				if w < tc.min[i] || w > tc.max[i] {
					t.Errorf("wait %d = %s, want %s..%s", i, w, tc.min[i], tc.max[i])
				}
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	none := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	for retried, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		if got := backoff(retried, none); got != want {
			t.Errorf("backoff(%d) = %s, want %s", retried, got, want)
		}
		if got := backoff(retried, most); got <= want*3/4 || got > want {
			t.Errorf("backoff(%d) with the most jitter = %s, want over %s", retried, got, want*3/4)
		}
	}
	if got := backoff(1000, none); got != maxBackoff {
		t.Errorf("backoff(1000) = %s", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ms, s string
		want  time.Duration
		ok    bool
	}{
		{ms: "100", want: 100 * time.Millisecond, ok: true},
		{ms: "0", want: 0, ok: true},
		{s: "2", want: 2 * time.Second, ok: true},
		{s: " 2 ", want: 2 * time.Second, ok: true},
		{s: "Tue, 01 Dec 2026 12:00:30 GMT", want: 30 * time.Second, ok: true},
		{s: "Tuesday, 01-Dec-26 12:00:30 GMT", want: 30 * time.Second, ok: true},
		{s: "Tue, 01 Dec 2026 11:00:00 GMT", want: 0, ok: true},
		{s: "-3"},
		{s: "NaN"},
		{s: "soon"},
		{ms: "-1", s: "4", want: 4 * time.Second, ok: true},
		{ms: "x", s: "4", want: 4 * time.Second, ok: true},
		{s: "1e400", ok: true, want: time.Duration(1<<63 - 1)},
		{},
	} {
		h := http.Header{}
		if tc.ms != "" {
			h.Set("Retry-After-Ms", tc.ms)
		}
		if tc.s != "" {
			h.Set("Retry-After", tc.s)
		}
		got, ok := retryAfter(h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(ms %q, s %q) = %s, %v; want %s, %v", tc.ms, tc.s, got, ok, tc.want, tc.ok)
		}
	}
}

// Cancelling the context during a retry's wait ends Next at once, as a
// cancellation, without another request.
func TestCancelDuringRetryWait(t *testing.T) {
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicError(429, "rate_limit_error", "slow down", map[string]string{"retry-after": "50"}),
		providertest.AnthropicMessage("late", "end_turn"))
	p := anthropicFor(t, fake, Options{})
	conv, err := p.Begin(agent.Request{Task: "task"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(fake.Requests()) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	_, err = conv.Next(ctx, nil)
	// The server asked for 50 s; returning well before shows the wait
	// ended with the context.
	if el := time.Since(start); el > 25*time.Second {
		t.Errorf("Next returned after %s", el)
	}
	if err == nil || err.Error() != "anthropic: request cancelled" || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the cancellation", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// chunkServer answers every request with status and n bytes of JSON-ish
// filler, written in chunks, and counts the requests.
func chunkServer(t *testing.T, status int, n int) (*httptest.Server, *atomic.Int32) {
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for written := 0; written < n; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

// An answer larger than the bound is refused, not read whole, and not
// retried.
func TestOversizedResponseRefused(t *testing.T) {
	srv, count := chunkServer(t, 200, maxResponseBody+1<<20)
	p, err := NewAnthropic(Options{Model: "m", APIKey: testKey, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	recordWaits(p.ep)
	_, err = firstTurn(t, p)
	var pe *Error
	if err == nil || err.Error() != "anthropic: the response is larger than 32 MiB: refused" || !errors.As(err, &pe) {
		t.Fatalf("error %v", err)
	}
	if n := count.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// An error answer's body is read up to its own bound; its status
	// still says what failed.
	srv, _ = chunkServer(t, 400, 4<<20)
	o, err := NewOpenAI(Options{Model: "m", BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := firstTurn(t, o); err == nil || !strings.HasPrefix(err.Error(), "openai: request rejected (400)") {
		t.Errorf("error %v", err)
	}
}

// Blocks the package does not read, and the model's blocks as a whole, go
// back in the next request byte for byte: key order, number spelling and
// escapes kept.
func TestAnthropicUnknownBlocksKeptVerbatim(t *testing.T) {
	blocks := []string{
		`{"type":"thinking","thinking":"let me see","signature":"EqQBCkYIARgCIkD+/=="}`,
		`{"type":"future_block","z":1,"a":{"deep":[1.50000000000000000001,null,"caf\u00e9"]}}`,
		`{"type":"text","text":"Reading.","citations":null}`,
		`{"type":"tool_use","id":"toolu_1","name":"file_read","input":{"path":"hello.txt","z":1,"a":2}}`,
		`{"type":"redacted_thinking","data":"opaque"}`,
	}
	raw := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` + strings.Join(blocks, ",") +
		`],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	fake := providertest.NewAnthropic(t,
		providertest.Reply{Body: json.RawMessage(raw)},
		providertest.AnthropicMessage("done", "end_turn"))
	p := anthropicFor(t, fake, Options{})
	conv, err := p.Begin(agent.Request{Task: "task"})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := conv.Next(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Text != "Reading." || turn.Stop != "tool_use" || len(turn.Calls) != 1 || turn.Calls[0].ID != "toolu_1" || string(turn.Calls[0].Args) != `{"path":"hello.txt","z":1,"a":2}` {
		t.Fatalf("turn %+v", turn)
	}
	if _, err := conv.Next(context.Background(), []agent.ToolResult{{CallID: "toolu_1", Name: "file_read", Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	sent := fake.Requests()[1].Body
	want := `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
	if !bytes.Contains(sent, []byte(want)) {
		t.Errorf("the model's turn did not go back as it came:\nwant %s\nsent %s", want, sent)
	}
}

// The request's wire shape: the path, the version and type headers, the
// key's header and the caps.
func TestRequestShapes(t *testing.T) {
	fa := providertest.NewAnthropic(t, providertest.AnthropicMessage("hi", "end_turn"))
	if _, err := firstTurn(t, anthropicFor(t, fa, Options{MaxTokens: 123})); err != nil {
		t.Fatal(err)
	}
	r := fa.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("anthropic-version") != "2023-06-01" || r.Header.Get("content-type") != "application/json" ||
		r.Header.Get("x-api-key") != testKey || r.Header.Get("authorization") != "" || r.JSON["max_tokens"] != float64(123) {
		t.Errorf("anthropic request: %s %v %s", r.Path, r.Header, r.Body)
	}
	if _, ok := r.JSON["tools"]; ok {
		t.Errorf("tools sent with none published: %s", r.Body)
	}

	fo := providertest.NewOpenAI(t, providertest.OpenAIMessage("hi", "stop"))
	if _, err := firstTurn(t, openaiFor(t, fo, Options{MaxTokens: 77})); err != nil {
		t.Fatal(err)
	}
	r = fo.Requests()[0]
	if r.Path != "/v1/chat/completions" || r.Header.Get("content-type") != "application/json" || r.Header.Get("authorization") != "Bearer "+testKey ||
		r.JSON["max_completion_tokens"] != float64(77) || r.JSON["model"] != "gpt-test" {
		t.Errorf("openai request: %s %v %s", r.Path, r.Header, r.Body)
	}
	if _, ok := r.JSON["max_tokens"]; ok {
		t.Errorf("max_tokens sent: %s", r.Body)
	}
	if _, ok := r.JSON["tools"]; ok {
		t.Errorf("tools sent with none published: %s", r.Body)
	}
}

// A server's message that echoes the key has it cut out.
func TestKeyCutFromServerMessages(t *testing.T) {
	fake := providertest.NewAnthropic(t, providertest.AnthropicError(401, "authentication_error", "key "+testKey+" is not valid", nil))
	_, err := firstTurn(t, anthropicFor(t, fake, Options{}))
	if err == nil || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "key [API key] is not valid") {
		t.Errorf("error %v", err)
	}
}

// An error body that is not the provider's format still says something, in
// one line with no control characters.
func TestErrorBodyNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/html")
		w.WriteHeader(502)
		fmt.Fprint(w, "<html>\n<title>\x1b[31mBad gateway</title>\n</html>")
	}))
	defer srv.Close()
	p, err := NewOpenAI(Options{Model: "m", BaseURL: srv.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = firstTurn(t, p)
	if err == nil || err.Error() != "openai: server error (502): <html> <title> [31mBad gateway</title> </html>" {
		t.Errorf("error %q", err)
	}
}

func TestAPIMessages(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`: "Overloaded",
		`{"type":"error","error":{"type":"overloaded_error"}}`:                        "overloaded_error",
		`{"error":"plain"}`: `{"error":"plain"}`,
		``:                  ``,
	} {
		if got := anthropicAPIMessage([]byte(body)); got != want {
			t.Errorf("anthropic %s: %q, want %q", body, got, want)
		}
	}
	for body, want := range map[string]string{
		`{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}`: "Incorrect API key",
		`{"error":"model not found"}`: "model not found",
		`{"object":"error","message":"max_tokens is too large","type":"BadRequest"}`: "max_tokens is too large",
		`{"detail":"Not Found"}`: `{"detail":"Not Found"}`,
	} {
		if got := openaiAPIMessage([]byte(body)); got != want {
			t.Errorf("openai %s: %q, want %q", body, got, want)
		}
	}
}

// A redirect to another host is not followed (the key would go with it), nor
// retried; one to the same host is followed.
func TestRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	answer, err := json.Marshal(providertest.AnthropicMessage("moved", "end_turn").Body)
	if err != nil {
		t.Fatal(err)
	}
	var away atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away/v1/messages":
			away.Add(1)
			http.Redirect(w, r, other.URL+"/v1/messages?secret=1", http.StatusTemporaryRedirect)
		case "/here/v1/messages":
			http.Redirect(w, r, "/there/v1/messages", http.StatusTemporaryRedirect)
		case "/there/v1/messages":
			if b, _ := io.ReadAll(r.Body); r.Header.Get("x-api-key") != testKey || !bytes.Contains(b, []byte(`"task"`)) {
				w.WriteHeader(400)
				return
			}
			w.Header().Set("content-type", "application/json")
			w.Write(answer)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()

	p, err := NewAnthropic(Options{Model: "m", APIKey: testKey, BaseURL: srv.URL + "/away"})
	if err != nil {
		t.Fatal(err)
	}
	recordWaits(p.ep)
	_, err = firstTurn(t, p)
	if err == nil || !strings.Contains(err.Error(), "another host: not followed") || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v", err)
	}
	if elsewhere.Load() != 0 || away.Load() != 1 {
		t.Errorf("the other host got %d requests, the redirecting one %d", elsewhere.Load(), away.Load())
	}

	p, err = NewAnthropic(Options{Model: "m", APIKey: testKey, BaseURL: srv.URL + "/here"})
	if err != nil {
		t.Fatal(err)
	}
	if turn, err := firstTurn(t, p); err != nil || turn.Text != "moved" {
		t.Errorf("same-host redirect: %+v, %v", turn, err)
	}
}

// An answer whose body breaks off is retried like a lost connection.
func TestLostBodyRetried(t *testing.T) {
	answer, err := json.Marshal(providertest.OpenAIMessage("whole", "stop").Body)
	if err != nil {
		t.Fatal(err)
	}
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		if count.Add(1) == 1 {
			w.Header().Set("content-length", fmt.Sprint(len(answer)))
			w.Write(answer[:10])
			return // the connection closes short of content-length
		}
		w.Write(answer)
	}))
	defer srv.Close()
	p, err := NewOpenAI(Options{Model: "m", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	waits := recordWaits(p.ep)
	turn, err := firstTurn(t, p)
	if err != nil || turn.Text != "whole" || count.Load() != 2 || len(*waits) != 1 {
		t.Errorf("turn %+v, error %v, %d requests, waits %v", turn, err, count.Load(), *waits)
	}
}

// The model's message goes back as the request format has it: content
// (absent when null), tool calls with their raw arguments, custom tool
// calls; arguments a server sent as an object are passed on as their JSON.
func TestOpenAIHistory(t *testing.T) {
	raw := `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,"annotations":[],
		"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"file_read","arguments":"{\"path\": \"a\"}"}},
			{"id":"c2","type":"function","function":{"name":"dir_list","arguments":{"path":"."}}},
			{"id":"c3","type":"custom","custom":{"name":"grammar","input":"free text"}}]}}]}`
	msg, turn, err := decodeOpenAI([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"file_read","arguments":"{\"path\": \"a\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"dir_list","arguments":"{\"path\":\".\"}"}},` +
		`{"id":"c3","type":"custom","custom":{"name":"grammar","input":"free text"}}]}`
	if string(got) != want {
		t.Errorf("history message\n got %s\nwant %s", got, want)
	}
	if turn.Stop != "tool_calls" || len(turn.Calls) != 3 || string(turn.Calls[0].Args) != `{"path": "a"}` ||
		string(turn.Calls[1].Args) != `{"path":"."}` || turn.Calls[2].Name != "grammar" || string(turn.Calls[2].Args) != "free text" {
		t.Errorf("turn %+v", turn)
	}

	_, turn, err = decodeOpenAI([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"refusal":"no."},"finish_reason":"stop"}]}`))
	if err != nil || turn.Text != "(refusal) no." {
		t.Errorf("refusal: %+v, %v", turn, err)
	}
	if _, _, err := decodeOpenAI([]byte(`{"choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"x","arguments":"{}"}}]}}]}`)); err == nil || err.Error() != "openai: tool call 1 has no id" {
		t.Errorf("call without id: %v", err)
	}
}

// A 200 whose body is not the API's answer is an error that says so.
func TestMalformedAnswers(t *testing.T) {
	for _, body := range []any{"just a string", []any{1, 2}, map[string]any{"content": "not a list"}, map[string]any{"content": []any{7}}} {
		fake := providertest.NewAnthropic(t, providertest.Reply{Body: body})
		_, err := firstTurn(t, anthropicFor(t, fake, Options{}))
		if err == nil || !strings.HasPrefix(err.Error(), "anthropic: the answer is not a Messages API response: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v", body, err)
		}
	}
	fake := providertest.NewOpenAI(t, providertest.Reply{Body: map[string]any{"choices": "none"}})
	if _, err := firstTurn(t, openaiFor(t, fake, Options{})); err == nil || !strings.HasPrefix(err.Error(), "openai: the answer is not a Chat Completions response: ") {
		t.Errorf("error %v", err)
	}
}
