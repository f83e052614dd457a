"""The checker: hidden checks run in a process that never runs a line of the student's code (issue 58).

values.py  what crosses: tensors as bytes, numbers, strings, containers, handles; read strictly
bridge.py  the student's side, in the student's kernel: looks names up, calls, reads attributes, runs backward
tables.py  nn.Module's reading methods over a module's own tables, for the bridge
line.py    the grader's end of the socket a check's calls reach the kernel on
remote.py  the checker's side: the student's names as proxies that send values and get values back
"""
