"""ansible-playbook runs forked from one process that imported ansible once.

An ``ansible-playbook`` start spends about 0.6 CPU-s importing ansible, its CLI and its
executor before it reads a playbook (measured on the 2-core machine: 1.85 CPU-s for
``validate.yml`` on the 2-node inventory as a new process, 1.1-1.2 forked from a process
that had imported ``ansible.cli.playbook``); the offline tests start it about 200 times.
A server process imports the CLI once, with the checkout's configuration, and forks one
child per run: the child is an ansible-playbook in every way a test sees (a process of its
own, its arguments, working directory and environment, its stdout, stderr and exit code).
Ansible reads its configuration once, at import: each set of ``ANSIBLE_*`` variables a
run is given has a server of its own, started with them.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading

# The server: reads one JSON request a line, forks a child that runs the CLI, answers its
# exit code. The parent imports ansible before its first fork and never runs a playbook.
_SERVER = r"""
import json, os, sys
import ansible.cli.playbook as cli

def run(req):
    out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.chdir(req["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.environ.clear()
            os.environ.update(req["env"])
            sys.argv = list(req["argv"])
            try:
                cli.main(req["argv"])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            # Not the CLI's own exit: the test sees the traceback on stderr, and rc 70.
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out)
    os.close(err)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

for line in sys.stdin:
    sys.stdout.write(json.dumps({"rc": run(json.loads(line))}) + "\n")
    sys.stdout.flush()
"""


class ForkedCli:
    """A server per set of ANSIBLE_* variables, each started at the first run that needs it."""

    def __init__(self, python, playbook_bin):
        self._python = python
        self._bin = playbook_bin
        self._servers = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def _server(self, env):
        key = tuple(sorted((k, v) for k, v in env.items() if k.startswith("ANSIBLE_")))
        proc = self._servers.get(key)
        if proc is None or proc.poll() is not None:
            proc = self._servers[key] = subprocess.Popen(
                [self._python, "-c", _SERVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
        return proc

    def close(self):
        for proc in self._servers.values():
            if proc.poll() is None:
                proc.stdin.close()
                proc.wait(timeout=30)

    def run(self, args, env, cwd=None):
        """subprocess.run(capture_output=True, text=True) of ansible-playbook ARGS."""
        argv = [self._bin, *args]
        with self._lock, tempfile.TemporaryDirectory(prefix="forked-cli-") as tmp:
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            request = {"argv": argv, "env": env, "cwd": cwd or os.getcwd(), "out": out, "err": err}
            server = self._server(env)
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            answer = server.stdout.readline()
            if not answer:
                raise RuntimeError(f"the forked ansible-playbook server ended (rc {server.poll()})")
            with open(out, encoding="utf-8", errors="replace") as handle:
                stdout = handle.read()
            with open(err, encoding="utf-8", errors="replace") as handle:
                stderr = handle.read()
        return subprocess.CompletedProcess(argv, json.loads(answer)["rc"], stdout, stderr)


def python_of(playbook_bin):
    """The interpreter of the venv that holds PLAYBOOK_BIN (its shebang's)."""
    python = os.path.join(os.path.dirname(playbook_bin), "python")
    return python if os.path.exists(python) else sys.executable
