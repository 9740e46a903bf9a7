package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// JSON-RPC by the book on stdio (decision 0076). The SDK's stdio
// connection ends the session at the first line it cannot use (malformed
// JSON, a batch, an id of the wrong type, a line over its cap), dropping
// the requests read before it, and it keeps an id as an int64 or a string,
// so 1.5 comes back as 1 and 1e30 as -9223372036854775808. ServeStdio
// therefore checks every line before the SDK sees it:
//
//   - a line that is not JSON (or not UTF-8, or nested deeper than the
//     SDK's 1000 levels) is answered -32700 with id null;
//   - a batch, an empty batch, anything but an object, a wrong "jsonrpc",
//     a method that is not a string, an id that is null, an object, an
//     array or a boolean, and a message that is neither a request, a
//     notification nor a response are answered -32600 (with the id when
//     it is one, null otherwise);
//   - a request whose id is already in flight is answered -32600 with that
//     id, and the request in flight goes on;
//   - a line longer than the message cap is skipped, never read whole, and
//     answered -32600 with id null;
//   - the SDK's answer with error code 0 (a request before initialize, a
//     second initialize) goes out as -32600;
//
// and the session carries on after each. A request that passes goes to the
// SDK under an id of the server's own ("b10x-N"), and its answer goes back
// to the client with the id exactly as the client wrote it (1.5, 1e30,
// "x"). Responses the client sends to the server's own requests
// (elicitations) keep their ids: those are the SDK's.

// Error codes of the JSON-RPC 2.0 specification.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// framer checks the client's lines and maps request ids. It is safe for
// concurrent use: the reader checks lines while the writer restores ids.
type framer struct {
	mu     sync.Mutex
	next   uint64
	byOurs map[string]json.RawMessage // our id (its string) → the client's id, as written
	byKey  map[string]string          // the client's id (idKey-like, exact) → our id
	// answer writes one of the framer's own answers to the client.
	answer func([]byte)
}

func newFramer(answer func([]byte)) *framer {
	return &framer{byOurs: map[string]json.RawMessage{}, byKey: map[string]string{}, answer: answer}
}

// ourPrefix starts every id the framer gives a request.
const ourPrefix = "b10x-"

// exactKey is a client id's identity: a string's value, a number's text as
// written (1 and 1.0 are two ids; JSON-RPC compares them as the client
// wrote them). "" when raw is not a string or a number.
func exactKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return "s" + s
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "n" + string(raw)
	}
	return ""
}

// refuse answers the client with a JSON-RPC error: id is the request's id
// as written, or nil for null.
func (f *framer) refuse(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	f.answer(append(b, '\n'))
}

// oversized answers a line of n bytes that was skipped.
func (f *framer) oversized(n, limit int) {
	f.refuse(nil, codeInvalidRequest, fmt.Sprintf("Invalid Request: a message of more than %d bytes (the limit); it was skipped, not read", limit))
}

// check decides what one complete line of the client's becomes: the line
// the SDK should read (without its newline), or nil when the line is
// answered here (or is blank).
func (f *framer) check(line []byte) []byte {
	line = bytes.TrimRight(line, "\r")
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	switch {
	case !utf8.Valid(trimmed):
		f.refuse(nil, codeParseError, "Parse error: the message is not UTF-8")
		return nil
	case !json.Valid(trimmed):
		f.refuse(nil, codeParseError, "Parse error: the message is not JSON")
		return nil
	case tooDeep(trimmed, 1000):
		f.refuse(nil, codeParseError, "Parse error: the message nests deeper than 1000 levels")
		return nil
	case trimmed[0] == '[':
		f.refuse(nil, codeInvalidRequest, "Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); send each message on a line of its own")
		return nil
	case trimmed[0] != '{':
		f.refuse(nil, codeInvalidRequest, "Invalid Request: a message must be a JSON object")
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		f.refuse(nil, codeParseError, "Parse error: the message is not JSON")
		return nil
	}
	rawID, hasID := m["id"]
	key := exactKey(rawID)
	var id json.RawMessage // the id to answer with: the client's, when it is one
	if key != "" {
		id = bytes.TrimSpace(rawID)
	}
	if v, ok := m["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		f.refuse(id, codeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
		return nil
	}
	rawMethod, hasMethod := m["method"]
	var method string
	if hasMethod && json.Unmarshal(rawMethod, &method) != nil {
		f.refuse(id, codeInvalidRequest, `Invalid Request: "method" must be a string`)
		return nil
	}
	if hasID && key == "" {
		f.refuse(nil, codeInvalidRequest, "Invalid Request: an id must be a string or a number (not null, an object, an array or a boolean)")
		return nil
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod && hasID:
		// A request: it goes on under an id of ours.
		f.mu.Lock()
		if _, busy := f.byKey[key]; busy {
			f.mu.Unlock()
			f.refuse(id, codeInvalidRequest, "Invalid Request: a request with this id is already in flight; ids must be unique among the requests not yet answered")
			return nil
		}
		f.next++
		ours := ourPrefix + strconv.FormatUint(f.next, 10)
		f.byKey[key] = ours
		f.byOurs[ours] = append(json.RawMessage(nil), id...)
		f.mu.Unlock()
		m["id"], _ = json.Marshal(ours)
	case hasMethod:
		// A notification; a cancellation names the request by the
		// client's id, which the SDK knows under ours.
		if method == "notifications/cancelled" {
			if p, ok := cancelledParams(m["params"]); ok {
				if ours, known := f.lookup(p["requestId"]); known {
					p["requestId"], _ = json.Marshal(ours)
					m["params"] = encode(p)
				}
			}
		}
	case hasID && (hasResult || hasError):
		// The client's answer to one of the server's requests.
		return trimmed
	default:
		f.refuse(id, codeInvalidRequest, "Invalid Request: a message needs a method (a request or a notification), or an id with a result or an error (a response)")
		return nil
	}
	return encode(m)
}

// lookup is our id for the client's id raw, while its request is in
// flight.
func (f *framer) lookup(raw json.RawMessage) (string, bool) {
	key := exactKey(raw)
	if key == "" {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ours, ok := f.byKey[key]
	return ours, ok
}

func cancelledParams(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return nil, false
	}
	return p, true
}

// encode writes v as one line of JSON, without HTML escapes (the SDK
// reads the line; nothing renders it).
func encode(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic("bug: mcp: encoding a checked message: " + err.Error())
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// restore puts the client's id back into one message the SDK wrote (b),
// when it answers a request of the client's: b as it should reach the
// client, and whether it was such an answer (the request is then no longer
// in flight).
func (f *framer) restore(b []byte) ([]byte, bool) {
	const prefix = `{"jsonrpc":"2.0","id":"` + ourPrefix
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return b, false
	}
	start := len(`{"jsonrpc":"2.0","id":`)
	end := bytes.IndexByte(b[start+1:], '"')
	if end < 0 {
		return b, false
	}
	end += start + 2 // past the closing quote
	ours := string(b[start+1 : end-1])
	after := b[end:]
	if !bytes.HasPrefix(after, []byte(`,"result":`)) && !bytes.HasPrefix(after, []byte(`,"error":`)) {
		return b, false // a request of the server's, not an answer
	}
	f.mu.Lock()
	id, ok := f.byOurs[ours]
	if ok {
		delete(f.byOurs, ours)
		delete(f.byKey, exactKey(id))
	}
	f.mu.Unlock()
	if !ok {
		return b, false
	}
	// The SDK answers a request before initialize, and a second
	// initialize, with error code 0, which JSON-RPC does not define: they
	// are invalid requests.
	if rest, ok := bytes.CutPrefix(after, []byte(`,"error":{"code":0,`)); ok {
		after = append([]byte(`,"error":{"code":-32600,`), rest...)
	}
	out := make([]byte, 0, len(b)-len(ours)-2+len(id))
	out = append(out, b[:start]...)
	out = append(out, id...)
	return append(out, after...), true
}

// tooDeep reports whether data nests objects and arrays deeper than max,
// counted as the SDK counts them (strings skipped).
func tooDeep(data []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}
