"""A long-lived kernel process: kernels run there, so a crash or a hang costs a respawn.

Running each candidate in a fresh process would cost an interpreter start (~0.3 s) per
kernel; a long-lived child costs that only after a crash. The child is started with
`python -m autosched.measure.sandbox` (not multiprocessing) so it works the same under pytest,
a service or a Ray actor, whose `__main__` modules are not re-importable. The two talk over a
socketpair with `multiprocessing.connection` framing. The parent waits for each reply with the
run timeout: no reply in time -> SIGKILL -> RUN_TIMEOUT; the child dies -> WORKER_CRASHED with
the signal named and the tail of the child's stderr (glibc and abort() messages land there).
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection

from autosched.compile.types import ErrorCode
from autosched.measure.config import RunnerConfig
from autosched.measure.executor import KernelCall, RunJob, RunOutcome
from autosched.measure.reference import Reference

STDERR_TAIL = 600
# libgomp's default (passive) wait puts idle OpenMP threads to sleep after every parallel region;
# a wake-up can then cost a scheduler tick, which would time the hypervisor instead of the kernel.
# A bounded spin keeps threads hot through a timing loop and still lets them sleep between batches
# (see docs/decisions/openmp-spin-wait.md).
OMP_ENV_DEFAULTS = {"GOMP_SPINCOUNT": "10000000"}


def kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    if "OMP_WAIT_POLICY" not in env:
        for key, value in OMP_ENV_DEFAULTS.items():
            env.setdefault(key, value)
    return env


def describe_exit(returncode: int | None) -> str:
    """'killed by signal SIGSEGV (Segmentation fault)' or 'exited with status 3'."""
    if returncode is None:
        return "is gone (exit status unknown)"
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by signal {name} ({signal.strsignal(sig) or 'unknown'})"
    return f"exited with status {returncode}"


class KernelSandbox:
    """Owns one kernel process; `run` never raises for anything the kernel does."""

    def __init__(self, *, max_refs: int = 8, start_timeout: float = 60.0) -> None:
        self.max_refs = max_refs
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log_fd: int | None = None
        self._refs: OrderedDict[str, None] = OrderedDict()  # mirror of what the child holds
        self._lock = threading.Lock()
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        # The log is unlinked at once: it lives as long as an fd on it, so nothing is left in
        # the temp folder even when this process is killed (a Ray actor on a dying node).
        fd, log = tempfile.mkstemp(prefix="autosched-kernel-", suffix=".log")
        os.unlink(log)
        # append mode (shared with the child): truncating before each job keeps only its output
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        parent_sock, child_sock = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "autosched.measure.sandbox", str(child_sock.fileno())],
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                env=kernel_env(),
            )
        except BaseException:
            os.close(fd)
            raise
        finally:
            child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._log_fd = fd
        self._refs.clear()
        if not self._conn.poll(self.start_timeout):
            self._kill()
            raise RuntimeError(f"kernel process did not start within {self.start_timeout:.0f} s")
        try:
            self._conn.recv()
        except (EOFError, OSError) as exc:
            tail = self._stderr_tail()
            self._kill()
            raise RuntimeError(f"kernel process failed to start: {tail}") from exc

    def _stderr_tail(self) -> str:
        if self._log_fd is None:
            return ""
        try:
            size = os.fstat(self._log_fd).st_size
            text = os.pread(self._log_fd, STDERR_TAIL, max(0, size - STDERR_TAIL)).decode(errors="replace")
        except OSError:
            return ""
        return " ".join(text.split())

    def _kill(self) -> int | None:
        code = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            try:
                code = self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
        if self._conn is not None:
            self._conn.close()
        if self._log_fd is not None:
            os.close(self._log_fd)
        self._proc, self._conn, self._log_fd = None, None, None
        return code

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._proc is not None and self._proc.poll() is None:
                try:
                    self._conn.send(None)
                    self._proc.wait(timeout=2)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()

    def _job(self, call: KernelCall, config: RunnerConfig, ref_key: str | None,
             reference: Reference | None) -> RunJob:
        if ref_key is None or reference is None or not config.enable_check:
            return RunJob(call, config)
        if ref_key in self._refs:
            self._refs.move_to_end(ref_key)
            return RunJob(call, config, ref_key)
        self._refs[ref_key] = None
        drop = []
        while len(self._refs) > self.max_refs:
            drop.append(self._refs.popitem(last=False)[0])
        return RunJob(call, config, ref_key, reference, tuple(drop))

    def run(self, call: KernelCall, config: RunnerConfig, ref_key: str | None = None,
            reference: Reference | None = None) -> RunOutcome:
        """Run one candidate with `config.timeout`; crashes and hangs come back as outcomes."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:
                    self._kill()  # died between jobs (not this candidate's fault)
                    self.restarts += 1
                try:
                    self._start()
                except (RuntimeError, OSError) as exc:  # e.g. fork refused: a result, not a crash
                    return RunOutcome((), ErrorCode.RUNTIME_ERROR, f"kernel process: {exc}", 0.0, 0)
            job = self._job(call, config, ref_key, reference)
            os.ftruncate(self._log_fd, 0)
            t0 = time.perf_counter()
            pid = self._proc.pid
            try:
                self._conn.send(job)
                if not self._conn.poll(config.timeout):
                    self._kill()
                    self.restarts += 1
                    return RunOutcome((), ErrorCode.RUN_TIMEOUT,
                                      f"kernel did not finish within {config.timeout:g} s; "
                                      f"kernel process {pid} killed", time.perf_counter() - t0, pid)
                return self._conn.recv()
            except (EOFError, OSError):
                tail = self._stderr_tail()
                code = self._kill()
                self.restarts += 1
                msg = f"kernel process {pid} {describe_exit(code)} while running {call.entry!r}"
                if tail:
                    msg += f"; its stderr: {tail}"
                return RunOutcome((), ErrorCode.WORKER_CRASHED, msg, time.perf_counter() - t0, pid)


def _orphan_watchdog(parent: int) -> None:
    """Exit when the parent is gone, even while a kernel spins forever in the main thread."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _pin_runtime_libraries() -> None:
    """Load libgomp once for the life of the process. Each kernel library is dlclose()d after
    its run; if it held the last reference to libgomp, libgomp would be unmapped under its own
    idle (spinning) worker threads and the process would segfault on the next kernel."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("gomp") or "libgomp.so.1"
    try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


def main(argv: list[str]) -> None:
    conn = Connection(int(argv[0]))
    _pin_runtime_libraries()
    threading.Thread(target=_orphan_watchdog, args=(os.getppid(),), daemon=True).start()
    from autosched.measure.executor import KernelExecutor

    executor = KernelExecutor()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        conn.send(executor.execute(job))


if __name__ == "__main__":
    main(sys.argv[1:])
