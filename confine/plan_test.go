package confine

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/cgroup"
)

// synthetic builds a Report by hand: every item supported, cgroup v2 with
// all three controllers. Tests then take things away. No kernel is asked.
func synthetic(root bool, abi int) Report {
	r := Report{
		Landlock:  LandlockReport{Finding: supported("synthetic"), LandlockInfo: LandlockInfo{ABI: abi}},
		Privilege: Privilege{UID: 1000},
		Seccomp:   SeccompReport{Filter: supported("synthetic"), NoNewPrivs: supported("synthetic")},
		Cgroup:    CgroupReport{Mount: "/sys/fs/cgroup", Self: "/user.slice/x", CanCreate: true, Kill: true, Controllers: []string{"pids", "memory", "cpu"}},
	}
	if abi == 0 {
		r.Landlock.Finding = notSupported("synthetic", nil)
	}
	if root {
		r.Privilege = Privilege{UID: 0, CapSysAdmin: true, Root: true}
	}
	for _, k := range namespaceKinds {
		r.Namespaces = append(r.Namespaces, NamespaceFinding{Name: k.name, Finding: supported("synthetic")})
	}
	return r
}

func setNS(r *Report, name string, f Finding) {
	for i := range r.Namespaces {
		if r.Namespaces[i].Name == name {
			r.Namespaces[i].Finding = f
		}
	}
}

func names(ls []Layer) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(drop, s) })
}

func TestPlanSynthetic(t *testing.T) {
	all := LayerNames()
	for _, tc := range []struct {
		name   string
		report func() Report
		// strictMissing nil: strict succeeds.
		strictMissing []string
		// Auto's outcome.
		workspace, execution, limits bool
		kill                         string
		enforced                     []string
	}{
		{
			name:      "AllPresentRoot",
			report:    func() Report { return synthetic(true, 7) },
			workspace: true, execution: true, limits: true, kill: "cgroup.kill",
			enforced: without(all, LayerUserNS), // root needs no user namespace
		},
		{
			name:      "AllPresentUnprivileged",
			report:    func() Report { return synthetic(false, 2) },
			workspace: true, execution: true, limits: true, kill: "cgroup.kill",
			enforced: all,
		},
		{
			name: "ThisHostShape", // cgroup v2 without pids, memory, cpu
			report: func() Report {
				r := synthetic(true, 7)
				r.Cgroup.Controllers = nil
				return r
			},
			strictMissing: []string{LayerPidsLimit, LayerMemoryLimit, LayerCPULimit},
			workspace:     true, execution: true, limits: false, kill: "cgroup.kill",
			enforced: without(all, LayerUserNS, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit),
		},
		{
			name: "OneControllerMissing",
			report: func() Report {
				r := synthetic(true, 7)
				r.Cgroup.Controllers = []string{"pids", "cpu"}
				return r
			},
			strictMissing: []string{LayerMemoryLimit},
			workspace:     true, execution: true, limits: false, kill: "cgroup.kill",
			enforced: without(all, LayerUserNS, LayerMemoryLimit),
		},
		{
			name:          "NoLandlock",
			report:        func() Report { return synthetic(true, 0) },
			strictMissing: []string{LayerLandlockSelf, LayerLandlockChild},
			workspace:     false, execution: false, limits: false, kill: "cgroup.kill",
			enforced: []string{},
		},
		{
			name: "LandlockInconclusive",
			report: func() Report {
				r := synthetic(true, 7)
				r.Landlock.Finding = inconclusive("synthetic", errors.New("landlock_create_ruleset: EFAULT"))
				return r
			},
			strictMissing: []string{LayerLandlockSelf, LayerLandlockChild},
			workspace:     false, execution: false, limits: false, kill: "cgroup.kill",
			enforced: []string{},
		},
		{
			name: "NoUsernsUnprivileged", // the no-userns shape: nothing can be unshared
			report: func() Report {
				r := synthetic(false, 2)
				for _, k := range namespaceKinds {
					setNS(&r, k.name, notSupported("synthetic", errors.New("EPERM")))
				}
				r.Cgroup.CanCreate = false
				return r
			},
			strictMissing: []string{LayerUserNS, LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit},
			workspace:     true, execution: false, limits: false, kill: "",
			enforced: []string{LayerLandlockSelf},
		},
		{
			name: "NoUsernsButRoot", // root does not need it
			report: func() Report {
				r := synthetic(true, 7)
				setNS(&r, "user", notSupported("synthetic", errors.New("ENOSPC")))
				return r
			},
			workspace: true, execution: true, limits: true, kill: "cgroup.kill",
			enforced: without(all, LayerUserNS),
		},
		{
			name: "CgroupV1Only", // whole-tree kill falls back to the PID namespace
			report: func() Report {
				r := synthetic(true, 2)
				r.Cgroup = CgroupReport{V1: true, Problem: "no cgroup2 mount"}
				return r
			},
			strictMissing: []string{LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit},
			workspace:     true, execution: true, limits: false, kill: "pid namespace",
			enforced: without(all, LayerUserNS, LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit),
		},
		{
			name: "NoKillAtAll", // no cgroup.kill and no PID namespace: no run
			report: func() Report {
				r := synthetic(true, 7)
				r.Cgroup.Kill = false
				setNS(&r, "pid", notSupported("synthetic", errors.New("EINVAL")))
				return r
			},
			strictMissing: []string{LayerPidNS, LayerCgroupLeaf},
			workspace:     true, execution: false, limits: false, kill: "",
			enforced: []string{LayerLandlockSelf},
		},
		{
			name: "SeccompInconclusive",
			report: func() Report {
				r := synthetic(true, 7)
				r.Seccomp.Filter = inconclusive("probe child failed", errors.New("no answer"))
				return r
			},
			strictMissing: []string{LayerSeccomp},
			workspace:     true, execution: false, limits: false, kill: "cgroup.kill",
			enforced: []string{LayerLandlockSelf},
		},
		{
			name: "NetNamespaceMissing",
			report: func() Report {
				r := synthetic(true, 7)
				setNS(&r, "net", notSupported("synthetic", errors.New("EINVAL")))
				return r
			},
			strictMissing: []string{LayerNetNS},
			workspace:     true, execution: false, limits: false, kill: "cgroup.kill",
			enforced: []string{LayerLandlockSelf},
		},
		{
			name:          "ZeroReport", // nothing probed: nothing assumed
			report:        func() Report { return Report{} },
			strictMissing: all,
			workspace:     false, execution: false, limits: false, kill: "",
			enforced: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.report()
			strict, err := r.Plan(Strict)
			switch {
			case tc.strictMissing == nil && err != nil:
				t.Errorf("strict: %v", err)
			case tc.strictMissing == nil:
				if !strict.ConfinedWorkspace || !strict.ConfinedExecution || !strict.ResourceLimits || len(strict.Missing) != 0 {
					t.Errorf("strict plan %+v, want every class and nothing missing", strict)
				}
				if !slices.Equal(strict.Enforced, tc.enforced) {
					t.Errorf("strict enforces %v, want %v", strict.Enforced, tc.enforced)
				}
			default:
				var se *StrictError
				if !errors.As(err, &se) || !errors.Is(err, ErrNotSupported) {
					t.Fatalf("strict: %T %v, want *StrictError matching ErrNotSupported", err, err)
				}
				if !slices.Equal(names(se.Missing), tc.strictMissing) {
					t.Errorf("strict names %v, want %v", names(se.Missing), tc.strictMissing)
				}
				lines := strings.Split(se.Error(), "\n")
				if len(lines) != len(tc.strictMissing) {
					t.Errorf("strict error has %d lines, want %d:\n%s", len(lines), len(tc.strictMissing), se)
				}
				for i, l := range se.Missing {
					if l.Remedy == "" || !strings.Contains(lines[i], l.Name) || !strings.Contains(lines[i], l.Remedy) {
						t.Errorf("line %d lacks the layer or its remedy: %q", i, lines[i])
					}
				}
				// The refused plan names its mode and the missing layers,
				// and holds nothing.
				if strict.Mode != Strict || strict.ConfinedWorkspace || strict.ConfinedExecution || strict.ResourceLimits ||
					strict.WholeTreeKill != "" || len(strict.Enforced) != 0 || len(strict.Missing) != len(se.Missing) {
					t.Errorf("strict refusal returned plan %+v; want mode strict, nothing held, the missing layers", strict)
				}
			}

			auto, err := r.Plan(Auto)
			if err != nil {
				t.Fatalf("auto: %v", err)
			}
			if auto.ConfinedWorkspace != tc.workspace || auto.ConfinedExecution != tc.execution || auto.ResourceLimits != tc.limits || auto.WholeTreeKill != tc.kill {
				t.Errorf("auto: workspace=%v execution=%v limits=%v kill=%q, want %v %v %v %q",
					auto.ConfinedWorkspace, auto.ConfinedExecution, auto.ResourceLimits, auto.WholeTreeKill,
					tc.workspace, tc.execution, tc.limits, tc.kill)
			}
			if !slices.Equal(auto.Enforced, tc.enforced) {
				t.Errorf("auto enforces %v, want %v", auto.Enforced, tc.enforced)
			}
			wantMissing := tc.strictMissing
			if wantMissing == nil {
				wantMissing = []string{}
			}
			if !slices.Equal(names(auto.Missing), wantMissing) {
				t.Errorf("auto lists missing %v, want %v", names(auto.Missing), wantMissing)
			}

			off, err := r.Plan(Off)
			if err != nil {
				t.Fatalf("off: %v", err)
			}
			if off.ConfinedWorkspace || off.ConfinedExecution || off.ResourceLimits || len(off.Enforced) != 0 || len(off.Missing) != 0 {
				t.Errorf("off plan %+v, want nothing", off)
			}

			// Every layer is in the table, in order, and an unavailable
			// required layer always says how to get it.
			rows := r.Table()
			if len(rows) != len(all) {
				t.Fatalf("table has %d rows, want %d", len(rows), len(all))
			}
			for i, row := range rows {
				if row.Layer != all[i] {
					t.Errorf("row %d is %s, want %s", i, row.Layer, all[i])
				}
				if !row.Available && row.Remedy == "" {
					t.Errorf("row %s unavailable without a remedy", row.Layer)
				}
				if row.Available && row.Remedy != "" {
					t.Errorf("row %s available with a remedy %q", row.Layer, row.Remedy)
				}
				if row.Detail == "" {
					t.Errorf("row %s has no detail", row.Layer)
				}
			}
		})
	}
}

func TestPlanInvalidMode(t *testing.T) {
	if _, err := synthetic(true, 7).Plan(Mode(9)); err == nil {
		t.Fatal("Plan(Mode(9)) succeeded")
	}
}

func TestPlanJSON(t *testing.T) {
	r := synthetic(true, 7)
	r.Cgroup.Controllers = nil
	p, err := r.Plan(Auto)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"mode":"auto"`, `"confined_workspace":true`, `"confined_execution":true`, `"resource_limits":false`, `"whole_tree_kill":"cgroup.kill"`, `"enforced":[`, `"missing":[{"name":"pids-limit"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("plan JSON lacks %s: %s", want, b)
		}
	}
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Mode != Auto || !slices.Equal(back.Enforced, p.Enforced) || !slices.Equal(back.Missing, p.Missing) {
		t.Errorf("round trip changed the plan: %+v vs %+v", back, p)
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
	}{{"strict", Strict}, {"auto", Auto}, {"off", Off}} {
		got, err := ParseMode(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, bad := range []string{"", "Strict", "AUTO", "on", "none", "stric", " strict", "strict\n", "1"} {
		_, err := ParseMode(bad)
		if err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, strconv.Quote(bad)) || !strings.Contains(msg, "strict, auto, off") {
			t.Errorf("ParseMode(%q) error %q: want one line naming the value and the valid ones", bad, msg)
		}
	}
	var zero Mode
	if zero != Auto {
		t.Errorf("zero Mode is %v, want auto", zero)
	}
	if s := Mode(7).String(); s != "Mode(7)" {
		t.Errorf("Mode(7).String() = %q", s)
	}
	var m struct{ M Mode }
	if err := json.Unmarshal([]byte(`{"M":"off"}`), &m); err != nil || m.M != Off {
		t.Errorf("unmarshal off: %v %v", m.M, err)
	}
	if err := json.Unmarshal([]byte(`{"M":"maybe"}`), &m); err == nil {
		t.Error("unmarshal of an invalid mode succeeded")
	}
	if _, err := json.Marshal(struct{ M Mode }{Mode(5)}); err == nil {
		t.Error("marshal of an invalid mode succeeded")
	}
}

func TestLandlockFeatureTable(t *testing.T) {
	want := map[string]int{
		FeatureFS: 1, FeatureRefer: 2, FeatureTruncate: 3, FeatureTCP: 4, FeatureIoctlDev: 5,
		FeatureScope: 6, FeatureAudit: 7, FeatureTSync: 8, FeatureResolveUnix: 9, FeatureUDP: 10,
	}
	table := LandlockFeatures()
	if len(table) != len(want) {
		t.Fatalf("table has %d rows, want %d", len(table), len(want))
	}
	for i, f := range table {
		if want[f.Name] != f.MinimumABI {
			t.Errorf("%s: minimum ABI %d, want %d", f.Name, f.MinimumABI, want[f.Name])
		}
		if i > 0 && table[i-1].MinimumABI > f.MinimumABI {
			t.Errorf("table not in ABI order at %s", f.Name)
		}
	}
	table[0].MinimumABI = 99
	if LandlockFeatures()[0].MinimumABI != 1 {
		t.Error("LandlockFeatures returned the table itself, not a copy")
	}
	for abi := 0; abi <= 11; abi++ {
		info := LandlockInfo{ABI: abi}
		for name, min := range want {
			if got := info.Has(name); got != (abi >= min) {
				t.Errorf("ABI %d Has(%s) = %v", abi, name, got)
			}
			err := info.Require(name)
			if (err == nil) != (abi >= min) {
				t.Errorf("ABI %d Require(%s) = %v", abi, name, err)
			}
			var ufe *UnsupportedFeatureError
			if err != nil && (!errors.Is(err, ErrNotSupported) || !errors.As(err, &ufe) || !strings.Contains(ufe.MinimumVersion, "ABI")) {
				t.Errorf("ABI %d Require(%s): %T %v, want *UnsupportedFeatureError matching ErrNotSupported", abi, name, err, err)
			}
		}
	}
	if err := (LandlockInfo{ABI: 1}).Require(FeatureTruncate); err.Error() != "Landlock truncate not supported (requires Linux 6.2 (Landlock ABI 3))" {
		t.Errorf("message: %v", err)
	}
	if (LandlockInfo{ABI: 11}).Has("no-such-feature") {
		t.Error("unknown feature reported present")
	}
	if err := (LandlockInfo{ABI: 11}).Require("no-such-feature"); err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("unknown feature: %v, want a plain error", err)
	}
	var ids []int
	for _, e := range (LandlockInfo{ABI: 7, Errata: 0x7}).FixedErrata() {
		ids = append(ids, e.ID)
		if e.ID <= 2 && e.Description == "" {
			t.Errorf("erratum %d has no description", e.ID)
		}
	}
	if !slices.Equal(ids, []int{1, 2, 3}) {
		t.Errorf("errata 0x7 -> %v, want [1 2 3]", ids)
	}
}

func TestSelfRightsPerABI(t *testing.T) {
	v1 := []string{"execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file", "make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block", "make_sym"}
	for _, tc := range []struct {
		abi  int
		want []string
	}{
		{0, nil},
		{1, v1},
		{2, append(slices.Clone(v1), "refer")},
		{3, append(slices.Clone(v1), "refer", "truncate")},
		{4, append(slices.Clone(v1), "refer", "truncate")},
		{5, append(slices.Clone(v1), "refer", "truncate", "ioctl_dev")},
		{7, append(slices.Clone(v1), "refer", "truncate", "ioctl_dev")},
		{11, append(slices.Clone(v1), "refer", "truncate", "ioctl_dev")},
	} {
		if got := rightNames(selfRights(tc.abi)); !slices.Equal(got, tc.want) {
			t.Errorf("ABI %d: %v, want %v", tc.abi, got, tc.want)
		}
		for _, read := range []string{"read_file", "read_dir", "execute"} {
			if tc.abi > 0 && !slices.Contains(rightNames(selfRights(tc.abi)), read) {
				t.Errorf("ABI %d does not handle %s: the harness's reads must be confined too", tc.abi, read)
			}
		}
	}
}

func TestPlanSelfValidation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "record.jsonl")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	toRoot := filepath.Join(dir, "to-root")
	if err := os.Symlink("/", toRoot); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    SelfPolicy
		abi  int
		want string // substring of the error; "" for success
	}{
		{"NoWorkspace", SelfPolicy{}, 7, "no workspace"},
		{"Relative", SelfPolicy{Workspace: "ws"}, 7, "not an absolute path"},
		{"Missing", SelfPolicy{Workspace: dir + "/nope"}, 7, "no such file"},
		{"WorkspaceIsFile", SelfPolicy{Workspace: file}, 7, "is not a directory"},
		{"Root", SelfPolicy{Workspace: "/"}, 7, "whole filesystem"},
		{"SymlinkToRoot", SelfPolicy{Workspace: toRoot}, 7, "whole filesystem"},
		{"Proc", SelfPolicy{Workspace: dir, WritePaths: []string{"/proc/self"}}, 7, "beneath /proc"},
		{"MissingWritePath", SelfPolicy{Workspace: dir, WritePaths: []string{dir + "/gone"}}, 7, "no such file"},
		{"RelativeDevice", SelfPolicy{Workspace: dir, Devices: []string{"dev/null"}}, 7, "not an absolute path"},
		{"NoLandlock", SelfPolicy{Workspace: dir}, 0, "Landlock not supported"},
		{"ProcRead", SelfPolicy{Workspace: dir, ReadPaths: []string{"/proc/self/status"}}, 7, "beneath /proc"},
		{"RootRead", SelfPolicy{Workspace: dir, ReadPaths: []string{"/"}}, 7, "whole filesystem"},
		{"OK", SelfPolicy{Workspace: dir, WritePaths: []string{file}, ReadPaths: []string{dir + "/no-such-read-path", "/usr"},
			Devices: []string{"/dev/null", dir + "/no-such-device"}}, 7, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := planSelf(tc.p, tc.abi)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("planSelf: %v, want one line containing %q", err, tc.want)
				}
				if tc.name == "NoLandlock" {
					var ufe *UnsupportedFeatureError
					if !errors.Is(err, ErrNotSupported) || !errors.As(err, &ufe) {
						t.Errorf("ABI 0: %T %v, want *UnsupportedFeatureError matching ErrNotSupported", err, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sp.skipped, []string{dir + "/no-such-read-path", dir + "/no-such-device"}) {
				t.Errorf("skipped %v", sp.skipped)
			}
			want := map[string][]string{
				dir:         rightNames(selfRights(7)),
				file:        {"write_file", "read_file", "truncate", "ioctl_dev"}, // a file: no directory rights
				"/usr":      {"execute", "read_file", "read_dir"},                 // read paths: never a write right
				"/dev/null": {"write_file", "read_file", "truncate", "ioctl_dev"},
			}
			if len(sp.grants) != len(want) {
				t.Fatalf("grants %+v", sp.grants)
			}
			for _, g := range sp.grants {
				if !slices.Equal(rightNames(g.rights), want[g.path]) {
					t.Errorf("%s: %v, want %v", g.path, rightNames(g.rights), want[g.path])
				}
			}
		})
	}
	// At ABI 2 a device keeps only write_file and read_file: truncate and
	// ioctl are not handled, so they need no grant.
	sp, err := planSelf(SelfPolicy{Workspace: dir, Devices: []string{"/dev/null"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := rightNames(sp.grants[1].rights); !slices.Equal(got, []string{"write_file", "read_file"}) {
		t.Errorf("ABI 2 device rights %v", got)
	}
}

// The cgroup package's per-controller lines become the layer's detail and
// remedy; without one, the layer still explains itself.
func TestControllerDetailFromCgroup(t *testing.T) {
	r := synthetic(true, 7)
	r.Cgroup.Controllers = []string{"cpu"}
	r.Cgroup.Missing = []string{"pids controller: not offered by the cgroup2 hierarchy at /x because it is bound to v1; to get it, boot with cgroup_no_v1=pids"}
	pids := r.layer(LayerPidsLimit)
	if pids.Available || pids.Detail != "pids controller not offered by the cgroup2 hierarchy at /x because it is bound to v1" || pids.Remedy != "boot with cgroup_no_v1=pids" {
		t.Errorf("pids layer %+v", pids)
	}
	mem := r.layer(LayerMemoryLimit)
	if mem.Available || !strings.Contains(mem.Detail, "not memory") || !strings.Contains(mem.Remedy, "memory controller") {
		t.Errorf("memory layer %+v", mem)
	}
	if cpu := r.layer(LayerCPULimit); !cpu.Available || cpu.Remedy != "" {
		t.Errorf("cpu layer %+v", cpu)
	}
}

// TestProbeSelfPlans: a report that probed only the harness's own layer
// publishes confined writes where Landlock works, never confined execution,
// lists nothing it did not probe as missing, and cannot plan strict.
func TestProbeSelfPlans(t *testing.T) {
	r := ProbeSelf("no program declared")
	p, err := r.Plan(Auto)
	if err != nil {
		t.Fatal(err)
	}
	if p.ConfinedExecution || p.ResourceLimits || p.WholeTreeKill != "" {
		t.Fatalf("execution planned without a probe: %+v", p)
	}
	for _, l := range p.Missing {
		if l.Name != LayerLandlockSelf {
			t.Errorf("unprobed layer listed missing: %+v", l)
		}
	}
	landlock := r.Landlock.OK() && r.Landlock.ABI >= 1
	if p.ConfinedWorkspace != landlock || slices.Contains(p.Enforced, LayerLandlockSelf) != landlock {
		t.Fatalf("Landlock %v but plan %+v", landlock, p)
	}
	if len(p.Enforced) > 1 {
		t.Fatalf("enforced beyond the harness's own layer: %q", p.Enforced)
	}
	for _, l := range r.Layers() {
		if l.Name != LayerLandlockSelf && (l.Available || l.Required || !strings.Contains(l.Detail, "not probed: no program declared")) {
			t.Errorf("layer %+v", l)
		}
	}
	if _, err := r.Plan(Strict); err == nil {
		t.Fatal("strict planned from a partial probe")
	}
}

// TestPlanSelfProc: SelfPolicy.Proc grants /proc for reading and listing
// only, at every ABI; without it /proc is never granted.
func TestPlanSelfProc(t *testing.T) {
	dir := t.TempDir()
	for _, abi := range []int{1, 3, 7} {
		sp, err := planSelf(SelfPolicy{Workspace: dir, Proc: true}, abi)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range sp.grants {
			if g.path == "/proc" {
				got = rightNames(g.rights)
			}
		}
		if !slices.Equal(got, []string{"read_file", "read_dir"}) {
			t.Errorf("ABI %d: /proc grant %v, want read_file and read_dir only", abi, got)
		}
		sp, err = planSelf(SelfPolicy{Workspace: dir}, abi)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range sp.grants {
			if g.path == "/proc" {
				t.Errorf("ABI %d: /proc granted without Proc", abi)
			}
		}
	}
}

func TestLimitLayers(t *testing.T) {
	all := cgroup.Limits{PidsMax: 1, MemoryMax: 1, CPUQuota: time.Millisecond}
	want := []LayerName{LayerPidsLimit, LayerMemoryLimit, LayerCPULimit}
	if got := LimitLayers(all); !slices.Equal(got, want) {
		t.Errorf("LimitLayers = %q, want %q", got, want)
	}
	if got := LimitLayers(cgroup.Limits{MemoryMax: 1}); !slices.Equal(got, want[1:2]) {
		t.Errorf("LimitLayers(memory) = %q", got)
	}
	if got := LimitLayer("io"); got != "" {
		t.Errorf("LimitLayer(io) = %q", got)
	}
	for _, l := range want {
		if c := controllerOfLayer(string(l)); LimitLayer(c) != l {
			t.Errorf("layer %s -> controller %q -> layer %q", l, c, LimitLayer(c))
		}
	}
}
