"""Entry points started as a user starts them, without paying their imports each time.

``python main_pretrain.py ...`` spends about 10 s of a 2-core machine importing torch,
torchvision, timm, Lightning and solo-learn before it reads its first argument, and the suite
starts about 150 of them. :class:`Launcher` keeps one interpreter per pytest worker that has
imported those once (``python tests/launcher.py``, with the worker's environment; the plugin's
``.pth`` hook registers into solo-learn there as in any process) and forks it for each command:
the child takes the command's working folder, environment, ``sys.argv``, default signal
handlers and its own stdout / stderr files, runs the script as ``__main__`` and exits with its
status (a signal's, negative, as ``subprocess`` reports it). Exit codes, signals, files, output
and the children it starts itself (DDP ranks, loader workers) are the script's own.

Two things the imports made are undone per child: wandb's media folder (each child gets its
own) and the preloaded modules' loggers, which a Hydra script's ``job_logging: disabled`` would
disable in the child but not in a fresh process, where they are made after it runs.

What the imports already made cannot change: a command whose environment differs from the
launcher's in a variable read at import time (:data:`IMPORT_TIME`: threads, oneDNN's ISA, the
plugin's hook, the module path) runs as a fresh ``subprocess`` instead, and so does every
command when ``MVSSL_TEST_FRESH_PROCESSES=1`` (that is how to check a failure is not the
launcher's). Tests of what a fresh interpreter imports start their own ``python``.

Protocol (JSON lines): the test writes ``{"id", "argv", "cwd", "env", "stdout", "stderr"}`` on
the launcher's stdin; the launcher answers ``{"id", "pid"}`` once the child is forked and
``{"id", "status"}`` once it has been reaped.
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional

#: variables whose value at import time stays with the launcher's modules
IMPORT_TIME = (
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "MKL_NUM_THREADS",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "MVSSL_PLUGIN_AUTOREGISTER",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH",
    "PYTHONWARNINGS",
    "CUDA_VISIBLE_DEVICES",
)
FRESH = "MVSSL_TEST_FRESH_PROCESSES"
#: what every entry point imports first (the 10 s); nothing of the plugin's flow runs here
PRELOAD = ("torch", "torchvision", "lightning.pytorch", "timm", "hydra", "omegaconf", "solo.methods")


# ----------------------------------------------------------------------------- the launcher process


#: temporary folders the preloaded modules made at import time (wandb's media folder): each child
#: gets its own, as a fresh process would, for its exit hooks remove them
IMPORT_TIME_FOLDERS: List[tempfile.TemporaryDirectory] = []


#: loggers the preloaded modules made: a fresh process makes them only when it imports those
#: modules, after a Hydra script's ``job_logging: disabled`` (``disable_existing_loggers``) has run
PRELOADED_LOGGERS: set = set()


def _leave_preloaded_loggers(handle):
    """logging.config's step that disables the loggers existing at configuration time (Hydra's
    configurator and ``dictConfig`` / ``fileConfig`` all call it), without the preloaded ones."""

    def handled(existing, child_loggers, disable_existing):
        return handle([n for n in existing if n not in PRELOADED_LOGGERS], child_loggers, disable_existing)

    return handled


def _child(request: dict) -> None:
    """In the forked child: become the command, run it, exit with its status (never returns).
    The exit hooks the launcher's imports registered (logging's, multiprocessing's) stay: a
    fresh process that imported the same modules has them too."""
    import atexit
    import runpy
    import traceback

    code = 1
    try:
        if request.get("new_session"):
            os.setsid()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        for folder in IMPORT_TIME_FOLDERS:
            folder.name = tempfile.mkdtemp(suffix=os.path.basename(folder.name)[-12:])
        logging.config._handle_existing_loggers = _leave_preloaded_loggers(logging.config._handle_existing_loggers)
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
        except KeyboardInterrupt:  # as Python does: the traceback, the exit hooks, then death by SIGINT
            traceback.print_exc()
            atexit._run_exitfuncs()
            sys.stdout.flush(), sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            traceback.print_exc()
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """The launcher's loop: fork on each request, report pids and statuses."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    import gc

    IMPORT_TIME_FOLDERS.extend(o for o in gc.get_objects() if isinstance(o, tempfile.TemporaryDirectory))
    loggers = logging.root.manager.loggerDict.items()
    PRELOADED_LOGGERS.update(name for name, lg in loggers if isinstance(lg, logging.Logger) and not lg.disabled)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    children: Dict[int, str] = {}
    buffer = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.02)
        if readable:
            chunk = os.read(0, 65536)
            if not chunk:
                break  # the test process is gone
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                out.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request)
                children[pid] = request["id"]
                out.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
                out.flush()
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in children:
                code = os.waitstatus_to_exitcode(status)
                out.write(json.dumps({"id": children.pop(pid), "status": code}) + "\n")
                out.flush()


# ----------------------------------------------------------------------------- the test side


class Launched:
    """What :meth:`Launcher.start` returns: the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, launcher: "Launcher", rid: str, argv: List[str], stdout: str, stderr: str) -> None:
        self.args, self._launcher, self._id = argv, launcher, rid
        self.stdout_path, self.stderr_path = stdout, stderr
        self.pid: int = launcher._wait_for(rid, "pid", 60.0)
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self._launcher._result(self._id, "status")
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self._launcher._wait_for(self._id, "status", timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def communicate(self, timeout: Optional[float] = None) -> tuple:
        """(stdout, stderr) once the command has ended, as ``Popen.communicate`` with text=True."""
        self.wait(timeout)
        return tuple(Path(p).read_text(errors="replace") for p in (self.stdout_path, self.stderr_path))

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Launcher:
    """One preloaded interpreter per test process, started on first use."""

    def __init__(self) -> None:
        # run_entry's environment: its own wandb service and folder per command, warnings off
        self._env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
        self._env["PYTHONWARNINGS"] = "ignore"
        self._process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self._env,
            cwd=tempfile.gettempdir(),
        )
        self._lock = threading.Condition()
        self._replies: Dict[str, dict] = {}
        self._count = 0
        self._files = Path(tempfile.mkdtemp(prefix="mvssl-launcher-"))
        if json.loads(self._process.stdout.readline() or b"{}").get("ready") is not True:
            raise RuntimeError("the test launcher did not start: run with MVSSL_TEST_FRESH_PROCESSES=1 to see why")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._process.stdout:
            reply = json.loads(line)
            with self._lock:
                self._replies.setdefault(reply["id"], {}).update(reply)
                self._lock.notify_all()

    def _result(self, rid: str, key: str):
        with self._lock:
            return self._replies.get(rid, {}).get(key)

    def _wait_for(self, rid: str, key: str, timeout: Optional[float]):
        with self._lock:
            if not self._lock.wait_for(lambda: key in self._replies.get(rid, {}), timeout):
                raise TimeoutError(f"{key} of {rid}")
            return self._replies[rid][key]

    def can_run(self, env: Dict[str, str]) -> bool:
        alive = self._process.poll() is None
        return alive and all(env.get(k) == self._env.get(k) for k in IMPORT_TIME)

    def start(self, argv: List[str], cwd: Path, env: Dict[str, str], new_session: bool = False) -> Launched:
        with self._lock:
            self._count += 1
            rid = str(self._count)
        stdout, stderr = (str(self._files / f"{rid}.{name}") for name in ("out", "err"))
        request = {"id": rid, "argv": argv, "cwd": str(cwd), "env": env, "stdout": stdout, "stderr": stderr}
        request["new_session"] = new_session
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()
        return Launched(self, rid, argv, stdout, stderr)

    def run(self, argv: List[str], cwd: Path, env: Dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)``, forked."""
        launched = self.start(argv, cwd, env)
        try:
            code = launched.wait(timeout)
        except subprocess.TimeoutExpired:
            launched.kill()
            launched.wait(30)
            raise
        outputs = []
        for path in (launched.stdout_path, launched.stderr_path):
            outputs.append(Path(path).read_text(errors="replace"))
            Path(path).unlink(missing_ok=True)
        return subprocess.CompletedProcess([sys.executable, *argv], code, *outputs)


_LAUNCHER: Optional[Launcher] = None


def launcher(env: Dict[str, str]) -> Optional[Launcher]:
    """This test process's launcher if it can run a command with ``env``, else None (run it fresh)."""
    global _LAUNCHER
    if os.environ.get(FRESH) == "1" or env.get(FRESH) == "1":
        return None
    if _LAUNCHER is None:
        _LAUNCHER = Launcher()
    return _LAUNCHER if _LAUNCHER.can_run(env) else None


if __name__ == "__main__":
    serve()
