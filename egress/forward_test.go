package egress

// Plain-HTTP forwarding under the limits: idleness is measured on
// movement (a response or a request body that takes longer than the idle
// timeout but keeps moving is not cut; one that stops is), and every byte
// counts against max_bytes as it moves.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestForwardIdleOnMovement: with an idle timeout of 600 ms, a response
// whose body comes in 30 pieces 40 ms apart (1.2 s) arrives whole, as does
// a request body sent the same way; a response that stops after three
// pieces is cut about the idle timeout after its last byte, and its event
// says so.
func TestForwardIdleOnMovement(t *testing.T) {
	// A pause of 40 ms between pieces leaves a loaded machine 560 ms
	// before the idle timeout; the 30 pieces take twice the idle timeout.
	const idle, pace, pieces = 600 * time.Millisecond, 40 * time.Millisecond, 30
	stalled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			for i := 0; i < pieces; i++ {
				fmt.Fprintf(w, "piece %02d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(pace)
			}
		case "/upload":
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
		case "/stall":
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "piece %02d\n", i)
			}
			w.(http.Flusher).Flush()
			<-stalled
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stalled) }) // first: srv.Close waits for the handler
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	pol := loopbackPolicy(t, "slow.test")
	pol.IdleTimeout = idle
	r := newRig(t, pol, loopbackNames("slow.test"))
	c := r.client(nil)
	c.Timeout = 30 * time.Second
	base := "http://slow.test:" + port

	start := time.Now()
	resp, err := c.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Count(string(body), "piece") != pieces {
		t.Errorf("a response moving for %v (idle timeout %v): %d bytes, %v; want all %d pieces", time.Since(start), idle, len(body), err, pieces)
	}

	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < pieces; i++ {
			fmt.Fprintf(pw, "piece %02d\n", i)
			time.Sleep(pace)
		}
		pw.Close()
	}()
	resp, err = c.Post(base+"/upload", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := strconv.Itoa(pieces*len("piece 00\n")) + " <nil>"; string(body) != want {
		t.Errorf("a request body moving for %v: the server read %q, want %q", pieces*pace, body, want)
	}

	resp, err = c.Get(base + "/stall")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3*len("piece 00\n"))
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatalf("the stalling response's first pieces: %v", err)
	}
	last := time.Now()
	_, err = io.ReadAll(resp.Body)
	took := time.Since(last)
	resp.Body.Close()
	// The proxy last moved a byte before the client read it: a close
	// "too early" is one well before the idle timeout, not a jitter.
	if err == nil || took < idle/2 || took > 20*idle {
		t.Errorf("a response that stopped: ended %v after its last byte (%v), want about the idle timeout of %v", took, err, idle)
	}
	ev := r.waitEvent("slow.test", 3)
	for i, want := range []string{"", "", "idle_timeout"} {
		if want == "" && ev[i].Error != "" || want != "" && !strings.Contains(ev[i].Error, want) {
			t.Errorf("event %d: %+v, want error %q", i, ev[i], want)
		}
	}
	if ev[0].BytesDown < int64(pieces*len("piece 00\n")) || ev[1].BytesUp < int64(pieces*len("piece 00\n")) {
		t.Errorf("events %+v %+v: the bytes moved are not counted", ev[0], ev[1])
	}
}

// TestForwardMaxBytes: a plain-HTTP response larger than max_bytes is cut
// at the cap as it moves (it was counted only after the whole response had
// been passed on): the program gets no more than the cap.
func TestForwardMaxBytes(t *testing.T) {
	const maxBytes, size = 1 << 20, 8 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		buf := make([]byte, 64<<10)
		for n := 0; n < size; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	pol := loopbackPolicy(t, "big.test")
	pol.MaxBytes = maxBytes
	r := newRig(t, pol, loopbackNames("big.test"))
	resp, err := r.client(nil).Get("http://big.test:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n > maxBytes {
		t.Errorf("the program read %d bytes of a %d-byte response with max_bytes %d (%v), want it cut at the cap", n, size, maxBytes, err)
	}
	ev := r.waitEvent("big.test", 1)
	if !strings.Contains(ev[0].Error, fmt.Sprintf("closed at the byte cap (max_bytes %d", maxBytes)) || ev[0].BytesUp+ev[0].BytesDown > maxBytes {
		t.Errorf("event %+v, want closed at the byte cap, within it", ev[0])
	}
}
