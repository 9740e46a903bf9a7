// Package spawn runs one program per call under the run layers: new user,
// PID, mount, network, IPC and UTS namespaces, a filesystem view assembled
// from binds (pivot_root), no_new_privs, a seccomp filter, a fresh Landlock
// domain and, when a cgroup manager is given, a cgroup v2 leaf entered at
// clone time. When the program (argv[0]'s process) exits, or its deadline
// passes, every process it started dies with it.
package spawn
