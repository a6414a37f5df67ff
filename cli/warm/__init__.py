"""The warm command server: the CLI's forking commands run in a process that already loaded everything.

A one-shot `warpgrad diagnose` pays, before it measures anything, a fresh Python, the tools' imports and a
worker's boot (Python, numpy and Warp in the sandbox): on a small script, more than the script's own run.
A model or a script calling the CLI pays it on every call. The server keeps one such process per
installation and user, and forwards each command to a process forked from it.

What a user can expect of it (the rules that make a background process acceptable, as Gradle's and
Bazel's servers do):
- **Started on demand, said out loud.** The first forking command (`diagnose`, `gradcheck`, `run`, ...)
  runs in its own process as before; when it ends, it starts the server and says so on stderr, with how to
  stop it and how to turn it off. Nothing starts for `--help`, the non-forking commands, or under `CI`.
- **Gone when idle.** It exits after `WARPGRAD_SERVER_IDLE_S` (default 300) seconds with nothing to do,
  and at once when warpgrad's own files change (the next command then runs in its own process).
  `warpgrad server status` shows it; `warpgrad server stop` stops it.
- **The same command, the same answer.** A forwarded command runs in a child forked from the server with
  the caller's arguments, working folder, environment and its very stdin, stdout and stderr (passed as
  file descriptors), so it prints and exits as it would have in its own process; Ctrl-C in the caller
  interrupts it. The server never runs user code itself: the tools run it in sandboxed harness runs, as
  in a one-shot command.
- **Reachable by its user only.** Its socket lives in warpgrad's private state folder (0700, beside the
  ledger's signing key), which every sandbox masks: user code under bubblewrap cannot reach it, so it cannot
  ask the server to run a command outside the sandbox. The server also refuses a peer of another user or
  of another mount namespace (`SO_PEERCRED`).
- **Off switch.** `WARPGRAD_SERVER=0` turns it off (the CLI runs every command in its own process, as
  before); `WARPGRAD_SERVER=1` turns it on under `CI` too. Linux only (file-descriptor passing, fork).

`client.py` is what the CLI does (forward a command, start the server, status and stop); `daemon.py` is
the server; `wire.py` the messages between them.
"""
