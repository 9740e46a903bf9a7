// Package audit reads the kernel's Landlock audit records and attributes
// each denial to the run call whose domain refused it.
//
// # What the kernel gives
//
// From Landlock ABI 7 (Linux 6.15) a domain can log what it refuses as
// audit records: one AUDIT_LANDLOCK_ACCESS record (type 1423) per denied
// request, naming the domain that refused it (domain=, a hexadecimal id),
// the rights missing (blockers=fs.write_file,...) and the object (path=,
// name=, dev=, ino=; daddr= and dest= for a TCP port; opid= for a signal),
// and, with a domain's first logged denial and in the same event, one
// AUDIT_LANDLOCK_DOMAIN record (1424, status=allocated) that says which
// process created the domain (pid=, in the initial PID namespace, and
// exe=). A run child's domain is created by the helper's program stage,
// the process that then executes the program, with
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, without which the kernel logs
// nothing after that execve.
//
// The records reach every socket bound to the audit netlink's read-only
// multicast group (AUDIT_NLGRP_READLOG), which needs CAP_AUDIT_READ and
// no auditd. The kernel emits them only while its audit is enabled
// (audit_enabled, set by audit=1 on its command line or by an audit
// daemon): this package never changes the host's audit rules or
// configuration, so where audit is off, denials are not attributable and
// Probe says why.
//
// # Attribution
//
// A denial is attributed by its domain id, and a domain to a call by the
// pid its AUDIT_LANDLOCK_DOMAIN record names: the creator of a run
// child's domain is the call's program stage, whose pid the harness knows
// before the program runs and which cannot be reused while the call
// lasts (its parent, the call's init, reaps it only at the end). A denial
// record comes before its domain's allocation record in the same event,
// so a Reader holds records of unknown domains by event serial until the
// allocation record names their creator, and holds the domains of the
// last creators nobody watches for a Watch that starts a moment late. Pids of processes the program
// forks are not needed: every process of the call is in the same domain
// (or in one nested in it, which logs with its own id and creator).
//
// # Not promised
//
// A denial that the harness's own domain (landlock-self) refuses is
// reported with that domain's id and is not a call's. The kernel's audit
// backlog and rate limit may drop records under a flood; what a Watch
// drops beyond its cap it counts. Records of other programs on the host
// are read and discarded.
package audit
