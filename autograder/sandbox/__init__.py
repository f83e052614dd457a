"""The sandbox a graded notebook runs in: the launcher (bubblewrap, the mount table, the output drainer), the warm
parents that fork each kernel, the start-up file and guard run in the kernel, the relay that bounds its messages,
the seccomp filter, the control groups, and the preflight that says which of these hold on a machine."""
