package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/workspace"
)

// Search limits.
const (
	DefaultSearchResults = 200 // max_results when not given
	maxShownLine         = 512 // bytes of a matching line shown before it is marked cut
	searchChunk          = 8 << 20
	maxSearchLine        = 64 << 20
)

// SearchArgs are search's arguments.
type SearchArgs struct {
	Pattern    string `json:"pattern" max:"4096" desc:"Regular expression (RE2 syntax, as in Go) matched against each line of each file. A match never spans lines."`
	Path       string `json:"path,omitempty" max:"16384" desc:"File or directory to search, relative to the workspace root. Default (or empty): the whole workspace."`
	Glob       string `json:"glob,omitempty" max:"4096" desc:"Only search files whose path matches this glob (** matches any number of directories). A glob without '/' is matched against the file name, one with '/' against the path relative to the workspace root."`
	MaxResults int    `json:"max_results,omitempty" min:"1" desc:"Stop after this many matching lines. Default 200."`
}

// Search is the search tool: an RE2 regular expression over the lines of
// every regular file beneath a path, results as "path:line:text" with
// workspace-relative paths, in path order then line order. Binary files
// (a NUL byte in the first 8 KiB, or in a matching line) are skipped;
// symbolic links are never followed (an in-root target is searched under
// its own path); directories named .git are not entered; every directory
// and file is opened from its parent's descriptor with the beneath resolve
// set, so a directory swapped for a link mid-walk is skipped and noted,
// never read through. It stops after max_results matching lines and says
// so. The zero value is ready to use; it holds no state and is safe for
// concurrent use.
//
// Speed: files are read whole (in 8 MiB chunks when larger) into reused
// buffers by one worker per CPU, a literal every match must contain is
// searched with bytes.Index before the regular expression runs on the
// candidate line only, and no allocation is made per line.
type Search struct{}

var searchSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(SearchArgs{}) })

// Name implements Tool.
func (Search) Name() string { return "search" }

// Description implements Tool.
func (Search) Description() string {
	return "Search file contents in the workspace with a regular expression (RE2 syntax, as in Go: no look-around or backreferences). " +
		"Prints one line per match as 'path:line:text', paths relative to the workspace root, sorted by path then line; long lines are shortened. " +
		"Binary files are skipped; symbolic links met while walking are not followed (a link's target inside the workspace is searched under its own path); .git directories are not entered. " +
		"Stops after max_results matching lines (default 200) and says so; narrow with path or glob. " + pathRules
}

// Schema implements Tool.
func (Search) Schema() json.RawMessage { return searchSpec().schema }

// Prepare implements Tool.
func (Search) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a SearchArgs
	if _, err := searchSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Pattern == "" {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q must not be empty", "pattern")
	}
	m, err := newMatcher(a.Pattern)
	if err != nil {
		// The regexp package's message quotes the pattern: capped in the
		// public message and in the cause the record keeps.
		return nil, Errorf(ReasonInvalidArgument, errors.New(capText(err.Error(), 4*maxEchoBytes)), "field %q: %s", "pattern", capText(err.Error(), maxEchoBytes))
	}
	if a.Glob != "" && !doublestar.ValidatePattern(a.Glob) {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q: %q is not a valid glob", "glob", capText(a.Glob, maxEchoBytes))
	}
	rel, err := resolveOptional(ws, a.Path)
	if err != nil {
		return nil, err
	}
	limit := a.MaxResults
	if limit == 0 {
		limit = DefaultSearchResults
	}
	return &searchCall{ws: ws, args: a, rel: rel, m: m, max: limit}, nil
}

// globMatch applies a glob as search and find document it: against the
// base name when the glob has no '/', else against the whole
// workspace-relative path.
func globMatch(glob, rel string) bool {
	if glob == "" {
		return true
	}
	if !strings.Contains(glob, "/") {
		_, rel = workspace.Split(rel)
	}
	return doublestar.MatchUnvalidated(glob, rel)
}

// searchBudget bounds the work of one regexp call, in bytes of input
// times instructions of the compiled pattern (the cost of Go's regexp
// engine grows with both: [ab]{1000}[cd], about 2,000 instructions, took
// 24 µs a byte of a/b text on the 2-core development host, 12 ns a unit),
// so that the search looks at its context every 10-20 ms at worst, also
// inside one long line. No call covers fewer than 256 bytes.
const searchBudget = 1 << 20

// matcher finds the lines a pattern matches.
type matcher struct {
	line *regexp.Regexp // the pattern, run on one line at a time
	bulk *regexp.Regexp // (?m) form run over a whole buffer to find candidates; nil when not equivalent
	lit  []byte         // a literal every match contains; nil when none is known
	// rareOff is the index in lit of the byte least likely to occur in
	// text, the one the scan looks for first.
	rareOff int
	// window is how many bytes (of whole lines) one bulk call covers, and
	// direct the longest line matched in one call; a longer line is fed to
	// the regexp through a reader that ends it when the context is done.
	// Both are searchBudget divided by the pattern's size.
	window, direct int
}

func newMatcher(pattern string) (*matcher, error) {
	line, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	m := &matcher{line: line}
	insts := 1
	if tree, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		if prog, err := syntax.Compile(tree.Simplify()); err == nil {
			insts = max(1, len(prog.Inst))
		}
	}
	m.direct = max(256, searchBudget/insts)
	m.window = m.direct
	if tree, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		if lit := requiredLiteral(tree.Simplify()); lit != "" {
			m.lit = []byte(lit)
			for i := range m.lit {
				if byteRank(m.lit[i]) < byteRank(m.lit[m.rareOff]) {
					m.rareOff = i
				}
			}
		}
	}
	if m.lit == nil {
		// With (?m), ^ and $ match at line boundaries, so any line that
		// matches alone also yields a match starting in that line when the
		// buffer is scanned from the line's start. \A and \z would not:
		// such patterns are run line by line.
		if tree, err := syntax.Parse("(?m)"+pattern, syntax.Perl); err == nil && !hasTextAnchor(tree) {
			m.bulk, _ = regexp.Compile("(?m)" + pattern)
		}
	}
	return m, nil
}

// requiredLiteral returns a case-sensitive literal that every match of re
// contains, or "".
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return ""
		}
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best, run := "", ""
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral && sub.Flags&syntax.FoldCase == 0 {
				run += string(sub.Rune)
				continue
			}
			if len(run) > len(best) {
				best = run
			}
			run = ""
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		if len(run) > len(best) {
			best = run
		}
		return best
	}
	return ""
}

// byteRank is a rough frequency class of a byte in source code and prose
// (higher: more common), used to pick the byte a literal search looks for.
func byteRank(b byte) int {
	switch {
	case strings.IndexByte(" \tetaoinsr", b) >= 0:
		return 10
	case b >= 'a' && b <= 'z', strings.IndexByte("\n.,()_\"=/:;{}*-", b) >= 0:
		return 6
	case b >= '0' && b <= '9':
		return 4
	case b >= 'A' && b <= 'Z':
		return 3
	}
	return 1
}

func hasTextAnchor(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginText || re.Op == syntax.OpEndText {
		return true
	}
	for _, s := range re.Sub {
		if hasTextAnchor(s) {
			return true
		}
	}
	return false
}

// scan calls emit for each line of data that matches, in order, with its
// number (the first line of data is number first). data holds whole lines;
// only its last may lack a newline. It stops when emit returns false or
// ctx is done, and reports whether it stopped; no regexp call in it does
// more than about searchBudget work before ctx is looked at.
func (m *matcher) scan(ctx context.Context, data []byte, first int, emit func(n int, line []byte) bool) (stopped bool) {
	s := &lineScan{m: m, ctx: ctx, data: data, lineNo: first}
	switch {
	case m.lit != nil:
		stopped = s.literal(emit)
	case m.bulk != nil:
		stopped = s.bulk(emit)
	default:
		stopped = s.lines(emit)
	}
	return stopped || s.cut
}

// lineScan is the state of one scan. The scan's emit function is passed
// to its methods rather than kept here: what a lineScan holds leaks to the
// heap (the context and the data reach the regexp), and emit with it
// would move every variable its closure captures there, for every file.
type lineScan struct {
	m    *matcher
	ctx  context.Context
	data []byte
	// lineNo is the number of the line starting at data[counted].
	lineNo, counted int
	// cut is set when ctx ended a long line's match before its answer.
	cut bool
	// since counts the bytes passed since ctx was last looked at.
	since int
}

// report matches the line data[ls:le] and emits it if it matches; false
// ends the scan.
func (s *lineScan) report(ls, le int, emit func(n int, line []byte) bool) bool {
	ok, cut := s.m.matchLine(s.ctx, s.data[ls:le])
	if cut {
		s.cut = true
		return false
	}
	if !ok {
		return true
	}
	s.lineNo += bytes.Count(s.data[s.counted:ls], nl)
	s.counted = ls
	return emit(s.lineNo, s.data[ls:le])
}

// pause counts n bytes passed and, once a window's worth has, reports
// whether ctx is done.
func (s *lineScan) pause(n int) bool {
	if s.since += n; s.since < s.m.window {
		return false
	}
	s.since = 0
	return s.ctx.Err() != nil
}

// literal looks for the literal's rarest byte with IndexByte
// (vectorised), then checks the whole literal around it.
func (s *lineScan) literal(emit func(n int, line []byte) bool) (stopped bool) {
	data := s.data
	rare, roff, lit := s.m.lit[s.m.rareOff], s.m.rareOff, s.m.lit
	pos := 0
	lineFrom := 0 // a line start at or before every candidate
	for pos+roff < len(data) {
		i := bytes.IndexByte(data[pos+roff:], rare)
		if i < 0 {
			break
		}
		at := pos + i
		if at+len(lit) > len(data) {
			break
		}
		if s.pause(i + 1) {
			return true
		}
		if !bytes.Equal(data[at:at+len(lit)], lit) {
			pos = at + 1
			continue
		}
		ls := lineFrom + bytes.LastIndexByte(data[lineFrom:at], '\n') + 1
		le := lineEnd(data, at)
		if !s.report(ls, le, emit) {
			return true
		}
		pos, lineFrom = le+1, le+1
	}
	return false
}

// bulk runs the (?m) form over windows of whole lines, at most m.window
// bytes each; a line longer than that is matched alone.
func (s *lineScan) bulk(emit func(n int, line []byte) bool) (stopped bool) {
	data := s.data
	pos := 0
	for pos < len(data) {
		if s.ctx.Err() != nil {
			return true
		}
		end := len(data)
		if pos+s.m.window < len(data) {
			i := bytes.LastIndexByte(data[pos:pos+s.m.window], '\n')
			if i < 0 {
				le := lineEnd(data, pos)
				if !s.report(pos, le, emit) {
					return true
				}
				pos = le + 1
				continue
			}
			end = pos + i + 1
		}
		if s.window(pos, end, emit) {
			return true
		}
		pos = end
	}
	return false
}

// window runs the (?m) form over data[pos:end], whole lines, reporting
// each line a match starts in.
func (s *lineScan) window(pos, end int, emit func(n int, line []byte) bool) (stopped bool) {
	data := s.data
	for p := pos; p < end; {
		loc := s.m.bulk.FindIndex(data[p:end])
		if loc == nil {
			break
		}
		at := p + loc[0]
		if at == end && (at == 0 || data[at-1] == '\n') {
			break // after the window's last newline: no line starts there
		}
		ls := p + bytes.LastIndexByte(data[p:at], '\n') + 1
		le := lineEnd(data, at)
		if !s.report(ls, le, emit) {
			return true
		}
		p = le + 1
	}
	return false
}

// lines matches every line alone.
func (s *lineScan) lines(emit func(n int, line []byte) bool) (stopped bool) {
	data := s.data
	for pos := 0; pos < len(data); {
		le := lineEnd(data, pos)
		if !s.report(pos, le, emit) || s.pause(le-pos+1) {
			return true
		}
		pos = le + 1
	}
	return false
}

// matchLine reports whether line matches. A line longer than m.direct is
// read by the regexp through a reader that ends the input when ctx is
// done; cut then reports that the answer is not known.
func (m *matcher) matchLine(ctx context.Context, line []byte) (ok, cut bool) {
	if len(line) <= m.direct {
		return m.line.Match(line), false
	}
	r := &ctxRuneReader{ctx: ctx, data: line, every: m.direct}
	ok = m.line.MatchReader(r)
	return ok && !r.cut, r.cut
}

// ctxRuneReader gives the regexp engine a line rune by rune, as a byte
// slice would (an invalid byte is utf8.RuneError of width 1), and ends it
// early, setting cut, once ctx is done; ctx is looked at every every bytes.
type ctxRuneReader struct {
	ctx   context.Context
	data  []byte
	pos   int
	next  int // position at which ctx is looked at next
	every int
	cut   bool
}

func (r *ctxRuneReader) ReadRune() (rune, int, error) {
	if r.pos >= len(r.data) {
		return 0, 0, io.EOF
	}
	if r.pos >= r.next {
		if r.ctx.Err() != nil {
			r.cut = true
			r.pos = len(r.data)
			return 0, 0, io.EOF
		}
		r.next = r.pos + r.every
	}
	c := r.data[r.pos]
	if c < utf8.RuneSelf {
		r.pos++
		return rune(c), 1, nil
	}
	ru, n := utf8.DecodeRune(r.data[r.pos:])
	r.pos += n
	return ru, n, nil
}

var nl = []byte{'\n'}

// lineEnd is the index of the newline ending the line holding at, or
// len(data).
func lineEnd(data []byte, at int) int {
	if i := bytes.IndexByte(data[at:], '\n'); i >= 0 {
		return at + i
	}
	return len(data)
}

type searchCall struct {
	ws     *workspace.Workspace
	args   SearchArgs
	rel    string
	m      *matcher
	max    int
	denied ReadVerdict
}

func (c *searchCall) Args() any                 { return c.args }
func (c *searchCall) Reads() []string           { return []string{c.rel} }
func (c *searchCall) FilterReads(v ReadVerdict) { c.denied = v }

// skipDenied reports whether rel's content is denied, noting it in nts.
func (c *searchCall) skipDenied(rel string, nts *notes) bool {
	if c.denied == nil {
		return false
	}
	rule, denied := c.denied(rel)
	if denied {
		nts.add(rel, "content denied by read_scope "+rule+": not searched")
	}
	return denied
}
func (c *searchCall) Writes() []Write { return nil }

// searchBatchSize is how many files go to a worker at once.
const searchBatchSize = 32

// searchBatch is a run of consecutive files of the walk; seq orders the
// batches, and results come back in the same batch.
type searchBatch struct {
	seq     int
	jobs    []searchJob
	results []searchResult
}

// searchJob is one file to search.
type searchJob struct {
	dir  *workspace.Dir
	name string // name inside dir (or canonical path when dir is the root)
	rel  string
}

// searchResult is one file's matches, already formatted.
type searchResult struct {
	out     []byte
	n       int
	scanned bool
	binary  bool
}

// bufPool keeps worker read buffers between calls.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (c *searchCall) Execute(ctx context.Context, rep Report) (Result, error) {
	var res Result
	err := c.ws.WithRoot(func(root int) error {
		var err error
		res, err = c.run(ctx, root)
		return err
	})
	return res, fromWorkspace(err)
}

func (c *searchCall) run(ctx context.Context, root int) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.target(root)
	if err != nil {
		return Result{}, err
	}
	var stopped atomic.Bool
	nts := &notes{}
	// Files travel in batches, and results come back per batch: one
	// channel operation per searchBatch files, not per file, keeps the
	// goroutines from handing work to each other 10,000 times a search.
	jobs := make(chan searchBatch, 16)
	results := make(chan searchBatch, 16)
	walkErr := make(chan error, 1)

	go c.produce(ctx, root, st, &stopped, nts, jobs, walkErr)
	c.startWorkers(ctx, &stopped, nts, jobs, results)
	t := c.collect(results, &stopped, cancel)
	if err := <-walkErr; err != nil {
		return Result{}, fsError(c.rel, "open directory", err)
	}
	if err := context.Cause(ctx); err != nil && !stopped.Load() {
		return Result{}, ctxError(err, "search")
	}
	return c.report(t, nts), nil
}

// target stats the search's path: a directory or a regular file.
func (c *searchCall) target(root int) (unix.Stat_t, error) {
	var st unix.Stat_t
	pfd, err := workspace.OpenBeneath(root, c.rel, unix.O_PATH, 0)
	if err != nil {
		return st, fsError(c.rel, "open", err)
	}
	err = unix.Fstat(pfd, &st)
	unix.Close(pfd)
	if err != nil {
		return st, fsError(c.rel, "stat", err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFREG {
		return st, Errorf(ReasonToolError, nil, "%q is not a regular file (%s); search reads regular files only", c.rel, kindName(st.Mode))
	}
	return st, nil
}

// produce is the producer: the walk, in order, sending the files that
// match the glob to jobs in batches, then its error to walkErr. It closes
// jobs.
func (c *searchCall) produce(ctx context.Context, root int, st unix.Stat_t, stopped *atomic.Bool, nts *notes, jobs chan<- searchBatch, walkErr chan<- error) {
	defer close(jobs)
	var batch searchBatch
	flush := func() {
		if len(batch.jobs) == 0 {
			return
		}
		select {
		case jobs <- batch:
		case <-ctx.Done():
			for _, j := range batch.jobs {
				j.dir.Release()
			}
		}
		batch = searchBatch{seq: batch.seq + 1}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if globMatch(c.args.Glob, c.rel) && !c.skipDenied(c.rel, nts) {
			batch.jobs = append(batch.jobs, searchJob{dir: workspace.NewDir(root, ".", false), name: c.rel, rel: c.rel})
			flush()
		}
		walkErr <- nil
		return
	}
	wk := workspace.Walker{Stop: stopped.Load, Skip: nts.add, Visit: func(e workspace.Entry) {
		if e.Type != unix.DT_REG || !globMatch(c.args.Glob, e.Rel) || c.skipDenied(e.Rel, nts) {
			return
		}
		e.Dir.Acquire()
		batch.jobs = append(batch.jobs, searchJob{dir: e.Dir, name: e.Name, rel: e.Rel})
		if len(batch.jobs) == searchBatchSize {
			flush()
		}
	}}
	err := wk.Walk(ctx, root, c.rel)
	flush()
	walkErr <- err
}

// startWorkers starts one worker per CPU scanning the batches of jobs into
// results; results is closed when they are done.
func (c *searchCall) startWorkers(ctx context.Context, stopped *atomic.Bool, nts *notes, jobs <-chan searchBatch, results chan<- searchBatch) {
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for b := range jobs {
				b.results = make([]searchResult, len(b.jobs))
				for i, j := range b.jobs {
					if !stopped.Load() && ctx.Err() == nil {
						b.results[i] = c.scanFile(ctx, j, bp, nts)
					}
					j.dir.Release()
				}
				b.jobs = nil
				results <- b
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
}

// searchTally is what the collector gathered.
type searchTally struct {
	out                                    []byte
	matches, files, filesMatched, binaries int
	truncated                              bool
}

// collect is the collector: it reassembles the results in walk order and
// stops (stopped, cancel) at max.
func (c *searchCall) collect(results <-chan searchBatch, stopped *atomic.Bool, cancel context.CancelFunc) searchTally {
	var t searchTally
	pending := map[int]searchBatch{}
	next := 0
	for b := range results {
		if t.truncated {
			continue
		}
		pending[b.seq] = b
	ordered:
		for {
			pb, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			for _, p := range pb.results {
				if p.scanned {
					t.files++
				}
				if p.binary {
					t.binaries++
				}
				if p.n == 0 {
					continue
				}
				t.filesMatched++
				if t.matches+p.n > c.max {
					// A match beyond max_results exists: keep max_results
					// and stop, saying so.
					t.out = append(t.out, cutLines(p.out, c.max-t.matches)...)
					t.matches = c.max
					t.truncated = true
					stopped.Store(true)
					cancel()
					break ordered
				}
				t.out = append(t.out, p.out...)
				t.matches += p.n
			}
		}
	}
	return t
}

// report is the search's result: the matches, the notes and the figures.
func (c *searchCall) report(t searchTally, nts *notes) Result {
	var b strings.Builder
	b.Write(t.out)
	if t.matches == 0 {
		b.WriteString("no matches\n")
	}
	if t.truncated {
		fmt.Fprintf(&b, "[search stopped after max_results=%d matching lines; there are more: narrow path, glob or pattern, or raise max_results]\n", c.max)
	}
	b.WriteString(nts.text())
	return Result{Text: b.String(), Meta: map[string]any{
		"path":           c.rel,
		"matches":        t.matches,
		"files_searched": t.files,
		"files_matched":  t.filesMatched,
		"binary_skipped": t.binaries,
		"skipped":        nts.count,
		"truncated":      t.truncated,
		"max_results":    c.max,
	}}
}

// cutLines keeps the first n lines of formatted output.
func cutLines(out []byte, n int) []byte {
	end := 0
	for range n {
		i := bytes.IndexByte(out[end:], '\n')
		if i < 0 {
			return out
		}
		end += i + 1
	}
	return out[:end]
}

// scanFile searches one file, reading it whole into the worker's buffer
// (in chunks of whole lines when larger than searchChunk).
func (c *searchCall) scanFile(ctx context.Context, j searchJob, bp *[]byte, nts *notes) searchResult {
	var r searchResult
	fd, err := workspace.OpenBeneath(j.dir.Fd(), j.name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		nts.add(j.rel, workspace.SkipReason(err))
		return r
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return r // not a regular file (any more): nothing to search
	}
	r.scanned = true
	buf := *bp
	if want := min(int(st.Size)+1, searchChunk); want > len(buf) {
		buf = make([]byte, want)
		*bp = buf
	}
	have, total, first := 0, int64(0), 1
	probed := false
	left := c.max + 1 // no file need contribute more: one past max proves truncation
	var out []byte
	emit := func(n int, line []byte) bool {
		if bytes.IndexByte(line, 0) >= 0 {
			r.binary = true
			return false
		}
		out = appendMatch(out, j.rel, n, line)
		r.n++
		left--
		return left > 0
	}
	for {
		if have == len(buf) { // one line fills the buffer: grow it
			if len(buf) >= maxSearchLine {
				nts.add(j.rel, fmt.Sprintf("a line is longer than %d MiB", maxSearchLine>>20))
				return searchResult{scanned: true}
			}
			nb := make([]byte, 2*len(buf))
			copy(nb, buf[:have])
			buf = nb
			*bp = buf
		}
		n, err := unix.Read(fd, buf[have:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			nts.add(j.rel, "read failed: "+err.Error())
			return searchResult{scanned: true}
		}
		total += int64(n)
		data := buf[:have+n]
		eof := n == 0 || total == st.Size
		if !probed { // the first read: a NUL in its first 8 KiB means binary
			probed = true
			if bytes.IndexByte(data[:min(len(data), binaryProbe)], 0) >= 0 {
				r.binary = true
				return searchResult{scanned: true, binary: true}
			}
		}
		cut := len(data)
		if !eof {
			cut = bytes.LastIndexByte(data, '\n') + 1
			if cut == 0 {
				have = len(data)
				continue
			}
		}
		if m := c.m.scan(ctx, data[:cut], first, emit); m || eof || ctx.Err() != nil {
			break
		}
		first += bytes.Count(data[:cut], nl)
		have = copy(buf, data[cut:])
	}
	if r.binary {
		return searchResult{scanned: true, binary: true}
	}
	r.out = out
	return r
}

// appendMatch formats one result line: path:line:text, the text made valid
// UTF-8, a trailing CR dropped and anything past maxShownLine bytes
// replaced by a marker.
func appendMatch(out []byte, rel string, n int, line []byte) []byte {
	out = append(out, workspace.ShowPath(rel)...)
	out = append(out, ':')
	out = strconv.AppendInt(out, int64(n), 10)
	out = append(out, ':')
	line = bytes.TrimSuffix(line, []byte{'\r'})
	cut := 0
	if len(line) > maxShownLine {
		cut = len(line)
		end := maxShownLine
		for end > 0 && !utf8.RuneStart(line[end]) {
			end--
		}
		line = line[:end]
		cut -= end
	}
	if utf8.Valid(line) {
		out = append(out, line...)
	} else {
		out = append(out, bytes.ToValidUTF8(line, []byte("\uFFFD"))...)
	}
	if cut > 0 {
		out = fmt.Appendf(out, " [... %d more bytes]", cut)
	}
	return append(out, '\n')
}

// kindName names the type of a file that is not regular, for a message.
func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "not a regular file"
}
