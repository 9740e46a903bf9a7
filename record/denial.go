package record

import "time"

// Denial is one request the kernel refused inside a run call's child,
// tied to the call by Seq: the layer that refused it (landlock, seccomp,
// netns, view), the operation (the rights it lacked, fs.write_file,
// net.connect_tcp, scope.signal; the system call, mount; net.no_route;
// fs.read_file of a masked file) and the object (a path, a port, a process;
// none for netns, whose counters keep no destination). Rule, when not "",
// says what refused it where the layer alone does not (a masked file:
// "masked: reads as empty"). Written once the program has ended, before
// the call's line, at most the call's cap of them (max_denials); Dropped
// on the last one counts those beyond it.
type Denial struct {
	Event     string    `json:"event"` // "denial"
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Layer     string    `json:"layer"`
	Operation string    `json:"operation"`
	Object    string    `json:"object,omitempty"`
	Rule      string    `json:"rule,omitempty"`
	Dropped   int       `json:"dropped,omitempty"`
}

// NewDenial is the denial line of call seq, stamped t (in UTC).
func NewDenial(seq int64, t time.Time, layer, operation, object string) Denial {
	return Denial{Event: "denial", Seq: seq, Time: t.UTC(), Layer: layer, Operation: operation, Object: object}
}
