// Command mcpbench measures MCP servers on stdio, as bench/mcp.sh runs it,
// with two clients in turn (-clients): the go-sdk client (CommandTransport)
// and a raw one (JSON-RPC lines over pipes, which shows the servers without
// the go-sdk client's own cost). For each client and server, -runs times:
//
//   - start: from starting the process to the answer of the first
//     tools/list (initialize included);
//   - calls: -calls tools/call requests reading one file, one after the
//     other on the same connection: p50 and p99 of their round trips;
//   - rss: VmRSS of the server's process tree (the process and its
//     descendants, from /proc) after those calls.
//
// With -floor FILE it is itself a server (see serveFloor), to be measured
// beside the others. The ratio row compares the first two servers.
//
// A server is NAME=TOOL=ARGS=COMMAND...: the name printed, the tool to call,
// its arguments (JSON) and the command line, split on spaces. Every call
// must succeed (not isError) and return the file's content, or mcpbench
// fails.
//
//	go run ./bench/mcpbench -runs 5 -calls 1000 -want f.txt \
//	    'b10x=file_read={"path":"f.txt"}=bin/b10x-harness mcp --workspace DIR' \
//	    'reference=read_text_file={"path":"DIR/f.txt"}=mcp-server-filesystem DIR'
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type server struct {
	name, tool string
	args       json.RawMessage
	argv       []string
}

type sample struct {
	start, p50, p99 time.Duration
	rss, anon       int64 // KiB: VmRSS, and its RssAnon part
	procs           int
}

func main() {
	runs := flag.Int("runs", 5, "runs of each server")
	calls := flag.Int("calls", 1000, "tools/call requests per run")
	want := flag.String("want", "", "the file every call reads: its content must come back")
	clients := flag.String("clients", "sdk,raw", "the clients to measure with: sdk (the go-sdk client, CommandTransport), raw (JSON-RPC lines over pipes)")
	floor := flag.String("floor", "", "serve FILE over stdio with the go-sdk server and nothing else (tool read), and exit at the end of input")
	flag.Parse()
	if *floor != "" {
		serveFloor(*floor)
		return
	}
	var servers []server
	for _, a := range flag.Args() {
		parts := strings.SplitN(a, "=", 4)
		if len(parts) != 4 || !json.Valid([]byte(parts[2])) {
			fatalf("server %q: want NAME=TOOL=ARGS=COMMAND", a)
		}
		servers = append(servers, server{parts[0], parts[1], json.RawMessage(parts[2]), strings.Fields(parts[3])})
	}
	if len(servers) == 0 || *want == "" {
		fatalf("usage: mcpbench [-runs N] [-calls N] -want FILE NAME=TOOL=ARGS=COMMAND...")
	}
	content, err := os.ReadFile(*want)
	if err != nil {
		fatalf("%v", err)
	}
	results := map[string][]sample{}
	for r := 0; r < *runs; r++ {
		for _, client := range strings.Split(*clients, ",") {
			for _, s := range servers {
				var m sample
				var err error
				switch client {
				case "sdk":
					m, err = measure(s, *calls, string(content))
				case "raw":
					m, err = measureRaw(s, *calls, string(content))
				default:
					fatalf("unknown client %q: want sdk or raw", client)
				}
				if err != nil {
					fatalf("%s, %s client, run %d: %v", s.name, client, r+1, err)
				}
				fmt.Fprintf(os.Stderr, "%s client, %s run %d: start %s, p50 %s, p99 %s, rss %d KiB (anonymous %d KiB, %d processes)\n",
					client, s.name, r+1, ms(m.start), us(m.p50), us(m.p99), m.rss, m.anon, m.procs)
				results[client+" "+s.name] = append(results[client+" "+s.name], m)
			}
		}
	}
	for _, client := range strings.Split(*clients, ",") {
		fmt.Printf("\n%s client: median of %d runs, %d calls each\n\n", map[string]string{"sdk": "go-sdk", "raw": "raw JSON-RPC"}[client], *runs, *calls)
		fmt.Printf("| server | start → first tools/list | call p50 | call p99 | VmRSS after the calls | of it anonymous |\n|---|---|---|---|---|---|\n")
		med := map[string]sample{}
		for _, s := range servers {
			m := median(results[client+" "+s.name])
			med[s.name] = m
			fmt.Printf("| %s | %s | %s | %s | %.1f MiB | %.1f MiB |\n", s.name, ms(m.start), us(m.p50), us(m.p99), float64(m.rss)/1024, float64(m.anon)/1024)
		}
		if len(servers) >= 2 {
			a, b := med[servers[0].name], med[servers[1].name]
			fmt.Printf("| %s / %s | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× |\n", servers[0].name, servers[1].name,
				float64(a.start)/float64(b.start), float64(a.p50)/float64(b.p50), float64(a.p99)/float64(b.p99), float64(a.rss)/float64(b.rss), float64(a.anon)/float64(b.anon))
		}
	}
}

// serveFloor is the least an MCP server over the go-sdk can do for a read:
// one tool that returns the file's content, read at each call. Measured
// beside the others, it shows what the client, the SDK and the pipes cost.
func serveFloor(file string) {
	s := sdk.NewServer(&sdk.Implementation{Name: "floor", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
	})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fatalf("%v", err)
	}
}

func measure(s server, calls int, content string) (sample, error) {
	var m sample
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stderr = os.Stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "mcpbench", Version: "1"}, nil)
	t0 := time.Now()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return m, err
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return m, err
	}
	m.start = time.Since(t0)
	lat := make([]time.Duration, 0, calls)
	for i := 0; i < calls; i++ {
		t := time.Now()
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: s.tool, Arguments: s.args})
		d := time.Since(t)
		if err != nil {
			return m, err
		}
		if r.IsError || len(r.Content) == 0 {
			return m, fmt.Errorf("call %d: %+v", i+1, r)
		}
		if tc, ok := r.Content[0].(*sdk.TextContent); !ok || tc.Text != content {
			return m, fmt.Errorf("call %d returned other content: %+v", i+1, r.Content[0])
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	m.p50 = lat[len(lat)*50/100]
	m.p99 = lat[len(lat)*99/100]
	m.rss, m.anon, m.procs = treeRSS(cmd.Process.Pid)
	return m, nil
}

// measureRaw is measure with a client of its own: JSON-RPC lines written
// to the server's stdin and read from its stdout, one request at a time,
// the answer checked after its time is taken. It shows the servers
// without the go-sdk client's own cost.
func measureRaw(s server, calls int, content string) (sample, error) {
	var m sample
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return m, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return m, err
	}
	out := bufio.NewReaderSize(outPipe, 1<<16)
	// roundTrip writes one request and returns the line answering id.
	roundTrip := func(id int, req string) ([]byte, error) {
		if _, err := io.WriteString(in, req+"\n"); err != nil {
			return nil, err
		}
		want, wantEnd := fmt.Sprintf(`"id":%d,`, id), fmt.Sprintf(`"id":%d}`, id)
		for {
			l, err := out.ReadBytes('\n')
			if err != nil {
				return nil, fmt.Errorf("reading the answer to %d: %w", id, err)
			}
			if (bytes.Contains(l, []byte(want)) || bytes.Contains(l, []byte(wantEnd))) && !bytes.Contains(l, []byte(`"method":`)) {
				return l, nil
			}
		}
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return m, err
	}
	defer func() { in.Close(); cmd.Wait() }()
	if _, err := roundTrip(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpbench","version":"1"}}}`); err != nil {
		return m, err
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return m, err
	}
	if _, err := roundTrip(2, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); err != nil {
		return m, err
	}
	m.start = time.Since(t0)
	lat := make([]time.Duration, 0, calls)
	for i := 0; i < calls; i++ {
		id := 3 + i
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, s.tool, s.args)
		t := time.Now()
		l, err := roundTrip(id, req)
		d := time.Since(t)
		if err != nil {
			return m, err
		}
		var r struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			}
		}
		if err := json.Unmarshal(l, &r); err != nil || r.Result.IsError || len(r.Result.Content) == 0 || r.Result.Content[0].Text != content {
			return m, fmt.Errorf("call %d: %v: %s", i+1, err, l)
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	m.p50 = lat[len(lat)*50/100]
	m.p99 = lat[len(lat)*99/100]
	m.rss, m.anon, m.procs = treeRSS(cmd.Process.Pid)
	return m, nil
}

// treeRSS sums VmRSS and RssAnon (KiB) over pid and its descendants.
func treeRSS(pid int) (rss, anon int64, n int) {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		p, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	var walk func(int)
	walk = func(p int) {
		n++
		rss += status(p, "VmRSS:")
		anon += status(p, "RssAnon:")
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return rss, anon, n
}

// status reads one kB field of /proc/PID/status.
func status(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			f := strings.Fields(v)
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n
		}
	}
	return 0
}

func median(s []sample) sample {
	pick := func(f func(sample) int64) int64 {
		v := make([]int64, len(s))
		for i := range s {
			v[i] = f(s[i])
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	return sample{
		start: time.Duration(pick(func(x sample) int64 { return int64(x.start) })),
		p50:   time.Duration(pick(func(x sample) int64 { return int64(x.p50) })),
		p99:   time.Duration(pick(func(x sample) int64 { return int64(x.p99) })),
		rss:   pick(func(x sample) int64 { return x.rss }),
		anon:  pick(func(x sample) int64 { return x.anon }),
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "mcpbench: "+format+"\n", a...)
	os.Exit(1)
}
