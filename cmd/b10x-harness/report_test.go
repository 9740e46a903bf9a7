package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// chromium is the headless Chromium the report tests render pages in:
// B10X_CHROMIUM (make test sets it from scripts/chromium.sh, which
// installs Debian's package) or chromium on the PATH. It is required on
// the host; no VM guest has it.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("B10X_CHROMIUM")
	if path == "" {
		path, _ = exec.LookPath("chromium")
	}
	testenv.Require(t, path != "", "headless Chromium (scripts/chromium.sh installs Debian's chromium)", testenv.InGuest()...)
	return path
}

// render loads page in headless Chromium and returns the DOM it built
// (after parsing and layout; the page runs no script) and a screenshot.
func renderInChromium(t *testing.T, browser, page string) (dom string, shot string) {
	t.Helper()
	shot = strings.TrimSuffix(page, ".html") + ".png"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile}, append(extra, "file://"+page)...)
	}
	out, err := exec.CommandContext(ctx, browser, args("--dump-dom")...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", page, err)
	}
	if b, err := exec.CommandContext(ctx, browser, args("--screenshot="+shot, "--window-size=1280,1800", "--hide-scrollbars")...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, b)
	}
	return string(out), shot
}

// checkScreenshot asserts the screenshot is a PNG of the window with
// something drawn on it: more than a handful of colours.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	b := img.Bounds()
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if b.Dx() != 1280 || len(colours) < 8 {
		t.Errorf("screenshot %s: %dx%d with %d colours: not a rendered page", path, b.Dx(), b.Dy(), len(colours))
	}
}

// summaryOf is `record summary --json` of a record, through the binary.
func summaryOf(t *testing.T, rec string) (calls, refused, executed int) {
	t.Helper()
	r := harness(t, "", "record", "summary", "--json", rec)
	if r.code != 0 {
		t.Fatalf("record summary: %d %s", r.code, r.stderr)
	}
	var s struct {
		Calls   int                       `json:"calls"`
		ByEntry map[string]map[string]int `json:"by_entry"`
	}
	must(t, json.Unmarshal([]byte(r.stdout), &s))
	for _, m := range s.ByEntry {
		refused += m["refused"]
		executed += m["executed"]
	}
	return s.Calls, refused, executed
}

var (
	domCall    = regexp.MustCompile(`<details class="call (\w+)" data-seq="\d+"`)
	domScript  = regexp.MustCompile(`(?i)<script`)
	domImg     = regexp.MustCompile(`(?i)<img`)
	domTitle   = regexp.MustCompile(`<title>([^<]*)</title>`)
	domRecords = regexp.MustCompile(`<tr class="record-row" data-record="r\d+">`)
)

// TestRecordReportInChromium: the demo's record, rendered by `record
// report` and loaded in a real browser, shows every call with its
// outcome and the rule that refused it; a record of calls whose arguments a
// hostile model wrote (markup, an attribute break-out, a bidi override)
// shows that text as text; three records together get one row each and
// the totals.
func TestRecordReportInChromium(t *testing.T) {
	browser := chromium(t)
	dir, ws := rnPrepare(t)
	demo := filepath.Join(dir, "demo.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:../../examples/attacks.jsonl", "--workspace", ws, "--record", demo,
		"--approve-up-to", "high", "--allow-program", "make", "--allow-program", "echo", "--write-scope", "**/*.pem=denied")
	if _, err := os.Stat(demo); err != nil {
		t.Fatalf("the demo wrote no record (exit %d): %s", r.code, r.stderr)
	}

	page := filepath.Join(dir, "demo.html")
	if r := harness(t, "", "record", "report", demo, "-o", page); r.code != 0 || !strings.Contains(r.stdout, "wrote "+page) {
		t.Fatalf("record report: %d %q %s", r.code, r.stdout, r.stderr)
	}
	dom, shot := renderInChromium(t, browser, page)
	checkScreenshot(t, shot)
	calls, refused, executed := summaryOf(t, demo)
	got := map[string]int{}
	for _, m := range domCall.FindAllStringSubmatch(dom, -1) {
		got[m[1]]++
	}
	if calls == 0 || got["refused"] != refused || got["executed"] != executed || len(domCall.FindAllString(dom, -1)) != calls {
		t.Errorf("the page shows calls %v, the summary says %d calls, %d refused, %d executed", got, calls, refused, executed)
	}
	// The rule that refused the read of the secret outside.
	if !strings.Contains(dom, `Decided at <code>paths: path "../outside/secret.env" leaves the workspace</code>`) {
		t.Error("the page does not say which step and rule refused ../outside/secret.env")
	}

	// A hostile model's text, recorded by the real gate.
	hostile := `<script>document.title='pwned'</script>"><img src=x onerror=alert(1)>` + "\u202e" + `gnp.exe`
	hws := filepath.Join(dir, "hostile-ws")
	must(t, os.MkdirAll(hws, 0o755))
	hrec := filepath.Join(dir, "hostile.jsonl")
	args, err := json.Marshal(map[string]string{"path": "notes.txt", "content": hostile + "\n"})
	must(t, err)
	if r := harness(t, "", "call", "--workspace", hws, "--record", hrec, "--approve", "all", "file_write", string(args)); r.code != 0 {
		t.Fatalf("call file_write: %d %s", r.code, r.stderr)
	}
	bad, err := json.Marshal(map[string]string{"path": hostile})
	must(t, err)
	harness(t, "", "call", "--workspace", hws, "--record", hrec, "file_read", string(bad)) // refused or failed: recorded either way

	// A third record: one executed read.
	trec := filepath.Join(dir, "third.jsonl")
	if r := harness(t, "", "call", "--workspace", hws, "--record", trec, "file_read", `{"path":"notes.txt"}`); r.code != 0 {
		t.Fatalf("call file_read: %d %s", r.code, r.stderr)
	}

	many := filepath.Join(dir, "many.html")
	if r := harness(t, "", "record", "report", demo, hrec, trec, "-o", many); r.code != 0 {
		t.Fatalf("record report of three: %d %s", r.code, r.stderr)
	}
	dom, shot = renderInChromium(t, browser, many)
	checkScreenshot(t, shot)
	if n := len(domRecords.FindAllString(dom, -1)); n != 3 {
		t.Errorf("%d rows in the table of records, want 3", n)
	}
	hc, hr, he := summaryOf(t, hrec)
	tc, tr, te := summaryOf(t, trec)
	totals := fmt.Sprintf(`<tr class="totals"><th>total</th><td class="n"></td><td class="n">%d</td><td class="n">%d</td><td class="n">%d</td>`,
		calls+hc+tc, executed+he+te, refused+hr+tr)
	if !strings.Contains(dom, totals) {
		t.Errorf("the totals row is not %s", totals)
	}
	if m := domTitle.FindStringSubmatch(dom); m == nil || m[1] != "3 run records" {
		t.Errorf("title %v: the page's title was changed", m)
	}
	if domScript.MatchString(dom) || domImg.MatchString(dom) {
		t.Error("the browser built a script or img element from the record's text")
	}
	if !strings.Contains(dom, `&lt;script&gt;document.title='pwned'&lt;/script&gt;`) || !strings.Contains(dom, `\u202e`) || strings.Contains(dom, "\u202e") {
		t.Error("the hostile text is not shown as text with its bidi override escaped")
	}
}
