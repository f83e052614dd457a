"""Waiting for a grading kernel to answer: jupyter_client's own wait, less its idle tail.

jupyter_client's `wait_for_ready` asks the kernel for its info until it replies and a message has come on IOPub
(so that IOPub is known to be connected), then reads IOPub until 0.2 s pass without a message, and drops what it
read. Those 0.2 s are idle wall time on every notebook graded. Nothing that read would drop can reach a cell:
nbclient keeps only the IOPub messages whose parent is the request it sent for that cell, and the grader's own
requests read their replies on the shell channel. So the wait here ends as soon as the kernel has replied and
IOPub is connected.
"""

from __future__ import annotations

import time
from queue import Empty


async def wait_for_ready(client, timeout: float | None = None) -> None:
    """`client.wait_for_ready(timeout)` for a client its kernel manager made (no heartbeat wait, as in
    jupyter_client), without the final 0.2 s of reading IOPub."""
    deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
    while True:
        client.kernel_info()
        try:
            reply = await client.shell_channel.get_msg(timeout=1)
        except Empty:
            pass
        else:
            if reply["msg_type"] == "kernel_info_reply":
                try:        # the kernel's busy status for that request: IOPub is connected
                    await client.iopub_channel.get_msg(timeout=0.2)
                except Empty:
                    pass    # not yet: ask again, as jupyter_client does
                else:
                    client._handle_kernel_info_reply(reply)     # the protocol version it speaks
                    return
        if not await client.is_alive():
            raise RuntimeError("Kernel died before replying to kernel_info")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
